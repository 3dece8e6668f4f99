"""The command line's manners: help in the usual Unix form, and a quiet exit when whoever
reads the output stops reading (`neuron-migrate rules | head -1`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from neuron_migrate.cli import app
from neuron_migrate.cli_help import argument_metavar
from tests.conftest import ROOT, cli

COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
OLD = b"import torch_xla.core.xla_model as xm\nd = xm.xla_device()\nxm.mark_step()\n"


def test_every_command_is_covered() -> None:
    assert COMMANDS == ["apply", "audit", "check", "explain", "rules", "scan", "smoke", "verify"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_names_values_with_metavars_never_python_types(command: str) -> None:
    run = cli(command, "--help")
    assert run.exit_code == 0
    for shape in ("<", "list[", "{", "\\[", " TEXT", " INTEGER", " RANGE", " FLOAT", "Path"):
        assert shape not in run.stdout, f"{command} --help shows {shape!r}:\n{run.stdout}"
    group = typer.main.get_command(app)
    params = group.commands[command].params  # type: ignore[attr-defined]
    for param in params:
        if param.param_type_name == "argument":
            assert re.fullmatch(r"\[?[A-Z_]+\]?(\.\.\.)?", argument_metavar(param))
            assert f"\n  {argument_metavar(param)}" in run.stdout
        elif not param.is_flag:
            # every option that takes a value names it: `-j, --jobs N`
            assert param.metavar and param.metavar.isupper(), param.name
            long = next(opt for opt in param.opts if opt.startswith("--"))
            assert f"{long} {param.metavar}" in run.stdout


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "rules"])  # rules: none
def test_every_argument_shows_its_declared_help_even_when_typer_drops_it(
        command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Typer before 0.26 beside a recent click builds each argument with no help; the help
    screen reads it from the command's declaration then, as the lowest typer allowed needs."""
    from neuron_migrate.cli_help import declared_help

    def without_help(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        real_init(self, *args, **kwargs)
        self.help = None

    real_init = typer.core.TyperArgument.__init__
    monkeypatch.setattr(typer.core.TyperArgument, "__init__", without_help)
    group = typer.main.get_command(app)
    params = group.commands[command].params  # type: ignore[attr-defined]
    callback = group.commands[command].callback  # type: ignore[attr-defined]
    shown = " ".join(cli(command, "--help").stdout.split())
    for param in params:
        if param.param_type_name == "argument":
            assert param.help is None
            declared = declared_help(callback, param.name)
            assert declared and " ".join(declared.split()) in shown, param.name


@pytest.mark.parametrize("command, usage", [
    ("check", "check [OPTIONS] PATH...\n"), ("apply", "apply [OPTIONS] PATH...\n"),
    ("scan", "scan [OPTIONS] PATH...\n"), ("audit", "audit [OPTIONS] PATH...\n"), ("smoke", "smoke [OPTIONS] SCRIPT [SCRIPT_ARGS]...\n"),
    ("verify", "verify [OPTIONS] ORIGINAL MIGRATED [SCRIPT_ARGS]...\n"),
    ("explain", "explain [OPTIONS] RULE\n"), ("rules", "rules [OPTIONS]\n"),
])
def test_the_usage_line_is_the_conventional_one(command: str, usage: str) -> None:
    assert cli(command, "--help").stdout.startswith(f"Usage: neuron-migrate {usage}")


def _closed_stdout(*args: str, cwd: Path, source: bytes = b"") -> tuple[int, bytes]:
    """Run the executable with its standard output a pipe nobody reads (closed before the
    interpreter has even started): its exit status and what it printed on stderr."""
    child = subprocess.Popen([sys.executable, "-m", "neuron_migrate", *args], cwd=cwd,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.stdout is not None and child.stdin is not None and child.stderr is not None
    child.stdout.close()
    try:
        child.stdin.write(source)
        child.stdin.close()
    except BrokenPipeError:
        pass
    errors = child.stderr.read()
    return child.wait(timeout=120), errors


@pytest.mark.parametrize("args", [
    ["rules"], ["--version"], ["--help"], ["explain", "NM110"], ["check", "--help"],
    ["smoke", "--help"], ["check", "clean.py"], ["check", "old.py"],
    ["check", "--format", "json", "old.py"], ["apply", "--dry-run", "old.py"],
    ["scan", "requirements.txt"], ["check", "-vv", "clean.py"],  # typer's to parse
    ["audit", "clean.py"],
    ["apply", "-q", "--stdin-filename", "x.py", "-"], ["check", "--stdin-filename", "x.py", "-"],
], ids=" ".join)
def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "clean.py").write_text("x = 1\n")
    (tmp_path / "old.py").write_bytes(OLD)
    (tmp_path / "requirements.txt").write_text("torch-neuronx==2.1.2.2.3.0\n")
    status, errors = _closed_stdout(*args, cwd=tmp_path, source=OLD)
    # status 1, as Python's documentation recommends for SIGPIPE (the `signal` module's
    # note), and no traceback or "Exception ignored" on stderr
    assert (status, errors) == (1, b""), errors.decode()
    assert (tmp_path / "old.py").read_bytes() == OLD


def test_apply_writes_its_files_before_a_closed_pipe_stops_the_report(tmp_path: Path) -> None:
    (tmp_path / "old.py").write_bytes(OLD)
    status, errors = _closed_stdout("apply", "old.py", cwd=tmp_path)
    assert (status, errors) == (1, b"")
    assert b"torch_xla" not in (tmp_path / "old.py").read_bytes()
