"""Inline markers: `# noqa: NMxxx` (ruff's meaning), `# neuron-migrate: reviewed[NMxxx]`
(acknowledges review items, never a fix), in Python, notebooks and the `#`-comment files the
dependency scanner reads."""

from __future__ import annotations

import json

import pytest

from neuron_migrate import catalogue
from neuron_migrate.command import load_rules
from neuron_migrate.model import FileResult, Kind, Options
from neuron_migrate.registry import DeferredRegistry
from neuron_migrate.runner import migrate_bytes

PROBE = 'HAS_XLA = importlib.util.find_spec("torch_xla") is not None'


def _migrate(name: str, text: str, **options: object) -> FileResult:
    chosen = Options(**options)  # type: ignore[arg-type]
    registry = DeferredRegistry(load_rules, catalogue.tokens(chosen.sources), chosen)
    return migrate_bytes(name, text.encode(), registry)


def _rules(result: FileResult) -> list[tuple[int, str]]:
    return [(f.line, f.rule_id) for f in result.findings]


def _python(marker: str) -> str:
    return f"import importlib.util\n\n{PROBE}{marker}\n"


def test_the_probe_is_a_review_item_without_a_marker() -> None:
    result = _migrate("a.py", _python(""))
    assert [(f.rule_id, f.kind) for f in result.findings] == [("NM715", Kind.REVIEW)]


@pytest.mark.parametrize("marker", ["  # noqa: NM715", "  # noqa:NM715", "  # NOQA: NM715",
                                    "  # noqa: E501,NM715", "  # noqa: E501, NM715 F401",
                                    "  # noqa: NM7", "  # neuron-migrate: reviewed[NM715]",
                                    "  # neuron-migrate: reviewed",
                                    "  # type: ignore  # neuron-migrate: reviewed[NM715]",
                                    "  # neuron-migrate: ignore[NM715]"])
def test_a_marker_naming_the_rule_silences_the_review_item(marker: str) -> None:
    assert _rules(_migrate("a.py", _python(marker))) == []


@pytest.mark.parametrize("marker", ["  # noqa", "  # noqa: E501", "  # noqa: F401,E501",
                                    "  # neuron-migrate: reviewed[NM101]"])
def test_a_bare_noqa_or_other_codes_leave_our_rules_alone(marker: str) -> None:
    rules = _rules(_migrate("a.py", _python(marker)))
    assert (3, "NM715") in rules
    # a bare noqa or other linters' codes are not ours: never reported as unused either
    assert ("NM002" in {r for _, r in rules}) == ("NM101" in marker)


@pytest.mark.parametrize(("marker", "silenced"), [
    ("  # neuron-migrate: ignore[NM1]", True), ("  # neuron-migrate: ignore[NM10]", True),
    ("  # neuron-migrate: ignore[nm101]", True), ("  # noqa: NM1", True),
    ("  # neuron-migrate: ignore[NM11]", False), ("  # neuron-migrate: ignore[NM1010]", False),
    ("  # neuron-migrate: ignore[101]", False), ("  # noqa: NM2", False),
])
def test_a_marker_names_rules_by_id_prefix(marker: str, silenced: bool) -> None:
    """As ruff's codes: `NM1` names every NM1xx rule; a code that is not a prefix of the id
    (a later digit, a tail of the id) names nothing, and the fix is made."""
    source = f"import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device(){marker}\n"
    result = _migrate("a.py", source)
    assert ("NM101" in {r for _, r in _rules(result)}) is not silenced
    assert result.changed is not silenced
    assert ((3, "NM002") in _rules(result)) is not silenced  # an unused marker is reported


def test_a_reviewed_marker_names_rules_by_id_prefix() -> None:
    assert _rules(_migrate("a.py", _python("  # neuron-migrate: reviewed[NM7]"))) == []
    unrelated = _migrate("a.py", _python("  # neuron-migrate: reviewed[NM716]"))
    assert (3, "NM715") in _rules(unrelated)


def test_noqa_holds_back_the_fix_as_ruff_does_but_reviewed_does_not() -> None:
    source = "import torch_xla.core.xla_model as xm\n\n\ndef f():\n    xm.mark_step(){}\n"
    ignored = _migrate("a.py", source.format("  # noqa: NM110"))
    assert not ignored.changed and "NM110" not in {f.rule_id for f in ignored.findings}
    reviewed = _migrate("a.py", source.format("  # neuron-migrate: reviewed[NM110]"))
    assert reviewed.changed
    assert {(f.rule_id, f.kind) for f in reviewed.findings if f.rule_id == "NM110"} == {
        ("NM110", Kind.FIX)}
    # a `reviewed` marker that acknowledged nothing is reported, so it does not linger
    unused = [f for f in reviewed.findings if f.rule_id == "NM002"]
    assert len(unused) == 1 and "reviewed[NM110]" in unused[0].message


def test_reviewed_covers_every_line_of_a_statement() -> None:
    source = ("import importlib.util\n\nHAS_XLA = (\n    importlib.util.find_spec(\"torch_xla\")\n"
              "    is not None\n)  # neuron-migrate: reviewed[NM715]\n")
    assert _rules(_migrate("a.py", source)) == []


def test_markers_in_a_notebook_cell() -> None:
    def notebook(marker: str) -> str:
        cell = {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                "source": ["import importlib.util\n", PROBE + marker]}
        return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                           "nbformat_minor": 5})

    assert "NM715" in {f.rule_id for f in _migrate("n.ipynb", notebook("")).findings}
    for marker in ("  # noqa: NM715", "  # neuron-migrate: reviewed[NM715]"):
        assert _migrate("n.ipynb", notebook(marker)).findings == ()
    assert "NM715" in {f.rule_id for f in _migrate("n.ipynb", notebook("  # noqa")).findings}


# ------------------------------------------------------------------ files other than Python
@pytest.mark.parametrize(("name", "text", "rule"), [
    ("requirements.txt", "transformers-neuronx{}\n", "NM807"),
    ("setup.sh", "pip install transformers-neuronx{}\n", "NM807"),
    ("setup.sh", "pip install \\\n    transformers-neuronx \\\n    numpy{}\n", "NM807"),
    ("Dockerfile", "FROM ubuntu:24.04\nRUN pip install transformers-neuronx{}\n", "NM807"),
    ("ci.yml", "jobs:\n  t:\n    steps:\n      - run: |\n          pip install "
               "transformers-neuronx{}\n", "NM807"),
    ("pyproject.toml", '[project]\nname = "x"\ndependencies = [\n  "transformers-neuronx",{}\n]\n',
     "NM807"),
])
@pytest.mark.parametrize("marker", ["  # noqa: {}", "  # neuron-migrate: reviewed[{}]",
                                    "  # neuron-migrate: ignore[{}]"])
def test_markers_in_files_other_than_python(name: str, text: str, rule: str,
                                            marker: str) -> None:
    assert rule in {f.rule_id for f in _migrate(name, text.format("")).findings}
    marked = _migrate(name, text.format(marker.format(rule)))
    assert rule not in {f.rule_id for f in marked.findings}
    assert "NM002" not in {f.rule_id for f in marked.findings}
    bare = _migrate(name, text.format("  # noqa"))
    assert rule in {f.rule_id for f in bare.findings}


def test_in_a_requirements_file_ignore_holds_back_the_fix_and_reviewed_does_not() -> None:
    ignored = _migrate("requirements.txt", "torch-neuronx==2.1.0  # noqa: NM801,NM805\n")
    assert ignored.findings == () and not ignored.changed
    reviewed = _migrate("requirements.txt",
                        "torch-neuronx==2.1.0  # neuron-migrate: reviewed[NM801]\n")
    assert reviewed.changed  # the pin is still fixed
    assert {"NM801", "NM002"} <= {f.rule_id for f in reviewed.findings}


def test_a_dockerfile_marker_on_the_comment_line_above_an_instruction() -> None:
    image = ("FROM public.ecr.aws/neuron/pytorch-training-neuronx:"
             "2.1.2-neuronx-py310-sdk2.20.0-ubuntu20.04\n")
    assert "NM811" in {f.rule_id for f in _migrate("Dockerfile", image).findings}
    marked = _migrate("Dockerfile", "# neuron-migrate: reviewed[NM811]\n" + image)
    assert marked.findings == ()
    # one line further up it covers nothing, and says so
    apart = _migrate("Dockerfile", "# neuron-migrate: reviewed[NM811]\n\n" + image)
    assert {f.rule_id for f in apart.findings} == {"NM811", "NM002"}


def test_an_unused_marker_in_a_requirements_file_is_reported() -> None:
    result = _migrate("requirements.txt", "transformers-neuronx\nnumpy  # noqa: NM801\n")
    assert (2, "NM002") in _rules(result)
