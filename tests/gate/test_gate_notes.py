"""Review items the rewrite would hide stay visible: `apply` leaves a note, `check` reports it
until someone acknowledges it; and the scenario of a team turning `check` green and keeping it
green, once with `--add-noqa` and once with a baseline."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT, cli
from tests.snapshots import assert_matches_snapshot

PROBE = ROOT / "fixtures" / "gate" / "import_probe.before.py"


def test_an_import_probe_stays_a_review_item_after_apply(in_tmp: Path) -> None:
    target = in_tmp / "train.py"
    shutil.copyfile(PROBE, target)
    before = cli("check", ".", "--format", "json")
    assert "NM715" in {f["rule_id"] for f in before.json()["findings"]}
    assert_matches_snapshot(PROBE, "check train.py", before.json()["findings"])
    assert cli("apply", ".").exit_code == 0
    assert target.read_bytes() == PROBE.with_name("import_probe.after.py").read_bytes()
    after = cli("check", ".", "--format", "json")
    assert after.exit_code == 1
    assert [(f["rule_id"], f["line"], f["kind"]) for f in after.json()["findings"]] == [
        ("NM715", 5, "review")]
    # a second apply changes nothing, and leaves no second note
    assert cli("apply", ".").exit_code == 0
    assert target.read_bytes() == PROBE.with_name("import_probe.after.py").read_bytes()
    # acknowledged, it no longer fails; the note's marker counts as used (no NM002)
    assert cli("check", "--add-noqa", ".").exit_code == 0
    assert "try:  # neuron-migrate: reviewed[NM715]" in target.read_text()
    assert cli("check", ".").exit_code == 0


def test_deleting_the_note_acknowledges_it_too(in_tmp: Path) -> None:
    target = in_tmp / "train.py"
    shutil.copyfile(PROBE, target)
    cli("apply", ".")
    target.write_text("".join(line for line in target.read_text().splitlines(keepends=True)
                              if not line.startswith("# neuron-migrate: NM715")))
    assert cli("check", ".").exit_code == 0


def test_a_note_is_ignored_like_its_rule(in_tmp: Path) -> None:
    target = in_tmp / "train.py"
    shutil.copyfile(PROBE, target)
    cli("apply", ".")
    assert cli("check", "--ignore", "NM715", ".").exit_code == 0


def test_with_annotate_no_second_note_is_added(in_tmp: Path) -> None:
    target = in_tmp / "train.py"
    shutil.copyfile(PROBE, target)
    cli("apply", "--annotate", ".")
    assert target.read_text().count("# neuron-migrate: NM715") == 1
    assert cli("check", ".").exit_code == 1


# ------------------------------------------------------------------ the scenario
REVIEWED = ('import importlib.util\n\nHAS_XLA = importlib.util.find_spec("torch_xla") '
            'is not None\n')
NEW_CALL = ("\n\ndef sync():\n    import torch_xla.core.xla_model as xm\n"
            "    return xm.get_ordinal()\n")


def _team_repository(root: Path) -> None:
    shutil.copyfile(PROBE, root / "train.py")
    (root / "detect.py").write_text(REVIEWED)
    (root / "requirements.txt").write_text("transformers-neuronx\n")
    assert cli("apply", ".").exit_code == 0  # migrated; review items left
    assert cli("check", ".").exit_code == 1


@pytest.mark.parametrize("way", ["add-noqa", "baseline"])
def test_a_team_turns_check_green_and_a_new_xla_call_turns_it_red(in_tmp: Path,
                                                                  way: str) -> None:
    _team_repository(in_tmp)
    gate = ["check", "."]
    if way == "add-noqa":
        assert cli("check", "--add-noqa", ".").exit_code == 0
    else:
        assert cli("check", "--write-baseline", "neuron-baseline.json", ".").exit_code == 0
        gate = ["check", "--baseline", "neuron-baseline.json", "."]
    green = cli(*gate)
    assert green.exit_code == 0, green.stdout + green.stderr
    with (in_tmp / "detect.py").open("a") as file:
        file.write(NEW_CALL)
    red = cli(*gate, "--format", "json")
    assert red.exit_code == 1
    assert {(f["path"], f["line"], f["rule_id"]) for f in red.json()["findings"]} == {
        ("detect.py", 7, "NM001"), ("detect.py", 8, "NM203")}
