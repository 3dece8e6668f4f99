"""The README's example end to end: migrate it, accept the one review item's suggestion, and
run it on the emulated neuron device in two processes; the loss falls and the replicas stay
in step (the gradient averaging xm.optimizer_step did survives the migration)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.conftest import ROOT, cli

EXAMPLE = ROOT / "examples" / "xla_mnist" / "train.py"


def test_migrated_example_trains_on_the_emulated_device(in_tmp: Path) -> None:
    script = in_tmp / "train.py"
    shutil.copyfile(EXAMPLE, script)
    report = cli("apply", "train.py", "--format", "json").json()
    spawn = next(f for f in report["findings"] if f["rule_id"] == "NM220")
    lines = script.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if "xmp.spawn(" in line)
    indent = re.match(r"\s*", lines[at]).group(0)
    lines[at] = f"{indent}{spawn['suggestion']}\n"  # what a reviewer accepts
    script.write_text("".join(lines))
    assert cli("apply", "train.py").exit_code == 0
    assert "torch_xla" not in script.read_text().split('"""', 2)[2]  # past the docstring
    run = cli("smoke", "train.py", "--nproc", "2", "--check-replicas", "--steps", "8",
              "--logs", "logs", "--", "--samples", "1024", "--epochs", "1", "--log-every", "1")
    assert run.exit_code == 0, run.stdout + run.stderr
    assert "PASSED" in run.stdout and "optimizer steps: 8" in run.stdout
    losses = [float(x) for x in re.findall(r"loss (\d+\.\d+)", (in_tmp / "logs" / "rank0.out")
                                           .read_text())]
    assert len(losses) >= 6
    assert sum(losses[-3:]) < sum(losses[:3])
