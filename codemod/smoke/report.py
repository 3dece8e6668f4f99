"""The smoke run's report, as text lines with styles or as JSON."""

from __future__ import annotations

import json
import linecache
import signal
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from neuron_migrate.smoke.paths import relative

if TYPE_CHECKING:
    from neuron_migrate.smoke.summary import SmokeResult, Worker

POSITIONING = ("Runs on the device API on CPU: it says nothing about which ops Trainium "
               "supports, its numerics, its compiler or its speed.")


def render_json(result: SmokeResult) -> str:
    return json.dumps(json_data(result), indent=2)


def json_data(result: SmokeResult) -> dict[str, Any]:
    data = asdict(result)
    data["workers"] = [{"rank": w.rank, "returncode": w.returncode, "killed": w.killed,
                        "optimizer_steps": (w.outcome or {}).get("optimizer_steps")}
                       for w in result.workers]
    data["exit_code"] = result.exit_code()
    data["distinct_ops"] = len(result.ops)
    data["positioning"] = POSITIONING
    return data


def render_text(result: SmokeResult) -> list[tuple[str, str]]:
    """(line, style) pairs; styles: heading, error, warning, dim, plain."""
    return [*run_lines(result), *_inventory_lines(result)]


def run_lines(result: SmokeResult) -> list[tuple[str, str]]:
    """What the run did, without the op inventory: what a layout comparison shows per run."""
    workers = f"{result.nproc} process{'es' if result.nproc > 1 else ''}"
    verdict = "PASSED" if result.passed else "FAILED"
    if result.passed and result.warnings:
        count = len(result.warnings)
        verdict += f" with {count} warning{'s' if count > 1 else ''}"
    lines = [(f"smoke {verdict}: {result.script} ({workers}, emulated neuron device on CPU, "
              f"{result.seconds:.1f}s)", "heading" if result.passed else "error")]
    if result.install_failed:
        lines.append((f"  the emulator could not be installed: {result.install_failed}", "error"))
    elif result.timed_out:
        found = result.timeout or {"text": "the run did not finish in time"}
        lines.append((f"  timed out: {found['text']}", "error"))
    lines.extend((f"  warning: {text}", "warning") for text in result.warnings)
    if result.layout:
        lines.append((f"  mesh (the script's DeviceMesh): {result.layout['mesh']}", "plain"))
    lines.extend((f"  note: {text}", "dim") for text in result.notes)
    if result.error:
        lines.extend(_error_lines(result))
    elif not result.passed and not result.timed_out and not result.install_failed:
        failing = next((w for w in result.workers if w.returncode != 0 and not w.killed), None)
        if failing is not None:
            lines.extend(_exit_lines(failing))
    stop = f" (stopped after {result.stopped_after_steps} as asked)" if result.stopped_after_steps else ""
    if result.steps_requested and not result.stopped_after_steps and result.passed:
        stop = f" (the script ended before the {result.steps_requested} asked)"
    lines.append((f"  optimizer steps: {result.optimizer_steps}{stop}", "plain"))
    lines.append((f"  graphs compiled: {result.graphs_compiled}", "plain"))
    lines.extend(_compiled_lines(result))
    return lines


def _inventory_lines(result: SmokeResult) -> list[tuple[str, str]]:
    lines = [(f"  distinct ops executed on the device (aten, and c10d collectives): "
              f"{len(result.ops)}", "plain")]
    if result.ops:
        lines.append(("    " + ", ".join(f"{name} {count}" for name, count in result.ops.items()),
                      "dim"))
    lines.append((f"  {POSITIONING}", "dim"))
    return lines


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _compiled_lines(result: SmokeResult) -> list[tuple[str, str]]:
    """One line per compiled function: its graphs for its input shapes, with the advice when
    shapes vary (TorchNeuron compiles a graph per input shape)."""
    lines = []
    for entry in result.compiled:
        if not entry["calls"]:
            continue
        text = (f"    {entry['function']} compiled {_plural(entry['graphs'], 'graph')} for "
                f"{_plural(entry['shapes'], 'input shape')}")
        if entry["shapes"] > 1:
            text += (": pad or bucket the inputs (TorchNeuron compiles a graph per input "
                     "shape)")
            if entry["shapes"] > entry["graphs"]:
                text += ("; fewer graphs than shapes: past Dynamo's recompile limit "
                         "(torch._dynamo.config.recompile_limit, 8 by default) new shapes "
                         "run uncompiled")
            lines.append((text, "warning"))
        else:
            lines.append((text, "plain"))
    return lines


def _unrecognised(error: dict[str, Any]) -> str:
    """No known migration cause: say whether the script's own code raised it, which the
    original would most likely do too (a missing dataset, a failed assertion)."""
    frames, location = error.get("frames") or [], error.get("location")
    if location and frames and frames[-1] == location and not error.get("origin"):
        return ("  likely cause: not a migration problem neuron-migrate recognises; it was raised "
                "at the script's own line above, not inside a helper the migration wrote: check "
                "whether the original fails the same way here (a path, a dataset, an assertion)")
    return "  likely cause: not recognised; read the error above"


def float64_warning(count: int, where: dict[str, Any] | None) -> str:
    """The warning for float64 tensors made on the device (TorchNeuron runs them as float32)."""
    at = f" (the first at {relative(where['file'])}:{where['line']})" if where else ""
    return (f"{_plural(count, 'float64 tensor')} made on the device{at}: "
            f"float64 executes as float32 on TorchNeuron")


# how a worker killed by a signal most likely died
_SIGNALS = {signal.SIGKILL: "the out-of-memory killer, most likely (or someone's kill -9)",
            signal.SIGSEGV: "a crash in native code", signal.SIGABRT: "a crash in native code",
            signal.SIGBUS: "a crash in native code", signal.SIGTERM: "something sent it SIGTERM"}


def _exit_lines(worker: Worker) -> list[tuple[str, str]]:
    """A worker that failed with no exception to show: how it ended, and its last words."""
    code = worker.returncode or 0
    if code < 0:
        try:
            sig = signal.Signals(-code)
            text = f"  rank {worker.rank} was killed by {sig.name}"
            text += f": {_SIGNALS[sig]}" if sig in _SIGNALS else ""
        except ValueError:
            text = f"  rank {worker.rank} was killed by signal {-code}"
    else:
        text = (f"  rank {worker.rank} exited with status {code}, without an exception "
                f"(raise SystemExit, os._exit, or a crash that printed no traceback)")
    said = worker.stderr_tail.splitlines()[-10:]
    label = "its last error output" if said else "its last output"
    said = said or worker.stdout_tail.splitlines()[-5:]
    lines = [(text, "error")]
    if said:
        lines.append((f"    {label}:", "dim"))
        lines.extend((f"    {line}", "dim") for line in said)
    return lines


def _error_lines(result: SmokeResult) -> list[tuple[str, str]]:
    error = result.error or {}
    rank = f" (rank {result.failing_rank})" if result.nproc > 1 else ""
    message = [line for line in error.get("message", "").splitlines() if line.strip()]
    location = error.get("location")
    if message:
        lines = [(f"  error{rank}: {error.get('type')}: {message[0]}", "error")]
    else:  # `assert x` and friends: the line says what failed
        source = linecache.getline(location["file"], location["line"]).strip() if location else ""
        lines = [(f"  error{rank}: {error.get('type')} (no message)"
                  + (f": {source}" if source else ""), "error")]
    lines.extend((f"    {line.strip()}", "error") for line in message[1:2])
    if location:
        lines.append((f"    at {relative(location['file'])}:{location['line']}"
                      f" in {location.get('function') or '?'}", "plain"))
    if error.get("type") == "SystemExit":  # what the script printed before it gave up
        worker = next((w for w in result.workers if w.rank == result.failing_rank), None)
        said = worker.stderr_tail.splitlines()[-5:] if worker else []
        if said and said != message[:1]:
            lines.append(("    its last error output:", "dim"))
            lines.extend((f"    {line}", "dim") for line in said)
    cause = error.get("cause")
    lines.append((f"  likely cause: {cause['text']}" if cause else _unrecognised(error), "plain"))
    found = error.get("origin")
    if found:
        call = found.get("call_site")
        at = (f"; called at {relative(call['file'])}:{call['line']}"
              if call and found.get("helper") else "")
        label = found.get("label") or \
            ('written by neuron-migrate' if found.get('helper') else 'traced')
        lines.append((f"  {label}: "
                      f"{found['text']}{at}", "plain"))
    return lines
