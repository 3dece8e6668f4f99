"""The smoke run inside one worker: count steps, record their losses, stop after K, check
replicas, report.

Configured by the smoke runner through the environment (the user's script is not touched):
- ``NEURON_EMU_REPORT``: where this worker writes its JSON outcome when it exits;
- ``NEURON_EMU_STEPS``: stop cleanly (exit 0) after this many optimizer steps;
- ``NEURON_EMU_CHECK_PORT``: compare replicas before each optimizer's first step (they must
  start equal) and after every step, on this loopback port, and
  raise when a step lost data parallelism (emulator/parallelism.py; without it, such a step
  is only recorded for the report, as a warning);
- ``NEURON_EMU_SCRIPT``: the user's script, to pick the traceback frame worth naming.

Only the worker process itself reports: ``NEURON_EMU_REPORT_OWNER`` is set to its pid and
inherited, so DataLoader workers and other children stay silent.

How a worker ends: :func:`finish` is its last exit handler (the bootstrap registers it before
torch is imported, so every other one runs first). Interpreter finalization is unsafe while a
gloo worker thread still holds tensors of a just-finished collective: releasing them takes the
GIL, and a thread that asks for it during finalization is ended mid-C++, which aborts the
process ("terminate called without an active exception"; plain gloo does the same to a script
that exits right after a collective without ``destroy_process_group``). So when the exit
status is already known (an uncaught error: 1; stopped after the requested steps: 0) the worker
writes its report, flushes and leaves with ``os._exit``, skipping finalization; otherwise (the
script ended by itself, or raised SystemExit) it frees the process groups first and lets Python
finish, so the script's own exit status stands.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from . import layout, losses
from .counters import COUNTERS
from .failure_causes import diagnose, pick_frame
from .distributed import ReplicaCheck
from .parallelism import ParallelismCheck, nested_step

_GLOO_GRACE_SECONDS = 0.05
_FRAMES_KEPT = 40  # innermost; a deep recursion would otherwise bloat the report
_outcome: dict[str, Any] = {"status": "ok", "error": None, "stopped_after_steps": None}
_report: Path | None = None  # set by start() in the worker process itself
_owner = 0  # its pid: a forked child inherits the two above, and must not report
_check: ReplicaCheck | None = None
_parallelism: ParallelismCheck | None = None


class StepLimitReached(SystemExit):
    """Raised from the optimizer hook after the last requested step: a clean exit (code 0)."""


def start() -> None:
    """Install the hooks for this worker; a no-op in processes the worker spawns."""
    report = os.environ.get("NEURON_EMU_REPORT")
    owner = os.environ.setdefault("NEURON_EMU_REPORT_OWNER", str(os.getpid()))
    if not report or owner != str(os.getpid()):
        return
    global _report, _owner, _check, _parallelism
    steps = int(os.environ.get("NEURON_EMU_STEPS", "0"))
    _check = ReplicaCheck.from_environment()
    _parallelism = ParallelismCheck.from_environment()
    layout.watch()
    losses.watch()
    register_optimizer_step_post_hook(_after_step(steps, _check, _parallelism))
    if _check is not None:
        register_optimizer_step_pre_hook(_before_step(_check))
    previous_hook = sys.excepthook

    def excepthook(kind: type[BaseException], error: BaseException, tb: TracebackType | None) -> None:
        record_error(error)
        previous_hook(kind, error, tb)

    sys.excepthook = excepthook
    sys.exit = _recording_exit(sys.exit)
    _report, _owner = Path(report), os.getpid()


def _recording_exit(real_exit: Any) -> Any:
    """``sys.exit`` that remembers where the script called it: a SystemExit reaches no
    excepthook, so a worker that ends itself with a status (argparse's usage error, a
    "dataset not found" message) would otherwise be reported without its line."""

    def exit(status: object = None) -> None:
        frames = [{"file": f.filename, "line": f.lineno, "function": f.name}
                  for f in traceback.extract_stack(sys._getframe(1))][-_FRAMES_KEPT:]
        _outcome["exit"] = {
            "status": status if status is None or isinstance(status, int) else str(status),
            "frames": frames,
            "location": pick_frame(frames, os.environ.get("NEURON_EMU_SCRIPT", ""))}
        real_exit(status)

    return exit


def finish() -> None:
    """The worker's last exit handler: report, then leave without finalization when the exit
    status is known, or free the process groups and let Python finish (see the module doc)."""
    if _report is None or _owner != os.getpid():
        return
    _write(_report)
    status = _known_status()
    if status is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    _release_process_groups()


def _known_status() -> int | None:
    """The status Python is about to exit with, where it is certain: 1 after an uncaught error
    (but KeyboardInterrupt, which Python turns into a SIGINT death), 0 when the hook stopped the
    run. None when the script ended by itself or raised SystemExit: its status is not known."""
    error = _outcome["error"]
    if error is not None:
        return None if error["type"] == "KeyboardInterrupt" else 1
    return 0 if _outcome["stopped_after_steps"] else None


def _release_process_groups() -> None:
    """Destroy the groups before finalization. A group the script still holds elsewhere (DDP
    keeps its own) outlives this; a short sleep hands the GIL to its threads, should one be
    waiting for it to drop a tensor, as nothing else can tell when they are done."""
    import torch.distributed as dist

    used = _check is not None and _check.close()
    if dist.is_available() and dist.is_initialized():
        used = True
        try:
            dist.destroy_process_group()
        except Exception as error:  # noqa: BLE001 - the script is over; say so and go on
            sys.stderr.write(f"neuron-migrate smoke: destroy_process_group at exit failed: "
                             f"{type(error).__name__}: {error}\n")
    if used:
        time.sleep(_GLOO_GRACE_SECONDS)


def _before_step(check: ReplicaCheck) -> Any:
    def hook(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if not nested_step():  # an inner optimizer's parameters are the outer one's
            check.before_first_step(optimizer)

    return hook


def _after_step(limit: int, check: ReplicaCheck | None,
                parallelism: ParallelismCheck | None) -> Any:
    def hook(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if nested_step():  # an inner optimizer stepped by a wrapper: the outer step counts
            return
        COUNTERS.optimizer_steps += 1
        losses.close_step()  # first: a check that raises below ends the run after this step
        if parallelism is not None:
            parallelism(optimizer, COUNTERS.optimizer_steps)
        if check is not None:
            check(optimizer, COUNTERS.optimizer_steps)
        if limit and COUNTERS.optimizer_steps >= limit:
            _outcome["stopped_after_steps"] = limit
            sys.stdout.flush()
            raise StepLimitReached(0)

    return hook


def record_error(error: BaseException) -> None:
    """Keep the first uncaught error with its frames, the frame to name and its cause."""
    if _outcome["error"] is not None:
        return
    frames = [{"file": f.filename, "line": f.lineno, "function": f.name}
              for f in traceback.extract_tb(error.__traceback__)][-_FRAMES_KEPT:]
    kind = type(error)
    cause = diagnose(kind.__name__, str(error))
    _outcome["status"] = "error"
    _outcome["error"] = {
        "type": _type_name(kind),
        "message": str(error),
        "location": pick_frame(frames, os.environ.get("NEURON_EMU_SCRIPT", "")),
        "frames": frames,
        "cause": None if cause is None else {"key": cause.key, "text": cause.text},
        "step": getattr(error, "step", None),
        "time": time.time(),  # the runner names the earliest error across workers
    }


def _type_name(kind: type) -> str:
    """Builtins and the emulator's own errors by name, others qualified (torch._dynamo.exc...)."""
    if kind.__module__ == "builtins" or kind.__module__.startswith("emulator."):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _parallelism_facts() -> dict[str, Any]:
    """What the runner needs to judge data parallelism: the world size, whether a process
    group was ever seen (a script may destroy it before exit), the first step that did not
    average its gradients, how many did not, and the layout of the mesh the script built."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        COUNTERS.process_group_seen = True
    rank = int(os.environ.get("RANK", "0") or 0)
    found = layout.current_layout(rank)
    return {"layout": None if found is None else found.as_dict(),
            "world_size": int(os.environ.get("WORLD_SIZE", "1") or 1),
            "process_group": COUNTERS.process_group_seen,
            "parallelism": None if _parallelism is None else _parallelism.first_problem,
            "steps_without_averaging": 0 if _parallelism is None
            else _parallelism.steps_without_averaging}


def _write(path: Path) -> None:
    outcome = dict(_outcome, rank=int(os.environ.get("RANK", "0")), **COUNTERS.snapshot(),
                   **_parallelism_facts())
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(outcome), encoding="utf-8")
    os.replace(tmp, path)
