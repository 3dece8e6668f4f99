"""A notebook's review items the rewrite would hide stay visible, as in a `.py` file: `apply`
leaves the note in the cell that changed, `check` reports it until it is acknowledged."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import cli

CELLS = [
    '"""Probe for PyTorch/XLA and fall back to the CPU."""\nimport torch',
    "try:\n    import torch_xla.core.xla_model as xm\n    ON_NEURON = True\n"
    "except ImportError:\n    ON_NEURON = False",
    "def device():\n    if ON_NEURON:\n        return xm.xla_device()\n"
    "    return torch.device(\"cpu\")",
]


def _notebook(cells: list[str]) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                                  "outputs": [], "source": c} for c in cells],
                       "metadata": {"kernelspec": {"language": "python", "name": "python3",
                                                   "display_name": "Python 3"}},
                       "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


def _cells(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]


def test_a_hidden_review_item_leaves_its_note_in_the_cell(in_tmp: Path) -> None:
    target = in_tmp / "probe.ipynb"
    target.write_text(_notebook(CELLS))
    assert "NM715" in {f["rule_id"] for f in cli("check", ".", "--format", "json").json()[
        "findings"]}
    applied = cli("apply", ".", "--format", "json")
    assert applied.exit_code == 0, applied.stdout
    [probe] = [f for f in applied.json()["findings"] if f["rule_id"] == "NM715"]
    assert "a note in this cell keeps it" in probe["message"]
    cells = _cells(target)
    assert cells[1].startswith("# neuron-migrate: NM715 "), cells[1]
    assert not any("neuron-migrate: NM715" in c for i, c in enumerate(cells) if i != 1)
    after = cli("check", ".", "--format", "json")
    assert after.exit_code == 1
    [found] = after.json()["findings"]
    assert (found["rule_id"], found["cell"], found["line"]) == ("NM715", 1, 2)
    assert "the note `apply` left at line 1 says" in found["message"]
    again = target.read_text()
    assert cli("apply", ".").exit_code == 0 and target.read_text() == again  # no second note


def test_an_acknowledged_note_lets_check_pass(in_tmp: Path) -> None:
    target = in_tmp / "probe.ipynb"
    target.write_text(_notebook(CELLS))
    cli("apply", ".")
    cells = _cells(target)
    cells[1] = "\n".join(line for line in cells[1].split("\n")
                         if not line.startswith("# neuron-migrate: NM715"))
    target.write_text(_notebook(cells))
    assert cli("check", ".").exit_code == 0
