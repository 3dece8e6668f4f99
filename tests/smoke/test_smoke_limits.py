"""TorchNeuron's documented limits in a smoke run (fixtures/smoke/compile_limits.py): graphs
per compiled function and input shape, --max-recompiles, float64 counted, sparse and nested
tensors refused, the aten ops with their counts. The runs start together on first use."""

from __future__ import annotations

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

import neuron_migrate.smoke.run
from neuron_migrate.emulator.failure_causes import diagnose, diagnose_text
from neuron_migrate.smoke.diagnosis import relative
from neuron_migrate.smoke.report import render_json, render_text
from neuron_migrate.smoke.run import SmokeOptions, SmokeResult, run_smoke, smoke, summarise, Worker
from neuron_migrate.smoke.run import worker_environment
from tests.conftest import FIXTURES

SCRIPT = FIXTURES / "smoke" / "compile_limits.py"
PYTHON = os.environ.get("SMOKE_PYTHON", sys.executable)


def _options(mode: str, **kw: Any) -> SmokeOptions:
    return SmokeOptions(script=SCRIPT, script_args=(mode,), timeout=300, python=PYTHON, **kw)


SCENARIOS = {
    "shapes": _options("shapes"),
    "capped": _options("shapes", max_recompiles=1),
    "sparse": _options("sparse"),
    "nested": _options("nested"),
}


class Runs:
    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=2)
        self.futures: dict[str, Future] = {name: self.pool.submit(run_smoke, options)
                                           for name, options in SCENARIOS.items()}

    def __getitem__(self, name: str) -> SmokeResult:
        return self.futures[name].result()


@pytest.fixture(scope="module")
def runs() -> Iterator[Runs]:
    started = Runs()
    yield started
    started.pool.shutdown(wait=True, cancel_futures=True)  # runs no test asked for never start


def _line_of(text: str) -> int:
    lines = SCRIPT.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def _text(result: SmokeResult) -> str:
    return "\n".join(line for line, _ in render_text(result))


@pytest.mark.torch
@pytest.mark.slow
def test_model_compile_goes_through_the_backend_with_graphs_per_shape(runs: Runs) -> None:
    result = runs["shapes"]
    assert result.passed and result.exit_code() == 0, _text(result)
    # batches of 4, 4, 3, 2 rows: three shapes, three graphs each for the model and `scaled`
    assert result.graphs_compiled == 6
    by_name = {entry["function"]: entry for entry in result.compiled}
    assert by_name["Sequential.forward"] == {"function": "Sequential.forward", "graphs": 3,
                                             "shapes": 3, "recompiles": 2, "calls": 4}
    assert by_name["scaled"]["graphs"] == 3 and by_name["scaled"]["shapes"] == 3
    text = _text(result)
    assert ("Sequential.forward compiled 3 graphs for 3 input shapes: pad or bucket the inputs"
            in text)


@pytest.mark.torch
@pytest.mark.slow
def test_float64_on_the_device_is_a_counted_warning_naming_the_first_line(runs: Runs) -> None:
    result = runs["shapes"]
    assert result.float64_tensors >= 1
    assert result.float64_location["line"] == _line_of("# float64 on the device")
    assert "float64 executes as float32 on TorchNeuron" in _text(result)
    assert _text(result).startswith("smoke PASSED with 1 warning")
    assert json.loads(render_json(result))["float64_tensors"] == result.float64_tensors


@pytest.mark.torch
@pytest.mark.slow
def test_the_ops_that_ran_are_listed_with_their_counts(runs: Runs) -> None:
    result = runs["shapes"]
    assert list(result.ops) == sorted(result.ops) and result.ops["aten::addmm"] >= 8
    assert f"aten::addmm {result.ops['aten::addmm']}" in _text(result)
    assert json.loads(render_json(result))["ops"] == result.ops


@pytest.mark.torch
@pytest.mark.slow
def test_max_recompiles_fails_the_run_at_the_call_that_recompiled_once_too_often(
        runs: Runs) -> None:
    result = runs["capped"]
    assert not result.passed and result.exit_code() == 1
    error = result.error
    assert error["type"] == "TooManyRecompiles"
    assert error["cause"]["key"] == "too-many-recompiles"
    assert error["location"]["line"] == _line_of("# the batch")
    assert "Sequential.forward recompiled 2 times, more than --max-recompiles 1" in error["message"]
    assert result.optimizer_steps == 3  # the fourth batch (2 rows), a third shape, failed
    assert "likely cause: a compiled function recompiled more often" in _text(result)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("mode", "marker"), [("sparse", "# sparse on the device"),
                                              ("nested", "# nested")])
def test_sparse_and_nested_tensors_on_the_device_fail_as_on_torchneuron(
        runs: Runs, mode: str, marker: str) -> None:
    result = runs[mode]
    assert not result.passed and result.exit_code() == 1
    assert result.error["type"] == "UnsupportedOnNeuron"
    assert result.error["cause"]["key"] == "unsupported-on-neuron"
    assert result.error["location"]["line"] == _line_of(marker)


# --------------------------------------------------------------- without a subprocess
def _outcome(**kw: Any) -> dict[str, Any]:
    base = {"status": "ok", "error": None, "stopped_after_steps": None, "optimizer_steps": 1,
            "graphs_compiled": 0, "ops": {}, "float64_tensors": 0, "float64_first": None,
            "compiled": []}
    return dict(base, **kw)


def _summary(*outcomes: dict[str, Any]) -> SmokeResult:
    workers = [Worker(rank, str(SCRIPT), returncode=0, outcome=o) for rank, o in enumerate(outcomes)]
    return summarise(SmokeOptions(script=SCRIPT, nproc=len(workers)), workers, False, 1.0)


def test_ranks_report_each_compiled_function_once_with_the_most_any_compiled() -> None:
    entry = {"function": "Net.forward", "graphs": 2, "shapes": 2, "recompiles": 1, "calls": 5}
    result = _summary(_outcome(compiled=[entry]), _outcome(compiled=[dict(entry, graphs=3,
                                                                          shapes=3, calls=4)]))
    assert result.compiled == [{"function": "Net.forward", "graphs": 3, "shapes": 3,
                                "recompiles": 1, "calls": 5}]


def test_one_shape_is_reported_without_advice_and_uncalled_functions_not_at_all() -> None:
    result = _summary(_outcome(compiled=[
        {"function": "step", "graphs": 1, "shapes": 1, "recompiles": 0, "calls": 3},
        {"function": "inner", "graphs": 0, "shapes": 0, "recompiles": 0, "calls": 0}]))
    lines = [line for line, _ in render_text(result)]
    assert "    step compiled 1 graph for 1 input shape" in lines
    assert not any("inner" in line or "pad or bucket" in line for line in lines)


def test_more_shapes_than_graphs_names_dynamos_recompile_limit() -> None:
    # what Dynamo does with 12 shapes: 8 graphs (its recompile limit), the rest uncompiled
    result = _summary(_outcome(compiled=[
        {"function": "Net.forward", "graphs": 8, "shapes": 12, "recompiles": 7, "calls": 12}]))
    line = next(line for line, _ in render_text(result) if "Net.forward" in line)
    assert line.startswith("    Net.forward compiled 8 graphs for 12 input shapes: pad or bucket")
    assert "recompile limit" in line and "run uncompiled" in line


def test_the_first_float64_frame_is_the_scripts() -> None:
    frames = [{"file": str(SCRIPT), "line": 7, "function": "<module>"},
              {"file": "/venv/lib/python3.11/site-packages/torch/x.py", "line": 1, "function": "f"}]
    result = _summary(_outcome(float64_tensors=4, float64_first=frames))
    assert result.float64_location["line"] == 7
    assert result.warnings == ["4 float64 tensors made on the device (the first at "
                               f"{relative(str(SCRIPT))}:7): float64 executes as float32 on "
                               "TorchNeuron"]
    assert any(line.startswith("  warning: 4 float64 tensors made on the device (the first at ")
               for line, _ in render_text(result))


def test_reports_of_workers_from_before_this_change_still_summarise() -> None:
    old = {"status": "ok", "error": None, "stopped_after_steps": None, "optimizer_steps": 1,
           "graphs_compiled": 1, "ops": {"aten::mm": 2}}
    result = _summary(old)
    assert result.passed and result.compiled == [] and result.float64_tensors == 0


def test_max_recompiles_reaches_the_workers_only_when_asked() -> None:
    report, ports = Path("r.json"), (1, 2)
    assert worker_environment(_options("shapes", max_recompiles=0), 0, report, ports)[
        "NEURON_EMU_MAX_RECOMPILES"] == "0"
    assert "NEURON_EMU_MAX_RECOMPILES" not in worker_environment(_options("shapes"), 0, report, ports)


def _invoke(*args: str) -> tuple[int, str]:
    app = typer.Typer(add_completion=False, rich_markup_mode=None)
    app.command()(smoke)

    @app.callback()
    def main() -> None:
        """Test harness."""

    result = CliRunner().invoke(app, ["smoke", *args], catch_exceptions=False)
    return result.exit_code, result.stdout


def test_the_command_passes_max_recompiles_and_refuses_a_negative_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[SmokeOptions] = []

    def fake_run(options: SmokeOptions) -> SmokeResult:
        seen.append(options)
        return _summary(_outcome())

    monkeypatch.setattr(neuron_migrate.smoke.run, "run_smoke", fake_run)
    assert _invoke("--max-recompiles", "3", str(SCRIPT))[0] == 0
    assert seen[0].max_recompiles == 3
    assert _invoke("--max-recompiles", "-1", str(SCRIPT))[0] == 2


@pytest.mark.parametrize(("kind", "message", "key"), [
    ("TooManyRecompiles", "Net.forward recompiled 3 times, more than --max-recompiles 2 allows",
     "too-many-recompiles"),
    ("UnsupportedOnNeuron", "nested tensors (torch.nested) are not supported on the neuron "
     "device: TorchNeuron does not support them", "unsupported-on-neuron"),
])
def test_the_new_failures_are_diagnosed_from_the_error_and_from_stderr(
        kind: str, message: str, key: str) -> None:
    assert diagnose(kind, message).key == key
    found = diagnose_text(f"Traceback (most recent call last):\n  File \"t.py\", line 1\n"
                          f"emulator.x.{kind}: {message}\n")
    assert found is not None and found[0].endswith(kind) and found[2].key == key
