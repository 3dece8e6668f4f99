"""Running both sides of a verify: the original under torch_xla on the CPU, the migrated
script under the emulated neuron device (exactly as `smoke` runs it), and the migrated script
again with its parameters perturbed by a tiny amount, which measures how far float32 rounding
alone moves two runs apart (the noise the comparison allows after the first step).

Each process records its steps into a folder (recorder/record.py); a run is the records of
its ranks plus, for one that failed, the error read from its stderr.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuron_migrate.smoke.run import SmokeOptions, free_ports, run_smoke
from neuron_migrate.smoke.summary import _error_from_stderr

RECORDER = Path(__file__).resolve().parent / "recorder"
PERTURBATION = 1e-7  # relative, about float32's rounding


@dataclass(frozen=True)
class Plan:
    original: Path
    migrated: Path
    script_args: tuple[str, ...] = ()
    nproc: int = 1
    steps: int = 5
    timeout: float = 600.0
    keep_dropout: bool = False
    match_numerics: bool = False
    logs: Path | None = None


@dataclass
class Run:
    """One side: per rank its record (None when the rank wrote none), and what went wrong."""

    label: str
    records: list[dict[str, Any] | None] = field(default_factory=list)
    error: str | None = None  # the first error, in one line with its place
    install_failed: str | None = None  # the environment, not the script
    seconds: float = 0.0


def recorder_environment(plan: Plan, side: str, folder: Path, perturb: float = 0.0) -> dict[str, str]:
    env = {"NEURON_VERIFY_RECORD": str(folder), "NEURON_VERIFY_SIDE": side,
           "NEURON_VERIFY_STEPS": str(plan.steps)}
    if perturb:
        env["NEURON_VERIFY_PERTURB"] = repr(perturb)
    if plan.keep_dropout:
        env["NEURON_VERIFY_KEEP_DROPOUT"] = "1"
    if plan.match_numerics:
        env["NEURON_VERIFY_MATCH_NUMERICS"] = "1"
    return env


def _read_records(folder: Path, nproc: int) -> list[dict[str, Any] | None]:
    records: list[dict[str, Any] | None] = []
    for rank in range(nproc):
        path = folder / f"rank{rank}.json"
        records.append(json.loads(path.read_text(encoding="utf-8")) if path.exists() else None)
    return records


# ------------------------------------------------------------------------- the migrated side
def run_migrated(plan: Plan, perturb: float = 0.0, python: str | None = None) -> Run:
    """A smoke run with the recorder on PYTHONPATH after the emulator's bootstrap; the
    emulator draws device randomness from the CPU generator, as the original side does."""
    label = "migrated (perturbed)" if perturb else "migrated"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="neuron-verify-") as scratch:
        env = recorder_environment(plan, "migrated", Path(scratch), perturb)
        env["NEURON_EMU_CPU_RNG"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(RECORDER),
                                                          os.environ.get("PYTHONPATH")]))
        logs = None if plan.logs is None else plan.logs / ("perturbed" if perturb else "migrated")
        options = SmokeOptions(script=plan.migrated, script_args=plan.script_args,
                               nproc=plan.nproc, steps=plan.steps, timeout=plan.timeout,
                               logs=logs, environment=tuple(env.items()),
                               **({"python": python} if python else {}))
        result = run_smoke(options)
        run = Run(label, _read_records(Path(scratch), plan.nproc),
                  seconds=round(time.monotonic() - started, 2))
    run.install_failed = result.install_failed
    if result.error and not result.passed:
        run.error = _one_line(result.error)
    elif result.timed_out:
        run.error = f"timed out after {plan.timeout:g}s"
    return run


# ------------------------------------------------------------------------- the original side
def run_original(plan: Plan, python: str) -> Run:
    """One process per replica under the reference interpreter, with torchrun's variables
    (the recorder makes xmp.spawn run the replica in place and bridges XLA's collectives)."""
    started = time.monotonic()
    run = Run("original")
    with tempfile.TemporaryDirectory(prefix="neuron-verify-") as scratch:
        folder = Path(scratch)
        logs = plan.logs / "original" if plan.logs else folder
        logs.mkdir(parents=True, exist_ok=True)
        master, bridge = free_ports(2)
        processes = []
        for rank in range(plan.nproc):
            env = dict(os.environ)
            env.update(recorder_environment(plan, "original", folder))
            env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(RECORDER), env.get("PYTHONPATH")])),
                       PJRT_DEVICE="CPU", RANK=str(rank), LOCAL_RANK=str(rank),
                       WORLD_SIZE=str(plan.nproc), LOCAL_WORLD_SIZE=str(plan.nproc),
                       GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master),
                       NEURON_VERIFY_BRIDGE_PORT=str(bridge), PYTHONUNBUFFERED="1",
                       TF_CPP_MIN_LOG_LEVEL="3", XLA_ENABLE_PARAM_ALIASING="0")
            with open(logs / f"rank{rank}.out", "wb") as out, \
                    open(logs / f"rank{rank}.err", "wb") as err:
                processes.append(subprocess.Popen(
                    [python, str(plan.original), *plan.script_args], env=env, stdout=out,
                    stderr=err, stdin=subprocess.DEVNULL, start_new_session=True))
        failed, timed_out = _wait(processes, started + plan.timeout)
        run.records = _read_records(folder, plan.nproc)
        if timed_out:
            run.error = f"timed out after {plan.timeout:g}s"
        elif failed is not None:
            tail = _tail(logs / f"rank{failed}.err")
            found = _error_from_stderr(tail, str(plan.original))
            run.error = f"rank {failed}: " + (_one_line(found) if found else _exception_line(tail))
    run.seconds = round(time.monotonic() - started, 2)
    return run


def _wait(processes: list[subprocess.Popen[bytes]], deadline: float) -> tuple[int | None, bool]:
    """Until every process ends; the others are ended a few seconds after one fails (a rank
    blocked in a collective would wait forever). (first failing rank, timed out)."""
    failed_at: float | None = None
    failed: int | None = None
    try:
        while True:
            for rank, process in enumerate(processes):
                if process.poll() not in (None, 0) and failed is None:
                    failed, failed_at = rank, time.monotonic()
            if all(p.poll() is not None for p in processes):
                return failed, False
            now = time.monotonic()
            if now > deadline:
                return failed, True
            if failed_at is not None and now - failed_at > 5:
                return failed, False
            time.sleep(0.05)
    finally:
        for process in processes:
            _kill_group(process)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=2)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(path: Path, lines: int = 60) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*")


def _exception_line(tail: str) -> str:
    """The last line that names an exception (its message may go on over lines that show
    tensors or overloads), else the last line."""
    lines = [line for line in tail.splitlines() if line.strip()]
    named = [line for line in lines if _EXCEPTION.match(line)]
    return (named or lines or ["exited with no error line"])[-1].strip()


def _one_line(error: dict[str, Any]) -> str:
    where = error.get("location") or {}
    place = f" ({where.get('file')}:{where.get('line')})" if where.get("file") else ""
    return f"{error.get('type', 'error')}: {error.get('message', '')}".strip() + place
