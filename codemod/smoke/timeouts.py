"""What a run that ran out of time was doing: hung, or only too slow for its timeout.

Two things are read at the deadline, before the workers are killed. The CPU each rank used
over the last seconds (smoke/processes.py): a rank blocked in a collective, a rendezvous or a
sleep uses next to none, a rank still computing keeps using some, however many ranks share
the cores. And where each rank's main thread was: every worker registers faulthandler for a
signal the runner sends (emulator/bootstrap/sitecustomize.py), which dumps the Python stack
of every thread from C, even while the thread is blocked inside gloo. The stack names the
collective a rank waits in (the torch.distributed call the script made) and the script's line.

A run is "too slow" when any rank was still computing: the others may be waiting for it, but
that is the ordinary shape of a run that needed more time, not a hang.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuron_migrate.emulator.failure_causes import pick_frame
from neuron_migrate.smoke.paths import relative
from neuron_migrate.smoke.processes import COMPUTING_CORES, PROGRESS_WINDOW, CpuWatch, cores

if TYPE_CHECKING:
    from neuron_migrate.smoke.summary import Worker

STACK_LEAD = 1.0  # the stacks are asked for this long before the deadline
STACK_WAIT = 0.3  # and waited for this long past it, at the most
# the signal that makes a worker dump its stacks (faulthandler): a real-time one, which no
# training library claims (SIGUSR1 and SIGUSR2 are SLURM's and Lightning's requeue signals)
STACK_SIGNAL = getattr(signal, "SIGRTMIN", signal.SIGUSR1) + (5 if hasattr(signal, "SIGRTMIN") else 0)

_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+ .*\(most recent call first\):$")
_FRAME = re.compile(r'^\s+File "(.+)", line (\d+) in (.+)$')
_DISTRIBUTED = ("torch/distributed/", "torch\\distributed\\")
_WRAPPERS = {"wrapper", "inner", "_fn", "decorate_context", "fn"}
_RENDEZVOUS = {"init_process_group", "rendezvous", "_store_based_barrier", "new_group",
               "init_device_mesh", "_create_c10d_store"}


@dataclass(frozen=True)
class RankState:
    """One rank at the deadline: computing or not, the collective it was in, its line."""

    rank: int
    ended: bool = False
    computing: bool | None = None  # None: its CPU use is not known
    collective: str | None = None
    at: dict[str, Any] | None = None  # the script's frame
    exiting: bool = False  # the script had ended (its report was written): Python was exiting

    def describe(self) -> str:
        if self.ended:
            return "had ended"
        if self.exiting:
            doing = "computing" if self.computing else "waiting"
            return f"{doing} in Python's exit, after the script ended (garbage collection, " \
                   f"process-group teardown)"
        where = f" at {relative(self.at['file'])}:{self.at['line']}" if self.at else ""
        if self.computing:
            return f"computing{where}"
        if self.collective:
            return f"in {self.collective}{where}"
        return f"waiting{where}" if where else "waiting (where is not known)"


def parse_stack(text: str) -> list[list[dict[str, Any]]]:
    """The threads of a faulthandler dump, each as frames from the outermost to the innermost
    (the order of a traceback)."""
    threads: list[list[dict[str, Any]]] = []
    for line in text.splitlines():
        if _THREAD.match(line.strip()):
            threads.append([])
        elif threads and (frame := _FRAME.match(line)):
            file, number, function = frame.groups()
            threads[-1].insert(0, {"file": file, "line": int(number), "function": function})
    return [thread for thread in threads if thread]


def main_thread(threads: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The thread running the script: the one whose outermost frame is a module's top level."""
    return next((t for t in threads if t[0]["function"] == "<module>"), threads[0] if threads else [])


def collective_of(frames: list[dict[str, Any]]) -> str | None:
    """The torch.distributed call the script made that this stack is inside, if any."""
    for frame in frames:
        if any(part in frame["file"] for part in _DISTRIBUTED) and \
                frame["function"] not in _WRAPPERS:
            return frame["function"]
    return None


def rank_state(rank: int, ended: bool, cores_used: float | None, stack: str,
               script: str, exiting: bool = False) -> RankState:
    """A rank from what was read at the deadline: the cores it used lately, its stack dump."""
    frames = main_thread(parse_stack(stack))
    computing = None if cores_used is None else cores_used >= COMPUTING_CORES
    return RankState(rank, ended=ended, computing=computing, exiting=exiting,
                     collective=collective_of(frames), at=pick_frame(frames, script))


def read_stack(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def verdict(states: list[RankState], timeout: float, nproc: int, available: int) -> dict[str, Any]:
    """``{"verdict": "hang" | "too-slow" | "unknown", "text": ..., "ranks": [...]}``."""
    ranks = [{"rank": s.rank, "ended": s.ended, "computing": s.computing, "exiting": s.exiting,
              "collective": s.collective, "at": s.at} for s in states]
    live = [s for s in states if not s.ended]
    crowded = (f"; {nproc} workers share {available} CPU core{'s' if available > 1 else ''}"
               if nproc > available else "")
    if any(s.computing for s in live):
        computing = [s.rank for s in live if s.computing]
        text = (f"too slow, not a hang: {_ranks(computing)} still computing when the "
                f"{timeout:g}s ran out{crowded}; raise --timeout, or stop earlier with "
                f"--steps K. {_where(states)}")
        return {"verdict": "too-slow", "text": text, "ranks": ranks}
    if not live or any(s.computing is None for s in live):
        text = ("the run did not finish in time (a hang, or a run too slow for --timeout: "
                f"the CPU the ranks used is not known here){crowded}. {_where(states)}")
        return {"verdict": "unknown", "text": text.replace(". .", "."), "ranks": ranks}
    collectives = {s.collective for s in live if s.collective}
    idle = f"no rank used the CPU in the last {PROGRESS_WINDOW:g}s"
    if collectives and all(s.collective for s in live):
        if collectives <= _RENDEZVOUS:
            kind = "ranks waiting for a process group that never forms"
        elif len(collectives) > 1:
            kind = "ranks waiting in different collectives"
        else:
            kind = f"every running rank waiting in {collectives.pop()}"
        text = f"a hang: {kind} ({idle}). {_where(states)}"
    elif collectives:
        text = (f"a hang: {idle}, some waiting in collectives and the others elsewhere. "
                f"{_where(states)}")
    else:
        text = (f"a hang: {idle} and none was in a torch.distributed call (each waited on "
                f"something else: a sleep, a lock, a queue, a child process). {_where(states)}")
    return {"verdict": "hang", "text": text, "ranks": ranks}


def _where(states: list[RankState]) -> str:
    """Ranks grouped by what they were doing: `ranks 0-31 in all_reduce at train.py:40`."""
    groups: dict[str, list[int]] = {}
    for state in states:
        groups.setdefault(state.describe(), []).append(state.rank)
    return "; ".join(f"{_ranks(ranks)} {text}" for text, ranks in groups.items()).rstrip()


def _ranks(ranks: list[int]) -> str:
    """`rank 3`, `ranks 0, 2`, `ranks 0-31` (runs of consecutive ranks folded)."""
    spans: list[str] = []
    start = previous = None
    for rank in sorted(ranks):
        if previous is not None and rank == previous + 1:
            previous = rank
            continue
        if start is not None:
            spans.append(f"{start}-{previous}" if previous != start else str(start))
        start = previous = rank
    if start is not None:
        spans.append(f"{start}-{previous}" if previous != start else str(start))
    word = "rank" if len(ranks) == 1 else "ranks"
    return f"{word} {', '.join(spans)}"


# ------------------------------------------------------------------ at the deadline
def ask_stacks(watch: CpuWatch, scratch: Path, running: list[int]) -> list[Path]:
    """Ask each running worker for its stacks, a moment before the deadline so that a busy
    machine has time to schedule the dumps: faulthandler writes them from C, even while the
    main thread is blocked in a collective. The files asked for."""
    asked = []
    for rank in running:
        path = scratch / f"rank{rank}.stack"
        if path.exists():  # registered: before that, the signal would kill the worker
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(watch.groups[rank], STACK_SIGNAL)
                asked.append(path)
    return asked


def at_deadline(watch: CpuWatch, scratch: Path, running: list[int],
                asked: list[Path]) -> dict[str, Any]:
    """What the timeout's verdict needs, read before the workers are killed: the CPU each
    group used lately, and the stacks of the running workers (:func:`ask_stacks`)."""
    cores_used = watch.cores_used()
    give_up = time.monotonic() + STACK_WAIT
    while asked and time.monotonic() < give_up and not all(_dumped(p) for p in asked):
        time.sleep(0.02)
    return {"running": set(running),
            "cores": None if cores_used is None else
            {rank: cores_used.get(pid) for rank, pid in enumerate(watch.groups)},
            "stacks": {rank: read_stack(scratch / f"rank{rank}.stack") for rank in running},
            "exiting": {rank for rank in running if (scratch / f"rank{rank}.json").exists()}}


def _dumped(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def timeout_verdict(script: str, timeout: float, workers: list[Worker],
                    seen: dict[str, Any]) -> dict[str, Any]:
    """The verdict on a timed-out run, from what :func:`at_deadline` read."""
    running, cores_used = seen.get("running", set()), seen.get("cores")
    states = [rank_state(w.rank, w.rank not in running,
                         None if cores_used is None else cores_used.get(w.rank),
                         seen.get("stacks", {}).get(w.rank, ""), script,
                         exiting=w.rank in seen.get("exiting", set()))
              for w in workers]
    return verdict(states, timeout, len(workers), cores())
