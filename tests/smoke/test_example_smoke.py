"""The README's example end to end: migrate it and run it on the emulated neuron device in two
torchrun-style processes, as the NM220 finding says to launch it; the loss falls and the
replicas stay in step (the gradient averaging xm.optimizer_step did survives the migration, in
the process group the worker entry now creates)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT, cli

pytestmark = pytest.mark.torch  # runs scripts on the emulated device

EXAMPLE = ROOT / "examples" / "xla_mnist" / "train.py"


@pytest.mark.slow
def test_migrated_example_trains_on_the_emulated_device(in_tmp: Path) -> None:
    script = in_tmp / "train.py"
    shutil.copyfile(EXAMPLE, script)
    report = cli("apply", "train.py", "--format", "json").json()
    spawn = next(f for f in report["findings"] if f["rule_id"] == "NM220")
    assert spawn["applied"] and "`torchrun --nproc-per-node=N train.py`" in spawn["message"]
    assert not [f for f in report["findings"] if f["kind"] == "review"]
    assert "torch_xla" not in script.read_text().split('"""', 2)[2]  # past the docstring
    run = cli("smoke", "train.py", "--nproc", "2", "--check-replicas", "--steps", "8",
              "--logs", "logs", "--", "--samples", "1024", "--epochs", "1", "--log-every", "1")
    assert run.exit_code == 0, run.stdout + run.stderr
    assert "PASSED" in run.stdout and "optimizer steps: 8" in run.stdout
    losses = [float(x) for x in re.findall(r"loss (\d+\.\d+)", (in_tmp / "logs" / "rank0.out")
                                           .read_text())]
    assert len(losses) >= 6
    assert sum(losses[-3:]) < sum(losses[:3])
