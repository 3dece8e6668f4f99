"""`neuron-migrate smoke` on the fixtures in fixtures/smoke/, end to end.

Every scenario launches real worker processes with the emulator injected. They start together
on first use (two at a time, on CI's two cores), so the module costs about the sum of its
runs divided by two; each test then reads its own result. Every run has the same generous
timeout (300 s): a busy machine makes them slower, never wrong. The timeout itself is tested
with plain-Python workers in test_smoke_processes.py.
SMOKE_PYTHON=/path/to/python runs the workers on another interpreter (another torch minor).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from neuron_migrate.smoke.run import SmokeOptions, SmokeResult, _error_from_stderr, run_smoke, smoke
from neuron_migrate.smoke.diagnosis import helper_rules, origin
from neuron_migrate.smoke.report import render_json, render_text
import neuron_migrate.smoke.run
from tests.conftest import FIXTURES

pytestmark = pytest.mark.torch  # runs scripts on the emulated device

SMOKE = FIXTURES / "smoke"


def _line_of(script: str, text: str) -> int:
    lines = (SMOKE / script).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


PYTHON = os.environ.get("SMOKE_PYTHON", sys.executable)


def _options(script: str, *args: str, **kw: object) -> SmokeOptions:
    return SmokeOptions(script=SMOKE / script, script_args=args, timeout=300, python=PYTHON, **kw)


SCENARIOS = {
    "train": _options("train_single.py", "--compile", steps=8),
    "ddp": _options("ddp_train.py", nproc=2, steps=4, check_replicas=True),
    "bare_step": _options("ddp_train_bare_step.py", nproc=2, steps=4, check_replicas=True),
    "torch_xla": _options("leftover_torch_xla.py"),
    "openxla": _options("compile_openxla.py"),
    "cpu_tensor": _options("tensor_left_on_cpu.py"),
    # script args: optimizer steps it would take, its exit status
    "stopped_uncleaned": _options("ends_without_cleanup.py", "6", "0", nproc=2, steps=2),
    "exit_status": _options("ends_without_cleanup.py", "2", "3", nproc=2, check_replicas=True),
    # data parallelism (fixtures/smoke/data_parallel.py MODE)
    "alone": _options("data_parallel.py", "alone", nproc=2, check_replicas=True),
    "alone_warned": _options("data_parallel.py", "alone", nproc=2, steps=2),
    "legit": _options("data_parallel.py", "legit", nproc=2, check_replicas=True),
    "unsynced": _options("data_parallel.py", "unsynced", nproc=2, check_replicas=True),
    "drifting": _options("data_parallel.py", "drifting", nproc=2, check_replicas=True),
    "compile_step": _options("compile_training_step.py"),
    "helper": _options("helper_device_loader.py"),
    "zero_batch": _options("compile_zero_batch.py"),
    "ddp_compiled": _options("ddp_compiled_buckets.py", nproc=2, check_replicas=True),
    # failures in the script's own code (fixtures/smoke/script_own_failures.py MODE)
    "own_loader": _options("script_own_failures.py", "loader"),
    "own_exit": _options("script_own_failures.py", "exit"),
}


class Runs:
    """Every subprocess run of this module, started together on first use (two at a time);
    each worker's output is kept under `logs`."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.pool = ThreadPoolExecutor(max_workers=2)
        self.futures: dict[str, Future] = {
            name: self.pool.submit(run_smoke, dataclasses.replace(options, logs=logs / name))
            for name, options in SCENARIOS.items()}

    def __getitem__(self, name: str) -> Any:
        return self.futures[name].result()

    def stdout(self, name: str, rank: int = 0) -> str:
        self[name]
        return (self.logs / name / f"rank{rank}.out").read_text()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    started = Runs(tmp_path_factory.mktemp("smoke-logs"))
    yield started
    started.pool.shutdown(wait=True, cancel_futures=True)  # runs no test asked for never start


def _text(result: SmokeResult) -> str:
    return "\n".join(line for line, _ in render_text(result))


@pytest.mark.slow
def test_single_process_training_passes_and_stops_after_the_steps_asked(runs: Runs) -> None:
    result = runs["train"]
    assert result.passed and result.exit_code() == 0, _text(result)
    assert result.optimizer_steps == 8 and result.stopped_after_steps == 8
    assert result.graphs_compiled == 1
    assert result.warnings == []  # a single process: nothing to say about data parallelism
    assert {"aten::addmm", "aten::relu", "aten::nll_loss_forward"} <= set(result.ops)


@pytest.mark.slow
def test_single_process_loss_decreases(runs: Runs) -> None:
    losses = [float(line.split()[-1]) for line in runs.stdout("train").splitlines()
              if line.startswith("step ")]
    assert len(losses) == 8  # the script asks for 30: --steps 8 stopped it
    assert losses[-1] < losses[0]


def test_correct_ddp_migration_passes_the_replica_check(runs: Runs) -> None:
    result = runs["ddp"]
    assert result.passed, _text(result)
    assert result.optimizer_steps == 4
    assert {"c10d::allreduce_", "c10d::broadcast_"} <= set(result.ops)  # DDP's own collectives
    assert [w.returncode for w in result.workers] == [0, 0]
    assert result.warnings == []  # DDP's bucket all-reduce, run by its reducer, is seen


@pytest.mark.slow
def test_bare_optimizer_step_without_ddp_fails_naming_the_step_even_with_a_logged_loss(
        runs: Runs) -> None:
    """The script all-reduces its loss (one element) before stepping: that averages nothing."""
    result = runs["bare_step"]
    assert not result.passed and result.exit_code() == 1
    assert result.error is not None and result.error["cause"]["key"] == "data-parallel-no-averaging"
    assert result.error["step"] == 1 and result.optimizer_steps == 1
    assert result.failing_rank == 0  # both ranks fail alike: the lowest is named
    location = result.error["location"]
    assert Path(location["file"]).name == "ddp_train_bare_step.py"
    assert location["line"] == _line_of("ddp_train_bare_step.py", "optimizer.step()  # was")
    text = _text(result)
    assert "optimizer step 1 on rank 0" in text and "had 1 element" in text
    assert "DistributedDataParallel" in text


@pytest.mark.slow
def test_replicas_that_never_agreed_are_reported_before_the_first_step(runs: Runs) -> None:
    """Gradients are all-reduced, but each rank started from its own weights: that is how the
    replicas started, which the original did too, not gradients left unaveraged."""
    result = runs["unsynced"]
    assert not result.passed and result.error is not None, _text(result)
    assert result.error["cause"]["key"] == "replicas-start-apart"
    text = _text(result)
    assert "rank 1's parameters differ from rank 0's before the first optimizer step" in text
    assert "the original has the same behaviour unless it broadcast them" in text
    assert "not being averaged" not in text and "written by" not in text


@pytest.mark.slow
def test_replicas_that_start_equal_and_drift_apart_fail_after_the_step(runs: Runs) -> None:
    result = runs["drifting"]
    assert not result.passed and result.error is not None, _text(result)
    assert result.error["cause"]["key"] == "replicas-diverged"
    assert result.error["step"] == 1 and "after optimizer step 1" in _text(result)


@pytest.mark.slow
def test_training_without_a_process_group_fails_under_check_replicas(runs: Runs) -> None:
    """Every rank reads the same data, so the replicas agree: only the missing process group
    shows that each trained alone."""
    result = runs["alone"]
    assert not result.passed and result.exit_code() == 1
    error = result.error
    assert error is not None and error["cause"]["key"] == "data-parallel-no-process-group"
    assert error["type"] == "DataParallelismLost" and error["step"] == 1
    assert error["location"]["line"] == _line_of("data_parallel.py", "optimizer.step()  # was")
    text = _text(result)
    assert "without a process group" in text and 'init_process_group("neuron")' in text


@pytest.mark.slow
def test_training_without_a_process_group_is_a_warning_without_check_replicas(runs: Runs) -> None:
    result = runs["alone_warned"]
    assert result.passed and result.exit_code() == 0, _text(result)
    assert len(result.warnings) == 1  # both ranks, the same problem: one line
    warning = result.warnings[0]
    assert "without a process group" in warning and "[ranks 0, 1; 2 steps without averaging]" in warning
    assert f"  warning: {warning}" in _text(result)
    assert _text(result).startswith("smoke PASSED with 1 warning: ")
    assert json.loads(render_json(result))["warnings"] == result.warnings


@pytest.mark.slow
def test_legitimate_data_parallelism_passes(runs: Runs) -> None:
    """Hand-averaged gradients over accumulated micro-batches with a logged loss; DDP with
    ZeroRedundancyOptimizer (whose step steps an inner optimizer) under no_sync; evaluation."""
    result = runs["legit"]
    assert result.passed and result.warnings == [], _text(result)
    assert result.optimizer_steps == 6  # the inner optimizer's steps are not counted again
    assert "eval loss" in runs.stdout("legit")


@pytest.mark.slow
def test_a_compiled_training_step_is_named_with_the_line_dynamo_traced(runs: Runs) -> None:
    result = runs["compile_step"]
    error = result.error
    assert not result.passed and error is not None, _text(result)
    assert error["type"] == "torch._dynamo.exc.Unsupported"
    assert error["cause"]["key"] == "compile-traced-training-step"
    assert error["location"]["line"] == _line_of("compile_training_step.py", "train_step(torch.randn")
    origin = error["origin"]
    assert origin["rules"] == ["NM502"]
    assert origin["call_site"]["line"] == _line_of("compile_training_step.py", "optimizer.zero_grad()")
    text = _text(result)
    assert "traced: Dynamo traced `optimizer.zero_grad()`" in text
    assert "NM502 (torch-xla-compile)" in text and "model.compile(" in text


@pytest.mark.slow
def test_a_compiled_model_runs_a_zero_size_batch(runs: Runs) -> None:
    result = runs["zero_batch"]
    assert result.passed, result.error
    assert result.graphs_compiled == 2  # the empty batch is a new shape: one recompile
    assert "batch of 0: output (0, 2)" in runs.stdout("zero_batch")


@pytest.mark.slow
def test_ddp_over_a_compiled_model_split_at_its_buckets_passes_the_replica_check(
        runs: Runs) -> None:
    result = runs["ddp_compiled"]
    assert result.passed, result.error
    assert result.graphs_compiled >= 4  # one graph per gradient bucket (one per layer)
    assert result.optimizer_steps == 3 and "c10d::allreduce_" in result.ops


def test_an_error_inside_a_helper_names_the_rule_that_wrote_it(runs: Runs) -> None:
    result = runs["helper"]
    error = result.error
    assert not result.passed and error is not None, _text(result)
    assert error["cause"]["key"] == "xla-device"  # the cause, and who wrote the code
    origin = error["origin"]
    assert origin["helper"] == "_NeuronDeviceLoader" and origin["rules"] == ["NM301"]
    assert origin["call_site"]["line"] == _line_of("helper_device_loader.py", "for (x,) in")
    assert ("written by neuron-migrate: raised in _NeuronDeviceLoader" in _text(result)
            and "written by NM301 (mp-device-loader); called at" in _text(result))


def test_a_stopped_run_skips_finalization_after_every_exit_handler_of_the_script(runs: Runs) -> None:
    """Stopping after the steps asked leaves the script's process group up; finalizing then
    could abort on a gloo thread (status -6), so the worker leaves without it, exit 0."""
    result = runs["stopped_uncleaned"]
    assert result.passed and [w.returncode for w in result.workers] == [0, 0], _text(result)
    assert result.stopped_after_steps == 2
    for rank in (0, 1):
        out = runs.stdout("stopped_uncleaned", rank)
        assert "the script's finally block ran" in out and "the script's exit handler ran" in out
        assert "finalized" not in out


def test_a_script_ending_by_itself_keeps_its_status_and_finalizes_without_process_groups(
        runs: Runs) -> None:
    result = runs["exit_status"]
    assert [w.returncode for w in result.workers] == [3, 3], _text(result)
    assert result.optimizer_steps == 2 and result.stopped_after_steps is None
    for rank in (0, 1):
        out = runs.stdout("exit_status", rank)
        assert "the script's exit handler ran" in out
        assert "finalized; process group still up: False" in out


@pytest.mark.parametrize(("error", "stopped", "status"), [
    ("ValueError", None, 1),
    ("ValueError", 4, 1),  # an error after the stop (in a finally block) still fails the run
    ("KeyboardInterrupt", None, None),  # Python ends the process by SIGINT: leave it to Python
    (None, 4, 0),
    (None, None, None),  # ended by itself or by SystemExit: only Python knows the status
])
def test_a_worker_skips_finalization_only_when_its_exit_status_is_certain(
        monkeypatch: pytest.MonkeyPatch, error: str | None, stopped: int | None,
        status: int | None) -> None:
    from neuron_migrate.emulator import session

    monkeypatch.setitem(session._outcome, "error", error and {"type": error})
    monkeypatch.setitem(session._outcome, "stopped_after_steps", stopped)
    assert session._known_status() == status


@pytest.mark.slow
@pytest.mark.parametrize(("scenario", "script", "key", "marker"), [
    ("torch_xla", "leftover_torch_xla.py", "torch-xla-import", "import torch_xla"),
    ("openxla", "compile_openxla.py", "xla-compile-backend", "compiled("),
    ("cpu_tensor", "tensor_left_on_cpu.py", "tensor-on-cpu", "model(batch)"),
])
def test_half_migrated_scripts_fail_with_cause_file_and_line(runs: Runs, scenario: str,
                                                             script: str, key: str, marker: str) -> None:
    result = runs[scenario]
    assert not result.passed and result.exit_code() == 1
    assert [w.returncode for w in result.workers] == [1]  # Python's status for an uncaught error
    error = result.error
    assert error is not None and error["cause"] is not None, _text(result)
    assert error["cause"]["key"] == key
    assert Path(error["location"]["file"]).name == script
    assert error["location"]["line"] == _line_of(script, marker)
    assert f"{script}:{error['location']['line']}" in _text(result)
    assert "likely cause: " + error["cause"]["text"] in _text(result)


@pytest.mark.slow
@pytest.mark.parametrize(("scenario", "kind", "words", "marker"), [
    ("own_loader", "KeyError", "'shard 0 is not in the index' (KeyError in DataLoader worker "
     "process 0)", "marker: getitem"),
    ("own_exit", "SystemExit", "ImageNet not found under /nonexistent/imagenet", "marker: exit"),
])
def test_a_failure_in_the_script_s_own_code_names_type_message_and_line(
        runs: Runs, scenario: str, kind: str, words: str, marker: str) -> None:
    result = runs[scenario]
    text = _text(result)
    assert result.error is not None, text
    assert f"error: {kind}: {words}" in text
    assert f"script_own_failures.py:{_line_of('script_own_failures.py', marker)}" in text


def test_every_report_says_what_the_run_cannot_tell(runs: Runs) -> None:
    result = runs["torch_xla"]
    data = json.loads(render_json(result))
    assert data["passed"] is False and data["exit_code"] == 1
    for text in (data["positioning"], _text(result)):
        assert "runs on the device api on cpu" in text.lower()
        assert "says nothing about which ops Trainium supports" in text


def test_a_worker_that_died_without_a_report_is_read_from_its_stderr(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    stderr = ("Traceback (most recent call last):\n"
              f'  File "{script}", line 9, in <module>\n'
              '  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d.py", line 3, in f\n'
              "ValueError: Default process group has not been initialized, please make sure\n")
    error = _error_from_stderr(stderr, str(script))
    assert error is not None and error["cause"]["key"] == "no-process-group"
    assert error["location"]["line"] == 9


# ------------------------------------------------------------------------- the command
def _app() -> typer.Typer:
    app = typer.Typer(add_completion=False, rich_markup_mode=None)
    app.command()(smoke)

    @app.callback()
    def main() -> None:
        """Test harness."""

    return app


def _invoke(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(_app(), ["smoke", *map(str, args)], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_command_passes_script_args_after_double_dash_and_prints_json(
        runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[SmokeOptions] = []

    def fake_run(options: SmokeOptions) -> SmokeResult:
        seen.append(options)
        return runs["torch_xla"]

    monkeypatch.setattr(neuron_migrate.smoke.run, "run_smoke", fake_run)
    code, out, _ = _invoke("--format", "json", "--nproc", "1", "--steps", "3",
                           SMOKE / "train_single.py", "--", "--lr", "0.5", "x")
    assert seen[0].script_args == ("--lr", "0.5", "x")
    assert (seen[0].nproc, seen[0].steps, seen[0].check_replicas) == (1, 3, False)
    data = json.loads(out)
    assert code == 1 and data["passed"] is False and data["error"]["cause"]["key"] == "torch-xla-import"


def test_command_prints_the_text_report(runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(neuron_migrate.smoke.run, "run_smoke", lambda options: runs["train"])
    code, out, _ = _invoke(SMOKE / "train_single.py")
    assert code == 0 and out.startswith("smoke PASSED") and "graphs compiled: 1" in out


@pytest.mark.parametrize("args", [
    ["missing.py"],
    [SMOKE / "ddp_train.py", "--check-replicas"],
    [SMOKE / "train_single.py", "--format", "xml"],
    [SMOKE / "train_single.py", "--nproc", "0"],
    [SMOKE / "train_single.py", "--unknown-flag"],
])
def test_usage_errors_exit_2(args: list) -> None:
    assert _invoke(*args)[0] == 2


def test_an_interpreter_without_torch_is_a_setup_error() -> None:
    bare = "/usr/bin/python3"
    if not os.path.exists(bare) or os.path.realpath(bare) == os.path.realpath(sys.executable):
        pytest.skip("no second interpreter")
    result = run_smoke(SmokeOptions(script=SMOKE / "train_single.py", python=bare, timeout=30))
    if result.install_failed is None and result.passed:
        pytest.skip(f"{bare} has torch")
    assert result.exit_code() == 2 and "could not install" in (result.install_failed or "")


def test_help_is_honest_about_what_it_proves() -> None:
    code, out, _ = _invoke("--help")
    flat = " ".join(out.split())
    assert code == 0
    assert "Runs on the device API on CPU" in flat
    assert "says nothing about which ops Trainium supports" in flat
    assert "--nproc" in flat and "--check-replicas" in flat and "SCRIPT_ARGS" in flat


def test_runs_started_together_never_share_a_port() -> None:
    """Both replica-checked DDP runs start at once, each asking for two ports."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        handed = [p for ports in pool.map(lambda _: neuron_migrate.smoke.run.free_ports(2), range(40))
                  for p in ports]
    assert len(set(handed)) == len(handed) == 80


# ------------------------------------------------------- diagnosis without a subprocess
def test_every_helper_is_claimed_by_the_rules_that_write_it() -> None:
    from neuron_migrate.rules.emitted_helpers import HELPERS

    claimed = helper_rules()
    assert set(claimed) == set(HELPERS), "a helper no rule asks for: teach smoke_diagnosis"
    assert [r.id for r in claimed["_neuron_optimizer_step"]] == ["NM210"]
    assert [r.id for r in claimed["_neuron_reduce_gradients"]] == ["NM210", "NM211"]
    assert "NM301" in [r.id for r in claimed["_neuron_to_device"]]  # needed by the loader


def test_a_helper_refusing_to_run_without_a_process_group_is_explained(tmp_path: Path) -> None:
    """As the emitted helpers word it when WORLD_SIZE > 1 and no group exists, read from the
    stderr of a worker that left no report."""
    script = tmp_path / "train.py"
    stderr = ("Traceback (most recent call last):\n"
              f'  File "{script}", line 40, in <module>\n'
              f'  File "{script}", line 12, in _neuron_optimizer_step\n'
              f'  File "{script}", line 5, in _neuron_reduce_gradients\n'
              "RuntimeError: neuron-migrate helper _neuron_reduce_gradients: WORLD_SIZE is 2 but "
              "no torch.distributed process group exists\n")
    error = _error_from_stderr(stderr, str(script))
    assert error is not None and error["cause"]["key"] == "helper-no-process-group"
    found = origin(error)
    assert found is not None and found["helper"] == "_neuron_optimizer_step"  # what the script calls
    assert found["rules"] == ["NM210"] and found["call_site"]["line"] == 40
    assert "written by NM210 (optimizer-step)" in found["text"]


def _worker(rank: int, **outcome: Any) -> neuron_migrate.smoke.run.Worker:
    base = {"optimizer_steps": 0, "graphs_compiled": 0, "ops": {}, "stopped_after_steps": None,
            "world_size": 2, "process_group": False, "parallelism": None, "rank": rank}
    return neuron_migrate.smoke.run.Worker(rank, "eval.py", returncode=0, outcome=dict(base, **outcome))


@pytest.mark.parametrize("check", [False, True])
def test_no_process_group_in_any_worker_warns_or_fails(check: bool) -> None:
    """An evaluation script that never steps and never forms a group: each rank did it all."""
    options = SmokeOptions(script=Path("eval.py"), nproc=2, check_replicas=check)
    result = neuron_migrate.smoke.run.summarise(options, [_worker(0), _worker(1)], False, 1.0)
    assert result.passed is not check
    if check:
        assert result.error["cause"]["key"] == "data-parallel-never-created"
        assert "none ever created a process group" in _text(result)
    else:
        assert len(result.warnings) == 1 and "none ever created a process group" in result.warnings[0]


def test_an_evaluation_with_a_process_group_or_a_single_process_says_nothing() -> None:
    grouped = [_worker(0, process_group=True), _worker(1, process_group=True)]
    options = SmokeOptions(script=Path("eval.py"), nproc=2, check_replicas=True)
    assert neuron_migrate.smoke.run.summarise(options, grouped, False, 1.0).passed
    single = SmokeOptions(script=Path("eval.py"))
    result = neuron_migrate.smoke.run.summarise(single, [_worker(0, world_size=1)], False, 1.0)
    assert result.passed and result.warnings == []


def test_a_rule_claims_the_helpers_its_code_names_directly_or_through_the_module() -> None:
    import ast

    from neuron_migrate.smoke.diagnosis import _helpers_by_rule

    module = ast.parse('''
_BY_NAME = {"all_reduce": "_neuron_a"}

def _loader(site):
    return site.helper("_neuron_b")

class Base:
    def shared(self, site):
        return site.helper("_neuron_c")

class First(Base):
    id = "NM901"
    example = Example(before="", after=HELPERS["_neuron_d"].source)

    def on_call(self, node, site):
        return _loader(site), site.helper(_BY_NAME[node])

class NotARule:
    def on_call(self, site):
        return site.helper("_neuron_d")
''')
    found = _helpers_by_rule(module, {"_neuron_a", "_neuron_b", "_neuron_c", "_neuron_d"})
    # its example only shows output: `_neuron_d` is not claimed
    assert found == {"NM901": {"_neuron_a", "_neuron_b", "_neuron_c"}}


def test_a_data_dependent_refusal_names_the_line_dynamo_traced() -> None:
    error = {"type": "torch._dynamo.exc.UserError", "frames": [], "message": (
        "Could not guard on data-dependent expression zuf0 > 0.0 (unhinted: zuf0 > 0.0).\n"
        "Caused by: if model(x).sum().item() > 0:  # smoke/train.py:14 in step "
        "(_dynamo/variables/tensor.py:2606 in evaluate_expr)\n")}
    found = origin(error)
    assert found is not None and found["call_site"] == {"file": "smoke/train.py", "line": 14,
                                                        "function": "step"}
    assert "Dynamo traced `if model(x).sum().item() > 0:`" in found["text"]


def test_a_lost_step_the_script_swallowed_still_fails_under_check_replicas() -> None:
    problem = {"key": "no-gradient-collective", "step": 2, "message": (
        "data parallelism lost: optimizer step 2 on rank 1 (WORLD_SIZE=2) stepped without "
        "averaging its gradients")}
    workers = [_worker(0, process_group=True),
               _worker(1, process_group=True, parallelism=problem, steps_without_averaging=1)]
    options = SmokeOptions(script=Path("train.py"), nproc=2, check_replicas=True)
    result = neuron_migrate.smoke.run.summarise(options, workers, False, 1.0)
    assert not result.passed and result.failing_rank == 1
    assert result.error["cause"]["key"] == "data-parallel-no-averaging" and result.error["step"] == 2


def test_a_function_only_named_like_a_helper_is_not_pinned_on_a_rule() -> None:
    error = {"type": "ValueError", "message": "bad", "frames": [
        {"file": "/x/train.py", "line": 3, "function": "<module>"},
        {"file": "/x/train.py", "line": 9, "function": "_neuron_my_own"}]}
    found = origin(error)
    assert found is not None and found["rules"] == [] and "not one this version knows" in found["text"]
