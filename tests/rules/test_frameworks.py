"""NM716: Lightning's XLA classes are reported wherever a file uses them, under every package
name Lightning has had; its other classes are not."""

from __future__ import annotations

import textwrap

import pytest

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import Kind
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules

REGISTRY = Registry(all_rules())


def _reported(source: str) -> list[tuple[int, str]]:
    source = textwrap.dedent(source)
    assert REGISTRY.prefilter(source.encode())  # no torch_xla needed to be looked at
    result = migrate_source("t.py", source.encode(), REGISTRY)
    assert result.error is None and result.new_source is None
    found = [f for f in result.findings if f.rule_id == "NM716"]
    assert all(f.kind is Kind.REVIEW for f in found)
    return [(f.line, f.message.split("`")[1]) for f in found]


@pytest.mark.parametrize("imports, use, qualname", [
    ("from pytorch_lightning.strategies import XLAStrategy", "XLAStrategy()",
     "pytorch_lightning.strategies.XLAStrategy"),
    ("from lightning.pytorch.plugins.precision.xla import XLAPrecision", "XLAPrecision()",
     "lightning.pytorch.plugins.precision.xla.XLAPrecision"),
    ("import lightning as L", "L.fabric.accelerators.XLAAccelerator()",
     "lightning.fabric.accelerators.XLAAccelerator"),
    ("from lightning_fabric.plugins.environments import XLAEnvironment", "XLAEnvironment()",
     "lightning_fabric.plugins.environments.XLAEnvironment"),
])
def test_each_package_name_is_reported_at_the_use(imports: str, use: str, qualname: str) -> None:
    assert _reported(f"{imports}\n\nthing = {use}\n") == [(3, qualname)]


def test_lightnings_other_classes_are_not_reported() -> None:
    assert _reported("""\
        from lightning.fabric.strategies import DDPStrategy, FSDPStrategy  # XLA-free
        strategy = DDPStrategy() if True else FSDPStrategy()
    """) == []
