"""verify's recorder on the migrated side: what it records, and that smoke's op counts do not
see it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_migrate.smoke.run import SmokeOptions, run_smoke
from neuron_migrate.verify import runs

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "fixtures" / "verify"

pytestmark = pytest.mark.torch

SCRIPT = """
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = TensorDataset(torch.arange(48.0).reshape(12, 4) / 48, torch.ones(12, 1))
for inputs, targets in DataLoader(data, batch_size=4):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    grad = sum(float(p.grad.double().pow(2).sum()) for p in model.parameters()) ** 0.5
    print(repr(float(loss)), repr(grad))
    optimizer.step()
"""


def test_the_recorder_writes_what_the_script_computed(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    plan = runs.Plan(script, script, steps=10)
    env = dict(os.environ, **runs.recorder_environment(plan, "migrated", tmp_path),
               PYTHONPATH=str(runs.RECORDER))
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    printed = [float(value) for line in done.stdout.splitlines() for value in line.split()]
    record = json.loads((tmp_path / "rank0.json").read_text())
    recorded = [value for s in record["steps"] for value in (s["loss"], s["grad_norm"])]
    assert recorded == pytest.approx(printed, rel=1e-12)
    assert [s["batches_taken"] for s in record["steps"]] == [1, 2, 3]
    assert record["batches"][0][0][0] == [4, 4]  # the inputs' shape, then their sums
    assert record["initial_params"] > 0


@pytest.mark.slow
def test_the_recorder_adds_no_op_to_smokes_counts():
    script = PAIRS / "single_device.migrated.py"
    plan = runs.Plan(script, script, steps=2, keep_dropout=True)  # dropout kept: same model
    with_recorder = runs.recorder_environment(plan, "migrated", Path("/tmp"))
    env = (*with_recorder.items(), ("PYTHONPATH", str(runs.RECORDER)))
    plain = run_smoke(SmokeOptions(script=script, steps=2))
    recorded = run_smoke(SmokeOptions(script=script, steps=2, environment=env))
    assert plain.passed and recorded.passed, (plain.error, recorded.error)
    assert plain.ops and recorded.ops == plain.ops
