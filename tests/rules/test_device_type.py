"""NM104 and `xr.device_type()` tested for None or truth: the XLA call returned None when no
PJRT device was configured, its replacement never does, so such a test is reported."""

from __future__ import annotations

import pytest

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import Kind
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules

REGISTRY = Registry(all_rules())


def _kind(expression: str) -> Kind:
    source = f"import torch_xla.runtime as xr\n\nvalue = {expression}\n"
    result = migrate_source("t.py", source.encode(), REGISTRY)
    assert result.error is None, result.error
    [finding] = [f for f in result.findings if f.rule_id == "NM104"]
    return finding.kind


@pytest.mark.parametrize("expression", [
    "xr.device_type() is not None", "None is xr.device_type()", "xr.device_type() == None",
    "not xr.device_type()", "ready and xr.device_type()", "1 if xr.device_type() else 0",
])
def test_a_test_for_none_or_truth_is_reported(expression: str) -> None:
    assert _kind(expression) is Kind.REVIEW


@pytest.mark.parametrize("expression", [
    'xr.device_type() == "NEURON"', "1 if ready else xr.device_type()", "xr.device_type()",
    'str(xr.device_type())',
])
def test_a_use_of_the_name_is_rewritten(expression: str) -> None:
    assert _kind(expression) is Kind.FIX
