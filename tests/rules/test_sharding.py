"""NM704 (XLA FSDP → FSDP2) and NM706 (XLA / NxD ZeRO-1 → ZeroRedundancyOptimizer).

The helpers are executed as the migrated file defines them; the XLA-era training scripts in
fixtures/smoke are migrated with the CLI and run on the emulated device, where one process and
two processes on the same global batch must print the same losses (the XLA optimizers averaged
the gradients; a migration that lost the averaging or the clipping changes them).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from neuron_migrate.rules.emitted_helpers import HELPERS
from tests.conftest import FIXTURES, cli

pytestmark = pytest.mark.torch
SMOKE = FIXTURES / "smoke"
STEP = re.compile(r"^step (\d+) loss (\S+) grad_norm (\S+)$", re.MULTILINE)


def _helpers(*names: str) -> dict[str, Any]:
    """The helpers' text executed in one namespace, as in a migrated file."""
    import torch
    import torch.distributed.fsdp
    import torch.distributed.optim  # noqa: F401  (the migrated file imports them too)

    namespace: dict[str, Any] = {"torch": torch, "os": os}
    for name in names:
        for needed in (*HELPERS[name].requires, name):
            exec(compile(HELPERS[needed].source, f"<{needed}>", "exec"), namespace)  # noqa: S102
    return namespace


@pytest.fixture
def one_process_group(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A gloo group of one process, so the native classes can be made outside the emulator."""
    import torch.distributed as dist

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield dist
    dist.destroy_process_group()


def test_the_step_clips_by_the_global_norm_with_xlas_default_max_norm(one_process_group: Any
                                                                       ) -> None:
    import torch

    zero1 = _helpers("_NeuronZeroRedundancyOptimizer")["_NeuronZeroRedundancyOptimizer"]
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(4, 3)), torch.nn.Parameter(torch.randn(5))]
    expected = [p.detach().clone() for p in params]
    grads = [torch.full_like(p, 2.0) for p in params]
    optimizer = zero1(params, torch.optim.SGD, lr=0.5)
    for param, grad in zip(params, grads):
        param.grad = grad.clone()
    optimizer.step()
    norm = torch.sqrt(sum((g * g).sum() for g in grads))
    scale = min(1.0, 1.0 / (float(norm) + 1e-6))  # torch_xla: max_norm defaults to 1.0
    for param, start, grad in zip(params, expected, grads):
        assert torch.allclose(param.detach(), start - 0.5 * scale * grad, atol=1e-6)
    assert optimizer.grad_norm is not None and torch.isclose(optimizer.grad_norm, norm)


def test_grad_clipping_false_steps_with_the_gradients_as_they_are(one_process_group: Any
                                                                  ) -> None:
    import torch

    zero1 = _helpers("_NeuronZeroRedundancyOptimizer")["_NeuronZeroRedundancyOptimizer"]
    param = torch.nn.Parameter(torch.zeros(3))
    optimizer = zero1([param], torch.optim.SGD, grad_clipping=False, lr=1.0)
    param.grad = torch.full((3,), 10.0)
    optimizer.step()
    assert torch.equal(param.detach(), torch.full((3,), -10.0)) and optimizer.grad_norm is None


def test_gradients_are_averaged_one_collective_per_bucket(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """Two processes, faked: the collective is counted and leaves each sum as it was, so
    averaging halves every gradient. Never one all_reduce per parameter."""
    import torch
    import torch.distributed as dist

    calls: list[int] = []
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(dist, "all_reduce", lambda t, op=None, group=None: calls.append(t.numel()))
    average = _helpers("_neuron_average_gradients")["_neuron_average_gradients"]
    params = [torch.nn.Parameter(torch.ones(n)) for n in (3, 4, 5)]
    params.append(torch.nn.Parameter(torch.ones(2, dtype=torch.float64)))
    params.append(torch.nn.Parameter(torch.ones(6)))  # no gradient: left alone
    for param in params[:4]:
        param.grad = torch.full_like(param, 4.0)
    average(params)
    assert sorted(calls) == [2, 12]  # one flat bucket per dtype
    assert all(torch.equal(p.grad, torch.full_like(p, 2.0)) for p in params[:4])
    assert params[4].grad is None
    calls.clear()
    average(params[:3], bucket_bytes=3 * 4)  # a bucket goes once it holds bucket_bytes
    assert calls == [3, 4, 5]
    calls.clear()
    average(params[:3], bucket_bytes=4 * 4)
    assert calls == [7, 5]


def _losses(logs: Path) -> list[tuple[float, float]]:
    found = STEP.findall((logs / "rank0.out").read_text())
    assert [int(step) for step, _, _ in found] == list(range(len(found)))
    return [(float(loss), float(norm)) for _, loss, norm in found]


def _migrate_and_run(name: str, tmp: Path, steps: int, *options: str
                     ) -> dict[int, list[tuple[float, float]]]:
    """Migrate the XLA-era script, then run it at 1 and 2 processes; the losses by size."""
    script = tmp / name
    shutil.copyfile(SMOKE / name, script)
    assert cli("apply", script).exit_code == 0
    migrated = script.read_text()
    assert "import torch_xla" not in migrated and "from torch_xla" not in migrated, migrated
    runs: dict[int, list[tuple[float, float]]] = {}
    for nproc in (1, 2):
        logs = tmp / f"logs{nproc}"
        extra = options if nproc > 1 else ()
        run = cli("smoke", "--nproc", str(nproc), *extra, "--logs", logs, script, "--",
                  str(steps))
        assert run.exit_code == 0 and "PASSED" in run.stdout, run.stdout + run.stderr
        runs[nproc] = _losses(logs)
        assert len(runs[nproc]) == steps
    return runs


def _agree(one: list[tuple[float, float]], two: list[tuple[float, float]]) -> None:
    for (loss1, norm1), (loss2, norm2) in zip(one, two, strict=True):
        assert loss2 == pytest.approx(loss1, rel=1e-3)
        assert norm2 == pytest.approx(norm1, rel=1e-3)


@pytest.mark.slow
def test_zero1_trains_the_same_on_one_and_two_processes(tmp_path: Path) -> None:
    runs = _migrate_and_run("zero1_train.py", tmp_path, 3, "--check-replicas")
    assert "_NeuronZeroRedundancyOptimizer(" in (tmp_path / "zero1_train.py").read_text()
    assert all(norm > 0.5 for _, norm in runs[1])  # max_norm=0.5: the clipping acted
    _agree(runs[1], runs[2])


@pytest.mark.slow
def test_zero1_without_the_averaging_trains_differently(tmp_path: Path) -> None:
    """The comparison above can fail: the migrated script with the averaging taken out of
    the step (what plain ZeroRedundancyOptimizer does without DDP) drifts at two processes."""
    runs = _migrate_and_run("zero1_train.py", tmp_path, 3)
    script = tmp_path / "zero1_train.py"
    text = script.read_text()
    assert "        _neuron_average_gradients(params)\n" in text
    script.write_text(text.replace("        _neuron_average_gradients(params)\n", ""))
    logs = tmp_path / "broken"
    assert cli("smoke", "--nproc", "2", "--logs", logs, script, "--", "3").exit_code == 0
    broken = _losses(logs)
    assert broken[0][0] == pytest.approx(runs[2][0][0], rel=1e-3)  # the same first loss...
    assert broken[-1][0] != pytest.approx(runs[1][-1][0], rel=1e-3)  # ...a different run


@pytest.mark.slow
def test_fsdp_trains_the_same_on_one_and_two_processes(tmp_path: Path) -> None:
    runs = _migrate_and_run("fsdp_train.py", tmp_path, 3)
    migrated = (tmp_path / "fsdp_train.py").read_text()
    assert "_neuron_fully_shard(model)" in migrated
    assert "torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)" in migrated or \
        "nn.utils.clip_grad_norm_(model.parameters(), 0.5)" in migrated
    _agree(runs[1], runs[2])
