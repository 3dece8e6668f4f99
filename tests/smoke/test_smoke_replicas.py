"""--check-replicas without subprocesses: replicas that start apart are told from replicas that
drift apart, and neither is pinned on the helper the step ran in when the original did the
same. (End to end: tests/smoke/test_smoke.py, the `unsynced` and `drifting` runs.)"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

from neuron_migrate.emulator.failure_causes import diagnose  # noqa: E402
from neuron_migrate.emulator.distributed import (  # noqa: E402
    ReplicaCheck, ReplicasDiverged, ReplicasStartApart, _apart)
from neuron_migrate.smoke.report import render_text  # noqa: E402
from neuron_migrate.smoke.run import SmokeOptions  # noqa: E402
from neuron_migrate.smoke.summary import Worker, summarise  # noqa: E402

pytestmark = pytest.mark.torch


def _fingerprints(*sums: float, group: float = 0.0) -> list[torch.Tensor]:
    return [torch.tensor([s, s * s, group], dtype=torch.float64) for s in sums]


class _Gathered(ReplicaCheck):
    """A check whose all-gather returns what the test says the ranks hold."""

    def __init__(self, gathered: list[torch.Tensor]) -> None:
        super().__init__(0, len(gathered), "127.0.0.1", 0)
        self.gathered = gathered

    def _gather(self, optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
        return self.gathered


def _optimizer() -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)


def test_ranks_that_differ_before_the_first_step_start_apart() -> None:
    check = _Gathered(_fingerprints(1.0, 1.0, 2.5))
    optimizer = _optimizer()
    with pytest.raises(ReplicasStartApart) as raised:
        check.before_first_step(optimizer)
    message = str(raised.value)
    assert message.startswith("replicas start from different parameters: rank 2's parameters "
                              "differ from rank 0's before the first optimizer step")
    assert "the original has the same behaviour unless it broadcast them" in message
    assert diagnose("ReplicasStartApart", message).key == "replicas-start-apart"
    check.before_first_step(optimizer)  # once per optimizer: its later steps are checked after


def test_equal_replicas_pass_before_the_step_and_a_drift_fails_after_it() -> None:
    check = _Gathered(_fingerprints(1.0, 1.0))
    check.before_first_step(_optimizer())
    check.gathered = _fingerprints(1.0, 1.5)
    with pytest.raises(ReplicasDiverged, match="diverged after optimizer step 1"):
        check(_optimizer(), 1)


def test_replicas_are_compared_only_within_their_replica_group() -> None:
    gathered = [*_fingerprints(1.0, 1.0, group=0.0), *_fingerprints(7.0, 7.0, group=2.0)]
    assert _apart(gathered) is None
    gathered[3] = _fingerprints(8.0, group=2.0)[0]
    assert _apart(gathered) == (3, 2)


def test_replicas_that_start_apart_are_not_pinned_on_the_helper_they_stepped_in(
        tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("def _neuron_optimizer_step(optimizer):\n    optimizer.step()\n\n"
                      "_neuron_optimizer_step(opt)\n")
    message = str(ReplicasStartApart(1, 0, [1.0, 2.0]))
    frames = [{"file": str(script), "line": 4, "function": "<module>"},
              {"file": str(script), "line": 2, "function": "_neuron_optimizer_step"}]
    error = {"type": "ReplicasStartApart", "message": message, "location": frames[0],
             "frames": frames, "step": 0, "time": 1.0,
             "cause": asdict(diagnose("ReplicasStartApart", message))}
    workers = [Worker(r, str(script), returncode=1, outcome={
        "optimizer_steps": 0, "graphs_compiled": 0, "ops": {}, "error": error}) for r in (0, 1)]
    result = summarise(SmokeOptions(script=script, nproc=2, check_replicas=True), workers,
                       False, 1.0)
    text = "\n".join(line for line, _ in render_text(result))
    assert result.error is not None and result.error["origin"] is None
    assert "written by" not in text and "NM2" not in text
    assert "rank 1's parameters differ from rank 0's" in text


def test_check_replicas_is_wired_from_the_option_to_the_optimizer_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The option reaches the workers as the check's port, a worker builds the check from it,
    and the step hooks run it: a drift after the first step fails that step. (The end-to-end
    runs of tests/smoke/test_smoke.py are slow.)"""
    from neuron_migrate.emulator import session
    from neuron_migrate.emulator.counters import COUNTERS
    from neuron_migrate.smoke.run import worker_environment

    script, report, ports = Path("train.py"), Path("r.json"), (1111, 2222)
    checked = SmokeOptions(script=script, nproc=2, check_replicas=True, timeout=60)
    unchecked = SmokeOptions(script=script, nproc=2, timeout=60)
    assert "NEURON_EMU_CHECK_PORT" not in worker_environment(unchecked, 1, report, ports)
    env = worker_environment(checked, 1, report, ports)
    for name in ("NEURON_EMU_CHECK_PORT", "WORLD_SIZE", "RANK", "MASTER_ADDR"):
        monkeypatch.setenv(name, env[name])
    built = ReplicaCheck.from_environment()
    assert built is not None
    assert (built.rank, built.world_size, built.port) == (1, 2, 2222)

    check = _Gathered(_fingerprints(1.0, 1.0))
    optimizer = _optimizer()
    monkeypatch.setattr(COUNTERS, "optimizer_steps", 0)
    session._before_step(check)(optimizer, (), {})
    session._after_step(0, check, None)(optimizer, (), {})  # still equal: passes
    check.gathered = _fingerprints(1.0, 1.5)
    with pytest.raises(ReplicasDiverged, match="diverged after optimizer step 2"):
        session._after_step(0, check, None)(optimizer, (), {})
