"""The hardware target: given with --target or the configuration, or detected from
the instance types a repository names. Trn1/Inf2 stop every rewrite toward TorchNeuron; with
no target, one note says which findings assume Trn2/Trn3."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from neuron_migrate import entry, target
from neuron_migrate.cli import app
from neuron_migrate.config import ConfigError, load_config
from tests.conftest import cli

XLA = "import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\nxm.mark_step()\n"
PINS = "torch-neuronx==2.9.0.2.15.32035\nneuronx-cc==2.*\nnki\n"


def _tree(folder: Path, script: str = "") -> None:
    (folder / "train.py").write_text(XLA)
    (folder / "requirements.txt").write_text(PINS)
    if script:
        (folder / "run.sh").write_text(script)


def test_named_instances_give_their_lines() -> None:
    data = (b"# trn1.32xlarge and ml.inf2.xlarge\nx = 'trn2.48xlarge'\ntrn2u.48xlarge\n"
            b"trn1n.32xlarge\ntrn10.large mytrn2.48xlarge\n")
    assert target.named_instances(data) == (
        (1, "trn1.32xlarge"), (1, "ml.inf2.xlarge"), (2, "trn2.48xlarge"),
        (3, "trn2u.48xlarge"), (4, "trn1n.32xlarge"))
    assert target.named_instances(b"import torch\n") == ()


@pytest.mark.parametrize(("names", "expected"), [
    (["trn2.48xlarge", "trn3.48xlarge"], "trn2"), (["inf2.xlarge"], "inf2"),
    (["trn1n.32xlarge", "inf2.xlarge"], "trn1"), (["trn1.2xlarge", "trn2.48xlarge"], None),
    ([], None)])
def test_detection_agrees_only_when_every_instance_is_of_one_kind(names, expected) -> None:
    mentions = [target.Mention(f"{i}.sh", 1, name) for i, name in enumerate(names)]
    assert target.detected(mentions)[0] == expected


def test_a_file_listing_both_kinds_is_a_menu_not_a_choice() -> None:
    menu = [target.Mention("bug-report.yml", 3, name)
            for name in ("trn1.32xlarge", "inf2.xlarge", "trn2.48xlarge")]
    chosen, new, old = target.detected([*menu, target.Mention("run.sh", 2, "trn1.32xlarge")])
    assert chosen == "trn1" and new == [] and [m.path for m in old] == ["run.sh"]


@pytest.mark.parametrize("chosen", ["trn1", "inf2"])
def test_a_trn1_or_inf2_target_rewrites_nothing_and_says_why(chosen: str, in_tmp: Path) -> None:
    _tree(in_tmp)
    done = cli("apply", "--target", chosen, ".")
    assert done.exit_code == 0
    assert (in_tmp / "train.py").read_text() == XLA
    assert (in_tmp / "requirements.txt").read_text() == PINS
    assert f"target {chosen} (--target)" in done.stderr
    assert "Trn2 and Trn3 only" in done.stderr and "2.9.0.2.15.32035" in done.stderr
    assert "0 review items" in done.stdout


def test_the_configuration_names_the_target(in_tmp: Path) -> None:
    _tree(in_tmp)
    (in_tmp / "pyproject.toml").write_text('[tool.neuron-migrate]\ntarget = "Inf2"\n')
    assert load_config([in_tmp], frozenset()).target == "inf2"
    done = cli("scan", "--fix", ".")
    assert done.exit_code == 0 and (in_tmp / "requirements.txt").read_text() == PINS
    assert "target inf2 (target in " in done.stderr
    # the command line wins over the configuration
    done = cli("scan", "--fix", "--target", "trn2", ".")
    assert "torch-neuronx==2.14.*" in (in_tmp / "requirements.txt").read_text()
    assert "target trn2 (--target)" in done.stdout


def test_an_unknown_target_is_an_error(in_tmp: Path) -> None:
    (in_tmp / "pyproject.toml").write_text('[tool.neuron-migrate]\ntarget = "trn9"\n')
    with pytest.raises(ConfigError, match="target must be one of trn2, trn3, trn1, inf2"):
        load_config([in_tmp], frozenset())
    done = cli("check", "--target", "p4d", "x.py")
    assert done.exit_code == 2 and "unknown target 'p4d'" in done.stderr


def test_standard_input_comes_back_unchanged_for_trn1(in_tmp: Path) -> None:
    done = CliRunner().invoke(app, ["apply", "--target", "trn1", "--stdin-filename", "train.py",
                                    "-"], input=XLA)
    assert done.exit_code == 0
    assert done.stdout == XLA


def test_without_a_target_one_note_says_the_findings_assume_trn2(in_tmp: Path) -> None:
    _tree(in_tmp)
    done = cli("check", ".")
    notes = [line for line in done.stdout.splitlines() if line.startswith("target")]
    assert notes == [notes[0]] and "target not given" in notes[0]
    assert "findings above assume Trn2/Trn3" in notes[0]


def test_a_detected_trn1_is_reported_with_where_but_still_migrated(in_tmp: Path) -> None:
    _tree(in_tmp, "#!/bin/sh\n# on a trn1.32xlarge\ntorchrun train.py\n")
    done = cli("apply", ".")
    assert "the repository names `trn1.32xlarge` in run.sh:2" in done.stdout
    assert "--target trn1" in done.stdout
    assert "xla_device" not in (in_tmp / "train.py").read_text()


def test_a_detected_trn2_is_the_target(in_tmp: Path) -> None:
    _tree(in_tmp, "#!/bin/sh\naws ec2 run-instances --instance-type trn2.48xlarge\n")
    done = cli("check", ".")
    assert "target trn2 (detected: `trn2.48xlarge` in run.sh:2)" in done.stdout
    assert "assume Trn2/Trn3" not in done.stdout


def test_a_clean_tree_says_nothing_about_hardware(in_tmp: Path) -> None:
    (in_tmp / "requirements.txt").write_text("numpy\n")
    (in_tmp / "Dockerfile").write_text("FROM python:3.12-slim\nRUN pip install numpy\n")
    done = cli("scan", ".")
    assert done.exit_code == 0
    assert done.stdout == "2 files scanned, 0 would change, 0 failed; 0 fixes, 0 unsafe fixes, " \
                          "0 review items\n"


@pytest.mark.parametrize(("args", "expected"), [
    (["check", "--target", "trn2", "a.py"], "trn2"), (["apply", "--target=inf2", "a.py"], "inf2"),
    (["scan", "--target", "TRN1", "--fix", "."], "trn1"), (["check", "a.py"], None)])
def test_the_lean_command_line_reads_the_target(args: list[str], expected: str | None,
                                                monkeypatch) -> None:
    import neuron_migrate.cli

    made = []
    monkeypatch.setattr(neuron_migrate.cli, "_execute", made.append)
    assert cli(*args).exit_code == 0
    assert entry.lean_request(args) == made[0]
    assert made[0].target == expected


@pytest.mark.parametrize("args", [["check", "--target", "trn9", "a.py"],
                                  ["check", "--target", "a.py"]])
def test_a_target_the_lean_parser_cannot_use_goes_to_typer(args: list[str]) -> None:
    assert entry.lean_request(args) is None


def test_the_note_names_each_file_once() -> None:
    mentions = [target.Mention(path, line, "trn1.32xlarge")
                for path, line in (("a.sh", 2), ("a.sh", 9), ("b.yaml", 1), ("c.py", 4),
                                   ("d.sh", 5))]
    (note,) = target.notes(None, None, mentions, findings=3)
    assert "`trn1.32xlarge` in a.sh:2, `trn1.32xlarge` in b.yaml:1, `trn1.32xlarge` in " \
           "c.py:4 and 1 more file:" in note
    assert "the 3 findings above assume Trn2/Trn3" in note and "--target trn1" in note
    assert target.notes(None, None, [], findings=0) == []


def test_the_markdown_report_carries_the_note(in_tmp: Path) -> None:
    _tree(in_tmp, "#!/bin/sh\naws ec2 run-instances --instance-type trn2.48xlarge\n")
    done = cli("check", "--format", "markdown", ".")
    assert "> target trn2 (detected: `trn2.48xlarge` in run.sh:2)" in done.stdout


def test_sagemaker_names_and_the_platform_override_count() -> None:
    data = (b"estimator = Estimator(instance_type='ml.inf2.xlarge')\n"
            b"os.environ[\"NEURON_PLATFORM_TARGET_OVERRIDE\"] = \"trn2\"\n"
            b"ENV NEURON_PLATFORM_TARGET_OVERRIDE=trn1\n")
    found = target.named_instances(data)
    assert found == ((1, "ml.inf2.xlarge"), (2, "NEURON_PLATFORM_TARGET_OVERRIDE=trn2"),
                     (3, "NEURON_PLATFORM_TARGET_OVERRIDE=trn1"))
    assert [target.family(name) for _, name in found] == ["inf2", "trn2", "trn1"]



def _joined(*parts: list[bytes]) -> st.SearchStrategy[bytes]:
    return st.tuples(*(st.sampled_from(p) for p in parts)).map(b"".join)


_NAMES = _joined([b"", b"ml.", b"ml", b"xml."], [b"trn1", b"trn1n", b"trn2u", b"trn3", b"inf2",
                                                 b"trn", b"inf", b"trn4"],
                 [b".large", b".48xlarge", b".xlarge", b"large", b".largex", b""])
_OVERRIDES = _joined([b"NEURON_PLATFORM_TARGET_OVERRIDE", b"NEURON_PLATFORM"],
                     [b"", b"\"]", b"'", b"]"], [b" = ", b":", b",", b"", b" "],
                     [b"\"", b"", b"'"], [b"trn1", b"trn2", b"inf2", b"trn2.large", b"inf"])
_NOISE = st.sampled_from([b"a", b"_", b"\n", b" ", b"\xc3\xa9", b"1", b".", b"ml."])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_NAMES, _OVERRIDES, _NOISE), max_size=12))
def test_the_instance_scan_finds_what_the_pattern_finds_everywhere(parts: list[bytes]) -> None:
    """The scan tries the pattern only where its literals are: the same matches as trying it
    at every position, `\\b` before an `ml.` or after a letter included."""
    data = b"".join(parts)
    everywhere = [(m.span(), m.groups()) for m in target.INSTANCE.finditer(data)]
    assert [(m.span(), m.groups()) for m in target._matches(data)] == everywhere
    lines = tuple(data.count(b"\n", 0, start) + 1 for (start, _), _ in everywhere)
    assert tuple(line for line, _ in target.named_instances(data)) == lines
