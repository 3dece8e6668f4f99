"""The pre-commit hooks (.pre-commit-hooks.yaml) without pre-commit: the files each hook is
handed, and what its entry does with staged files. tests/gate/test_precommit.py runs them with
pre-commit itself."""

from __future__ import annotations

import itertools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from neuron_migrate.deps import is_dependency_file
from tests.conftest import FIXTURES, ROOT, cli

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

HOOKS = {hook["id"]: hook for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
SCAN_HOOKS = ("neuron-migrate-scan", "neuron-migrate-scan-fix")
XLA_CODE = "import torch_xla\ntorch_xla.sync()\nx = 1\n"
XLA_PINS = "torch-neuronx==2.1.2\n"


def handed(hook: str, path: str) -> bool:
    """Whether pre-commit hands `path` (relative, with `/`, as git names it) to `hook`: its
    `files` pattern is searched in the path (pre-commit's `re.search`)."""
    return re.search(HOOKS[hook]["files"], path) is not None


def arguments(hook: str) -> list[str]:
    """The hook's entry without the console script, as the CLI's arguments."""
    command, *rest = shlex.split(HOOKS[hook]["entry"])
    assert command == "neuron-migrate"
    return rest


def test_every_hook_runs_the_console_script_the_package_installs() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(HOOKS) == {"neuron-migrate-check", "neuron-migrate", *SCAN_HOOKS}
    for hook in HOOKS.values():
        assert hook["language"] == "python"
        assert shlex.split(hook["entry"])[0] in scripts  # never `python -m <package>`


FIXTURE_NAMES = sorted({p.name for p in (FIXTURES / "deps").rglob("*") if p.is_file()})
NAMES = [
    *FIXTURE_NAMES, "requirements.txt", "REQUIREMENTS.TXT", "requirements-dev.in",
    "dev-requirements.txt", "dev.requirements.pip", "constraints.txt", "test_constraints.in",
    "requirements/base.txt", "deps/requirements/dev.in", "requirements/notes.md",
    "Dockerfile", "docker/Dockerfile.neuron", "Dockerfile-trn1", "Containerfile", "x.dockerfile",
    "poetry.lock", "Pipfile.lock", "yarn.lock", "uv.lock", "pdm.lock", "Cargo.lock",
    "pyproject.toml", "sub/pyproject.toml", "setup.py", "setup.cfg", "Pipfile",
    "environment.yml", "environment-gpu.yaml", "conda.yaml", ".github/workflows/ci.yml",
    "run.sh", "job.sbatch", "job.slurm", "x.bash", "x.zsh", "train.py", "README.md",
    "notes.txt", "my requirements.txt", "requirements.txt.bak", "setup.py.orig",
    "nb.ipynb", "pyproject.toml/inner.py", "a-dockerfile", "Dockerfile/README",
    ".python-version", "src/.Python-Version", "x.python-version", ".python-version.bak",
]


def test_scan_hooks_are_handed_exactly_the_files_the_scanner_reads() -> None:
    wrong = [(hook, path) for hook in SCAN_HOOKS for path in NAMES
             if handed(hook, path) != is_dependency_file(Path(path))]
    assert not wrong


def test_every_dependency_fixture_is_handed_to_the_scan_hooks() -> None:
    names = {p.name for p in (FIXTURES / "deps").rglob("*") if is_dependency_file(p)}
    assert len(names) > 15 and all(handed(h, n) for h in SCAN_HOOKS for n in names)


# every name built like the ones the scanner reads (junk, a keyword, junk, an extension), in
# two cases and three folders, so that the paths sit on every boundary of its name rules;
# no newline or case-folding oddity (the long s, which `re.I` equates with `s` and
# `str.lower` keeps): git names like that are not worth a rule
JUNK = ("", " ", "é", "-", "_", ".", " -", "é_")
INFIX = ("", " ", "x", "-", "_", ".")
KEYWORDS = ("", "requirements", "constraints", "dockerfile", "containerfile", "pyproject",
            "setup", "pipfile", "poetry", "uv", "pdm", "yarn", "environment")
SUFFIXES = ("", ".txt", ".in", ".pip", ".toml", ".py", ".cfg", ".lock", ".sh", ".bash", ".zsh",
            ".sbatch", ".slurm", ".yml", ".yaml", ".ipynb", ".dockerfile", ".md")
FOLDERS = ("", "a b/Requirements/", "x.txt/")


def test_scan_hooks_match_the_scanner_on_every_name_built_from_its_rules() -> None:
    patterns = [re.compile(HOOKS[hook]["files"]) for hook in SCAN_HOOKS]
    wrong = []
    for parts in itertools.product(JUNK, KEYWORDS, INFIX, SUFFIXES):
        name = "".join(parts)
        for path in (f + n for f in FOLDERS for n in (name, name.upper())):
            read = is_dependency_file(Path(path))
            wrong += [path for pattern in patterns if bool(pattern.search(path)) != read]
    assert not wrong, wrong[:20]


def test_scan_hooks_leave_files_they_do_not_read_alone(in_tmp: Path) -> None:
    """Whatever a user's `files:` override hands them: a file of no kind the scanner reads
    is neither reported, nor written, nor an error."""
    files = {"notes.txt": XLA_PINS, "train.py": XLA_CODE, "README.md": "pip install torch_xla\n",
             "data.bin": "\0\xff torch_xla"}
    for name, text in files.items():
        (in_tmp / name).write_text(text, encoding="utf-8", errors="surrogateescape")
    for hook in SCAN_HOOKS:
        run = cli(*arguments(hook), *files)
        assert run.exit_code == 0, run.stdout + run.stderr
    for name, text in files.items():
        assert (in_tmp / name).read_text(encoding="utf-8", errors="surrogateescape") == text


def git(directory: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   cwd=directory, check=True, capture_output=True)


@pytest.mark.parametrize(("hook", "without_force", "name", "text", "fixed"), [
    ("neuron-migrate", ["apply"], "train.py", XLA_CODE, "x = 1\n"),
    ("neuron-migrate-scan-fix", ["scan", "--fix"], "requirements.txt", XLA_PINS,
     "torch-neuronx==2.14.*\n"),
])
def test_fixing_hooks_write_the_staged_files_pre_commit_hands_them(
        in_tmp: Path, hook: str, without_force: list[str], name: str, text: str,
        fixed: str) -> None:
    """During `git commit` every file a hook is handed is staged, which the guard against
    mixing the migration into uncommitted work would refuse: the fixing hooks pass `--force`."""
    git(in_tmp, "init", "-q")
    (in_tmp / name).write_text(text)
    git(in_tmp, "add", name)
    refused = cli(*without_force, name)
    assert refused.exit_code == 2 and "uncommitted changes" in refused.stderr + refused.stdout
    assert (in_tmp / name).read_text() == text
    run = cli(*arguments(hook), name)
    assert (in_tmp / name).read_text().startswith(fixed), run.stdout + run.stderr


@pytest.mark.parametrize("hook", ["neuron-migrate-check", "neuron-migrate-scan"])
def test_reporting_hooks_never_write(in_tmp: Path, hook: str) -> None:
    name = "requirements.txt" if "scan" in hook else "train.py"
    text = XLA_PINS if "scan" in hook else XLA_CODE
    (in_tmp / name).write_text(text)
    assert cli(*arguments(hook), name).exit_code == 1
    assert (in_tmp / name).read_text() == text


def test_pre_commit_accepts_the_manifest() -> None:
    pytest.importorskip("pre_commit", reason="pre-commit is not installed (the `test` extra)")
    done = subprocess.run([sys.executable, "-m", "pre_commit", "validate-manifest",
                           str(ROOT / ".pre-commit-hooks.yaml")], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
