"""`smoke --layout` (comparing the loss of every step across layouts) and the mesh-aware
data-parallel and replica checks, on fixtures/smoke/layout_*.py.

The end-to-end comparisons start together on first use, two at a time (the machine has two
cores); each test then reads its own. The rest runs in this process, without workers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import neuron_migrate.smoke.run
from neuron_migrate.smoke.layout_report import render_comparison_json, render_comparison_text
from neuron_migrate.smoke.layouts import (LayoutComparison, LayoutRun, compare_layouts, judge,
                                          parse_layout)
from neuron_migrate.smoke.run import SmokeOptions, run_smoke
from neuron_migrate.smoke.summary import SmokeResult, layout_notes, step_losses
from tests.conftest import FIXTURES
from tests.smoke.test_smoke import PYTHON, _invoke

pytestmark = pytest.mark.torch

DATA_PARALLEL = FIXTURES / "smoke" / "layout_data_parallel.py"
TENSOR_PARALLEL = FIXTURES / "smoke" / "layout_tensor_parallel.py"


# ------------------------------------------------------------------- parsing and judging
def test_a_layout_is_a_number_of_workers_and_the_arguments_it_adds() -> None:
    assert parse_layout("1").nproc == 1 and parse_layout("1").args == ()
    spec = parse_layout("2:--tp 2 --name 'a b'")
    assert (spec.nproc, spec.args, spec.text) == (2, ("--tp", "2", "--name", "a b"),
                                                  "2:--tp 2 --name 'a b'")
    for bad in ("0", "x:--tp 2", "", ":--tp", "2:--name 'open"):
        with pytest.raises(ValueError):
            parse_layout(bad)


def _run(text: str, losses: list[float | None], passed: bool = True) -> LayoutRun:
    result = SmokeResult(script="train.py", nproc=parse_layout(text).nproc, passed=passed,
                         losses=losses)
    return LayoutRun(parse_layout(text), result)


def test_layouts_agree_within_the_relative_tolerance() -> None:
    found = judge("train.py", [_run("1", [2.0, 1.5, 1.0]), _run("2", [2.0001, 1.5, 1.0])],
                  1e-3, 1.0)
    assert found.passed and found.exit_code() == 0 and found.steps_compared == 3
    assert not judge("train.py", [_run("1", [2.0, 1.5]), _run("2", [2.0001, 1.5])],
                     1e-5, 1.0).passed


def test_the_first_differing_step_is_named_with_both_losses() -> None:
    found = judge("train.py", [_run("1", [2.0, 1.5, 1.0]), _run("2", [2.0, 1.5, 1.0]),
                               _run("2:--tp 2", [2.0, 1.6, 0.5])], 1e-3, 1.0)
    assert not found.passed and found.exit_code() == 1 and found.steps_compared == 1
    difference = found.difference
    assert difference is not None
    assert (difference.step, difference.layout, difference.reference) == (2, "2:--tp 2", "1")
    assert (difference.loss, difference.reference_loss) == (1.6, 1.5)
    headline = render_comparison_text(found)[0][0]
    assert headline.startswith("smoke layouts DIFFER") and "optimizer step 2" in headline
    assert "1.6" in headline and "1.5" in headline
    data = json.loads(render_comparison_json(found))
    assert data["first_difference"]["step"] == 2 and data["exit_code"] == 1
    assert [layout["losses"] for layout in data["layouts"]][2] == [2.0, 1.6, 0.5]


@pytest.mark.parametrize(("other", "step"), [
    ([2.0], 2),  # a layout that stopped early has no loss where the other has one
    ([2.0, math.nan, 1.0], 2),  # a NaN is never within the tolerance
    ([2.0, None, 1.0], 2),  # a step without a backward() in one layout only
])
def test_a_missing_or_undefined_loss_is_a_difference(other: list[float | None], step: int) -> None:
    found = judge("train.py", [_run("1", [2.0, 1.5, 1.0]), _run("2", other)], 1e-3, 1.0)
    assert found.difference is not None and found.difference.step == step


def test_a_failed_run_or_no_recorded_loss_fails_the_comparison() -> None:
    failed = judge("train.py", [_run("1", [2.0]), _run("2", [2.0], passed=False)], 1e-3, 1.0)
    assert not failed.passed and "did not run cleanly" in failed.problems[0]
    silent = judge("train.py", [_run("1", [None, None]), _run("2", [None, None])], 1e-3, 1.0)
    assert not silent.passed and any("recorded no loss" in p for p in silent.problems)


def test_a_layouts_loss_is_the_mean_over_its_workers() -> None:
    outcomes = [{"losses": [1.0, 3.0, None]}, {"losses": [2.0, None, None]}, {}]
    assert step_losses(outcomes) == [1.5, 3.0, None]


# ------------------------------------------------------------------------- the layout
@pytest.fixture
def meshes(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The emulator's record of meshes, empty; the test adds the ones it means."""
    from neuron_migrate.emulator import layout

    monkeypatch.setattr(layout, "_meshes", [])
    monkeypatch.setattr(layout, "_tensor_parallel_groups", [])
    return layout


def _mesh(layout: Any, ranks: list[Any], names: tuple[str, ...] | None) -> None:
    import torch

    layout._meshes.append(layout.MeshSeen(layout._as_tuples(ranks),
                                          tuple(torch.tensor(ranks).shape), names))


def test_the_data_parallel_group_is_the_ranks_sharing_the_model_parallel_coordinates(
        meshes: Any) -> None:
    _mesh(meshes, [[0, 1], [2, 3]], ("dp", "tp"))
    found = meshes.current_layout(3)
    assert found.describe() == "dp=2 × tp=2" and found.model_parallel
    assert found.data_group == (1, 3) and found.replica_group == (1, 3)
    _mesh(meshes, [0, 1, 2, 3], None)  # a narrower mesh built too: the widest describes the run
    assert meshes.current_layout(3).describe() == "dp=2 × tp=2"


def test_tensor_parallelism_alone_has_no_data_parallel_peers(meshes: Any) -> None:
    _mesh(meshes, [[0, 1]], ("dp", "tp"))
    assert meshes.current_layout(1).data_group == (1,)
    assert layout_notes(meshes.current_layout(1).as_dict(), True)[0].startswith(
        "mesh dp=1 × tp=2: no data-parallel dimension")


def test_an_unnamed_mesh_is_data_parallel_unless_a_module_was_parallelised_over_it(
        meshes: Any) -> None:
    _mesh(meshes, [0, 1], None)
    assert meshes.current_layout(0).data_group == (0, 1)
    meshes._tensor_parallel_groups.append(frozenset({0, 1}))
    found = meshes.current_layout(0)
    assert found.data_group == (0,) and found.model_parallel and found.describe() == "dim0=2"


def test_sharded_data_parallel_ranks_average_but_are_not_replicas(meshes: Any) -> None:
    _mesh(meshes, [[0, 1], [2, 3]], ("dp_replicate", "dp_shard"))
    found = meshes.current_layout(2)
    assert found.data_group == (0, 1, 2, 3) and found.replica_group == (0, 2)
    assert not found.model_parallel


def test_only_a_reduction_over_the_whole_data_parallel_group_averages(meshes: Any) -> None:
    from neuron_migrate.emulator.parallelism import _reduced_over

    _mesh(meshes, [[0, 1], [2, 3]], ("dp", "tp"))
    found = meshes.current_layout(0)
    tensor_parallel, data_parallel = frozenset({0, 1}), frozenset({0, 2})
    assert _reduced_over({tensor_parallel: 500}, found) == 0
    assert _reduced_over({tensor_parallel: 500, data_parallel: 40}, found) == 40
    assert _reduced_over({frozenset({0, 1, 2, 3}): 7, None: 3}, found) == 7
    assert _reduced_over({tensor_parallel: 500}, None) == 500  # no mesh: every rank a replica


# ------------------------------------------------------------------ recording the loss
def test_the_loss_of_a_step_is_the_sum_of_its_scalar_backward_calls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from neuron_migrate.emulator import losses
    from neuron_migrate.emulator.counters import COUNTERS

    monkeypatch.setattr(COUNTERS, "losses", [])
    monkeypatch.setattr(COUNTERS, "pending_loss", None)
    calls: list[Any] = []

    def backward(*args: Any, **kwargs: Any) -> None:
        calls.append(args)

    def nested(tensor: torch.Tensor) -> None:  # Tensor.backward calling autograd.backward
        losses._recording(backward, tensor, tensor)

    losses._recording(backward, torch.tensor(0.25), torch.tensor(0.25))
    losses._recording(nested, torch.tensor(0.5), torch.tensor(0.5))  # recorded once
    losses._recording(backward, torch.ones(3), torch.ones(3))  # not a loss
    losses._recording(backward, [torch.tensor(1.0), torch.tensor(2.0)], None)  # not one
    losses.close_step()
    losses.close_step()  # a step without backward()
    assert COUNTERS.losses == [0.75, None] and len(calls) == 4


# --------------------------------------------------------------------------- command
@pytest.mark.parametrize("args", [
    ["--layout", "1", "--layout", "2", "--nproc", "2"],
    ["--layout", "2"],
    ["--layout", "1", "--layout", "two"],
    ["--rtol", "0.01"],
    ["--layout", "1", "--layout", "1:--tp 1", "--check-replicas"],
])
def test_layouts_that_cannot_be_compared_are_usage_errors(args: list[str]) -> None:
    assert _invoke(DATA_PARALLEL, *args)[0] == 2


def test_the_command_runs_each_layout_with_its_arguments_and_fails_when_they_differ(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[SmokeOptions] = []

    def fake_run(options: SmokeOptions) -> SmokeResult:
        seen.append(options)
        losses = [1.0, 0.5] if options.nproc == 1 else [1.0, 0.7]
        return SmokeResult(script=str(options.script), nproc=options.nproc or 1, passed=True,
                           losses=losses)

    monkeypatch.setattr(neuron_migrate.smoke.run, "run_smoke", fake_run)
    code, out, _ = _invoke(DATA_PARALLEL, "--format", "json", "--check-replicas", "--logs",
                        tmp_path, "--layout", "1", "--layout", "2:--reduce sum", "--rtol",
                        "0.1", "--", "--steps", "2")
    assert [(o.nproc, o.script_args, o.check_replicas) for o in seen] == [
        (1, ("--steps", "2"), False), (2, ("--steps", "2", "--reduce", "sum"), True)]
    assert [o.logs for o in seen] == [tmp_path / "layout1", tmp_path / "layout2"]
    data = json.loads(out)
    assert code == 1 and data["rtol"] == 0.1
    assert data["first_difference"] == {"step": 2, "layout": "2:--reduce sum", "reference": "1",
                                        "loss": 0.7, "reference_loss": 0.5,
                                        "relative": pytest.approx(2 / 7)}


# ---------------------------------------------------------------- end to end, slow
def _options(script: Path, **kw: Any) -> SmokeOptions:
    return SmokeOptions(script=script, timeout=300, python=PYTHON, **kw)


class Comparisons:
    """Every end-to-end comparison and run of this module, two at a time."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=2)
        layouts = {
            "dp": (DATA_PARALLEL, ["1", "1:--accumulate 2", "2"]),
            "dp_sum": (DATA_PARALLEL, ["1:--reduce sum", "2:--reduce sum"]),
            "tp": (TENSOR_PARALLEL, ["1:--tp 1", "2:--tp 2", "2:--tp 1"]),
        }
        self.futures: dict[str, Future] = {
            name: self.pool.submit(compare_layouts, _options(script, steps=3, check_replicas=True),
                                   [parse_layout(text) for text in texts], 1e-3, run_smoke)
            for name, (script, texts) in layouts.items()}
        self.futures["tp_data_rank"] = self.pool.submit(run_smoke, _options(
            TENSOR_PARALLEL, nproc=2, script_args=("--tp", "2", "--data", "rank")))
        self.futures["dp_forgotten"] = self.pool.submit(run_smoke, _options(
            TENSOR_PARALLEL, nproc=2, check_replicas=True,
            script_args=("--tp", "1", "--average", "none")))

    def __getitem__(self, name: str) -> Any:
        return self.futures[name].result()


@pytest.fixture(scope="module")
def comparisons() -> Iterator[Comparisons]:
    started = Comparisons()
    yield started
    started.pool.shutdown(wait=True, cancel_futures=True)  # runs no test asked for never start


def _explain(comparison: LayoutComparison) -> str:
    return "\n".join(line for line, _ in render_comparison_text(comparison))


@pytest.mark.slow
def test_data_parallelism_over_one_global_batch_agrees_with_one_process(
        comparisons: Comparisons) -> None:
    found = comparisons["dp"]
    assert found.passed and found.exit_code() == 0, _explain(found)
    assert found.steps_compared == 3  # --steps 3 stopped every layout
    assert all(run.result.warnings == [] for run in found.runs)
    assert all(len(run.result.losses) == 3 and None not in run.result.losses
               for run in found.runs)


@pytest.mark.slow
def test_summed_gradients_differ_from_the_second_step(comparisons: Comparisons) -> None:
    found = comparisons["dp_sum"]
    assert all(run.result.passed for run in found.runs)  # the run itself sees nothing wrong
    assert found.exit_code() == 1 and found.difference is not None, _explain(found)
    assert found.difference.step == 2 and found.difference.layout == "2:--reduce sum"
    assert found.steps_compared == 1
    assert "DIFFER" in _explain(found) and "optimizer step 2" in _explain(found)


@pytest.mark.slow
def test_tensor_parallelism_agrees_and_is_not_taken_for_lost_data_parallelism(
        comparisons: Comparisons) -> None:
    found = comparisons["tp"]
    assert found.passed, _explain(found)  # --check-replicas: a false alarm would fail a run
    single, tensor, data = (run.result for run in found.runs)
    assert all(result.warnings == [] for result in (single, tensor, data))
    assert tensor.layout is not None and tensor.layout["mesh"] == "dp=1 × tp=2"
    assert any("need no averaging" in note for note in tensor.notes)
    assert any("compared no parameter checksums" in note for note in tensor.notes)
    assert data.layout is not None and data.layout["data_group"] == [0, 1]


@pytest.mark.slow
def test_tensor_parallel_peers_reading_different_data_differ_at_the_first_step(
        comparisons: Comparisons) -> None:
    reference = comparisons["tp"].runs[0]
    broken = LayoutRun(parse_layout("2:--tp 2 --data rank"), comparisons["tp_data_rank"])
    found = judge(str(TENSOR_PARALLEL), [reference, broken], 1e-3, 0.0)
    assert found.difference is not None and found.difference.step == 1, _explain(found)


@pytest.mark.slow
def test_a_mesh_with_two_data_parallel_replicas_that_never_average_still_fails(
        comparisons: Comparisons) -> None:
    result = comparisons["dp_forgotten"]
    assert not result.passed and result.error is not None
    assert result.error["type"] == "DataParallelismLost" and result.error["step"] == 1
    assert "over its data-parallel group (ranks 0, 1 of mesh dp=2 × tp=1)" in result.error["message"]
