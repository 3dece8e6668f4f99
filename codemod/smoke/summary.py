"""What a smoke run found: each worker's outcome, summed up into one :class:`SmokeResult`.

Workers report through the JSON file their session writes at exit (emulator/session.py); a
worker that died without one is read from the end of its stderr. Across workers: the first
error (the lowest rank among those that hit the same one), the op inventory summed, compiled
functions merged, data parallelism judged, and the loss of each optimizer step averaged.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuron_migrate.emulator.failure_causes import diagnose, diagnose_text, pick_frame
from neuron_migrate.smoke.diagnosis import origin, parallelism_problems, problem_lines
from neuron_migrate.smoke.processes import cores
from neuron_migrate.smoke.report import float64_warning

if TYPE_CHECKING:
    from neuron_migrate.smoke.run import SmokeOptions

INSTALL_FAILED = 3  # emulator/bootstrap/sitecustomize.py exits with this when it cannot install


@dataclass
class Worker:
    """One process: its exit, what its session reported, and the end of its stderr."""

    rank: int
    script: str = ""
    returncode: int | None = None
    ended_at: float | None = None
    killed: bool = False
    outcome: dict[str, Any] | None = None
    stderr_tail: str = ""
    report_problem: str | None = None  # its report exists but cannot be read (read_outcome)
    stdout_tail: str = ""

    @property
    def error(self) -> dict[str, Any] | None:
        if self.outcome and self.outcome.get("error"):
            return _unwrapped(self.outcome["error"], self.script)
        if self.report_problem:
            cause = diagnose(REPORT_UNREADABLE, self.report_problem)
            return {"type": REPORT_UNREADABLE, "message": self.report_problem, "location": None,
                    "frames": [], "cause": None if cause is None else asdict(cause), "step": None}
        if self.returncode not in (0, None) and not self.killed:
            return _error_from_stderr(self.stderr_tail, self.script) or self._exit_error()
        return None

    def _exit_error(self) -> dict[str, Any] | None:
        """A worker that ended itself with a status through sys.exit: where it called it."""
        called = (self.outcome or {}).get("exit")
        if not called:
            return None
        status = called["status"]
        message = status if isinstance(status, str) else f"exit status {self.returncode}"
        return {"type": "SystemExit", "message": message, "location": called["location"],
                "frames": called["frames"], "cause": None, "step": None}


@dataclass
class SmokeResult:
    script: str
    nproc: int
    passed: bool
    timed_out: bool = False
    install_failed: str | None = None
    failing_rank: int | None = None
    error: dict[str, Any] | None = None
    optimizer_steps: int = 0
    graphs_compiled: int = 0
    ops: dict[str, int] = field(default_factory=dict)
    compiled: list[dict[str, Any]] = field(default_factory=list)
    float64_tensors: int = 0
    float64_location: dict[str, Any] | None = None
    stopped_after_steps: int | None = None
    steps_requested: int | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    # the mesh rank 0 built (emulator/layout.py), and what it changed in the checks
    layout: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    # per optimizer step, the mean over the workers of the loss each recorded (None: none did)
    losses: list[float | None] = field(default_factory=list)
    workers: list[Worker] = field(default_factory=list)
    # when timed out: hung or too slow, and where each rank was (smoke/timeouts.py)
    timeout: dict[str, Any] | None = None

    def exit_code(self) -> int:
        if self.install_failed is not None:
            return 2
        return 0 if self.passed else 1


REPORT_UNREADABLE = "SmokeReportUnreadable"
# what summarise reads from every outcome, with the type it must have
_REQUIRED = {"optimizer_steps": int, "graphs_compiled": int, "ops": dict}


def read_outcome(path: Path, rank: int) -> tuple[dict[str, Any] | None, str | None]:
    """A worker's report: (outcome, None), (None, None) when it wrote none, or (None, why it
    cannot be read) when the file is there but is not a report the session wrote: the script
    (or something it ran) wrote to the path NEURON_EMU_REPORT names, or the disk was full."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as error:
        return None, f"rank {rank}'s smoke report {path.name} could not be read: {error}"
    try:
        outcome = json.loads(text)
    except json.JSONDecodeError as error:
        return None, (f"rank {rank}'s smoke report {path.name} is not valid JSON ({error}); "
                      f"something in the worker overwrote it (the script, or a process it "
                      f"started, writing to the path in NEURON_EMU_REPORT) or cut it short")
    wrong = [key for key, kind in _REQUIRED.items()
             if not isinstance(outcome, dict) or not isinstance(outcome.get(key), kind)]
    if wrong:
        return None, (f"rank {rank}'s smoke report {path.name} is JSON but not a smoke report "
                      f"(missing or wrong: {', '.join(wrong)}); something in the worker "
                      f"overwrote it (the script, or a process it started, writing to the path "
                      f"in NEURON_EMU_REPORT)")
    return outcome, None


# [ \t], not \s: \s would also run over newlines, retrying a run of blank lines from each of
# them (a worker that printed thousands of empty lines took minutes to read)
_FRAME = re.compile(r'^[ \t]*File "([^"]+)", line (\d+)(?:, in (.+))?$', re.MULTILINE)
_RERAISED = "\nOriginal Traceback (most recent call last):\n"
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?:: (.*))?$")


def _in_project(frame: dict[str, Any] | None, script: str) -> dict[str, Any] | None:
    """The frame, when it is in the script's folder (its own code, not a library's)."""
    if frame is None or not script:
        return None
    folder = Path(script).resolve().parent
    return frame if Path(frame["file"]).resolve().is_relative_to(folder) else None


def _unwrapped(error: dict[str, Any], script: str) -> dict[str, Any]:
    """An error a DataLoader worker raised, re-raised in the main process with the worker's
    traceback as its message ("Caught KeyError in DataLoader worker process 0. Original
    Traceback ..."): its own message and the script's line in the worker (a dataset's
    __getitem__), not the line that iterated the loader."""
    message = error.get("message") or ""
    if _RERAISED not in message:
        return error
    head, _, trace = message.partition(_RERAISED)
    frames = [{"file": f, "line": int(n), "function": fn or ""} for f, n, fn in _FRAME.findall(trace)]
    last = next((m for line in reversed(trace.strip().splitlines())
                 if not line.startswith(" ") and (m := _EXCEPTION_LINE.match(line))), None)
    inner = (last.group(2) or "") if last else ""
    where = head.strip().removeprefix("Caught ").rstrip(".")
    return dict(error, message=f"{inner} ({where})" if inner else head.strip(),
                location=_in_project(pick_frame(frames, script), script) or error.get("location"),
                frames=[*(error.get("frames") or []), *frames])




def _error_from_stderr(stderr: str, script: str) -> dict[str, Any] | None:
    """For a worker that died without a session report (a crash in C++, os._exit, sys.exit
    after printing a traceback): the last traceback in its stderr."""
    found = diagnose_text(stderr)
    if found is None:
        return None
    name, message, cause = found
    frames = [{"file": f, "line": int(n), "function": fn or ""} for f, n, fn in _FRAME.findall(stderr)]
    return {"type": name, "message": message, "location": pick_frame(frames, script),
            "frames": frames, "cause": None if cause is None else asdict(cause), "step": None}


def summarise(options: SmokeOptions, workers: list[Worker], timed_out: bool,
              seconds: float) -> SmokeResult:
    result = SmokeResult(script=str(options.script), nproc=options.nproc or 1, passed=False,
                         timed_out=timed_out, seconds=round(seconds, 2), workers=workers,
                         steps_requested=options.steps)
    outcomes = [w.outcome for w in workers if w.outcome]
    result.optimizer_steps = max((o["optimizer_steps"] for o in outcomes), default=0)
    result.graphs_compiled = max((o["graphs_compiled"] for o in outcomes), default=0)
    ops: dict[str, int] = {}
    for outcome in outcomes:
        for name, count in outcome["ops"].items():
            ops[name] = ops.get(name, 0) + count
    result.ops = dict(sorted(ops.items()))
    result.compiled = _compiled(outcomes)
    result.float64_tensors = max((o.get("float64_tensors", 0) for o in outcomes), default=0)
    first = next((o["float64_first"] for o in outcomes if o.get("float64_first")), None)
    result.float64_location = pick_frame(first, str(options.script)) if first else None
    if result.float64_tensors:
        result.warnings.append(float64_warning(result.float64_tensors, result.float64_location))
    result.stopped_after_steps = next((o["stopped_after_steps"] for o in outcomes
                                       if o.get("stopped_after_steps")), None)
    result.losses = step_losses(outcomes)
    result.layout = next((o["layout"] for o in sorted(outcomes, key=lambda o: o.get("rank", 0))
                          if o.get("layout")), None)
    result.notes = layout_notes(result.layout, options.check_replicas and result.nproc > 1)
    if (crowded := crowding_warning(result.nproc)) is not None:
        result.warnings.append(crowded)
    install = [w for w in workers if w.returncode == INSTALL_FAILED and "could not install" in w.stderr_tail]
    if install:
        result.install_failed = install[0].stderr_tail.splitlines()[-1]
        return result
    failed = sorted((w for w in workers if (w.returncode != 0 and not w.killed) or w.report_problem),
                    key=lambda w: (w.error is None, (w.error or {}).get("time") or w.ended_at or 0.0))
    if failed:
        first = failed[0]
        # ranks that hit the same error at about the same time: name the lowest, as torchrun does
        same = [w for w in failed if w.error and first.error and _kind(w.error) == _kind(first.error)]
        first = min(same, key=lambda w: w.rank) if same else first
        result.failing_rank, result.error = first.rank, _with_origin(first.error)
    result.passed = not timed_out and not failed and all(w.returncode == 0 for w in workers)
    if not failed and not timed_out:
        _judge_parallelism(result, outcomes, options.check_replicas)
    return result


def _compiled(outcomes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each compiled function once, with the most any worker compiled for it (ranks compile
    the same graphs; a rank that stopped early compiled fewer)."""
    merged: dict[str, dict[str, Any]] = {}
    for outcome in outcomes:
        for index, entry in enumerate(outcome.get("compiled", [])):
            key = f"{entry['function']}#{index}"
            known = merged.setdefault(key, dict(entry))
            for count in ("graphs", "shapes", "recompiles", "calls"):
                known[count] = max(known[count], entry[count])
    return list(merged.values())


def _kind(error: dict[str, Any]) -> tuple[str, str]:
    """Errors alike across ranks: the same type and cause (messages may name the rank)."""
    cause = error.get("cause")
    return error["type"], cause["key"] if cause else error["message"]


# errors the original script has too: the helper they surface in did not cause them
_NOT_THE_MIGRATION = ("ReplicasStartApart",)


def _with_origin(error: dict[str, Any] | None) -> dict[str, Any] | None:
    """The error, with the rule that wrote the code it was raised in, when the tool wrote it."""
    if error is None:
        return None
    if error.get("type", "").rsplit(".", 1)[-1] in _NOT_THE_MIGRATION:
        return dict(error, origin=None)
    return dict(error, origin=origin(error))


def _judge_parallelism(result: SmokeResult, outcomes: list[dict[str, Any]],
                       check_replicas: bool) -> None:
    """Lost data parallelism that no worker raised (they raise only under --check-replicas,
    and only at a step): a warning, or with --check-replicas the run's failure."""
    problems = parallelism_problems(outcomes, result.nproc)
    if not problems:
        return
    if not check_replicas:
        result.warnings.extend(problem_lines(problems))
        return
    first = problems[0]
    cause = diagnose("DataParallelismLost", first["message"])
    result.passed, result.failing_rank = False, first["rank"]
    result.error = {"type": "DataParallelismLost", "message": first["message"], "location": None,
                    "frames": [], "step": first["step"], "origin": None,
                    "cause": None if cause is None else asdict(cause)}




def crowding_warning(nproc: int, available: int | None = None) -> str | None:
    """More workers than cores is allowed (the script may need that world size, and a cap
    would change what it computes), but every rank gets a share of a core: say so."""
    available = cores() if available is None else available
    if nproc <= available:
        return None
    return (f"{nproc} workers on {available} CPU core{'s' if available > 1 else ''}: each "
            f"gets about 1/{-(-nproc // available)} of a core, so the run is that much slower "
            f"(raise --timeout, or run fewer workers where the script allows)")


def step_losses(outcomes: list[dict[str, Any]]) -> list[float | None]:
    """The loss of each optimizer step: the mean over the workers of the loss each recorded.
    Data-parallel ranks each hold their shard's mean loss, whose mean is the whole batch's
    (for equal shards); tensor-parallel ranks all hold the same one."""
    recorded = [o.get("losses") or [] for o in outcomes]
    steps = max((len(r) for r in recorded), default=0)
    means: list[float | None] = []
    for step in range(steps):
        values = [r[step] for r in recorded if len(r) > step and r[step] is not None]
        means.append(sum(values) / len(values) if values else None)
    return means


def layout_notes(layout: dict[str, Any] | None, check_replicas: bool) -> list[str]:
    """What a model-parallel mesh changed in the checks, so that a silent check is not read as
    a passed one: no data-parallel peers to average with, replicas compared within groups."""
    if not layout or not layout["model_parallel"]:
        return []
    mesh = layout["mesh"]
    notes = []
    if len(layout["data_group"]) < 2:
        notes.append(f"mesh {mesh}: no data-parallel dimension larger than 1, so gradients "
                     f"need no averaging across ranks and were not checked for it")
    if check_replicas and len(layout["replica_group"]) < 2:
        notes.append(f"mesh {mesh}: no two ranks hold the same parameters (each holds its "
                     f"own shards), so --check-replicas compared no parameter checksums")
    elif check_replicas:
        notes.append(f"mesh {mesh}: --check-replicas compared parameter checksums only among "
                     f"ranks holding the same shards (rank 0 with ranks "
                     f"{', '.join(map(str, layout['replica_group']))})")
    return notes
