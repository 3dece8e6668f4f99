"""NM210's DistributedDataParallel form: which loops train through DDP, which keep the
averaging helper and why, and (on the emulated device) that both forms train alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, cli, migrated

LOOP = '''\
import torch
import torch_xla.core.xla_model as xm


def train(loader):
    device = xm.xla_device()
    model = torch.nn.Linear(4, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        xm.optimizer_step(optimizer)
    torch.save(model.state_dict(), "model.pt")
'''


def _ddp(source: str) -> bool:
    """Whether the migration trains through DDP; it is all or nothing (wrapper, forward,
    step), never a step without averaging."""
    new, _ = migrated(source)
    wrapped = "DistributedDataParallel(model, broadcast_buffers=False)" in new
    through = "ddp_model(x)" in new
    stepped = "optimizer.step()" in new and "_neuron_optimizer_step" not in new
    assert wrapped == through == stepped, new
    return wrapped


def _reason(source: str) -> str:
    _, findings = migrated(source)
    return next(f.message for f in findings if "optimizer_step" in f.message)


def test_a_plain_data_parallel_loop_trains_through_ddp() -> None:
    assert _ddp(LOOP)
    new, _ = migrated(LOOP)
    assert "torch.save(model.state_dict()" in new  # checkpoint keys keep no `module.`


def test_the_wrapper_goes_before_the_loop_and_a_name_in_use_is_not_taken() -> None:
    new, _ = migrated(LOOP.replace("    for x, y", "    ddp_model = 1\n    for x, y"))
    assert "ddp_model_2 = model\n    if torch.distributed.is_initialized() or int(os.environ" \
           ".get(\"WORLD_SIZE\", 1)) > 1:\n" \
           "        ddp_model_2 = torch.nn.parallel.DistributedDataParallel(" in new
    assert new.index("ddp_model_2 = model") > new.index("ddp_model = 1")


@pytest.mark.parametrize(("change", "reason"), [
    (("        xm.optimizer_step(optimizer)", "        if x.sum() > 0:\n"
      "            xm.optimizer_step(optimizer)"), "does not run on every iteration"),
    (("xm.optimizer_step(optimizer)", "xm.optimizer_step(optimizer, barrier=True)"),
     "more than the optimizer"),
    (("        loss.backward()\n", "        loss.backward()\n"
      "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"), "between backward"),
    (("def train(loader):\n    device = xm.xla_device()\n    model = torch.nn.Linear(4, 1)"
      ".to(device)", "def train(loader, model):\n    device = xm.xla_device()"),
     "parameter of `train`"),
    (("loss = torch.nn.functional.mse_loss(model(x), y)",
      "loss = torch.nn.functional.mse_loss(model(x), y) + model(x).mean()"), "exactly once"),
    (("    for x, y in loader:\n", "    other = torch.optim.Adam(model.parameters())\n"
      "    for x, y in loader:\n"), "more than one optimizer"),
    (("    torch.save(", "    model = None\n    torch.save("), "assigned again"),
    (("loss = torch.nn.functional.mse_loss(model(x), y)",
      "loss = compute(model, x, y)"), "exactly once"),
])
def test_other_loops_keep_the_helper_and_say_why(change: tuple[str, str], reason: str) -> None:
    source = LOOP.replace(*change)
    assert source != LOOP
    assert not _ddp(source)
    assert reason in _reason(source)


def test_without_a_process_group_several_processes_fail_loudly(tmp_path: Path) -> None:
    """WORLD_SIZE > 1 and no group: DDP raises, as the helper did, rather than stepping
    each process alone."""
    pytest.importorskip("torch")
    new, _ = migrated(LOOP)
    script = tmp_path / "train.py"
    script.write_text(new.replace('"model.pt"', repr(str(tmp_path / "m.pt")))
                      .replace('torch.device("neuron")', 'torch.device("cpu")')
                      .replace('backend="neuron"', 'backend="eager"') +
                      "\ntrain([(torch.ones(2, 4), torch.ones(2, 1))])\n")
    env = {**os.environ, "WORLD_SIZE": "2"}
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert run.returncode != 0 and "process group" in run.stderr.lower(), run.stderr[-2000:]


def test_a_suppression_on_any_edited_line_keeps_the_helper() -> None:
    source = LOOP.replace("mse_loss(model(x), y)", "mse_loss(model(x), y)  # neuron-migrate: "
                          "ignore[NM210]")
    new, _ = migrated(source)
    assert "_neuron_optimizer_step(optimizer)" in new and "DistributedDataParallel" not in new


def _smoke(script: str) -> dict:
    run = cli("smoke", script, "--nproc", "2", "--check-replicas", "--format", "json", "--",
              "--steps", "4")
    report = json.loads(run.stdout)
    assert report["passed"], run.stdout + run.stderr
    return report


@pytest.mark.torch
@pytest.mark.slow
def test_ddp_and_the_helper_train_alike_on_two_processes(in_tmp: Path) -> None:
    source = (FIXTURES / "smoke" / "xla_data_parallel_loop.py").read_text()
    (in_tmp / "ddp.py").write_text(source)
    (in_tmp / "helper.py").write_text(source.replace(
        "model(images), labels)", "model(images), labels)  # neuron-migrate: ignore[NM210]"))
    assert cli("apply", "--no-compile", "ddp.py", "helper.py").exit_code == 0
    assert "DistributedDataParallel" in (in_tmp / "ddp.py").read_text()
    assert "_neuron_optimizer_step" in (in_tmp / "helper.py").read_text()
    ddp, helper = _smoke("ddp.py"), _smoke("helper.py")
    assert ddp["optimizer_steps"] == helper["optimizer_steps"] == 4
    assert ddp["losses"] == pytest.approx(helper["losses"], rel=1e-5)
    # DDP broadcasts rank 0's parameters when it wraps the model; both average once per step
    # here (one small bucket), the helper after backward, DDP during it
    assert ddp["ops"].get("c10d::broadcast_") and not helper["ops"].get("c10d::broadcast_")
    assert ddp["ops"]["c10d::allreduce_"] == helper["ops"]["c10d::allreduce_"] == 2 * 4
