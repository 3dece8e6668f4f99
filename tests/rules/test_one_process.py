"""A script that provably runs as one process saves with a plain `torch.save` of its CPU copy
(NM230) and gets no process group (NM221); any sign of several processes, in the file or in
its repository, keeps the writer choice, the barrier and the group."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_migrate.deps import script_mentions
from neuron_migrate.deps.script_mentions import maybe_several_processes
from tests.conftest import cli

SCRIPT = '''\
import torch
import torch_xla.core.xla_model as xm


def fit(out):
    device = xm.xla_device()
    line = torch.nn.Linear(1, 1).to(device)
    xm.save(line.state_dict(), out)


if __name__ == "__main__":
    fit("line.pt")
'''

ONE = 'torch.save(_neuron_to_device(line.state_dict(), "cpu"), out)'
SEVERAL = "_neuron_save(line.state_dict(), out)"
GROUP = 'init_process_group("neuron")'


def _apply(folder: Path, source: str = SCRIPT, name: str = "fit_line.py") -> str:
    (folder / name).write_text(source)
    run = cli("apply", str(folder / name))
    assert run.exit_code == 0, run.stdout + run.stderr
    return (folder / name).read_text()


def test_a_lone_script_saves_its_cpu_copy_without_group_or_barrier(in_tmp: Path) -> None:
    text = _apply(in_tmp)
    assert ONE in text
    assert "_neuron_save" not in text and "_neuron_distributed" not in text
    assert GROUP not in text and "import os" not in text


@pytest.mark.parametrize("launcher, content", [
    ("run.sh", "torchrun --nproc-per-node=2 fit_line.py\n"),
    ("run.sh", "SCRIPT=fit_line.py\n\ntorchrun --nproc-per-node=2 \"$SCRIPT\"\n"),
    ("README.md", "Train on 32 cores: `torchrun --nproc_per_node=32 fit_line.py`\n"),
    ("Dockerfile", "FROM python:3.12\nCMD [\"torchrun\", \"fit_line.py\"]\n"),
    ("launch_job.py", "est = PyTorch(entry_point='fit_line.py', distribution={})\n"),
    ("run.sh", "cd scripts\ntorchrun --nproc-per-node=2 fit_line.py\n"),
    ("jobs/run.sh", "torchrun --nproc-per-node=2 ../scripts/fit_line.py\n"),
    ("run.sh", "torchrun --nproc-per-node=2 $HOME/code/fit_line.py\n"),
    ("scripts/driver.py", "from fit_line import fit\n"),
    ("tools/driver.py", "import sys\nsys.path.append('scripts')\nimport fit_line\n"),
    ("sub/driver.py", "from scripts import (\n    other,\n    fit_line,\n)\n"),
    ("scripts/driver.py", "import importlib\nimportlib.import_module('fit_line')\n"),
    ("scripts/inner/driver.py", "from .. import fit_line\n"),
    # Python reads a fullwidth letter as its ASCII one: the bytes never spell the word
    ("scripts/driver.py", "# fit_lines\nimport \uff46it_line\n"),
])
def test_a_script_its_repository_may_start_several_times_keeps_the_machinery(
        in_tmp: Path, launcher: str, content: str) -> None:
    (in_tmp / ".git").mkdir()
    (in_tmp / launcher).parent.mkdir(parents=True, exist_ok=True)
    (in_tmp / launcher).write_text(content)
    (in_tmp / "scripts").mkdir(exist_ok=True)
    text = _apply(in_tmp / "scripts")  # the launcher is in the work tree, above the script
    assert SEVERAL in text and GROUP in text


@pytest.mark.parametrize("launcher, content", [
    ("run.sh", "torchrun --nproc-per-node=2 other.py\n"),
    ("run.sh", "torchrun --nproc-per-node=2 my_fit_line.py\n"),
    ("run.sh", "torchrun --nproc-per-node=2 elsewhere/fit_line.py\n"),
    ("elsewhere/README.md", "torchrun --nproc-per-node=2 fit_line.py\n"),  # its own script
    ("elsewhere/driver.py", "from fit_line import fit\n"),
    ("driver.py", "from pkg import fit_line\n"),
    ("driver.py", "split = 'fit_line'\n"),
])
def test_a_launcher_or_importer_of_another_script_changes_nothing(
        in_tmp: Path, launcher: str, content: str) -> None:
    (in_tmp / ".git").mkdir()
    (in_tmp / launcher).parent.mkdir(parents=True, exist_ok=True)
    (in_tmp / launcher).write_text(content)
    (in_tmp / "scripts").mkdir(exist_ok=True)
    assert ONE in _apply(in_tmp / "scripts")


@pytest.mark.parametrize("change", [
    ("    xm.save(", "    print(xm.get_ordinal())\n    xm.save("),  # an ordinal
    ("def fit", "# run me with torchrun\ndef fit"),  # a word of a launcher, even in a comment
    ("def fit", "import os\nRANKS = os.environ.get('WORLD_SIZE')\n\n\ndef fit"),
    ('if __name__ == "__main__":\n    fit("line.pt")\n', ""),  # a module: its caller decides
    ("xm.save(line.state_dict(), out)", "xm.save(line.state_dict(), out, master_only=flag())"),
])
def test_any_sign_of_several_processes_in_the_file_keeps_the_helper(
        in_tmp: Path, change: tuple[str, str]) -> None:
    source = SCRIPT.replace(*change)
    assert source != SCRIPT
    text = _apply(in_tmp, source)
    assert ONE not in text and "_neuron_save(" in text


def test_a_notebook_is_one_process(in_tmp: Path) -> None:
    cells = [SCRIPT.split("\n\n\n")[0], "device = xm.xla_device()\n"
             "line = torch.nn.Linear(1, 1).to(device)\nxm.save(line.state_dict(), 'line.pt')"]
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "execution_count": None,
                           "outputs": [], "source": c} for c in cells],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (in_tmp / "fit.ipynb").write_text(json.dumps(notebook))
    assert cli("apply", "fit.ipynb").exit_code == 0
    text = "".join(c["source"] for c in json.loads((in_tmp / "fit.ipynb").read_text())["cells"])
    assert "torch.save(_neuron_to_device(line.state_dict(), \"cpu\"), 'line.pt')" in text
    assert "_neuron_save" not in text


def test_only_files_naming_the_module_as_a_word_are_parsed(
        in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[bytes] = []
    original = script_mentions._imported_modules
    monkeypatch.setattr(script_mentions, "_imported_modules",
                        lambda data: parsed.append(data) or original(data))
    (in_tmp / ".git").mkdir()
    (in_tmp / "fit_lines.py").write_text("fit_lines_total = 1  # fit_line_x\n")
    (in_tmp / "uses.py").write_text("import fit_line\n")
    (in_tmp / "fit_line.py").write_text("x = 1\n")
    assert maybe_several_processes(str(in_tmp / "fit_line.py"))
    assert parsed == [b"import fit_line\n"]


def test_text_with_no_file_on_disk_may_be_several(tmp_path: Path) -> None:
    assert maybe_several_processes(str(tmp_path / "absent.py"))
    (tmp_path / "here.py").write_text("x = 1\n")
    assert not maybe_several_processes(str(tmp_path / "here.py"))
