"""A bug never exits 1, which `check` means as "findings" and CI reads as a result: it prints
its traceback (escaped, as every output) and exits 2, as an unreadable file does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from neuron_migrate import entry


@pytest.mark.parametrize("args, module", [(["check", "."], "neuron_migrate.command"),
                                          (["audit", "-qv", "."], "neuron_migrate.cli")])
def test_an_unexpected_exception_exits_2_with_its_traceback(
        in_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        args: list[str], module: str) -> None:
    """`check .` runs on the lean start-up path, `audit -qv .` (two switches written as one
    word) through typer: both end here."""
    def broken(*args: object, **kwargs: object) -> int:
        raise RuntimeError("a bug \x1b[2J")

    monkeypatch.setattr(f"{module}.execute", broken)
    monkeypatch.setattr(sys, "argv", ["neuron-migrate", *args])
    with pytest.raises(SystemExit) as exited:
        entry.main()
    assert exited.value.code == entry.INTERNAL_ERROR == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: a bug \\x1b[2J" in err
    assert "internal error in neuron-migrate" in err and "please report" in err
