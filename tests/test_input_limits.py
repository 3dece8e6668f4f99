"""Input beyond what Python's own readers take is a clear message for that file, naming it and
the line, and the run goes on: a number longer than Python converts to an int (a notebook's
`nbformat`, a lock file, a TOML value), an expression nested deeper than the parser's stack.
A message never repeats a huge line of input in full."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import cli
from neuron_migrate.wording import MESSAGE_LIMIT, QUOTE_LIMIT, clipped

XLA = "import torch_xla.core.xla_model as xm\nd = xm.xla_device()\n"
DIGITS = "9" * 100_000
LIMIT = getattr(sys, "get_int_max_str_digits", lambda: 4300)()


@pytest.mark.parametrize("name, text, line", [
    ("nb.ipynb", '{"cells": [],\n "metadata": {},\n "nbformat": %s, "nbformat_minor": 5}', 3),
    ("Pipfile.lock", '{"_meta": {\n"x": %s}, "default": {"torch-xla": {"version": "==2.1"}}}', 2),
    ("pyproject.toml", '[project]\nname = "x"\nv = %s\ndependencies = ["torch-xla==2.1"]\n', 3),
], ids=["notebook", "lockfile", "toml"])
def test_a_number_longer_than_python_reads_names_the_file_and_line(
        in_tmp: Path, name: str, text: str, line: int) -> None:
    (in_tmp / name).write_text(text % DIGITS)
    (in_tmp / "ok.py").write_text(XLA)
    run = cli("check", ".")
    assert run.exit_code == 2
    said = f"error: {name}:{line}: a number of 100000 digits, longer than Python reads " \
           f"({LIMIT}); file skipped"
    # tomli, the TOML reader before Python 3.11, reports the number itself ("Invalid number")
    by_tomli = f"error: {name}:{line}: not valid TOML (Invalid number"
    assert said in run.stderr or (name.endswith(".toml") and sys.version_info < (3, 11)
                                  and by_tomli in run.stderr), run.stderr
    assert "internal error" not in run.stderr
    assert "ok.py: 2 changes" in run.stdout  # the run went on


@pytest.mark.parametrize("expression", ["-" * 50_000 + "1", "not " * 50_000 + "x",
                                        "+".join(["a"] * 30_000), "a" + ".b" * 30_000],
                         ids=["unary-minus", "not", "sum", "attributes"])
def test_an_expression_nested_too_deeply_names_the_file_and_line(in_tmp: Path,
                                                                 expression: str) -> None:
    (in_tmp / "deep.py").write_text(f"import torch_xla\ny = 2\nx = {expression}\nz = 3\n")
    (in_tmp / "ok.py").write_text(XLA)
    run = cli("check", ".")
    assert run.exit_code == 2
    assert "error: deep.py:3: nested too deeply to analyse; file skipped" in run.stderr
    assert "internal error" not in run.stderr and "MemoryError" not in run.stderr
    assert "ok.py: 2 changes" in run.stdout


def test_a_huge_requirement_line_is_quoted_in_part(in_tmp: Path) -> None:
    (in_tmp / "requirements.txt").write_text("torch-xla==" + "1" * 100_000 + "x y z\n")
    run = cli("scan", "--format", "json", ".")
    [error] = [file["error"] for file in run.json()["files"] if file.get("error")]
    assert error.startswith("requirements.txt:1: pip would reject `torch-xla==111")
    assert error.endswith("…` (100,016 characters); file left untouched")
    assert len(error) < 300
    assert len(cli("scan", ".").stderr) < 400  # the error line of the text report


def test_clipped_keeps_short_messages_and_cuts_long_ones() -> None:
    short = f"`xm.mark_step()` → `{'x' * 100}`"
    assert clipped(short) == short
    long_code = "y" * 5000
    assert clipped(f"remove `{long_code}`: unused") == \
        f"remove `{'y' * (QUOTE_LIMIT - 20)}…` (5,000 characters): unused"
    unquoted = "z" * 5000
    cut = clipped(f"{unquoted}: cannot read")
    assert len(cut) < MESSAGE_LIMIT and cut.endswith("… (5,013 characters in all)")
