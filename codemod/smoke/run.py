"""`neuron-migrate smoke`: run a migrated script on an emulated `neuron` device on this CPU.

The script runs unchanged, in a child process per worker, with the emulator package
(`emulator/`) installed at interpreter start-up through a sitecustomize folder on PYTHONPATH;
the user's code never imports neuron-migrate. The run shows that the script *runs on the
device API on CPU*: device placement, API and backend names, compile rules, distributed
wiring, checkpoints. It says nothing about which ops Trainium supports, its numerics, its
compiler or its speed: every op runs on the CPU.

Exit status: 0 when the script ran, 1 when it failed (or timed out; with --check-replicas,
when data parallelism was lost or the replicas diverged), 2 on usage errors and when the
emulator cannot be installed in the interpreter.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.text import Text

from neuron_migrate import emulator
from neuron_migrate.smoke.diagnosis import origin, parallelism_problems, problem_lines
from neuron_migrate.smoke.report import float64_warning, render_json, render_text
from neuron_migrate.emulator.diagnosis import diagnose, diagnose_text, pick_frame

# the folder whose sitecustomize.py installs the emulator in each worker
BOOTSTRAP = Path(emulator.__file__).resolve().parent / "bootstrap"
INSTALL_FAILED = 3  # emulator/bootstrap/sitecustomize.py exits with this when it cannot install
GRACE_SECONDS = 5.0  # how long the other workers may take to fail on their own, as torchrun waits
FORMATS = ("text", "json")


@dataclass(frozen=True)
class SmokeOptions:
    script: Path
    script_args: tuple[str, ...] = ()
    nproc: int | None = None  # None: a plain `python SCRIPT`; N: N workers, as torchrun
    steps: int | None = None
    check_replicas: bool = False
    timeout: float = 300.0
    python: str = sys.executable
    logs: Path | None = None
    max_recompiles: int | None = None


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

    @property
    def error(self) -> dict[str, Any] | None:
        if self.outcome and self.outcome.get("error"):
            return self.outcome["error"]
        if self.returncode not in (0, None) and not self.killed:
            return _error_from_stderr(self.stderr_tail, self.script)
        return None


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
    workers: list[Worker] = field(default_factory=list)

    def exit_code(self) -> int:
        if self.install_failed is not None:
            return 2
        return 0 if self.passed else 1


_HANDED_OUT: set[int] = set()
_HANDING_OUT = threading.Lock()


def free_ports(count: int) -> tuple[int, ...]:
    """Ports nothing listens on, none handed out before by this process: smoke runs started
    together (as the tests do) would otherwise be given the same port now and then, since a
    port is free again once the probing socket closes."""
    with _HANDING_OUT, contextlib.ExitStack() as stack:
        ports: list[int] = []
        while len(ports) < count:
            probe = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
            if port not in _HANDED_OUT:
                ports.append(port)
                _HANDED_OUT.add(port)
        return tuple(ports)


def free_port() -> int:
    return free_ports(1)[0]


def worker_environment(options: SmokeOptions, rank: int, report: Path,
                       ports: tuple[int, ...]) -> dict[str, str]:
    """The worker's environment: the bootstrap on PYTHONPATH, the session's settings, and
    for --nproc the variables torchrun sets (single node, loopback rendezvous)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BOOTSTRAP), env.get("PYTHONPATH")]))
    env.update(NEURON_EMU="1", NEURON_EMU_REPORT=str(report),
               NEURON_EMU_SCRIPT=str(options.script.resolve()), PYTHONUNBUFFERED="1")
    env.pop("NEURON_EMU_REPORT_OWNER", None)
    if options.steps:
        env["NEURON_EMU_STEPS"] = str(options.steps)
    if options.max_recompiles is not None:
        env["NEURON_EMU_MAX_RECOMPILES"] = str(options.max_recompiles)
    if options.nproc is not None:
        world = str(options.nproc)
        env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=world,
                   LOCAL_WORLD_SIZE=world, GROUP_RANK="0", ROLE_RANK=str(rank),
                   ROLE_WORLD_SIZE=world, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(ports[0]))
    if options.check_replicas:
        env["NEURON_EMU_CHECK_PORT"] = str(ports[1])
    return env


def run_smoke(options: SmokeOptions) -> SmokeResult:
    """Launch the workers, wait (bounded by the timeout), collect and summarise."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="neuron-smoke-") as scratch:
        logs = options.logs or Path(scratch)
        logs.mkdir(parents=True, exist_ok=True)
        ports = free_ports(2)
        workers, processes = [], []
        for rank in range(options.nproc or 1):
            report = Path(scratch) / f"rank{rank}.json"
            with open(logs / f"rank{rank}.out", "wb") as out, open(logs / f"rank{rank}.err", "wb") as err:
                processes.append(subprocess.Popen(
                    [options.python, _as_path(options.script), *options.script_args],
                    env=worker_environment(options, rank, report, ports), stdout=out,
                    stderr=err, stdin=subprocess.DEVNULL, start_new_session=True))
            workers.append(Worker(rank, str(options.script)))
        try:
            timed_out = _wait(processes, workers, started + options.timeout)
        finally:  # also on Ctrl-C: the workers are in sessions of their own and would live on
            for process in processes:
                _kill_group(process)
        for worker in workers:
            worker.stderr_tail = _tail(logs / f"rank{worker.rank}.err")
            report = Path(scratch) / f"rank{worker.rank}.json"
            if report.exists():
                worker.outcome = json.loads(report.read_text(encoding="utf-8"))
    return summarise(options, workers, timed_out, time.monotonic() - started)


def _wait(processes: list[subprocess.Popen[bytes]], workers: list[Worker], deadline: float) -> bool:
    """Poll until every worker ends. After the first failure the others get GRACE_SECONDS,
    then are killed (a rank blocked in a collective would otherwise hang until the deadline).
    Returns True when the deadline passed."""
    first_failure: float | None = None
    while True:
        now = time.monotonic()
        for process, worker in zip(processes, workers):
            if worker.returncode is None and process.poll() is not None:
                worker.returncode, worker.ended_at = process.returncode, now
                if process.returncode != 0 and first_failure is None:
                    first_failure = now
        running = [(p, w) for p, w in zip(processes, workers) if w.returncode is None]
        if not running:
            return False
        late = first_failure is not None and now - first_failure > GRACE_SECONDS
        if now > deadline or late:
            for process, worker in running:
                _kill_group(process)
                worker.returncode, worker.ended_at, worker.killed = process.returncode, now, True
            return now > deadline
        time.sleep(0.05)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the worker's process group (its DataLoader workers and any other children),
    then SIGKILL; for a worker that already ended, what it left behind."""
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(path: Path, lines: int = 40) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in (.+))?$', re.MULTILINE)


def _as_path(script: Path) -> str:
    """The script as Python must read it: a name such as `-c` or `-m` would be an option."""
    text = str(script)
    return text if not text.startswith("-") else os.path.join(os.curdir, text)


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
    install = [w for w in workers if w.returncode == INSTALL_FAILED and "could not install" in w.stderr_tail]
    if install:
        result.install_failed = install[0].stderr_tail.splitlines()[-1]
        return result
    failed = sorted((w for w in workers if w.returncode != 0 and not w.killed),
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


def _with_origin(error: dict[str, Any] | None) -> dict[str, Any] | None:
    """The error, with the rule that wrote the code it was raised in, when the tool wrote it."""
    return None if error is None else dict(error, origin=origin(error))


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


# ---------------------------------------------------------------------------- command
def smoke(
    script: Annotated[Path, typer.Argument(help="The migrated training script to run.",
                                           show_default=False, metavar="SCRIPT")],
    script_args: Annotated[Optional[list[str]], typer.Argument(
        help="Arguments for the script, after `--` (e.g. `smoke train.py -- --epochs 1`).",
        show_default=False, metavar="SCRIPT_ARGS")] = None,
    nproc: Annotated[Optional[int], typer.Option(
        "--nproc", min=1, metavar="N",
        help="Launch N workers the way torchrun does (RANK, LOCAL_RANK, "
        "WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free MASTER_PORT).")] = None,
    steps: Annotated[Optional[int], typer.Option(
        "--steps", min=1, metavar="K",
        help="Stop the run cleanly after K optimizer steps.")] = None,
    check_replicas: Annotated[bool, typer.Option(
        "--check-replicas", help="Fail when data parallelism is lost: a worker steps its "
        "optimizer without a process group, or without averaging its gradients since its "
        "previous step (no DDP, all_reduce or reduce_scatter), or no worker ever creates a "
        "process group (without this option these are warnings); and compare parameter "
        "checksums across the replicas after every step, failing when they diverge. Catches "
        "xm.optimizer_step turned into a bare optimizer.step() without DDP. Needs --nproc 2 "
        "or more. Both checks assume data parallelism: they are wrong for tensor or pipeline "
        "parallelism, and the checksums for FSDP.")] = False,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=1, metavar="S",
        help="Kill the run (every worker's process group) after S seconds.")] = 300.0,
    max_recompiles: Annotated[Optional[int], typer.Option(
        "--max-recompiles", min=0, metavar="N",
        help="Fail the run when a function compiled with backend=\"neuron\" compiles more "
        "than N graphs after its first call (TorchNeuron compiles a graph per input shape: "
        "each new shape is a recompile of minutes on Trainium). Dynamo stops recompiling a "
        "function at its recompile limit (8 graphs by default) and runs further shapes "
        "uncompiled, which the report shows as fewer graphs than shapes.")] = None,
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT",
                                     help="Report format: text or json.")] = "text",
    python: Annotated[Optional[str], typer.Option(
        "--python", metavar="PYTHON",
        help="The interpreter to run the script with (it needs torch 2.13 or "
        "2.14); default: the one running neuron-migrate.")] = None,
    logs: Annotated[Optional[Path], typer.Option(
        "--logs", metavar="DIR", help="Keep each worker's stdout and stderr in this folder "
        "(rankN.out, rankN.err).")] = None,
) -> None:
    """Run a migrated script on an emulated `neuron` device on this CPU, unchanged.

    Runs on the device API on CPU: it checks device placement, API and backend names, compile
    rules, distributed wiring and checkpoints. It says nothing about which ops Trainium
    supports, its numerics, its compiler or its speed. The report gives the first error, its
    likely migration cause and, when it was raised in code neuron-migrate wrote (a `_neuron_*`
    helper, a compiled training step), the rule that wrote it; a warning when data parallelism
    was lost (a worker stepped without a process group or without averaging its gradients);
    the optimizer steps run, the graphs each compiled function compiled for how many input
    shapes, float64 tensors made on the device (float64 executes as float32 on TorchNeuron)
    and the aten ops executed with their counts (to compare with AWS's operator support
    table). Sparse and nested tensors on the device fail the run, as on TorchNeuron.

    Exit status: 0 when the script ran, 1 when it failed, 2 on usage errors or when the
    emulator cannot be installed in the interpreter.
    """
    options = _options(script, script_args, nproc, steps, check_replicas, timeout, fmt, python, logs,
                       max_recompiles)
    result = run_smoke(options)
    if fmt == "json":
        sys.stdout.write(render_json(result) + "\n")
    else:
        console = Console(highlight=False, soft_wrap=True)
        styles = {"heading": "bold green", "error": "bold red", "warning": "bold yellow",
                  "dim": "dim", "plain": ""}
        for line, style in render_text(result):
            console.print(Text(line, style=styles[style]))
    raise typer.Exit(result.exit_code())


def _options(script: Path, script_args: list[str] | None, nproc: int | None, steps: int | None,
             check_replicas: bool, timeout: float, fmt: str, python: str | None,
             logs: Path | None, max_recompiles: int | None = None) -> SmokeOptions:
    """Validate what click cannot; every problem here is a usage error (exit 2)."""
    if fmt not in FORMATS:
        raise typer.BadParameter(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}",
                                 param_hint="--format")
    if not script.is_file():
        raise typer.BadParameter(f"no such file: {script}", param_hint="SCRIPT")
    if check_replicas and (nproc or 1) < 2:
        raise typer.BadParameter("needs data-parallel replicas: add --nproc 2 (or more)",
                                 param_hint="--check-replicas")
    interpreter = python or sys.executable
    if shutil.which(interpreter) is None:
        raise typer.BadParameter(f"no such interpreter: {interpreter}", param_hint="--python")
    return SmokeOptions(script=script, script_args=tuple(script_args or ()), nproc=nproc,
                        steps=steps, check_replicas=check_replicas, timeout=timeout,
                        python=interpreter, logs=logs, max_recompiles=max_recompiles)
