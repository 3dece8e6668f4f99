"""The exit statuses a run's result makes, read in this process: 0 nothing to do, 1 findings,
2 errors, and 128 plus the signal for a run a signal stopped, as a shell reports it (before
anything else the result holds)."""

from __future__ import annotations

import signal

import pytest
from neuron_migrate.gate.outcome import _errors_only
from neuron_migrate.model import FileResult
from neuron_migrate.run_result import RunResult

CHANGED = FileResult("a.py", original=b"x\n", new_source=b"y\n")
BROKEN = FileResult("b.py", error="b.py:1: cannot parse")


@pytest.mark.parametrize(("signal_number", "status"), [(signal.SIGINT, 130),
                                                         (signal.SIGTERM, 143)])
@pytest.mark.parametrize("files", [(), (CHANGED,), (BROKEN,)], ids=["empty", "changed", "error"])
def test_a_signal_makes_128_plus_its_number_whatever_else_happened(
        signal_number: int, status: int, files: tuple[FileResult, ...]) -> None:
    result = RunResult(files, interrupted=signal_number)
    assert result.exit_code() == status
    assert _errors_only(result) == status


def test_recording_acknowledgements_fails_only_on_errors() -> None:
    """`--add-noqa` records findings: they do not fail it, an error does."""
    assert _errors_only(RunResult((CHANGED,))) == 0
    assert RunResult((CHANGED,)).exit_code() == 1
    assert _errors_only(RunResult((CHANGED, BROKEN))) == 2
    assert _errors_only(RunResult((), errors=("c.py: cannot read",))) == 2
