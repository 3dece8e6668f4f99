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
