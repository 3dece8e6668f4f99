"""The smoke run's worker processes: their CPU use while they run, their teardown within the
time allowed, and what a run killed before it could clean up left behind.

Each worker leads a process group of its own (the script's DataLoader workers and other
children join it), so a group is the unit that is watched and killed. On Linux the CPU a group
used comes from ``/proc``: a rank blocked in a collective or a sleep uses next to none, a rank
still computing (however slowly, sharing the cores with 63 others) keeps using some, which is
what tells a hang from a run too slow for its timeout. Elsewhere nothing is sampled and the
timeout is reported without that verdict.

A runner killed by SIGKILL runs no clean-up: its workers die with it (the bootstrap asks the
kernel for that, emulator/bootstrap/sitecustomize.py), but what they started and the run's
temporary folder stay behind. The folder holds an owner file (the runner's pid and start
time); the next smoke run finds folders whose owner is gone, kills the processes that still
carry that folder in their environment, and removes them (:func:`reap_stale_runs`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path

SCRATCH_PREFIX = "neuron-smoke-"
OWNER_FILE = "runner"
_PROC = Path("/proc")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# A rank blocked in gloo still wakes now and then (measured: about 0.005 of a core); one
# computing while sharing 2 cores with 63 others gets about 0.03. Between the two:
COMPUTING_CORES = 0.015
PROGRESS_WINDOW = 3.0  # seconds of CPU use looked back on when the time runs out


MAX_WORKERS = 256
"""The most workers a run launches. Each imports torch (a few hundred MB), so a number far past
any machine's memory (`--nproc 1000000`) would only exhaust it, launching until the timeout."""


def cores() -> int:
    """The cores this process may run on (a container's or taskset's share, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# ------------------------------------------------------------------ /proc, read cheaply
def _stat_fields(pid: str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (field 3, the state, first)."""
    try:
        text = (_PROC / pid / "stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def group_cpu(groups: Iterable[int]) -> dict[int, float] | None:
    """CPU seconds used so far by the live members of each process group; None without /proc."""
    wanted = set(groups)
    if not _PROC.is_dir():
        return None
    used = dict.fromkeys(wanted, 0.0)
    for entry in os.listdir(_PROC):
        if not entry.isdigit() or (fields := _stat_fields(entry)) is None:
            continue
        group = int(fields[2])
        if group in wanted:
            used[group] += (int(fields[11]) + int(fields[12])) / _TICKS
    return used


def live_groups(groups: Iterable[int]) -> set[int]:
    """The process groups that still have a member that is not a zombie (in a container whose
    init does not reap, a finished group would otherwise look alive forever)."""
    wanted = set(groups)
    if not _PROC.is_dir():
        alive = set()
        for group in wanted:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, 0)
                alive.add(group)
        return alive
    found: set[int] = set()
    for entry in os.listdir(_PROC):
        fields = _stat_fields(entry) if entry.isdigit() else None
        if fields is not None and int(fields[2]) in wanted and fields[0] != "Z":
            found.add(int(fields[2]))
    return found


class CpuWatch:
    """Samples the CPU each worker's group uses, about once a second, to say at the deadline
    which ranks were still computing."""

    def __init__(self, groups: list[int]) -> None:
        self.groups = groups
        self.samples: deque[tuple[float, dict[int, float]]] = deque()
        self.available = _PROC.is_dir()

    def sample(self, now: float) -> None:
        if not self.available or (self.samples and now - self.samples[-1][0] < 1.0):
            return
        used = group_cpu(self.groups)
        if used is None:
            self.available = False
            return
        self.samples.append((now, used))
        while len(self.samples) > 2 and now - self.samples[1][0] >= PROGRESS_WINDOW:
            self.samples.popleft()

    def cores_used(self) -> dict[int, float] | None:
        """Per group, the cores it used over the last window (None: too little was sampled)."""
        if len(self.samples) < 2:
            return None
        (first, before), (last, after) = self.samples[0], self.samples[-1]
        span = last - first
        if span < 0.9:
            return None
        return {g: max(0.0, after.get(g, 0.0) - before.get(g, 0.0)) / span for g in self.groups}


# ------------------------------------------------------------------ teardown
def signal_groups(processes: list[subprocess.Popen[bytes]], sig: int) -> None:
    for process in processes:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)


def kill_groups(processes: list[subprocess.Popen[bytes]], grace: float) -> None:
    """SIGTERM every worker's group at once, give them ``grace`` seconds together, then
    SIGKILL what is left and reap the workers: the whole teardown takes about ``grace`` plus
    a second however many workers there are (one after the other, it took seconds each)."""
    signal_groups(processes, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if all(p.poll() is not None for p in processes) and \
                not live_groups(p.pid for p in processes):
            break
        time.sleep(0.02)
    signal_groups(processes, signal.SIGKILL)
    reap_deadline = time.monotonic() + 1.0
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.01, reap_deadline - time.monotonic()))


# ------------------------------------------------------------------ a run's scratch folder
def _start_time(pid: int) -> str | None:
    fields = _stat_fields(str(pid))
    return None if fields is None else fields[19]


def make_scratch() -> Path:
    """The run's temporary folder, with the owner file that lets a later run tell whether
    the runner that made it is still alive."""
    scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
    (scratch / OWNER_FILE).write_text(f"{os.getpid()} {_start_time(os.getpid()) or ''}\n")
    return scratch


def _owner_alive(scratch: Path) -> bool:
    try:
        pid_text, _, started = (scratch / OWNER_FILE).read_text().strip().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return True  # not ours, or not written yet: leave it
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not started or _start_time(pid) == started  # the same pid, reused: not the owner


def reap_stale_runs(tmp: Path | None = None) -> list[Path]:
    """Kill what runs killed by SIGKILL left running (processes whose environment names
    their folder) and remove their folders; the folders removed."""
    root = Path(tmp or tempfile.gettempdir())
    stale = [p for p in root.glob(SCRATCH_PREFIX + "*") if p.is_dir() and not _owner_alive(p)]
    if stale and _PROC.is_dir():
        markers = [f"NEURON_EMU_REPORT={p}{os.sep}".encode() for p in stale]
        for entry in os.listdir(_PROC):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                environ = (_PROC / entry / "environ").read_bytes()
            except OSError:
                continue
            if any(marker in environ for marker in markers):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(entry), signal.SIGKILL)
    for folder in stale:
        shutil.rmtree(folder, ignore_errors=True)
    return stale
