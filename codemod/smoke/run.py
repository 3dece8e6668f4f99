"""`neuron-migrate smoke`: run a migrated script on an emulated `neuron` device on this CPU.

The script runs unchanged, in a child process per worker, with the emulator package
(`emulator/`) installed at interpreter start-up through a sitecustomize folder on PYTHONPATH;
the user's code never imports neuron-migrate. The run shows that the script *runs on the
device API on CPU*: device placement, API and backend names, compile rules, distributed
wiring, checkpoints. It says nothing about which ops Trainium supports, its numerics, its
compiler or its speed: every op runs on the CPU.

With two or more `--layout NPROC[:EXTRA ARGS]`, the script runs once per layout and the loss
of every optimizer step is compared across them (smoke/layouts.py).

Exit status: 0 when the script ran, 1 when it failed (or timed out; with --check-replicas,
when data parallelism was lost or the replicas diverged; with layouts, when their losses
differ), 2 on usage errors and when the emulator cannot be installed in the interpreter.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.text import Text

from neuron_migrate import emulator
from neuron_migrate.printable import printable
from neuron_migrate.smoke.formats import SMOKE_FORMATS, SmokeOutcome, styled_lines
from neuron_migrate.smoke.layouts import DEFAULT_RTOL, LayoutSpec, compare_layouts, parse_layout
from neuron_migrate.smoke.processes import (MAX_WORKERS, CpuWatch, kill_groups, make_scratch,
                                             reap_stale_runs)
from neuron_migrate.smoke.summary import (  # noqa: F401 - Worker, _error_from_stderr: the API
    SmokeResult, Worker, _error_from_stderr, crowding_warning, read_outcome, summarise)
from neuron_migrate.smoke.timeouts import (STACK_LEAD, STACK_SIGNAL, ask_stacks, at_deadline,
                                           timeout_verdict)

# the folder whose sitecustomize.py installs the emulator in each worker
BOOTSTRAP = Path(emulator.__file__).resolve().parent / "bootstrap"
GRACE_SECONDS = 5.0  # how long the other workers may take to fail on their own, as torchrun waits
TEARDOWN_GRACE = 0.5  # between SIGTERM and SIGKILL of the workers' groups, all at once
_TERMINATIONS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


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
    # more variables for the workers, set before smoke's own (verify adds its recorder's folder
    # to PYTHONPATH, after the emulator's)
    environment: tuple[tuple[str, str], ...] = ()


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
    env.update(options.environment)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BOOTSTRAP), env.get("PYTHONPATH")]))
    env.update(NEURON_EMU="1", NEURON_EMU_REPORT=str(report),
               NEURON_EMU_SCRIPT=str(options.script.resolve()), PYTHONUNBUFFERED="1")
    env.pop("NEURON_EMU_REPORT_OWNER", None)
    env.pop("NEURON_EMU_WORKER", None)
    # the bootstrap makes the worker die with this process, and dump its stacks on a signal
    env.update(NEURON_EMU_RUNNER_PID=str(os.getpid()), NEURON_EMU_STACKS=str(report.with_suffix(".stack")),
               NEURON_EMU_STACK_SIGNAL=str(int(STACK_SIGNAL)))
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
    """Launch the workers, wait (bounded by the timeout: the whole run, teardown included,
    ends within about a second or two of it), collect and summarise. SIGTERM and SIGHUP of
    this process end the workers and remove the temporary folder as Ctrl-C does."""
    started = time.monotonic()
    reap_stale_runs()
    scratch = make_scratch()
    try:
        with _terminations_raise():
            return _run_in(options, scratch, started)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_in(options: SmokeOptions, scratch: Path, started: float) -> SmokeResult:
    logs = options.logs or scratch
    logs.mkdir(parents=True, exist_ok=True)
    ports = free_ports(2)
    workers: list[Worker] = []
    processes: list[subprocess.Popen[bytes]] = []
    seen: dict[str, Any] = {}
    try:  # also on Ctrl-C or SIGTERM: the workers are in sessions of their own and would live on
        for rank in range(options.nproc or 1):
            if time.monotonic() > started + options.timeout:
                break  # launching alone took the whole timeout: the run is too slow
            with open(logs / f"rank{rank}.out", "wb") as out, \
                    open(logs / f"rank{rank}.err", "wb") as err:
                processes.append(subprocess.Popen(
                    [options.python, _as_path(options.script), *options.script_args],
                    env=worker_environment(options, rank, scratch / f"rank{rank}.json", ports),
                    stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True))
            workers.append(Worker(rank, str(options.script)))
        watch = CpuWatch([p.pid for p in processes])
        timed_out = _wait(processes, workers, started + options.timeout, watch,
                          lambda running: seen.update(at_deadline(watch, scratch, running,
                                                                  seen.get("asked", []))),
                          lambda running: seen.update(asked=ask_stacks(watch, scratch, running)))
    finally:
        kill_groups(processes, grace=TEARDOWN_GRACE)
    for worker in workers:
        worker.stderr_tail = _tail(logs / f"rank{worker.rank}.err")
        worker.stdout_tail = _tail(logs / f"rank{worker.rank}.out", 10)
        worker.outcome, worker.report_problem = read_outcome(scratch / f"rank{worker.rank}.json",
                                                             worker.rank)
    result = summarise(options, workers, timed_out, time.monotonic() - started)
    if timed_out:
        result.timeout = timeout_verdict(str(options.script), options.timeout, workers, seen)
    return result


def _wait(processes: list[subprocess.Popen[bytes]], workers: list[Worker], deadline: float,
          watch: CpuWatch | None = None,
          before_kill: Callable[[list[int]], None] | None = None,
          near_deadline: Callable[[list[int]], None] | None = None) -> bool:
    """Poll until every worker ends. After the first failure the others get GRACE_SECONDS,
    then are killed (a rank blocked in a collective would otherwise hang until the deadline).
    STACK_LEAD seconds before the deadline ``near_deadline``, at the deadline ``before_kill``,
    see the ranks still running. Returns True when the deadline passed."""
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
        if watch is not None:
            watch.sample(now)
        if near_deadline is not None and now > deadline - STACK_LEAD:
            near_deadline([w.rank for _, w in running])
            near_deadline = None
        late = first_failure is not None and now - first_failure > GRACE_SECONDS
        if now > deadline or late:
            if now > deadline and before_kill is not None:
                before_kill([w.rank for _, w in running])
            kill_groups([p for p, _ in running],
                        grace=TEARDOWN_GRACE if now > deadline else
                        min(2.0, max(TEARDOWN_GRACE, deadline - now)))
            for process, worker in running:
                worker.returncode, worker.ended_at, worker.killed = process.returncode, now, True
            return now > deadline
        time.sleep(0.05)


@contextlib.contextmanager
def _terminations_raise() -> Iterator[None]:
    """SIGTERM and SIGHUP raise SystemExit (status 128 + the signal) while the run lasts, so
    that its clean-up runs as it does for Ctrl-C. Only the main thread may set handlers; a run
    in another thread leaves them to whoever owns the process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, _frame: object) -> None:
        for sig in _TERMINATIONS:  # once: a second signal must not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, terminate) for sig in _TERMINATIONS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _tail(path: Path, lines: int = 40) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def _as_path(script: Path) -> str:
    """The script as Python must read it: a name such as `-c` or `-m` would be an option."""
    text = str(script)
    return text if not text.startswith("-") else os.path.join(os.curdir, text)


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
        "WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free MASTER_PORT). More "
        "workers than CPU cores run, slower, with a warning: N is not capped at the cores, "
        f"since the world size is the script's to choose (at most {MAX_WORKERS}).")] = None,
    steps: Annotated[Optional[int], typer.Option(
        "--steps", min=1, metavar="K",
        help="Stop the run cleanly after K optimizer steps.")] = None,
    check_replicas: Annotated[bool, typer.Option(
        "--check-replicas", help="Fail when data parallelism is lost: a worker steps its "
        "optimizer without a process group, or without averaging its gradients since its "
        "previous step (no DDP, all_reduce or reduce_scatter), or no worker ever creates a "
        "process group (without this option these are warnings); and compare parameter "
        "checksums across the replicas before each optimizer's first step (replicas that "
        "start apart, with no common seed and nothing broadcast, are reported as that: the "
        "original did the same) and after every step, failing when they diverge. Catches "
        "xm.optimizer_step turned into a bare optimizer.step() without DDP. Needs --nproc 2 "
        "or more. With a DeviceMesh, both follow its layout: gradients must be averaged over "
        "the data-parallel dimensions (named dp, data_parallel, dp_replicate or dp_shard; "
        "any other name, or a mesh given to parallelize_module, is model parallel) and only "
        "ranks holding the same shards are compared; a tensor-parallel run with no "
        "data-parallel dimension is not checked for averaging, and one with no replicas "
        "compares no checksums (the report says so). Without a mesh every rank counts as a "
        "data-parallel replica, which is wrong for FSDP's checksums.")] = False,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=1, metavar="S",
        help="Kill the run (every worker's process group) after S seconds; it ends within "
        "a second or two of S. The report says whether it hung (every rank waiting: in "
        "which collectives, at which lines) or was too slow (ranks still computing).")] = 300.0,
    max_recompiles: Annotated[Optional[int], typer.Option(
        "--max-recompiles", min=0, metavar="N",
        help="Fail the run when a function compiled with backend=\"neuron\" compiles more "
        "than N graphs after its first call (TorchNeuron compiles a graph per input shape: "
        "each new shape is a recompile of minutes on Trainium). Dynamo stops recompiling a "
        "function at its recompile limit (8 graphs by default) and runs further shapes "
        "uncompiled, which the report shows as fewer graphs than shapes.")] = None,
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT",
                                     help=SMOKE_FORMATS.help())] = "text",
    python: Annotated[Optional[str], typer.Option(
        "--python", metavar="PYTHON",
        help="The interpreter to run the script with (it needs torch 2.13 or "
        "2.14); default: the one running neuron-migrate.")] = None,
    logs: Annotated[Optional[Path], typer.Option(
        "--logs", metavar="DIR", help="Keep each worker's stdout and stderr in this folder "
        "(rankN.out, rankN.err; with layouts, in layoutN/ per layout).")] = None,
    layouts: Annotated[Optional[list[str]], typer.Option(
        "--layout", metavar="NPROC[:ARGS]",
        help="Run the script at this layout: NPROC workers (as --nproc), ARGS (split as a "
        "shell does) added after the SCRIPT_ARGS, e.g. --layout 1 --layout \"2:--tp 2\". "
        "Give two or more: each runs in turn and the loss of every optimizer step (the "
        "one-element tensor backward() was called on, summed over the backward calls of a "
        "step, averaged over the workers) is compared with the first layout's; the run "
        "fails at the first step that differs by more than --rtol. Proves that a data- or "
        "tensor-parallel layout trains as one process does.")] = None,
    rtol: Annotated[Optional[float], typer.Option(
        "--rtol", min=0, metavar="R",
        help=f"With layouts: the relative difference two losses may have at a step "
        f"(default {DEFAULT_RTOL:g}).")] = None,
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

    With two or more --layout, runs the script at each and compares the loss of every
    optimizer step, naming the first step at which a layout differs from the first.

    Exit status: 0 when the script ran (and the layouts agree), 1 when it failed (or they
    differ), 2 on usage errors or when the emulator cannot be installed in the interpreter.
    """
    specs = _layouts(layouts, nproc, check_replicas, rtol)
    # with layouts, --check-replicas applies to those of several workers (checked above)
    options = _options(script, script_args, nproc, steps, check_replicas and not specs, timeout,
                       fmt, python, logs, max_recompiles)
    if specs:
        options = dataclasses.replace(options, check_replicas=check_replicas)
        comparison = compare_layouts(options, specs, DEFAULT_RTOL if rtol is None else rtol,
                                     run_smoke)
        _print(fmt, comparison)
        raise typer.Exit(comparison.exit_code())
    if options.nproc and (crowded := crowding_warning(options.nproc)):
        typer.echo(f"neuron-migrate smoke: warning: {crowded}", err=True)
    result = run_smoke(options)
    _print(fmt, result)
    raise typer.Exit(result.exit_code())


def _print(fmt: str, outcome: SmokeOutcome) -> None:
    renderer = SMOKE_FORMATS.choose(fmt)
    if not renderer.styled:
        sys.stdout.write(renderer.render(outcome) + "\n")
        return
    print_styled(styled_lines(outcome))


def print_styled(lines: list[tuple[str, str]]) -> None:
    """Each line through rich (styled on a terminal), with its control characters shown as
    escapes: the script's own output is among them."""
    console = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
    styles = {"heading": "bold green", "error": "bold red", "warning": "bold yellow",
              "dim": "dim", "plain": ""}
    for line, style in lines:
        console.print(Text(printable(line), style=styles[style]))


def _layouts(texts: list[str] | None, nproc: int | None, check_replicas: bool,
             rtol: float | None) -> list[LayoutSpec]:
    """The layouts to compare, or none; usage errors (exit 2) for what cannot be compared."""
    if not texts:
        if rtol is not None:
            raise typer.BadParameter("compares layouts: give two or more --layout",
                                     param_hint="--rtol")
        return []
    if nproc is not None:
        raise typer.BadParameter("each --layout gives its own number of workers: drop --nproc",
                                 param_hint="--nproc")
    if len(texts) < 2:
        raise typer.BadParameter("give two or more layouts to compare (for one, use --nproc "
                                 "and put its arguments after --)", param_hint="--layout")
    try:
        specs = [parse_layout(text) for text in texts]
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--layout") from None
    if check_replicas and all(spec.nproc < 2 for spec in specs):
        raise typer.BadParameter("needs data-parallel replicas: a layout of 2 workers or more",
                                 param_hint="--check-replicas")
    return specs


def _options(script: Path, script_args: list[str] | None, nproc: int | None, steps: int | None,
             check_replicas: bool, timeout: float, fmt: str, python: str | None,
             logs: Path | None, max_recompiles: int | None = None) -> SmokeOptions:
    """Validate what click cannot; every problem here is a usage error (exit 2)."""
    if (problem := SMOKE_FORMATS.problem(fmt)) is not None:
        raise typer.BadParameter(problem, param_hint="--format")
    if not script.is_file():
        raise typer.BadParameter(f"no such file: {script}", param_hint="SCRIPT")
    if nproc is not None and nproc > MAX_WORKERS:
        raise typer.BadParameter(f"at most {MAX_WORKERS} workers: each imports torch, and "
                                 f"{nproc} would exhaust the machine's memory",
                                 param_hint="--nproc")
    if check_replicas and (nproc or 1) < 2:
        raise typer.BadParameter("needs data-parallel replicas: add --nproc 2 (or more)",
                                 param_hint="--check-replicas")
    interpreter = python or sys.executable
    if shutil.which(interpreter) is None:
        raise typer.BadParameter(f"no such interpreter: {interpreter}", param_hint="--python")
    return SmokeOptions(script=script, script_args=tuple(script_args or ()), nproc=nproc,
                        steps=steps, check_replicas=check_replicas, timeout=timeout,
                        python=interpreter, logs=logs, max_recompiles=max_recompiles)
