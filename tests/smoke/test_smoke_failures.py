"""A smoke run that fails in the script's own code says so as plainly as one that fails in the
tool's helpers: the exception's type, its message and the script's line, always. (End to end
with the emulator: tests/smoke/test_smoke.py, the `own_*` runs.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from neuron_migrate.emulator.failure_causes import diagnose
from neuron_migrate.smoke.report import render_text
from neuron_migrate.smoke.run import SmokeOptions, run_smoke
from neuron_migrate.smoke.summary import SmokeResult, Worker, summarise

OUTCOME = {"optimizer_steps": 0, "graphs_compiled": 0, "ops": {}}


def _text(result: SmokeResult) -> str:
    return "\n".join(line for line, _ in render_text(result))


def _summarised(script: Path, *workers: Worker) -> SmokeResult:
    return summarise(SmokeOptions(script=script, nproc=len(workers)), list(workers), False, 1.0)


def _script(tmp_path: Path, text: str) -> Path:
    script = tmp_path / "train.py"
    script.write_text(text)
    return script


def test_an_error_a_dataloader_worker_raised_names_its_own_message_and_line(tmp_path: Path) -> None:
    script = _script(tmp_path, "class D:\n    def __getitem__(self, i):\n        raise KeyError(i)\n"
                               "for b in loader:\n    pass\n")
    message = ("Caught KeyError in DataLoader worker process 0.\nOriginal Traceback (most recent "
               "call last):\n  File \"/v/site-packages/torch/utils/data/_utils/worker.py\", line "
               f"349, in _worker_loop\n    data = fetcher.fetch(index)\n  File \"{script}\", line 3, "
               "in __getitem__\n    raise KeyError(i)\nKeyError: 'shard 7'\n")
    loop = {"file": str(script), "line": 4, "function": "<module>"}
    error = {"type": "KeyError", "message": message, "location": loop, "frames": [loop],
             "cause": None, "step": None, "time": 1.0}
    result = _summarised(script, Worker(0, str(script), returncode=1, outcome=dict(OUTCOME, error=error)))
    text = _text(result)
    assert "error: KeyError: 'shard 7' (KeyError in DataLoader worker process 0)" in text
    assert "train.py:3 in __getitem__" in text and "Original Traceback" not in text


def test_sys_exit_with_a_message_is_the_error_with_the_line_that_called_it(tmp_path: Path) -> None:
    script = _script(tmp_path, "import sys\nsys.exit('no data')\n")
    called = {"file": str(script), "line": 2, "function": "<module>"}
    outcome = dict(OUTCOME, exit={"status": "no data", "frames": [called], "location": called})
    text = _text(_summarised(script, Worker(0, str(script), returncode=1, outcome=outcome,
                                            stderr_tail="no data")))
    assert "error: SystemExit: no data" in text and "train.py:2 in <module>" in text
    assert "the script's own line" in text


def test_an_argparse_usage_error_shows_the_parse_line_and_the_usage_it_printed(
        tmp_path: Path) -> None:
    script = _script(tmp_path, "import argparse\nargs = argparse.ArgumentParser().parse_args()\n")
    called = {"file": str(script), "line": 2, "function": "<module>"}
    outcome = dict(OUTCOME, exit={"status": 2, "frames": [called], "location": called})
    usage = "usage: train.py [-h]\ntrain.py: error: unrecognized arguments: --epochs 1"
    text = _text(_summarised(script, Worker(0, str(script), returncode=2, outcome=outcome,
                                            stderr_tail=usage)))
    assert "error: SystemExit: exit status 2" in text and "train.py:2 in <module>" in text
    assert "train.py: error: unrecognized arguments: --epochs 1" in text


def test_a_bare_assertion_shows_its_line_for_the_missing_message(tmp_path: Path) -> None:
    script = _script(tmp_path, "x = 1\nassert x == 2\n")
    where = {"file": str(script), "line": 2, "function": "<module>"}
    error = {"type": "AssertionError", "message": "", "location": where, "frames": [where],
             "cause": None, "step": None, "time": 1.0}
    text = _text(_summarised(script, Worker(0, str(script), returncode=1,
                                            outcome=dict(OUTCOME, error=error))))
    assert "error: AssertionError (no message): assert x == 2" in text


@pytest.mark.parametrize(("code", "words"), [
    (-9, "rank 0 was killed by SIGKILL: the out-of-memory killer, most likely"),
    (-11, "rank 0 was killed by SIGSEGV: a crash in native code"),
    (4, "rank 0 exited with status 4, without an exception"),
])
def test_a_worker_that_died_without_an_exception_says_how_and_its_last_words(
        tmp_path: Path, code: int, words: str) -> None:
    script = _script(tmp_path, "pass\n")
    text = _text(_summarised(script, Worker(0, str(script), returncode=code,
                                            stdout_tail="epoch 0\nbad shard 12")))
    assert words in text and "its last output:" in text and "bad shard 12" in text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the worker wrapper is a sh script")
def test_raise_systemexit_without_a_traceback_shows_the_script_s_last_output(
        tmp_path: Path, plain_python: str) -> None:
    script = _script(tmp_path, "print('labels.csv has 3 columns, expected 4', flush=True)\n"
                               "raise SystemExit(4)\n")
    result = run_smoke(SmokeOptions(script=script, timeout=60, python=plain_python))
    text = _text(result)
    assert result.exit_code() == 1
    assert "exited with status 4, without an exception" in text
    assert "labels.csv has 3 columns, expected 4" in text


@pytest.mark.parametrize(("message", "key"), [
    ("No module named 'torchvision'", "missing-module"),
    ("No module named 'torch_xla'", "torch-xla-import"),
    ("No module named 'neuronx_distributed'", None),
])
def test_a_module_missing_from_the_environment_is_not_blamed_on_the_migration(
        message: str, key: str | None) -> None:
    cause = diagnose("ModuleNotFoundError", message)
    assert (cause.key if cause else None) == key
