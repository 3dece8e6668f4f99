"""verify's verdict, likely cause and report, on records written by hand (no torch needed)."""

from __future__ import annotations

import json

import pytest

from neuron_migrate.model import Finding
from neuron_migrate.verify.causes import likely_cause
from neuron_migrate.verify.compare import AGREE, CANNOT, DIFFER, NOISE_FACTOR, STRICT, allowed, judge
from neuron_migrate.verify.report import Outcome, render
from neuron_migrate.verify.scope import out_of_scope

BATCH = [[[8, 10], 1.5, 7.25], [[8], 12.0, 40.0]]


def record(losses, grads=None, params=None, batches=None, per_step=1, initial=5.0, env=None):
    """A rank's record as the recorder writes it: one batch per step unless told."""
    grads = grads or [1.0] * len(losses)
    params = params or [5.0 + 0.1 * i for i in range(len(losses))]
    batches = batches if batches is not None else [
        [[[8, 10], 1.5 + i, 7.25 * i], [[8], 12.0, 40.0]] for i in range(len(losses) * per_step)]
    steps = [{"loss": l, "grad_norm": g, "param_norm": p, "batches_taken": (i + 1) * per_step}
             for i, (l, g, p) in enumerate(zip(losses, grads, params))]
    return {"rank": 0, "world_size": 1, "steps": steps, "initial_params": initial,
            "batches": batches, "numerics_env": env or {}}


LOSSES = [2.5, 2.25, 2.0, 1.8]


def test_equal_runs_agree_and_fill_every_row():
    verdict = judge([record(LOSSES)], [record(LOSSES)], [record(LOSSES)], 4)
    assert verdict.status == AGREE and verdict.exit_code == 0
    assert [row.step for row in verdict.rows] == [1, 2, 3, 4]
    assert all(row.status == "ok" for row in verdict.rows)


def test_step_one_is_strict():
    off = [LOSSES[0] * (1 + 3 * STRICT), *LOSSES[1:]]
    verdict = judge([record(LOSSES)], [record(off)], [record(off)], 4)
    assert verdict.status == DIFFER and verdict.exit_code == 1
    assert (verdict.parting.step, verdict.parting.quantity) == (1, "loss")
    assert verdict.rows[0].status == "differs" and verdict.rows[1].status == "after"


def test_later_steps_are_held_to_the_measured_noise():
    drift = 1e-3  # far above STRICT
    migrated = [LOSSES[0], LOSSES[1] * (1 + drift), *LOSSES[2:]]
    # the noise is measured between the migrated run and its perturbed repeat
    noisy = [LOSSES[0], migrated[1] * (1 + 2 * drift / NOISE_FACTOR), *LOSSES[2:]]
    assert judge([record(LOSSES)], [record(migrated)], [record(noisy)], 4).status == AGREE
    quiet = [LOSSES[0], migrated[1] * (1 + 1e-8), *LOSSES[2:]]
    verdict = judge([record(LOSSES)], [record(migrated)], [record(quiet)], 4)
    assert verdict.status == DIFFER and verdict.parting.step == 2


def test_allowed_difference_never_falls_below_strict():
    assert allowed(1, 0.5) == STRICT
    assert allowed(3, 0.0) == STRICT
    assert allowed(3, 1e-3) == pytest.approx(NOISE_FACTOR * 1e-3)
    assert allowed(3, None) == STRICT


def test_a_gradient_that_differs_while_the_loss_agrees_is_found_at_its_step():
    grads = [1.0, 1.2, 0.9, 0.8]
    migrated = record(LOSSES, [1.0, 2.2, 2.9, 3.5])
    verdict = judge([record(LOSSES, grads)], [migrated], [migrated], 4)
    assert (verdict.parting.step, verdict.parting.quantity) == (2, "grad_norm")


def test_data_that_differs_from_the_original_is_a_difference_at_the_step_that_took_it():
    original = record(LOSSES, per_step=2)
    batches = [list(b) for b in original["batches"]]
    batches[3] = [[[8, 10], 99.0, 7.0], [[8], 12.0, 40.0]]
    migrated = record(LOSSES, per_step=2, batches=batches)
    verdict = judge([original], [migrated], [migrated], 4)
    assert verdict.status == DIFFER
    assert (verdict.parting.step, verdict.parting.quantity) == (2, "data")
    assert "batch 4" in verdict.reason


def test_data_that_changes_between_two_migrated_runs_cannot_be_compared():
    first, second = record(LOSSES), record(LOSSES)
    second["batches"][0] = [[[8, 10], -3.0, 1.0], [[8], 12.0, 40.0]]
    verdict = judge([record(LOSSES)], [first], [second], 4)
    assert verdict.status == CANNOT and verdict.exit_code == 2
    assert "between two runs of the migrated script" in verdict.reason


def test_prefetched_batches_of_the_original_are_not_compared():
    original = record(LOSSES)
    original["batches"] += [[[[8, 10], 1e9, 0.0]]] * 5  # a device loader's thread took more
    assert judge([original], [record(LOSSES)], [record(LOSSES)], 4).status == AGREE


def test_parameters_that_start_elsewhere_are_found_before_the_first_step():
    verdict = judge([record(LOSSES, initial=5.0)], [record(LOSSES, initial=5.5)],
                    [record(LOSSES, initial=5.5)], 4)
    assert verdict.parting.step == 0 and verdict.parting.quantity == "initial_params"
    unseeded = judge([record(LOSSES)], [record(LOSSES, initial=5.5)],
                     [record(LOSSES, initial=5.7)], 4)
    assert unseeded.status == CANNOT and "no seed" in unseeded.reason


def test_a_rank_without_steps_cannot_be_compared():
    empty = record([])
    verdict = judge([record(LOSSES)], [empty], None, 4)
    assert verdict.status == CANNOT and "migrated rank 0" in verdict.reason


def test_one_side_stopping_early_differs():
    verdict = judge([record(LOSSES)], [record(LOSSES[:2])], [record(LOSSES[:2])], 4)
    assert verdict.status == DIFFER and verdict.parting.quantity == "steps"


def test_every_rank_is_compared():
    other = record([LOSSES[0] * 1.01, *LOSSES[1:]])
    verdict = judge([record(LOSSES), record(LOSSES)], [record(LOSSES), other],
                    [record(LOSSES), other], 4)
    assert verdict.parting.rank == 1 and "rank 1" in verdict.reason


# ---------------------------------------------------------------------------- causes
def finding(rule: str, line: int) -> Finding:
    return Finding("train.py", line, 1, rule, "fix", "a rewrite", applied=True)


def test_gradients_summed_over_the_replicas_name_the_averaging_rewrite():
    verdict = judge([record(LOSSES, [1.0] * 4), record(LOSSES, [1.0] * 4)],
                    [record(LOSSES, [2.0] * 4), record(LOSSES, [2.0] * 4)], None, 4)
    cause = likely_cause(verdict.parting, [finding("NM210", 40), finding("NM101", 3)], 2, {}, False)
    assert "summed, not averaged" in cause and "NM210 (line 40)" in cause and "NM101" not in cause


def test_a_loss_scaled_twice_is_read_from_the_ratio():
    verdict = judge([record(LOSSES)], [record([v / 2 for v in LOSSES])], None, 4)
    assert "scaled" in likely_cause(verdict.parting, [], 1, {}, False)


def test_a_path_no_rule_rewrote_was_changed_by_hand():
    verdict = judge([record(LOSSES, [1.0, 1.0, 1, 1])], [record(LOSSES, [1.0, 1.9, 2.7, 3.4])],
                    None, 4)
    cause = likely_cause(verdict.parting, [finding("NM101", 3)], 1, {}, False)
    assert "zero_grad" in cause and "after the migration" in cause


def test_numerics_settings_of_the_original_are_the_expected_cause():
    verdict = judge([record(LOSSES, env={"XLA_USE_BF16": "1"})], [record([2.51, *LOSSES[1:]])],
                    None, 4)
    assert verdict.expected_differences == {"XLA_USE_BF16": "1"}
    cause = likely_cause(verdict.parting, [], 1, verdict.expected_differences, False)
    assert cause.startswith("expected") and "--match-numerics" in cause


# ---------------------------------------------------------------------------- scope
def test_sharded_and_kernel_originals_are_out_of_scope():
    assert out_of_scope("import torch\n", [finding("NM210", 4)]) == []
    reasons = out_of_scope("from neuronxcc.nki import jit\n", [finding("NM704", 9)])
    assert any("FSDP" in r for r in reasons) and any("NKI" in r for r in reasons)


# ---------------------------------------------------------------------------- report
@pytest.fixture
def differing() -> Outcome:
    migrated = record([*LOSSES[:2], 2.5, 2.2])
    verdict = judge([record(LOSSES)], [migrated], [migrated], 4)
    verdict.cause = "the update of step 2"
    return Outcome("train.py", "train_migrated.py", 1, 4, verdict, seconds={"original": 1.0})


def test_text_report_gives_the_verdict_the_cause_and_a_row_per_step(differing):
    text = render(differing, "text")
    lines = text.splitlines()
    assert lines[0].startswith("verify DIFFER: train.py and train_migrated.py: at optimizer step 3")
    assert "likely cause: the update of step 2" in text
    assert sum(1 for line in lines if line.strip()[:1].isdigit()) == 4
    assert "<- parts here" in next(line for line in lines if line.strip().startswith("3 "))


def test_json_report_carries_the_rows_and_the_exit_code(differing):
    data = json.loads(render(differing, "json"))
    assert data["verdict"] == "differ" and data["exit_code"] == 1
    assert data["first_parting"]["step"] == 3 and len(data["steps"]) == 4
    assert data["steps"][2]["status"] == "differs"


def test_markdown_report_is_a_table_for_a_pull_request(differing):
    text = render(differing, "markdown")
    assert text.startswith("### ❌ neuron-migrate verify: DIFFER")
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 4 and "**parts here**" in table[2 + 2]


def test_the_noise_allowed_at_a_step_is_the_largest_measured_so_far():
    migrated = [LOSSES[0], LOSSES[1] * (1 + 1e-3), LOSSES[2] * (1 + 1e-3), LOSSES[3]]
    noise = [LOSSES[0], migrated[1] * (1 + 2e-4), migrated[2] * (1 + 1e-9), LOSSES[3]]
    verdict = judge([record(LOSSES)], [record(migrated)], [record(noise)], 4)
    assert verdict.status == AGREE, verdict.reason
    assert verdict.rows[2].noise["loss"] == pytest.approx(2e-4, rel=1e-3)
