"""A pattern git reads but Python's regular expressions refuse (`[z-a]`, a range from high to
low, which git matches nothing with) is passed over with a warning naming where it is written;
it ended `check`, `apply` and `scan` with a traceback and status 1, which CI reads as
findings."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import cli
from neuron_migrate.files.discover import discover
from neuron_migrate.files.patterns import gitignore_spec

XLA = "import torch_xla.core.xla_model as xm\nd = xm.xla_device()\n"


@pytest.fixture
def project(in_tmp: Path) -> Path:
    (in_tmp / "train.py").write_text(XLA)
    (in_tmp / "build").mkdir()
    (in_tmp / "build" / "generated.py").write_text(XLA)
    (in_tmp / "requirements.txt").write_text("torch-xla==2.1.0\n")
    return in_tmp


@pytest.mark.parametrize("command", ["check", "apply", "scan"])
def test_in_a_gitignore_the_line_is_passed_over_and_the_others_apply(
        project: Path, command: str) -> None:
    (project / ".gitignore").write_text("build/\n[z-a]\n")
    run = cli(command, ".")
    assert "Traceback" not in run.stderr and run.exit_code != 2, run.stderr
    assert "warning: .gitignore:2: '[z-a]' can match no path (bad character range z-a); " \
           "passed over" in run.stderr
    assert "generated.py" not in run.stdout  # build/ is still ignored
    assert ("train.py" in run.stdout) == (command != "scan")


@pytest.mark.parametrize("option", ["--exclude", "--extend-exclude"])
def test_on_the_command_line_the_option_is_named(project: Path, option: str) -> None:
    run = cli("check", option, "build/", option, "[9-0]", ".")
    assert run.exit_code == 1 and "Traceback" not in run.stderr
    assert f"warning: {option}: '[9-0]' can match no path" in run.stderr
    assert "train.py" in run.stdout and "generated.py" not in run.stdout


@pytest.mark.parametrize("table", ['exclude = ["build/", "[z-a]"]',
                                   'extend-exclude = ["build/", "[z-a]"]',
                                   '[tool.neuron-migrate.per-file-ignores]\n"[z-a]" = ["NM1"]'])
def test_in_a_configuration_the_file_and_key_are_named(project: Path, table: str) -> None:
    header = "" if table.startswith("[") else "[tool.neuron-migrate]\n"
    (project / "pyproject.toml").write_text(header + table + "\n")
    run = cli("check", ".")
    assert run.exit_code == 1 and "Traceback" not in run.stderr, run.stderr
    key = table.split(" ")[0].strip("[]").split(".")[-1] if not table.startswith("[") \
        else "per-file-ignores"
    assert f"warning: {key} in {project / 'pyproject.toml'}: '[z-a]' can match no path" \
        in run.stderr
    assert "train.py" in run.stdout


def test_quiet_says_nothing_of_it(project: Path) -> None:
    (project / ".gitignore").write_text("[z-a]\n")
    run = cli("check", "-q", ".")
    assert run.exit_code == 1 and run.stderr == ""


def test_discovery_and_the_spec() -> None:
    read = gitignore_spec(["*.log", "[z-a]", "!", "[b-a]x"])
    assert read.bad == [(3, "!")]
    assert [(n, line) for n, line, _ in read.matching_nothing] == [(2, "[z-a]"), (4, "[b-a]x")]
    assert read.spec.match_file("a.log") and not read.spec.match_file("z")


def test_a_nested_gitignore_warns_with_its_path(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("old_*.py\n[z-a]\n")
    for name in ("old_a.py", "kept.py"):
        (tmp_path / "sub" / name).write_text("x = 1\n")
    found = discover([tmp_path])
    assert [p.name for p in found.files] == ["kept.py"]
    assert found.warnings == [(f"{tmp_path / 'sub' / '.gitignore'}:2: '[z-a]' can match no "
                               "path (bad character range z-a); passed over")]


def test_standard_input_names_the_option_too(project: Path) -> None:
    run = cli("check", "-", "--stdin-filename", "train.py", "--exclude", "[z-a]")
    assert "warning: --exclude: '[z-a]' can match no path" in run.stderr
    assert "Traceback" not in run.stderr
