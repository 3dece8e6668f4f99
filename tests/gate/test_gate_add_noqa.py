"""`check --add-noqa`: a `reviewed` marker at every review item, never changing code."""

from __future__ import annotations

import json
from pathlib import Path

from neuron_migrate.gate.add_noqa import mark_file
from neuron_migrate.model import Finding, Kind
from tests.conftest import cli


def _review(line: int, rule: str = "NM715", cell: int | None = None) -> Finding:
    return Finding("f", line, 1, rule, Kind.REVIEW, "m", cell=cell)


def _mark(name: str, text: str, *findings: Finding) -> tuple[str, int, list[str]]:
    skipped: list[str] = []
    new, count = mark_file(name, text.encode(), list(findings), skipped)
    return new.decode(), count, skipped


def test_python_marker_goes_at_the_end_of_the_statement_and_merges() -> None:
    text = "x = f(\n    1,\n)\ny = g()  # keep me\nz = h()  # neuron-migrate: reviewed[NM710]\n"
    new, count, _ = _mark("a.py", text, _review(1), _review(2, "NM709"), _review(4),
                          _review(5))
    assert new.splitlines() == [
        "x = f(", "    1,", ")  # neuron-migrate: reviewed[NM709, NM715]",
        "y = g()  # keep me  # neuron-migrate: reviewed[NM715]",
        "z = h()  # neuron-migrate: reviewed[NM710, NM715]"]
    assert count == 4


def test_python_compound_statement_takes_the_marker_on_its_header() -> None:
    text = "try:\n    import a\nexcept ImportError:\n    a = None\n"
    new, count, _ = _mark("a.py", text, _review(1))
    assert new.startswith("try:  # neuron-migrate: reviewed[NM715]\n    import a\n")


def test_a_line_inside_a_multiline_string_is_never_marked() -> None:
    text = 'x = f("""\nxla\n""", 2)\ny = """\nxla\n"""; z = 1 \\\n    + 2\n'
    new, count, skipped = _mark("a.py", text, _review(2))
    # the statement's last line ends outside the string: the marker goes there
    assert new.splitlines()[2] == '""", 2)  # neuron-migrate: reviewed[NM715]'
    compile(new, "a.py", "exec")
    # a statement whose only lines end in a string or a backslash: skipped, and said so
    whole = 'x = """\nxla\n""" \\\n    "tail"; y = 1 \\\n    + 2\n'
    new, count, skipped = _mark("b.py", whole, _review(2))
    assert (new, count) == (whole, 0) and "multi-line string" in skipped[0]


def test_crlf_and_bom_survive() -> None:
    text = "\ufeffa = f()\r\nb = 2\r\n"
    skipped: list[str] = []
    new, count = mark_file("a.py", text.encode("utf-8"), [_review(1)], skipped)
    assert new == "\ufeffa = f()  # neuron-migrate: reviewed[NM715]\r\nb = 2\r\n".encode()


def test_other_files() -> None:
    assert _mark("requirements.txt", "a\nb \\\n  --hash=x\n", _review(2))[0] == \
        "a\nb \\\n  --hash=x  # neuron-migrate: reviewed[NM715]\n"
    docker = "FROM img AS x\nRUN pip install a \\\n    b\nRUN [\"pip\", \"install\", \"c\"]\n"
    new, count, _ = _mark("Dockerfile", docker, _review(1, "NM811"), _review(2, "NM807"),
                          _review(4, "NM807"))
    assert new.splitlines() == [
        "# neuron-migrate: reviewed[NM811]", "FROM img AS x", "RUN pip install a \\",
        "    b  # neuron-migrate: reviewed[NM807]", "# neuron-migrate: reviewed[NM807]",
        'RUN ["pip", "install", "c"]']
    assert count == 3
    toml = 'a = """\nneuron\n"""\nb = ["neuron"]\n'
    new, count, skipped = _mark("pyproject.toml", toml, _review(2), _review(4))
    assert new == 'a = """\nneuron\n"""\nb = ["neuron"]  # neuron-migrate: reviewed[NM715]\n'
    assert count == 1 and "multi-line string" in skipped[0]
    yaml = "a: |\n  pip install x\nb: >\n  pip install\n  y\n"
    new, count, skipped = _mark("ci.yml", yaml, _review(2), _review(4))
    assert new.splitlines()[1] == "  pip install x  # neuron-migrate: reviewed[NM715]"
    assert count == 1 and "YAML string" in skipped[0]


def test_notebook_cells() -> None:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# t"]},
             {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
              "source": ["!pip install transformers-neuronx\n", "x = f(\n", "  1)"]}]
    text = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
                      indent=1)
    new, count, _ = _mark("n.ipynb", text, _review(1, "NM807", cell=1), _review(2, cell=1))
    source = json.loads(new)["cells"][1]["source"]
    assert source == ["!pip install transformers-neuronx  # neuron-migrate: reviewed[NM807]\n",
                      "x = f(\n", "  1)  # neuron-migrate: reviewed[NM715]"]
    assert count == 2


def test_add_noqa_through_the_cli_is_idempotent_and_leaves_fixes(in_tmp: Path) -> None:
    code = ('import importlib.util\n\nPROBE = importlib.util.find_spec("torch_xla")\n'
            'TEXT = """\ntorch_xla\n"""\n')
    (in_tmp / "a.py").write_text(code)
    (in_tmp / "requirements.txt").write_text("transformers-neuronx\ntorch-neuronx==2.1.0\n")
    assert cli("check", ".").exit_code == 1
    run = cli("check", "--add-noqa", ".")
    assert run.exit_code == 0, run.stdout + run.stderr
    assert "added 2 " in run.stdout
    assert (in_tmp / "a.py").read_text().splitlines()[2].endswith(
        "# neuron-migrate: reviewed[NM715]")
    assert (in_tmp / "requirements.txt").read_text() == \
        "transformers-neuronx  # neuron-migrate: reviewed[NM807]\ntorch-neuronx==2.1.0\n"
    again = cli("check", "--add-noqa", ".")
    assert "added 0 " in again.stdout
    # the pin's fix is not acknowledged: check still fails on it, and on nothing else
    report = cli("check", ".", "--format", "json")
    assert report.exit_code == 1
    assert {f["rule_id"] for f in report.json()["findings"]} == {"NM801", "NM805"}
