"""Messages say what the run does: an instruction (`remove ...`) where nothing was written
(check, dry-run, a review item, an unsafe fix left out), the past tense (`removed ...`) for a
change apply wrote."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import libcst as cst

from neuron_migrate.engine.kept_calls import quoted_as_written
from neuron_migrate.wording import as_done
from tests.conftest import FIXTURES, cli, migrated

PAST = re.compile(r"(?:^|(?<=; )|(?<=: ))(?:removed|deleted|dropped|added|changed|renamed|"
                  r"replaced|moved|unwrapped|launched|kept|written)\b")


def _outside_code(message: str) -> str:
    return "`…`".join(message.split("`")[::2])


def test_the_past_tense_is_formed_outside_code_only() -> None:
    assert as_done("remove `x: add y`: nothing uses it; drop `z`") == \
        "removed `x: add y`: nothing uses it; dropped `z`"
    assert as_done("`a` → `b`; add dtype=torch.bfloat16 (the default)") == \
        "`a` → `b`; added dtype=torch.bfloat16 (the default)"
    # advice beside a change, and verbs inside a clause, stay as they are
    assert as_done("`a` → `b`: update launch commands; check the index") == \
        "`a` → `b`: update launch commands; check the index"
    assert as_done("the removal is safe: addresses remove nothing") == \
        "the removal is safe: addresses remove nothing"


@pytest.fixture
def everything(in_tmp: Path) -> Path:
    """Every fixture input: code, notebooks, dependency files."""
    shutil.copytree(FIXTURES / "python", in_tmp / "src",
                    ignore=shutil.ignore_patterns("*.after.py"))
    shutil.copytree(FIXTURES / "notebooks", in_tmp / "src" / "notebooks",
                    ignore=shutil.ignore_patterns("*.after.ipynb"))
    for case in sorted((FIXTURES / "deps").iterdir()):
        if (case / "before").is_dir():
            shutil.copytree(case / "before", in_tmp / "src" / "deps" / case.name)
    return in_tmp


def test_nothing_written_is_told_as_done(everything: Path) -> None:
    report = cli("check", "src", "--format", "json").json()
    assert len(report["findings"]) > 300
    told_as_done = [f["message"] for f in report["findings"]
                    if PAST.search(_outside_code(f["message"]))]
    assert told_as_done == []


def test_what_apply_wrote_is_told_as_done_and_the_rest_is_not(everything: Path) -> None:
    check = cli("check", "src", "--format", "json").json()["findings"]
    apply = cli("apply", "src", "--format", "json").json()["findings"]
    assert [(f["path"], f["line"], f["rule_id"]) for f in check] == \
        [(f["path"], f["line"], f["rule_id"]) for f in apply]
    done = 0
    for before, after in zip(check, apply):
        if after["applied"]:
            assert after["message"] == as_done(before["message"])
            done += after["message"] != before["message"]
        else:
            assert after["message"] == before["message"]
    assert done > 100
    by_rule = {f["rule_id"]: f["message"] for f in apply if f["applied"]}
    assert by_rule["NM001"].startswith("removed `")
    assert by_rule["NM110"].startswith("deleted `")
    unsafe = [f["message"] for f in apply if f["rule_id"] == "NM602"]
    assert unsafe and all(m.startswith("remove XLA_") for m in unsafe)  # not applied


def test_the_text_report_words_changes_by_mode(in_tmp: Path) -> None:
    source = "import torch_xla\nimport torch_xla.core.xla_model as xm\nxm.mark_step()\n"
    (in_tmp / "train.py").write_text(source)
    dry = cli("apply", "--dry-run", "train.py").stdout
    assert "NM110 [fix]  delete `xm.mark_step()`" in dry and "deleted" not in dry
    applied = cli("apply", "train.py").stdout
    assert "NM110 [fix]  deleted `xm.mark_step()`" in applied


def test_prose_between_two_code_spans_is_never_clipped_as_one() -> None:
    """Only code spans are cut: a long explanation between two short quotations stays whole,
    and a long quotation after it is still cut."""
    from neuron_migrate.wording import QUOTE_LIMIT, clipped

    prose = "why " * 80  # well past QUOTE_LIMIT, outside any span
    long_call = "f(" + "x, " * 200 + ")"
    message = clipped(f"`a()` → `b()`: {prose}; drop `num_workers=8`: `{long_call}`")
    assert prose in message and "`num_workers=8`" in message
    assert long_call not in message and f"({len(long_call):,} characters)" in message
    assert len(long_call) > QUOTE_LIMIT


@pytest.mark.parametrize(("source", "rule", "quoted"), [
    # the reduction constant inside is rewritten first (NM206)
    ("import torch_xla.core.xla_model as xm\n\ntotal = xm.all_reduce(xm.REDUCE_SUM, t)\n",
     "NM207", "`xm.all_reduce(xm.REDUCE_SUM, t)` → `_neuron_all_reduce("),
    # over two lines: the message joins them, still as written
    ("import torch_xla.core.xla_model as xm\n\ntotal = xm.all_reduce(\n    xm.REDUCE_MAX, t)\n",
     "NM207", "`xm.all_reduce( xm.REDUCE_MAX, t)` → `_neuron_all_reduce("),
    # the device argument is rewritten first (NM101), and the rule renames the call itself
    ("import torch_xla.amp\nimport torch_xla.core.xla_model as xm\n\n"
     "with torch_xla.amp.autocast(xm.xla_device()):\n    y = f(x)\n",
     "NM401", "`torch_xla.amp.autocast(xm.xla_device())` → `torch.autocast(\"neuron\""),
])
def test_an_outer_rewrite_quotes_the_code_as_written(source: str, rule: str, quoted: str) -> None:
    new, findings = migrated(source)
    assert new != source
    [message] = [f.message for f in findings if f.rule_id == rule]
    assert quoted in message


def test_an_after_quote_holding_the_rewritten_node_is_left_as_it_is() -> None:
    original, updated = cst.parse_expression("f(x)"), cst.parse_expression("f(y)")
    assert quoted_as_written("`f(y)` → `g(f(y))`", updated, original) == "`f(x)` → `g(f(y))`"
