"""Every report format in a command's name -> renderer map is one the command accepts, lists in
its help and renders: a format added to a map without its renderer (or a renderer without its
entry) fails here. The bytes of each format are pinned by the report tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from neuron_migrate.report.formats import AUDIT_FORMATS, RUN_FORMATS
from neuron_migrate.report.renderer import Formats, UnknownFormat
from neuron_migrate.smoke.formats import SMOKE_FORMATS
from neuron_migrate.smoke.layouts import LayoutComparison
from neuron_migrate.smoke.summary import SmokeResult
from neuron_migrate.verify.compare import CANNOT, Verdict
from neuron_migrate.verify.report import VERIFY_FORMATS, Outcome
from tests.conftest import FIXTURES, cli

SAMPLE = FIXTURES / "python" / "NM101_xla_device.before.py"


@pytest.fixture
def sample(in_tmp: Path) -> Path:
    shutil.copyfile(SAMPLE, in_tmp / "train.py")
    return in_tmp


@pytest.mark.parametrize("formats", [RUN_FORMATS, AUDIT_FORMATS, SMOKE_FORMATS, VERIFY_FORMATS],
                         ids=["run", "audit", "smoke", "verify"])
def test_every_entry_names_a_renderer(formats: Formats) -> None:  # type: ignore[type-arg]
    for name in formats:
        renderer = formats.choose(name)
        assert callable(renderer.render) and isinstance(renderer.styled, bool), name
    assert [name for name in formats if formats.choose(name).styled] in ([], ["text"])


@pytest.mark.parametrize("fmt", RUN_FORMATS.names)
def test_check_accepts_lists_and_renders_every_format(fmt: str, sample: Path) -> None:
    renderer = RUN_FORMATS.choose(fmt)
    assert isinstance(renderer.human, bool) and isinstance(renderer.keeps_sources, bool)
    run = cli("check", "train.py", "--format", fmt, "-o", "report")
    assert run.exit_code == 1, run.stdout + run.stderr
    written = (sample / "report").read_text()
    assert "NM101" in written
    printed = cli("check", "train.py", "--format", fmt)
    assert "NM101" in printed.stdout
    if not renderer.styled:  # the document itself goes to standard output
        assert printed.stdout == written + "\n"
    assert f" {fmt}" in cli("check", "--help").stdout.replace(",", " ")


@pytest.mark.parametrize("fmt", AUDIT_FORMATS.names)
def test_audit_renders_every_format(fmt: str, sample: Path) -> None:
    run = cli("audit", "train.py", "--format", fmt, "-o", "report")
    assert run.exit_code in (0, 1), run.stdout + run.stderr
    assert "NM101" in (sample / "report").read_text()


def test_audit_adds_its_readiness_summary_to_text_json_and_markdown(sample: Path) -> None:
    for fmt in ("text", "json", "markdown"):
        cli("audit", "train.py", "--format", fmt, "-o", "report")
        assert "Readiness for TorchNeuron" in (sample / "report").read_text() or \
            '"readiness"' in (sample / "report").read_text(), fmt


def test_an_unknown_format_is_a_usage_error_naming_the_choices(sample: Path) -> None:
    run = cli("check", "train.py", "--format", "yaml")
    assert run.exit_code == 2
    assert "unknown format 'yaml'" in run.stderr or "'yaml'" in run.stderr
    with pytest.raises(UnknownFormat, match="choose from text, json, markdown"):
        RUN_FORMATS.choose("yaml")


@pytest.mark.parametrize("fmt", SMOKE_FORMATS.names)
def test_smoke_renders_a_run_and_a_layout_comparison_in_every_format(fmt: str) -> None:
    result = SmokeResult(script="train.py", nproc=1, passed=True, optimizer_steps=2,
                         ops={"aten::mm": 3})
    comparison = LayoutComparison(script="train.py", rtol=1e-3, runs=[])
    renderer = SMOKE_FORMATS.choose(fmt)
    assert "train.py" in renderer.render(result)
    assert "train.py" in renderer.render(comparison)


@pytest.mark.parametrize("fmt", VERIFY_FORMATS.names)
def test_verify_renders_every_format(fmt: str) -> None:
    outcome = Outcome("train.py", "train_migrated.py", 1, 4,
                      Verdict(CANNOT, "the original did not run"))
    assert "the original did not run" in VERIFY_FORMATS.choose(fmt).render(outcome)


def test_the_help_of_smoke_and_verify_lists_their_formats() -> None:
    assert SMOKE_FORMATS.help() in " ".join(cli("smoke", "--help").stdout.split())
    assert VERIFY_FORMATS.help() in " ".join(cli("verify", "--help").stdout.split())
