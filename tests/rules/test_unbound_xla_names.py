"""NM719: torch_xla's conventional names (`xm`, `xmp`, `xr`, `xs`, `met`, `xu`, `pl`,
`torch_xla`) used where nothing in the file binds them are reported with what they would be;
a name the file binds to anything else, or Lightning's `pl`, is not."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

import neuron_migrate.rules.unbound_names as unbound_names
from neuron_migrate.analysis.readiness_facts import facts_of
from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import Kind
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from tests.conftest import FIXTURES, SOURCES, source_id

REGISTRY = Registry(all_rules())


def _reported(source: str) -> list[tuple[int, str]]:
    data = textwrap.dedent(source).encode()
    result = migrate_source("t.py", data, REGISTRY)
    assert result.error is None, result.error
    found = [f for f in result.findings if f.rule_id == "NM719"]
    assert all(f.kind is Kind.REVIEW and not f.applied for f in found)
    return [(f.line, f.message) for f in found]


def test_a_use_whose_import_was_removed_is_reported_with_what_it_would_be() -> None:
    found = _reported("""\
        import torch


        def place(model):
            device = xm.xla_device()
            return model.to(device)
    """)
    assert [line for line, _ in found] == [5]
    message = found[0][1]
    assert "`xm` is not bound" in message and "NameError" in message
    assert "`torch_xla.core.xla_model.xla_device`" in message
    assert "`import torch_xla.core.xla_model as xm`" in message


def test_a_file_whose_only_xla_trace_is_an_unbound_name_is_still_read() -> None:
    data = b"import torch\n\n\ndef step():\n    xm.mark_step()\n"
    assert REGISTRY.prefilter(data)
    assert [line for line, _ in _reported(data.decode())] == [5]


@pytest.mark.parametrize("use, meaning", [
    ("xmp.spawn(fn, args=())", "torch_xla.distributed.xla_multiprocessing.spawn"),
    ("xr.world_size()", "torch_xla.runtime.world_size"),
    ("xs.mark_sharding(t, mesh, (0, 1))", "torch_xla.distributed.spmd.mark_sharding"),
    ("print(met.metrics_report())", "torch_xla.debug.metrics.metrics_report"),
    ("xu.getenv_as('X', int)", "torch_xla.utils.utils.getenv_as"),
    ("pl.MpDeviceLoader(loader, device)", "torch_xla.distributed.parallel_loader.MpDeviceLoader"),
    ("torch_xla.core.xla_model.xla_device()", "`import torch_xla.core.xla_model` binds"),
])
def test_each_conventional_name_is_reported_once_per_use(use: str, meaning: str) -> None:
    found = _reported(f"import torch  # torch_xla is gone\n\n{use}\n")
    assert len(found) == 1 and found[0][0] == 3 and meaning in found[0][1]


@pytest.mark.parametrize("source", [
    # bound to something else somewhere in the file
    "import torch\n\n\ndef f(xm):\n    return xm.xla_device()\n",
    "import torch\nxm = object()\nxm.xla_device()\n",
    "import torch\n\n\ndef g():\n    import torch_xla.core.xla_model as xm\n\n\n"
    "def f():\n    return xm.xla_device()\n",
    "import torch\n\n\ndef f(data):\n    xs = [d for d in data]\n    xs.append(1)\n",
    # Lightning's `pl`, bound or not: only torch_xla's loaders make `pl` XLA's
    "import torch\nimport pytorch_lightning as pl\nloader = pl.MpDeviceLoader(data, dev)\n",
    "import torch\ntrainer = pl.Trainer(max_epochs=1)\n",
    # a file that can bind names it does not spell
    "import torch\nfrom common import *\nxm.mark_step()\n",
    "import torch\nglobals()['xm'] = load()\nxm.mark_step()\n",
    # not a use of the name: an attribute of something else
    "import torch\nself.xm.xla_device()\n",
])
def test_names_the_file_binds_or_that_are_not_torch_xlas_are_not_reported(source: str) -> None:
    assert _reported(source) == []


def test_a_bound_import_is_still_migrated_beside_an_unbound_one() -> None:
    data = textwrap.dedent("""\
        import torch
        import torch_xla.core.xla_model as xm


        def step():
            xm.mark_step()
            xr.world_size()
    """).encode()
    result = migrate_source("t.py", data, REGISTRY)
    assert [f.line for f in result.findings if f.rule_id == "NM719"] == [7]
    assert b"xm.mark_step()" not in (result.new_source or b"")


BINDINGS = [
    "import torch_xla.core.xla_model as xm\n",
    "def f():\n    import torch_xla\n",
    "class A:\n    @staticmethod\n    def f(\n        a,\n        xm=None,\n    ):\n        pass\n",
    "try:\n    pass\nexcept (\n    ValueError,\n    KeyError,\n) as met:\n    pass\n",
    "match x:\n    case [1, *xs] | {'k': xu}:\n        pass\n",
    "for (a,\n     xr) in y:\n    pass\n",
    "with open(f) as (a,\n                 pl):\n    pass\n",
    "def f():\n    from os import *\n",
    "def f():\n    from torch_xla import *\n",
    "x = [globals()\n     for _ in y]\n",
    "exec('xm = 1')\n",
    "@decorate(\n    xmp := 1)\ndef f():\n    pass\n",
    "if a:\n    pass\nelif b:\n    del xm\n",
    "lambda xu=1: xu\n",
    "x = 1\r\ny = xm.f()\rimport torch_xla.core.xla_model as xm\r\n",
    "# -*- coding: latin-1 -*-\nimport torch_xla.core.xla_model as xm\n",
]


@pytest.mark.parametrize("source", BINDINGS)
def test_reading_only_the_lines_naming_a_binding_binds_what_reading_all_binds(
        source: str) -> None:
    _same_unbound(f"import torch\n\ny = xm.xla_device()\n{source}".encode())


@pytest.mark.parametrize("source", [*SOURCES, *sorted((FIXTURES / "cuda").glob("*.py"))],
                         ids=source_id)
def test_the_fixtures_unbound_names_are_the_same_read_by_lines(source: Path) -> None:
    _same_unbound(source.read_bytes())


def _same_unbound(data: bytes) -> None:
    tree = ast.parse(data)
    by_lines, whole = facts_of(tree), facts_of(tree)
    assert unbound_names._unbound(by_lines, data) == unbound_names._unbound(whole)
