"""The hooks of .pre-commit-hooks.yaml run by pre-commit itself, the way a user's repository
runs them: pre-commit clones this repository at a commit, pip-installs it into a virtualenv
of its own and runs the console script on the files of a throwaway git repository, with
`pre-commit run --all-files` and during a real `git commit`.

Slow (the hook environment is built from the package index once per module, about a
minute) and needs the network: marked `slow`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

pytest.importorskip("pre_commit", reason="pre-commit is not installed (the `test` extra has it)")
pytestmark = pytest.mark.slow

XLA_CODE = ("import torch_xla.core.xla_model as xm\n\n"
            "device = xm.xla_device()\n"
            "xm.mark_step()\n")
XLA_PINS = "torch-neuronx==2.1.2\n"
REVIEW_CODE = ("import torch_xla.core.xla_model as xm\n\n"
               "print(xm.get_memory_info(xm.xla_device()))\n")  # NM711: a human decides
DOCKERFILE = "FROM python:3.12\nRUN pip install torch-neuronx==2.1.2\n"
NOTEBOOK = json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "id": "c1",
                                  "metadata": {}, "outputs": [], "source": XLA_CODE}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"
NOT_OURS = {  # files no hook reads, though they mention the XLA stack
    "notes.txt": XLA_PINS,
    "README.md": "pip install torch-neuronx==2.1.2 torch_xla\n",
}
SKIPPED = shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", ".pytest_cache",
                                 ".hypothesis", ".tox", ".nox")
BUILT = {"build", "dist"}  # at the top only: setuptools' output, not sources


def copy_sources(target: Path) -> None:
    """This checkout as it is on disk: the files git would commit (tracked or new, not
    ignored), or, outside git (an unpacked sdist), the tree without caches, build output and
    virtualenvs."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, check=False)
    if listed.returncode != 0 or not listed.stdout:
        shutil.copytree(ROOT, target, ignore=_skipped, symlinks=True)
        return
    for name in {os.fsdecode(n) for n in listed.stdout.split(b"\0") if n}:
        source = ROOT / name
        if source.is_file() or source.is_symlink():  # not a file deleted but not yet staged
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name, follow_symlinks=False)


def _skipped(folder: str, names: list[str]) -> set[str]:
    top = {name for name in names if name in BUILT} if Path(folder) == ROOT else set()
    venvs = {name for name in names if (Path(folder) / name / "pyvenv.cfg").exists()}
    return set(SKIPPED(folder, names)) | top | venvs


@dataclass(frozen=True)
class HookRepo:
    """This repository as pre-commit sees it: a git repository at a commit, and the
    environment (pre-commit's cache included) every run of the module shares."""

    path: Path
    rev: str
    env: dict[str, str]


def run(command: list[str], cwd: Path, env: dict[str, str],
        timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def git(cwd: Path, env: dict[str, str], *args: str) -> str:
    done = run(["git", *args], cwd, env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def pre_commit(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "pre_commit", *args], cwd, env)


def isolated_environment(home: Path) -> dict[str, str]:
    """Git without the user's configuration (a global core.hooksPath would stop
    `pre-commit install`), pre-commit's cache in the module's folder, and no PYTHONPATH: the
    hooks must run the package pre-commit installed, not this checkout."""
    (home / "gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("GIT_", "PRE_COMMIT")) and key != "PYTHONPATH"}
    env.update(GIT_CONFIG_GLOBAL=str(home / "gitconfig"), GIT_CONFIG_NOSYSTEM="1",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com",
               PRE_COMMIT_HOME=str(home / "pre-commit"), PRE_COMMIT_COLOR="never")
    return env


def index_reachable() -> bool:
    url = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/").rstrip("/") + "/pip/"
    try:
        with urllib.request.urlopen(url, timeout=15):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HookRepo]:
    """A copy of this checkout (uncommitted changes included, so the hooks under test are the
    ones on disk) committed in a repository of its own, and the hook environment built once."""
    home = tmp_path_factory.mktemp("pre-commit-home")
    env = isolated_environment(home)
    path = home / "neuron-migrate"
    copy_sources(path)
    git(path, env, "init", "-q")
    git(path, env, "add", "-A")
    git(path, env, "commit", "-q", "--no-verify", "-m", "the checkout under test")
    repo = HookRepo(path, git(path, env, "rev-parse", "HEAD").strip(), env)
    user = make_repository(tmp_path_factory.mktemp("install"), repo, ["neuron-migrate-check"])
    done = pre_commit(user, env, "install-hooks")
    if done.returncode != 0:
        if not index_reachable():
            pytest.skip("the package index is unreachable: pre-commit cannot install the "
                        "hooks' environment")
        pytest.fail(f"pre-commit could not install the hooks:\n{done.stdout}\n{done.stderr}")
    yield repo


def make_repository(directory: Path, hooks: HookRepo, ids: list[str],
                    files: dict[str, str] | None = None) -> Path:
    """A user's repository whose .pre-commit-config.yaml runs the hooks `ids`, in that order,
    from `hooks` at its commit; `files` committed without hooks."""
    config = {"repos": [{"repo": str(hooks.path), "rev": hooks.rev,
                         "hooks": [{"id": hook} for hook in ids]}]}
    (directory / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    for name, text in (files or {}).items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    git(directory, hooks.env, "init", "-q")
    git(directory, hooks.env, "add", "-A")
    git(directory, hooks.env, "commit", "-q", "--no-verify", "-m", "start")
    return directory


def test_check_and_scan_hooks_fail_on_xla_code_and_pins_and_never_write(
        hook_repo: HookRepo, tmp_path: Path) -> None:
    files = {"train.py": XLA_CODE, "requirements.txt": XLA_PINS, "docker/Dockerfile": DOCKERFILE,
             **NOT_OURS}
    user = make_repository(tmp_path, hook_repo, ["neuron-migrate-check", "neuron-migrate-scan"],
                           files)
    done = pre_commit(user, hook_repo.env, "run", "--all-files")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert _status(output, "neuron-migrate (check)") == "Failed", output
    assert _status(output, "neuron-migrate (scan dependencies)") == "Failed", output
    assert "train.py" in output and "NM101" in output  # xm.xla_device()
    assert "requirements.txt" in output and "docker/Dockerfile" in output
    assert "notes.txt" not in output and "README.md" not in output  # never handed to a hook
    for name, text in files.items():
        assert (user / name).read_text() == text
    assert git(user, hook_repo.env, "status", "--porcelain") == ""


def test_hooks_pass_a_repository_with_nothing_to_migrate(hook_repo: HookRepo,
                                                          tmp_path: Path) -> None:
    files = {"train.py": "import torch\n\ndevice = torch.device('neuron')\n",
             "requirements.txt": "torch-neuronx==2.14.*\nneuronx-cc==2.*\nnki\n", **NOT_OURS}
    ids = ["neuron-migrate-check", "neuron-migrate", "neuron-migrate-scan",
           "neuron-migrate-scan-fix"]
    user = make_repository(tmp_path, hook_repo, ids, files)
    done = pre_commit(user, hook_repo.env, "run", "--all-files")
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(_status(done.stdout, name) == "Passed" for name in (
        "neuron-migrate (check)", "neuron-migrate (apply)", "neuron-migrate (scan dependencies)",
        "neuron-migrate (fix dependencies)")), done.stdout


def test_a_git_commit_is_fixed_by_the_fixing_hooks(hook_repo: HookRepo, tmp_path: Path) -> None:
    """The fix lands in the work tree and fails the commit, as every pre-commit fixer does:
    the user reviews it, stages it and commits again. Work that is not staged is neither
    handed to a hook nor lost."""
    user = make_repository(tmp_path, hook_repo, ["neuron-migrate", "neuron-migrate-scan-fix"],
                           {"unstaged.py": "x = 1\n"})
    assert pre_commit(user, hook_repo.env, "install").returncode == 0
    (user / "train.py").write_text(XLA_CODE)
    (user / "requirements.txt").write_text(XLA_PINS)
    (user / "Dockerfile").write_text(DOCKERFILE)
    (user / "explore.ipynb").write_text(NOTEBOOK)
    staged = ("train.py", "requirements.txt", "Dockerfile", "explore.ipynb")
    git(user, hook_repo.env, "add", *staged)
    (user / "unstaged.py").write_text(XLA_CODE)  # the user's work in progress

    first = run(["git", "commit", "-m", "add training"], user, hook_repo.env)
    output = first.stdout + first.stderr
    assert first.returncode != 0, output
    assert "files were modified by this hook" in output
    assert _status(output, "neuron-migrate (apply)") == "Failed", output
    assert _status(output, "neuron-migrate (fix dependencies)") == "Failed", output
    assert "pass --force" not in output and "uncommitted changes" not in output
    fixed_code = (user / "train.py").read_text()
    assert "torch_xla" not in fixed_code and "neuron" in fixed_code
    assert (user / "requirements.txt").read_text().startswith("torch-neuronx==2.14.*")
    assert "torch-neuronx==2.14.*" in (user / "Dockerfile").read_text()
    cell = json.loads((user / "explore.ipynb").read_text())["cells"][0]["source"]
    assert "torch_xla" not in "".join(cell) and "neuron" in "".join(cell)
    assert git(user, hook_repo.env, "show", ":train.py") == XLA_CODE  # the index: as staged
    assert (user / "unstaged.py").read_text() == XLA_CODE

    git(user, hook_repo.env, "add", *staged)
    second = run(["git", "commit", "-m", "add training"], user, hook_repo.env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert git(user, hook_repo.env, "show", "HEAD:train.py") == fixed_code
    assert (user / "unstaged.py").read_text() == XLA_CODE
    assert git(user, hook_repo.env, "status", "--porcelain") == " M unstaged.py\n"


def _status(output: str, hook_name: str) -> str | None:
    """A hook's verdict in pre-commit's listing (`name.....Passed`)."""
    for line in output.splitlines():
        if line.startswith(hook_name + "."):
            return line.rstrip(".").rsplit(".", 1)[-1].strip() or None
    return None


def test_unstaged_work_in_a_staged_file_survives_the_fixing_hook(hook_repo: HookRepo,
                                                                  tmp_path: Path) -> None:
    """What makes --force safe in the hook: pre-commit stashes the unstaged part of a file,
    and when the fix conflicts with it, rolls the fix back and restores the user's work."""
    user = make_repository(tmp_path, hook_repo, ["neuron-migrate"], {"train.py": "x = 1\n"})
    assert pre_commit(user, hook_repo.env, "install").returncode == 0
    (user / "train.py").write_text(XLA_CODE)
    git(user, hook_repo.env, "add", "train.py")
    work = XLA_CODE + "again = xm.xla_device()  # not staged\n"
    (user / "train.py").write_text(work)
    done = run(["git", "commit", "-m", "wip"], user, hook_repo.env)
    assert done.returncode != 0, done.stdout + done.stderr
    assert (user / "train.py").read_text() == work
    assert git(user, hook_repo.env, "show", ":train.py") == XLA_CODE
    assert git(user, hook_repo.env, "log", "--format=%s") == "start\n"


def test_check_after_apply_holds_back_a_commit_with_review_items(hook_repo: HookRepo,
                                                                  tmp_path: Path) -> None:
    """apply exits 0 once it has fixed what it can, so alone it would let a review item into
    the commit, silently (pre-commit prints nothing for a hook that passed): the check hook
    after it fails until the item is dealt with."""
    user = make_repository(tmp_path, hook_repo, ["neuron-migrate", "neuron-migrate-check"])
    assert pre_commit(user, hook_repo.env, "install").returncode == 0
    (user / "memory.py").write_text(REVIEW_CODE)
    git(user, hook_repo.env, "add", "memory.py")
    assert run(["git", "commit", "-m", "memory"], user, hook_repo.env).returncode != 0
    git(user, hook_repo.env, "add", "memory.py")  # the fix, as reviewed
    again = run(["git", "commit", "-m", "memory"], user, hook_repo.env)
    output = again.stdout + again.stderr
    assert again.returncode != 0, output
    assert _status(output, "neuron-migrate (apply)") == "Passed", output
    assert _status(output, "neuron-migrate (check)") == "Failed", output
    assert "NM711" in output and "get_memory_info" in output
    assert git(user, hook_repo.env, "log", "--format=%s") == "start\n"
