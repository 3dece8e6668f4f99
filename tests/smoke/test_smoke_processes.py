"""The smoke runner's worker processes: teardown within the timeout, a hang told from a slow
run, workers dying with the runner however it dies, unreadable worker reports.

The workers here run plain-Python scripts on an interpreter wrapper that turns the emulator
off (NEURON_EMU=0): the bootstrap still makes each worker die with the runner and dump its
stacks on request, but no torch is imported, so a worker starts in a fraction of a second.
Every wait is for a condition, with a generous deadline.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from neuron_migrate.smoke.processes import CpuWatch, kill_groups, reap_stale_runs
from neuron_migrate.smoke.report import render_text
from neuron_migrate.smoke.run import SmokeOptions, run_smoke
from neuron_migrate.smoke.summary import SmokeResult, Worker, crowding_warning, read_outcome, summarise
from neuron_migrate.smoke.timeouts import (RankState, collective_of, main_thread, parse_stack,
                                           rank_state, verdict)
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="process groups and /proc as Linux has them")


def _wait_for(condition: Callable[[], bool], seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for a container's init to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _text(result: SmokeResult) -> str:
    return "\n".join(line for line, _ in render_text(result))


# ------------------------------------------------------------------ scripts the workers run
# Starts a child in the worker's process group, writes "worker-pid child-pid" to argv[1]
# (argv[1].rankN with several workers), then waits; with "ignore-term", it ignores SIGTERM.
WAITER = """\
import os, signal, subprocess, sys, time
if "ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen(["sleep", "300"])
out = sys.argv[1] + (".rank" + os.environ["RANK"] if "RANK" in os.environ else "")
with open(out + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
os.replace(out + ".tmp", out)
while True:
    time.sleep(1)
"""
SPINNER = "while True:\n    pass\n"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_workers_that_ignore_sigterm_are_killed_together_within_a_second_or_so() -> None:
    workers = [subprocess.Popen(["sh", "-c", 'trap "" TERM; sleep 300 & wait'],
                                start_new_session=True) for _ in range(8)]
    assert _wait_for(lambda: all(_children(w.pid) for w in workers))
    children = [pid for w in workers for pid in _children(w.pid)]
    started = time.monotonic()
    kill_groups(workers, grace=0.5)
    # half a second's grace, then SIGKILL: well under the bound even on a busy machine,
    # while waiting on each worker in turn, or for ever, is not
    assert time.monotonic() - started < 8
    assert all(w.poll() is not None for w in workers)
    assert _wait_for(lambda: not any(map(_alive, children)), 10)


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.slow
def test_timeout_kills_the_process_group(tmp_path: Path, plain_python: str) -> None:
    """Eight workers that ignore SIGTERM, each with a child in its group: at the timeout all
    die, and the run ends within seconds of it (killed one after another, they took 2 s each
    past it). The timeout must leave the workers time to start their children, which a busy
    machine slows: it doubles until they all did, rather than guessing one."""
    script = _write(tmp_path, "waiter.py", WAITER)
    for timeout in (3, 6, 12, 24, 48):
        started = time.monotonic()
        result = run_smoke(SmokeOptions(script=script, nproc=8, timeout=timeout, python=plain_python,
                                        script_args=(str(tmp_path / f"pids{timeout}"), "ignore-term")))
        elapsed = time.monotonic() - started
        assert result.timed_out and result.exit_code() == 1 and "timed out: " in _text(result)
        assert elapsed < timeout + 3, f"the run overshot its timeout by {elapsed - timeout:.1f}s"
        written = list(tmp_path.glob(f"pids{timeout}.rank*"))
        for pids in written:
            assert not any(_alive(int(pid)) for pid in pids.read_text().split()), \
                "a worker or its child survived"
        if len(written) == 8:
            return
    pytest.fail("the workers never all started their children, even in 48 s")


@pytest.mark.slow
def test_a_run_still_computing_at_its_timeout_is_too_slow_not_a_hang(
        tmp_path: Path, plain_python: str) -> None:
    spinner = _write(tmp_path, "spin.py", SPINNER)
    result = run_smoke(SmokeOptions(script=spinner, nproc=2, timeout=6, python=plain_python))
    assert result.timeout is not None and result.timeout["verdict"] == "too-slow", _text(result)
    assert "too slow, not a hang" in _text(result) and "timed out: a hang" not in _text(result)


@pytest.mark.slow
def test_a_run_whose_ranks_all_wait_is_a_hang_naming_each_rank_s_line(
        tmp_path: Path, plain_python: str) -> None:
    script = _write(tmp_path, "waiter.py", WAITER)
    result = run_smoke(SmokeOptions(script=script, script_args=(str(tmp_path / "pids"),),
                                    nproc=2, timeout=8, python=plain_python))
    assert result.timeout is not None and result.timeout["verdict"] == "hang", _text(result)
    assert "ranks 0-1 waiting at " in _text(result) and "waiter.py:10" in _text(result)


def test_a_faulthandler_dump_names_the_collective_and_the_script_line(tmp_path: Path) -> None:
    dump = tmp_path / "stack"
    with open(dump, "w") as out:
        faulthandler.dump_traceback(out, all_threads=True)
    threads = parse_stack(dump.read_text())
    here = "test_a_faulthandler_dump_names_the_collective_and_the_script_line"
    assert any(thread[-1]["function"] == here for thread in threads)  # any thread: xdist has more
    blocked = ('Current thread 0x00007f00 (most recent call first):\n'
               '  File "/v/site-packages/torch/distributed/distributed_c10d.py", line 2800 in all_reduce\n'
               '  File "/v/site-packages/torch/distributed/c10d_logger.py", line 81 in wrapper\n'
               '  File "/w/train.py", line 42 in step\n'
               '  File "/w/train.py", line 60 in <module>\n')
    assert collective_of(main_thread(parse_stack(blocked))) == "all_reduce"
    state = rank_state(1, False, 0.0, blocked, "/w/train.py")
    assert state.at == {"file": "/w/train.py", "line": 42, "function": "step"}
    assert state.describe() == "in all_reduce at /w/train.py:42"


@pytest.mark.parametrize(("states", "expected", "words"), [
    ([RankState(0, computing=True), RankState(1, computing=False, collective="all_reduce")],
     "too-slow", "too slow, not a hang: rank 0 still computing"),
    ([RankState(0, computing=False, collective="all_reduce"),
      RankState(1, computing=False, collective="barrier")],
     "hang", "ranks waiting in different collectives"),
    ([RankState(0, computing=False, collective="init_process_group"),
      RankState(1, ended=True)], "hang", "a process group that never forms"),
    ([RankState(0, computing=False), RankState(1, computing=False)],
     "hang", "none was in a torch.distributed call"),
    ([RankState(0, computing=None), RankState(1, computing=None)], "unknown", "not known"),
])
def test_the_timeout_verdict(states: list[RankState], expected: str, words: str) -> None:
    found = verdict(states, 150, nproc=len(states), available=2)
    assert found["verdict"] == expected and words in found["text"], found["text"]


def test_a_rank_whose_script_had_ended_is_said_to_be_exiting() -> None:
    states = [RankState(0, computing=True, exiting=True), RankState(1, computing=False)]
    text = verdict(states, 45, nproc=2, available=2)["text"]
    assert "rank 0 computing in Python's exit, after the script ended" in text


def test_the_verdict_folds_many_ranks_and_says_the_cores_are_shared() -> None:
    states = [RankState(r, computing=True) for r in range(64)]
    text = verdict(states, 150, nproc=64, available=2)["text"]
    assert "ranks 0-63 still computing" in text and "64 workers share 2 CPU cores" in text


def test_a_busy_process_uses_the_cpu_and_a_waiting_one_does_not() -> None:
    busy = subprocess.Popen([sys.executable, "-c", SPINNER], start_new_session=True)
    idle = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        watch = CpuWatch([busy.pid, idle.pid])
        assert _wait_for(lambda: (watch.sample(time.monotonic()) or True)
                         and (watch.cores_used() or {}).get(busy.pid, 0) > 0.015)
        assert watch.cores_used()[idle.pid] < 0.015  # type: ignore[index]
    finally:
        busy.kill()
        idle.kill()
        busy.wait()
        idle.wait()


def test_more_workers_than_cores_is_a_warning_not_a_cap() -> None:
    assert crowding_warning(2, available=2) is None
    text = crowding_warning(64, available=2)
    assert text and "64 workers on 2 CPU cores" in text and "1/32 of a core" in text
    options = SmokeOptions(script=Path("train.py"), nproc=10_000)
    result = summarise(options, [Worker(rank, returncode=0) for rank in range(3)], False, 1.0)
    assert any("10000 workers on" in w for w in result.warnings)



def test_launching_stops_at_the_timeout(tmp_path: Path, plain_python: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers that take the whole timeout to launch (a machine too small for N) leave the
    rest unlaunched: the run ends at its timeout, not after launching all N."""
    import neuron_migrate.smoke.run as run_module

    script = _write(tmp_path, "sleeper.py", "import time\ntime.sleep(60)\n")
    real = subprocess.Popen
    launched: list[int] = []

    def slow_popen(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        process = real(*args, **kwargs)  # type: ignore[call-overload]
        launched.append(process.pid)
        time.sleep(1.5)  # past the whole timeout after the first
        return process

    monkeypatch.setattr(run_module.subprocess, "Popen", slow_popen)
    result = run_smoke(SmokeOptions(script=script, nproc=50, timeout=1, python=plain_python))
    assert len(launched) == 1 and result.timed_out


def test_a_number_of_workers_past_any_machine_is_a_usage_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import neuron_migrate.smoke.run as run_module
    from neuron_migrate.cli import app

    def never(*_: object) -> None:
        raise AssertionError("launched")

    monkeypatch.setattr(run_module, "run_smoke", never)
    for args in (["--nproc", "257"], ["--nproc", "999999999999"],
                 ["--layout", "1", "--layout", "300"]):
        run = CliRunner().invoke(app, ["smoke", str(ROOT / "examples" / "xla_mnist" / "train.py"), *args])
        assert run.exit_code == 2, (args, run.output)


# ------------------------------------------------------------------ the runner killed
RUNNER = """\
import sys
from pathlib import Path
from neuron_migrate.smoke.run import SmokeOptions, run_smoke
run_smoke(SmokeOptions(script=Path(sys.argv[1]), script_args=(sys.argv[2],), timeout=300,
                       python=sys.argv[3]))
"""


def _start_runner(tmp_path: Path, plain_python: str) -> tuple[subprocess.Popen[bytes], Path, list[int]]:
    """A runner in a process of its own, its temporary folder under tmp_path/tmp, once its
    worker has started its child: (runner, the tmp folder, [worker pid, child pid])."""
    script = _write(tmp_path, "waiter.py", WAITER)
    temp = tmp_path / "tmp"
    temp.mkdir()
    pids = tmp_path / "pids"
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(script), str(pids), plain_python],
                              env=dict(os.environ, TMPDIR=str(temp)), cwd=ROOT)
    assert _wait_for(pids.exists), "the worker never started"
    return runner, temp, [int(pid) for pid in pids.read_text().split()]


def test_sigterm_of_the_runner_kills_its_workers_and_removes_its_folder(
        tmp_path: Path, plain_python: str) -> None:
    runner, temp, pids = _start_runner(tmp_path, plain_python)
    runner.send_signal(signal.SIGTERM)
    assert runner.wait(timeout=60) == 128 + signal.SIGTERM
    assert _wait_for(lambda: not any(map(_alive, pids))), "the worker or its child survived"
    assert not list(temp.glob("neuron-smoke-*")), "the temporary folder stayed"


def test_sigkill_of_the_runner_kills_its_workers_and_the_next_run_the_rest(
        tmp_path: Path, plain_python: str) -> None:
    runner, temp, (worker, child) = _start_runner(tmp_path, plain_python)
    runner.kill()
    runner.wait(timeout=60)
    assert _wait_for(lambda: not _alive(worker)), "the worker outlived the runner"
    (stale,) = temp.glob("neuron-smoke-*")
    assert reap_stale_runs(temp) == [stale]
    assert _wait_for(lambda: not _alive(child)), "the worker's child outlived the next run"
    assert not stale.exists()


def test_a_live_runner_s_folder_is_left_alone(tmp_path: Path, plain_python: str) -> None:
    runner, temp, pids = _start_runner(tmp_path, plain_python)
    try:
        assert reap_stale_runs(temp) == [] and list(temp.glob("neuron-smoke-*"))
        assert all(map(_alive, pids))
    finally:
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=60)


# ------------------------------------------------------------------ unreadable reports
@pytest.mark.parametrize(("written", "words"), [
    ("{not json", "is not valid JSON"),
    ("[1, 2]", "is JSON but not a smoke report"),
    ('{"optimizer_steps": "3", "graphs_compiled": 0, "ops": {}}', "optimizer_steps"),
])
def test_an_unreadable_worker_report_is_a_clear_failure(
        tmp_path: Path, plain_python: str, written: str, words: str) -> None:
    script = _write(tmp_path, "overwrites.py",
                    f"import os\nopen(os.environ['NEURON_EMU_REPORT'], 'w').write({written!r})\n")
    result = run_smoke(SmokeOptions(script=script, nproc=2, timeout=60, python=plain_python))
    assert not result.passed and result.exit_code() == 1
    assert result.error is not None and result.error["type"] == "SmokeReportUnreadable"
    text = _text(result)
    assert words in text and "rank 0's smoke report rank0.json" in text
    assert result.error["cause"]["key"] == "smoke-report-unreadable"


def test_a_missing_report_is_no_problem_and_a_good_one_is_read(tmp_path: Path) -> None:
    assert read_outcome(tmp_path / "rank0.json", 0) == (None, None)
    (tmp_path / "rank0.json").write_text('{"optimizer_steps": 1, "graphs_compiled": 0, "ops": {}}')
    assert read_outcome(tmp_path / "rank0.json", 0)[0] == {
        "optimizer_steps": 1, "graphs_compiled": 0, "ops": {}}
