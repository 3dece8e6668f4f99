"""`Site.catching`, through NM101: `xm.xla_device()` raised RuntimeError when there was no
device, so a `try` around it that catches that is a test for the device, reported; other
`try` statements are not."""

from __future__ import annotations

import textwrap

import pytest

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import Kind
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules

REGISTRY = Registry(all_rules())


def _kinds(body: str) -> list[Kind]:
    source = "import torch_xla.core.xla_model as xm\n\n" + textwrap.dedent(body)
    result = migrate_source("t.py", source.encode(), REGISTRY)
    assert result.error is None, result.error
    return [f.kind for f in result.findings if f.rule_id == "NM101"]


@pytest.mark.parametrize("body", [
    """\
    try:
        with open("f") as f:
            d = xm.xla_device()
    except Exception:
        d = None
    """,
    """\
    try:
        d = xm.xla_device()
    except (ValueError, RuntimeError) as error:
        d = None
    """,
    """\
    try:
        d = xm.xla_device()
    except:
        d = None
    """,
])
def test_a_try_that_catches_what_the_call_raised_is_reported(body: str) -> None:
    assert _kinds(body) == [Kind.REVIEW]


@pytest.mark.parametrize("body", [
    """\
    try:
        def device():
            return xm.xla_device()  # runs when called, not inside this try
    except RuntimeError:
        pass
    """,
    """\
    try:
        pass
    except RuntimeError:
        pass
    else:
        d = xm.xla_device()  # the else branch is not guarded by the handler
    """,
    """\
    try:
        d = xm.xla_device()
    except KeyError:
        d = None
    """,
])
def test_other_tries_leave_the_rewrite_alone(body: str) -> None:
    assert _kinds(body) == [Kind.FIX]
