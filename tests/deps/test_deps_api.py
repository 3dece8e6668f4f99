"""The scanner's public API: which files it takes, byte-for-byte preservation, --select /
--ignore, notebook lines, and never raising on bad input."""

from __future__ import annotations

import json
import random
import re
import subprocess
from pathlib import Path

import pytest
import tomlkit
import yaml
from packaging.requirements import Requirement

from neuron_migrate.deps import SCANNERS, is_dependency_file, kind_of, scan_source, scan_text_lines
from neuron_migrate.model import Kind, Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules.dependencies import RULES
from tests.conftest import FIXTURES

BOM = b"\xef\xbb\xbf"
XLA_REQUIREMENTS = (FIXTURES / "deps/requirements_xla_stack/before/requirements.txt")
FIXED_CASES = sorted(p for p in (FIXTURES / "deps").glob("*/after/*"))


def registry(**options: object) -> Registry:
    return Registry([rule() for rule in RULES], Options(**options))  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "kind"), [
    ("requirements.txt", "requirements"), ("requirements-dev.txt", "requirements"),
    ("dev-requirements.txt", "requirements"), ("requirements/base.txt", "requirements"),
    ("requirements.in", "requirements"), ("constraints.txt", "requirements"),
    ("pyproject.toml", "pyproject"), ("setup.py", "setup.py"), ("setup.cfg", "setup.cfg"),
    ("Pipfile", "pipfile"), ("Pipfile.lock", "lockfile"), ("poetry.lock", "lockfile"),
    ("uv.lock", "lockfile"), ("pdm.lock", "lockfile"), ("environment.yml", "conda"),
    ("environment.yaml", "conda"), ("Dockerfile", "dockerfile"),
    ("Dockerfile.neuron", "dockerfile"), ("train.Dockerfile", "dockerfile"),
    ("Dockerfile-training-dlc", "dockerfile"), ("Dockerfile_inference", "dockerfile"),
    ("Containerfile", "dockerfile"), ("run.sh", "shell"), ("env.bash", "shell"),
    ("train.sbatch", "shell"), ("job.slurm", "shell"),
    ("k8s/job.yaml", "yaml"), (".github/workflows/ci.yml", "yaml"),
])
def test_files_are_recognised_by_name(name: str, kind: str) -> None:
    assert kind_of(Path(name)) == kind and is_dependency_file(Path(name))
    assert kind in SCANNERS


@pytest.mark.parametrize("name", ["train.py", "README.md", "notes.txt", "setup.toml",
                                  "docker-compose.json"])
def test_other_files_are_not_taken(name: str) -> None:
    assert not is_dependency_file(Path(name))


@pytest.mark.parametrize("after", FIXED_CASES, ids=lambda p: p.parent.parent.name)
def test_crlf_and_bom_survive_a_fix(after: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = after.parent.parent / "before" / after.name
    monkeypatch.chdir(before.parent)  # where the scripts its launch lines start are
    convert = lambda data: BOM + data.replace(b"\n", b"\r\n")  # noqa: E731
    headers = (after.parent.parent / "findings.txt").read_text().splitlines()
    sources = frozenset({"xla", "cuda"} if "# from cuda" in headers else {"xla"})
    result = scan_source(after.name, convert(before.read_bytes()),
                         registry(unsafe_fixes="# unsafe-fixes" in headers, sources=sources),
                         fix=True)
    assert result.new_source == convert(after.read_bytes())


def test_a_clean_file_is_returned_unchanged() -> None:
    data = b"requests==2.32.3\n# torch-neuronx is installed by the image\n"
    result = scan_source("requirements.txt", data, registry(), fix=True)
    assert result.new_source is None and not result.findings and result.error is None


def test_ignore_and_select_are_respected() -> None:
    data = XLA_REQUIREMENTS.read_bytes()
    ignored = scan_source("requirements.txt", data, registry(ignore=frozenset({"NM801"})), True)
    assert "NM801" not in {f.rule_id for f in ignored.findings}
    assert b"Torch_NeuronX==2.1.2.2.3.0" in (ignored.new_source or b"")
    selected = scan_source("requirements.txt", data, registry(select=frozenset({"NM806"})), True)
    assert {f.rule_id for f in selected.findings} == {"NM806"}
    assert b"torch-xla" not in (selected.new_source or b"") and b"2.1.2.2.3.0" in \
        (selected.new_source or b"")


def test_unsafe_fix_is_suggested_not_applied_by_default() -> None:
    data = b"torch-neuronx==2.13.3.0\nneuronx-cc==2.*\nnki\n"
    (finding,) = scan_source("requirements.txt", data, registry(), fix=True).findings
    assert finding.kind is Kind.UNSAFE_FIX and not finding.applied
    assert finding.suggestion == "torch-neuronx==2.14.*"


def test_notebook_lines_are_reported_at_their_own_line_numbers() -> None:
    lines = [(3, "!pip install torch-neuronx neuronx-cc "
                 "--extra-index-url=https://pip.repos.neuron.amazonaws.com"),
             (4, "%pip install -q nki"), (7, "%env XLA_USE_BF16=1"),
             (8, "%env PJRT_DEVICE NEURON"), (9, "!neuron_parallel_compile python train.py"),
             (12, "model = model.to(device)  # python, not shell")]
    found = [(f.line, f.column, f.rule_id) for f in scan_text_lines("nb.ipynb", lines, registry())]
    assert found == [(3, 14, "NM802"), (3, 39, "NM810"), (7, 6, "NM812"), (8, 6, "NM812"),
                     (9, 2, "NM813")]
    assert all(f.kind is Kind.REVIEW and not f.applied
               for f in scan_text_lines("nb.ipynb", lines, registry()))
    assert scan_text_lines("nb.ipynb", lines, registry(ignore=frozenset({"NM8"}))) == []


@pytest.mark.parametrize("name", ["requirements.txt", "pyproject.toml", "setup.py", "setup.cfg",
                                  "Pipfile", "Pipfile.lock", "uv.lock", "environment.yml",
                                  "Dockerfile", "run.sh", "ci.yaml"])
def test_garbage_never_raises(name: str) -> None:
    rng = random.Random(name)
    alphabet = b"torch-neuronx==2.9.* [{\"'\\\n\r\t#;=:$%!-]}\xff\x00ARG FROM RUN pip install"
    for _ in range(60):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        result = scan_source(name, data, registry(), fix=True)
        assert result.error is None or result.error.startswith(name)
        assert "internal error" not in (result.error or "")


@pytest.mark.parametrize("after", FIXED_CASES, ids=lambda p: p.parent.parent.name)
def test_fixed_files_parse_with_their_own_tools(after: Path, tmp_path: Path) -> None:
    """A fixed file is still a valid file of its kind, checked with the real parsers where there is one on this machine (bash,
    make, YAML, TOML, packaging), and for a Dockerfile by its own grammar: instructions,
    heredocs that end, exec forms that are JSON, and shell forms bash accepts."""
    data = after.read_text()
    kind = kind_of(after)
    if kind == "pyproject":
        tomlkit.parse(data)
    elif kind in ("conda", "yaml"):
        assert [document for document in yaml.safe_load_all(data) if document]
    elif kind == "shell":
        subprocess.run(["bash", "-n", str(after)], check=True)
    elif kind == "makefile":
        subprocess.run(["make", "-n", "-f", str(after)], cwd=tmp_path, check=True,
                       capture_output=True)
    elif kind == "dockerfile":
        _check_dockerfile(data)
    elif kind == "requirements":
        for line in data.replace("\\\n", " ").splitlines():
            body = line.split(" #")[0].strip()
            if body and not body.startswith(("#", "-")):
                Requirement(body.split(" --")[0])
    else:
        pytest.fail(f"no parser checks a fixed {kind} file")


_INSTRUCTIONS = frozenset({
    "ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL",
    "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR"})
_HEREDOC = re.compile(r"(?<!<)<<(-?)(['\"]?)([A-Za-z_][\w.]*)\2")


def _check_dockerfile(text: str) -> None:
    lines = text.splitlines()
    position = 0
    while position < len(lines):
        line = lines[position]
        position += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        while line.endswith("\\") and position < len(lines):
            line = line[:-1] + " " + lines[position]
            position += 1
        instruction, _, rest = line.strip().partition(" ")
        assert instruction.upper() in _INSTRUCTIONS, line
        body = rest.lstrip()
        if body.startswith("["):
            assert all(isinstance(word, str) for word in json.loads(body)), line
            continue
        heredocs = _HEREDOC.findall(body)
        scripts = []
        for dash, _, end in heredocs:  # each body ends at its own terminator line
            start = position
            while position < len(lines) and \
                    (lines[position].lstrip("\t") if dash else lines[position]) != end:
                position += 1
            assert position < len(lines), f"heredoc {end} of `{line}` never ends"
            scripts.append("\n".join(lines[start:position]))
            position += 1
        command = re.sub(r"^(--\S+\s+)*", "", body)
        if instruction.upper() == "RUN" and not heredocs:
            subprocess.run(["bash", "-n", "-c", command], check=True)
        elif instruction.upper() == "RUN" and re.match(r"(<<|(/bin/)?(ba)?sh\b)", command):
            for script in scripts:  # the heredoc is the shell script RUN runs
                subprocess.run(["bash", "-n", "-c", script], check=True)


def test_a_fix_that_would_break_the_file_is_not_written(monkeypatch: pytest.MonkeyPatch) -> None:
    from neuron_migrate.deps import emit

    monkeypatch.setattr(emit, "apply_edits", lambda text, edits: text + "\n[[[broken\n")
    result = scan_source("pyproject.toml", b'[project]\ndependencies = ["torch-neuronx"]\n',
                         registry(), fix=True)
    assert result.new_source is None and result.error is not None
    assert "NM802" in result.error and "nothing written" in result.error


def test_a_file_without_neuron_words_is_not_parsed() -> None:
    broken = b"matrix: [unclosed\nimage: ubuntu:24.04\n"
    assert scan_source("ci.yml", broken, registry(), fix=True).error is None
    assert scan_source("ci.yml", broken + b"# trn1\n", registry(), fix=True).error is not None


def test_shell_inside_yaml_strings_is_reported_at_its_file_column() -> None:
    data = (b"jobs:\n  train:\n    run: |\n      echo start\n"
            b"      pip install torch-neuronx==2.9.* neuronx-cc==2.* nki\n"
            b"    post: 'neuron_parallel_compile python t.py'\n")
    found = [(f.line, f.column, f.rule_id)
             for f in scan_source("ci.yml", data, registry(), fix=True).findings]
    assert found == [(5, 19, "NM801"), (6, 12, "NM813")]
