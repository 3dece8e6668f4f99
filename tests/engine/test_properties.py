"""Property-based tests: for generated Python programs, with and without XLA calls spliced
in, the engine never crashes, its output parses, and a second run changes nothing.

The default example count keeps CI fast; set NEURON_MIGRATE_EXAMPLES=2000 for a long run.
"""

from __future__ import annotations

import ast
import os

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules

REGISTRY = Registry(all_rules())
SETTINGS = settings(max_examples=int(os.environ.get("NEURON_MIGRATE_EXAMPLES", "40")),
                    deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))

XLA_HEADER = ("import torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n"
              "import torch_xla.debug.metrics as met\n"
              "import torch_xla.distributed.parallel_loader as pl\n")
XLA_LINES = st.lists(st.sampled_from([
    "xm.mark_step()", "device = xm.xla_device()", "torch_xla.sync()",
    "rank = xm.get_ordinal()", "xm.master_print('hi')", "xm.optimizer_step(opt)",
    "loader = pl.MpDeviceLoader(data, device)", "t = torch.zeros(2, device='xla')",
    "if xm.is_master_ordinal():\n    xm.save(state, 'x.pt')",
    "with torch_xla.step():\n    xm.rendezvous('x')", "total = xm.all_reduce(xm.REDUCE_SUM, t)",
    "def f(xm):\n    return xm.mark_step()", "print(xm.xla_device_hw(device))",
    # the shapes real scripts have: one-line blocks, comments in arguments, nesting,
    # decorators, comprehensions, f-strings, calls inside rewritten calls
    "if not ready: xm.rendezvous('download')", "for _ in range(2): xm.mark_step()",
    "xm.optimizer_step(opt,  # the optimizer\n                  )",
    "device = xm.xla_device(  # pick the device\n)",
    "devices = [xm.xla_device() for _ in range(2)]",
    "label = f'{xm.xla_device()}:{xm.get_ordinal()}'",
    "xm.master_print(met.metrics_report())", "xm.master_print(met.counter_value('x'))",
    "@torch_xla.compile\ndef step(x):\n    return x * 2",
    "class Trainer:\n    def run(self):\n        if xm.is_master_ordinal(): print(1)",
    "try:\n    xm.mark_step()\nexcept RuntimeError:\n    pass",
]), min_size=1, max_size=8)
LAYOUTS = st.sampled_from(["lf", "crlf", "bom", "tabs"])


def _laid_out(source: str, layout: str) -> bytes:
    """The same program with other line endings, a BOM or tab indentation."""
    if layout == "tabs":
        source = "\n".join(line.replace("    ", "\t") for line in source.split("\n"))
    data = source.encode()
    if layout == "crlf":
        data = data.replace(b"\n", b"\r\n")
    if layout == "bom":
        data = b"\xef\xbb\xbf" + data
    return data


def _check(source: bytes) -> None:
    result = migrate_source("generated.py", source, REGISTRY)
    if result.error is not None:
        assert "internal error" not in result.error and "does not compile" not in result.error \
            and "still used" not in result.error, result.error  # the name guard refused it
        return
    new = result.new_source or source
    ast.parse(new)
    again = migrate_source("generated.py", new, REGISTRY)
    assert again.error is None
    assert again.new_source in (None, new), "a second run changed the file"


@pytest.mark.slow
@SETTINGS
@given(hypothesmith.from_grammar())
def test_generated_programs(program: str) -> None:
    _check(program.encode())


@pytest.mark.slow
@SETTINGS
@given(hypothesmith.from_grammar())
def test_programs_without_xla_tokens_stay_byte_identical(program: str) -> None:
    if any(token in program.encode() for token in REGISTRY.tokens):
        return
    result = migrate_source("generated.py", program.encode(), REGISTRY)
    assert result.new_source in (None, program.encode()) and not result.findings


@pytest.mark.slow
@SETTINGS
@given(hypothesmith.from_grammar(), XLA_LINES, LAYOUTS)
def test_generated_programs_with_xla_calls(program: str, lines: list[str], layout: str) -> None:
    body = "\n".join(lines)
    indented = "\n".join("    " + line for line in body.splitlines())
    source = f"{XLA_HEADER}{program}\n{body}\n\ndef _wrapped(opt, data, state):\n{indented}\n"
    try:
        ast.parse(source)
    except SyntaxError:
        return  # the generated program does not end a statement cleanly
    data = _laid_out(source, layout)
    try:
        ast.parse(data)
    except SyntaxError:
        return  # tabs mixed with the program's own spaces
    _check(data)
