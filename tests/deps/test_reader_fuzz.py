"""Hostile and malformed dependency files, lockfiles and notebooks: every reader either
understands a file or says in one line what is wrong with it, naming the file; never an
internal error, and the rest of the run goes on."""

from __future__ import annotations

import json
import os
import re

import pytest
import tomlkit
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_migrate.model import FileResult, Options
from neuron_migrate.notebooks.migrate import migrate_notebook
from neuron_migrate.registry import Registry
from neuron_migrate.runner import migrate_data
from neuron_migrate.rules import all_rules

REGISTRY = Registry(all_rules(), Options())
EXAMPLES = int(os.environ.get("NEURON_MIGRATE_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

WORDS = ["torch-neuronx", "torch_neuronx", "neuronx-cc", "torch-xla", "torch", "==2.1.2",
         "2.1.2.2.3.0", ">=2.1", "^2.1", "*", "", "name", "version", "package", "packages",
         "dependencies", "pip", "image", "command", "args", "url", "index-url", "source",
         "https://pip.repos.neuron.amazonaws.com", "python train.py", "xla", "optional"]
KEYS = st.sampled_from(["package", "name", "version", "project", "dependencies", "tool",
                        "poetry", "optional-dependencies", "dependency-groups", "source",
                        "build-system", "requires", "default", "develop", "packages",
                        "dev-packages", "pip", "channels", "image", "command", "args",
                        "containers", "spec", "script", "run", "url", "uv", "index",
                        "markers", "torch-neuronx"])
SCALARS = st.one_of(st.sampled_from(WORDS), st.integers(-3, 3), st.booleans(),
                    st.text(max_size=8), st.floats(allow_nan=False, allow_infinity=False))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)
DOCUMENTS = st.dictionaries(KEYS, VALUES, min_size=1, max_size=5)
LINE = st.lists(st.sampled_from(WORDS + ["pip install", "RUN", "FROM", "<<EOF", "EOF", "\\",
                                         "#", "-r", "[", "]", "\"", "'", "=", "{", "}", ":",
                                         "- ", "\t", "${X}", "$(", ")", ";", "&&", "|"]),
                max_size=8).map(" ".join)
TEXT = st.lists(LINE, max_size=8).map("\n".join)


def _must_not_crash(name: str, text: str | bytes, code: bool = True) -> None:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    data = b"# neuron\n" + data if not name.endswith((".lock", ".ipynb")) else data
    result = _migrate(name, data, code)
    assert result.error is None or ("internal error" not in result.error
                                    and result.error.startswith(name)
                                    and "\n" not in result.error), result.error


def _migrate(name: str, data: bytes, code: bool = True) -> FileResult:
    """As `apply` reads a file, or (without `code`) as `scan --fix` does."""
    if name.endswith(".ipynb"):
        return migrate_notebook(name, data, REGISTRY, migrate_data, code)
    return migrate_data(name, data, REGISTRY, code=code)


def _toml(document: dict) -> str | None:
    try:
        return tomlkit.dumps(document)
    except Exception:  # a shape TOML cannot spell
        return None


@FUZZ
@given(DOCUMENTS, st.sampled_from(["poetry.lock", "uv.lock", "pdm.lock", "pyproject.toml",
                                   "Pipfile"]))
def test_toml_files_of_any_shape(document: dict, name: str) -> None:
    text = _toml(document)
    if text is not None:
        _must_not_crash(name, "# neuron\n" + text)


@FUZZ
@given(VALUES)
def test_pipfile_lock_of_any_shape(document: object) -> None:
    _must_not_crash("Pipfile.lock", json.dumps(document) + "\n")


@FUZZ
@given(VALUES, st.sampled_from(["environment.yml", "job.yaml", "k8s.yml"]))
def test_yaml_files_of_any_shape(document: object, name: str) -> None:
    _must_not_crash(name, yaml.safe_dump(document))


@FUZZ
@given(TEXT, st.sampled_from(["requirements.txt", "Dockerfile", "run.sh", "setup.cfg",
                              "pyproject.toml", "poetry.lock", "environment.yml", "ci.yaml",
                              "setup.py", "Pipfile", "Pipfile.lock"]))
def test_text_of_any_shape(text: str, name: str) -> None:
    _must_not_crash(name, text)


@FUZZ
@given(st.lists(st.one_of(LINE, st.text(max_size=12)), min_size=1, max_size=4),
       st.sampled_from(["code", "markdown", "raw"]))
def test_notebooks_of_any_text(lines: list[str], cell_type: str) -> None:
    cell = {"cell_type": cell_type, "metadata": {}, "source": [f"!{line}\n" for line in lines]
            + ["import torch_xla.core.xla_model as xm\n", "d = xm.xla_device()\n"]}
    if cell_type == "code":
        cell |= {"outputs": [], "execution_count": None}
    notebook = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    _must_not_crash("nb.ipynb", json.dumps(notebook))


@pytest.mark.parametrize(("name", "text", "message"), [
    ("poetry.lock", "# neuron\npackage = [1, 2]\n", "poetry.lock:2: "),
    ("uv.lock", "# neuron\n[[package]]\nname = 1\nversion = [2]\n", None),
    ("pyproject.toml", "[project]\ndependencies = 'torch-neuronx'\n", None),
    ("pyproject.toml", '[project]\ndependencies = [\n  "torch-neuronx==2.1",\n',
     "pyproject.toml:2: not valid TOML (an array opened on this line is never closed with `]`)"),
    ("pyproject.toml", '[project]\ndependencies = [\n  "torch-neuronx==2.1",\n\n[tool.x]\n',
     "pyproject.toml:2: not valid TOML (an array opened on this line is never closed with `]`)"),
    ("pyproject.toml", '[project]\nname = """torch-neuronx\n\n[tool.x]\n',
     "pyproject.toml:2: not valid TOML (a multi-line string opened on this line is never "
     "closed)"),
    ("pyproject.toml", "[project]\nname = 'torch-neuronx'\n= 1\n", "pyproject.toml:3: "),
])
def test_known_bad_shapes(name: str, text: str, message: str | None) -> None:
    result = migrate_data(name, text.encode(), REGISTRY)
    assert result.error is None or "internal error" not in result.error, result.error
    if message is not None:
        assert result.error is not None and result.error.startswith(message), result.error


def test_a_lone_surrogate_in_a_notebook_is_one_line_naming_the_cell() -> None:
    notebook = ('{"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], '
                '"execution_count": null, "source": ["import torch_xla\\n", "x = 1\\n", '
                '"!pip install torch-neuronx==2.1.2  # \\ud800\\n"]}], "metadata": {}, '
                '"nbformat": 4, "nbformat_minor": 5}')
    result = _migrate("nb.ipynb", notebook.encode())
    assert result.error == ("nb.ipynb: cell 0, line 3: a lone surrogate (\\ud800) in the JSON, "
                            "not a character; file skipped")


NOTEBOOK_VALUES = st.one_of(SCALARS, st.lists(st.one_of(LINE, SCALARS), max_size=3),
                            st.dictionaries(st.sampled_from(["language", "name", "languageId",
                                                             "vscode", "kernelspec"]),
                                            SCALARS, max_size=2))
CELLS = st.lists(st.fixed_dictionaries(
    {"cell_type": st.sampled_from(["code", "markdown", 3])},
    optional={"source": st.one_of(NOTEBOOK_VALUES, st.just(["import torch_xla\n"])),
              "metadata": NOTEBOOK_VALUES, "outputs": NOTEBOOK_VALUES, "id": NOTEBOOK_VALUES}),
    max_size=3)


@FUZZ
@given(st.one_of(CELLS, NOTEBOOK_VALUES), NOTEBOOK_VALUES,
       st.sampled_from(["\\ud800", "\\udc00x", "\\ud83d\\ude00", "neuron"]))
def test_notebooks_of_any_shape(cells: object, metadata: object, odd: str) -> None:
    document = json.dumps({"cells": cells, "metadata": metadata, "nbformat": 4})
    _must_not_crash("nb.ipynb", document.replace("neuron", odd, 1))


@pytest.mark.parametrize(("name", "text"), [
    ("run.sh", "#!/bin/bash\nset -e\ncat <<EOF > requirements.txt\ntorch-neuronx==2.1.2\n"
               "pip install torch-neuronx==2.1.2\n"),
    ("run.sh", "cat << 'END' | sh\npip install torch-neuronx==2.1.2\nEND \n"),
    ("run.sh", "cat <<-EOF | sh\n\tpip install torch-neuronx==2.1.2\n  EOF\n"),
    ("Dockerfile", "FROM ubuntu\nRUN <<EOF\npip install torch-neuronx==2.1.2\n"),
])
def test_an_unended_heredoc_is_refused_naming_its_line(name: str, text: str) -> None:
    """A shell script and a Dockerfile alike: the rest of the file is the heredoc's text."""
    result = migrate_data(name, text.encode(), REGISTRY)
    assert result.new_source is None and result.error is not None
    assert re.fullmatch(rf"{name}:\d: the heredoc <<\w+ opened here is never ended; file left "
                        "untouched", result.error), result.error
    assert result.error.split(":")[1] == str(text.split("\n").index(
        next(line for line in text.split("\n") if "<<" in line)) + 1)


def test_an_ended_heredoc_and_other_shifts_are_read_as_before() -> None:
    text = ("cat <<-EOF > req.txt\n\tpip install torch-neuronx==2.1.2\n\tEOF\n"
            "echo $((1 << 2)); cat <<< x; echo '<<EOF'\npip install torch-neuronx==2.1.2\n")
    result = migrate_data("run.sh", text.encode(), REGISTRY)
    assert result.error is None
    assert sorted({f.line for f in result.findings if f.rule_id == "NM801"}) == [2, 5]


ODD_TEXT = st.lists(st.tuples(LINE, st.sampled_from(["\n", "\r\n", "\r", "\x0b", "\x0c",
                                                     "\x1c", "\u2028", "\x85", "\\\n"])),
                    max_size=8).map(lambda pairs: "".join(a + b for a, b in pairs))


@FUZZ
@given(ODD_TEXT, st.sampled_from(["requirements.txt", "Dockerfile", "run.sh", "setup.cfg",
                                  "pyproject.toml", "environment.yml", "ci.yaml", "Pipfile"]))
def test_text_with_any_line_separators(text: str, name: str) -> None:
    """Readers split lines in more than one way (str.splitlines also splits on form feeds,
    U+2028 ...); a mismatch must never become an internal error."""
    _must_not_crash(name, text)


def test_a_character_yaml_refuses_is_one_line_with_its_line() -> None:
    result = migrate_data("ci.yaml", b"image: neuron\nx: 1\n\x0b\n", REGISTRY)
    assert result.error == ("ci.yaml:3: not valid YAML (character U+000B is not allowed); "
                            "file left untouched")


@FUZZ
@given(st.lists(st.one_of(LINE.map(str.encode), st.binary(max_size=6)), max_size=8),
       st.sampled_from(["requirements.txt", "Dockerfile", "run.sh", "pyproject.toml",
                        "poetry.lock", "Pipfile.lock", "environment.yml", "setup.cfg",
                        "nb.ipynb"]))
def test_bytes_of_any_kind(chunks: list[bytes], name: str) -> None:
    """Invalid UTF-8, stray BOMs, NUL bytes between the words a reader looks for."""
    _must_not_crash(name, b"\n".join(chunks))


def test_yaml_that_is_not_utf8_is_one_line_with_its_line() -> None:
    result = migrate_data("ci.yaml", b"image: neuron\nx: caf\xe9\n", REGISTRY)
    assert result.error == ("ci.yaml:2: not valid YAML (not UTF-8: byte 0xE9); "
                            "file left untouched")


DOCKER_LINES = st.sampled_from([
    "FROM ubuntu AS base", "RUN <<EOF", "RUN <<-EOF bash", "EOF", "\tEOF", "END",
    "COPY <<EOF /app/requirements.txt", "COPY <<A <<B /app/", "A", "B",
    "RUN pip install torch-neuronx==2.1.2 \\", "  neuronx-cc==2.12 \\", "# escape=`", "`",
    "ARG V=2.1.2", "RUN pip install torch-neuronx==$V", "ENV NEURON_CC_FLAGS=--model-type=x",
    "CMD python train.py", "ENTRYPOINT [\"python\", \"train.py\"]", 'RUN ["sh", "-c", "x <<EOF"]',
    "torch-neuronx==2.1.2", "", "# comment", "cat <<EOF > requirements.txt"])
MAGIC_LINES = st.sampled_from([
    "%%writefile requirements.txt", "%%writefile train.py", "%%writefile run.sh", "%%bash",
    "!pip install torch-neuronx==2.1.2", "%pip install -U torch-neuronx", "!python train.py",
    "%env XLA_USE_BF16=1", "!cat <<EOF", "EOF", "import torch_xla.core.xla_model as xm",
    "xmp.spawn(f, args=())", "torch-neuronx==2.1.2", "!torchrun --nproc-per-node=2 train.py",
    "%%capture", "  ", "\\", "!!ls", "x = !ls", "%time xm.mark_step()", "?xm"])


@FUZZ
@given(st.lists(DOCKER_LINES, max_size=10), st.sampled_from(["Dockerfile", "run.sh"]))
def test_dockerfiles_and_scripts_of_any_order(lines: list[str], name: str) -> None:
    _must_not_crash(name, "\n".join(lines) + "\n")


@FUZZ
@given(st.lists(st.lists(MAGIC_LINES, max_size=5), min_size=1, max_size=3), st.booleans())
def test_notebooks_of_any_magics(cells: list[list[str]], code: bool) -> None:
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [],
                           "execution_count": None, "source": [line + "\n" for line in cell]}
                          for cell in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    _must_not_crash("nb.ipynb", json.dumps(notebook), code)
