"""Changes that only make sense together are made together or not at all.

A call left as it is (for review, by a suppression, or an XLA call no rule rewrites) keeps its
arguments as written: a native value inside an XLA call runs on neither stack. And the XLA
RNG state read by `xm.get_rng_state()` and restored by `xm.set_rng_state()` migrates as a
pair."""

from __future__ import annotations

import textwrap

import pytest

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import Kind
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules

REGISTRY = Registry(all_rules())


def _migrate(body: str) -> tuple[str, list]:
    source = "import torch_xla.core.xla_model as xm\n\n" + textwrap.dedent(body)
    result = migrate_source("t.py", source.encode(), REGISTRY)
    assert result.error is None, result.error
    text = result.new_source.decode() if result.new_source is not None else source
    return text, list(result.findings)


@pytest.mark.parametrize("line, kept", [
    ("y = xm.all_reduce(xm.REDUCE_SUM, t, groups=g)\n", "xm.REDUCE_SUM"),
    ("y = xm.all_reduce(xm.REDUCE_MAX, t, pin_layout=False)\n", "xm.REDUCE_MAX"),
    ("y = xm.all_reduce(xm.REDUCE_SUM, t, groups=g)  # neuron-migrate: ignore[NM207]\n",
     "xm.REDUCE_SUM"),
    ("y = xm.all_to_all(t.to(xm.xla_device()), 0, 0, 4)\n", "xm.xla_device()"),
])
def test_a_call_left_as_it_is_keeps_its_arguments_as_written(line: str, kept: str) -> None:
    text, findings = _migrate(line)
    assert line in text  # the whole line, the XLA value inside included
    inner = [f for f in findings if kept.split("(")[0].split(".")[-1] in f.message
             and "not written" in f.message]
    assert inner and all(f.kind is Kind.REVIEW and not f.applied for f in inner)
    assert not any(f.applied for f in findings)


def test_the_held_back_change_names_the_call_and_its_rule() -> None:
    _, findings = _migrate("y = xm.all_reduce(xm.REDUCE_SUM, t, groups=g)\n")
    (held,) = [f for f in findings if f.rule_id == "NM206"]
    assert "`xm.all_reduce(xm.REDUCE_SUM, t, groups=g)` around it stays for review (NM207)" \
        in held.message
    (outer,) = [f for f in findings if f.rule_id == "NM207"]
    assert "xm.all_reduce(xm.REDUCE_SUM, t, groups=g)" in outer.message  # as it stays


def test_a_call_that_is_rewritten_takes_its_arguments_along() -> None:
    text, findings = _migrate("import torch.distributed as dist\n"
                              "dist.all_reduce(t, op=xm.REDUCE_SUM)\n"
                              "print(xm.xla_device())\n")
    assert "dist.all_reduce(t, op=dist.ReduceOp.SUM)" in text
    assert 'print(torch.device("neuron"))' in text
    assert all(f.applied for f in findings if f.rule_id in ("NM206", "NM101"))


def _rng(findings: list) -> list:
    return [f for f in findings if f.rule_id == "NM404"]


def test_a_read_state_and_its_restore_migrate_as_a_native_pair() -> None:
    text, findings = _migrate("""\
    def sample_twice(model, x):
        state = xm.get_rng_state()
        first = model(x)
        xm.set_rng_state(state)
        return first, model(x)
    """)
    assert "state = torch.neuron.get_rng_state()" in text
    assert "torch.neuron.set_rng_state(state)" in text
    assert "manual_seed" not in text
    assert [f.applied for f in _rng(findings)] == [True, True]


@pytest.mark.parametrize("body", [
    pytest.param("""\
    def checkpoint_rng():
        s = xm.get_rng_state()
        return s


    def restore(s):
        xm.set_rng_state(s)
    """, id="returned-then-passed-back"),
    pytest.param("""\
    def save(state):
        state["rng"] = xm.get_rng_state()


    def load(state):
        xm.set_rng_state(state["rng"])
    """, id="through-a-dict"),
    pytest.param("""\
    def maybe(x):
        s = xm.get_rng_state()
        if x:
            s = 0
        xm.set_rng_state(s)
        return s
    """, id="the-name-holds-other-values"),
])
def test_a_read_that_stays_for_review_keeps_its_restores_with_it(body: str) -> None:
    text, findings = _migrate(body)
    rng = _rng(findings)
    assert len(rng) == 2 and all(f.kind is Kind.REVIEW and not f.applied for f in rng)
    assert "torch.neuron" not in text
    (restore,) = [f for f in rng if "xm.set_rng_state" in f.message.split(":")[0]]
    read_line = next(f.line for f in rng if f is not restore)
    assert f"line {read_line}" in restore.message


def test_a_number_is_a_seed_whatever_the_file_reads() -> None:
    text, findings = _migrate("""\
    def state():
        return xm.get_rng_state()


    def reseed():
        xm.set_rng_state(1234 * 2)
    """)
    assert "torch.neuron.manual_seed(1234 * 2)" in text
    assert sorted(f.applied for f in _rng(findings)) == [False, True]


def test_a_pair_half_kept_by_a_suppression_is_reviewed_whole() -> None:
    text, findings = _migrate("""\
    def sample_twice(model, x):
        state = xm.get_rng_state()  # neuron-migrate: ignore[NM404]
        first = model(x)
        xm.set_rng_state(state)
        return first
    """)
    assert "torch.neuron" not in text
    assert not any(f.applied for f in _rng(findings))
