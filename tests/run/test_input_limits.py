"""Input beyond what Python's own readers take is a clear message for that file, naming it and
the line, and the run goes on: a number longer than Python converts to an int (a notebook's
`nbformat`, a lock file, a TOML value), an expression nested deeper than the parser's stack.
A message never repeats a huge line of input in full."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import cli
from neuron_migrate.engine_size import DEFAULT_ENGINE_SIZE, parse_size
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


def _padded(size: int) -> str:
    """XLA-era code padded with comment lines to exactly `size` bytes: cheap for the engine,
    so a file at the cap is migrated in about a second."""
    line = "# " + "p" * 61 + "\n"
    pad = line * ((size - len(XLA)) // len(line))
    return XLA + pad + "#" * (size - len(XLA) - len(pad) - 1) + "\n"


def test_xla_code_over_the_engine_cap_is_refused_and_left_untouched(in_tmp: Path) -> None:
    big = in_tmp / "big.py"
    big.write_text(_padded(DEFAULT_ENGINE_SIZE + 1))
    (in_tmp / "ok.py").write_text(XLA)
    run = cli("apply", ".")
    assert run.exit_code == 2
    assert (f"error: big.py: 256 KiB ({DEFAULT_ENGINE_SIZE + 1} bytes) of code with XLA-era "
            f"tokens is over the engine's limit of 256 KiB ({DEFAULT_ENGINE_SIZE} bytes); file "
            "not migrated (raise the limit with --max-engine-size or `max-engine-size` in the "
            "configuration)") in run.stderr
    assert big.read_text() == _padded(DEFAULT_ENGINE_SIZE + 1)
    assert "xla_device" not in (in_tmp / "ok.py").read_text()  # the run went on


def test_xla_code_at_the_engine_cap_is_migrated(in_tmp: Path) -> None:
    (in_tmp / "edge.py").write_text(_padded(DEFAULT_ENGINE_SIZE))
    run = cli("check", "edge.py")
    assert run.exit_code == 1 and "edge.py: 2 changes" in run.stdout, run.stderr
    assert "engine's limit" not in run.stderr


@pytest.mark.parametrize("how", ["option", "configuration"])
def test_the_setting_raises_the_engine_cap(in_tmp: Path, how: str) -> None:
    (in_tmp / "big.py").write_text(_padded(DEFAULT_ENGINE_SIZE + 4096))
    args = ["--max-engine-size", "300KiB"] if how == "option" else []
    if how == "configuration":
        (in_tmp / "pyproject.toml").write_text("[tool.neuron-migrate]\n"
                                               "max-engine-size = 300000\n")
    run = cli("check", *args, "big.py")
    assert run.exit_code == 1 and "big.py: 2 changes" in run.stdout, run.stderr


def test_the_option_overrides_the_configuration_both_ways(in_tmp: Path) -> None:
    (in_tmp / "pyproject.toml").write_text('[tool.neuron-migrate]\nmax-engine-size = "1KiB"\n')
    (in_tmp / "mid.py").write_text(_padded(2048))
    assert "engine's limit of 1 KiB (1024 bytes)" in cli("check", "mid.py").stderr
    assert "mid.py: 2 changes" in cli("check", "--max-engine-size", "4k", "mid.py").stdout
    run = cli("check", "--max-engine-size", "2047", "mid.py")
    assert "mid.py: 2 KiB (2048 bytes) of code" in run.stderr and run.exit_code == 2


def test_a_notebook_over_the_engine_cap_is_refused(in_tmp: Path) -> None:
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": _padded(3000)}
    notebook = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (in_tmp / "nb.ipynb").write_text(json.dumps(notebook))
    run = cli("check", "--max-engine-size", "2KiB", "nb.ipynb")
    assert run.exit_code == 2
    assert "error: nb.ipynb: " in run.stderr and "engine's limit of 2 KiB" in run.stderr
    assert "nb.ipynb: 2 changes" in cli("check", "nb.ipynb").stdout


def test_audit_names_a_file_over_the_engine_cap_instead_of_finding_nothing(
        in_tmp: Path) -> None:
    (in_tmp / "big.py").write_text(_padded(4096))
    run = cli("audit", "--max-engine-size", "2KiB", "big.py")
    assert "error: big.py: 4 KiB (4096 bytes) of code with XLA-era tokens" in run.stderr
    assert "NM960" in cli("audit", "big.py").stdout


def test_a_big_file_without_xla_code_is_not_refused(in_tmp: Path) -> None:
    (in_tmp / "plain.py").write_text("import torch\n" + "x = torch.ones(3)\n" * 60_000)
    run = cli("check", "--max-engine-size", "1KiB", "plain.py")
    assert run.exit_code == 0 and run.stderr == "", run.stderr


def test_a_size_that_is_not_one_is_a_usage_error(in_tmp: Path) -> None:
    (in_tmp / "ok.py").write_text(XLA)
    run = cli("check", "--max-engine-size", "12 parsecs", "ok.py")
    assert run.exit_code == 2 and "'12 parsecs' is not a size" in run.stderr
    (in_tmp / "pyproject.toml").write_text('[tool.neuron-migrate]\nmax-engine-size = 0\n')
    run = cli("check", "ok.py")
    assert run.exit_code == 2 and "max-engine-size must be a size in bytes" in run.stderr


@pytest.mark.parametrize("given, size", [
    ("262144", 262144), ("512KiB", 512 * 1024), ("512 kb", 512 * 1024), ("2M", 2 * 1024 ** 2),
    ("1MiB", 1024 ** 2), (4096, 4096), ("0", None), ("-5", None), ("1.5MiB", None),
    ("", None), ("KiB", None), ("1 GiB", None), (True, None), ("١٢", None)])
def test_parse_size(given: object, size: int | None) -> None:
    assert parse_size(given) == size
