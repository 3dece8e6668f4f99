"""The code generation without position bookkeeping writes what LibCST's own does."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from neuron_migrate.engine.codegen import module_bytes
from tests.conftest import SOURCES, source_id

ODD = [b"", b"\n", b"x = 1", b"# only a comment\r\n", b"\xef\xbb\xbfimport os\n",
       b"# -*- coding: latin-1 -*-\ns = '\xe9'\n", b"if x:\n\tpass\n", b"async def f():\n"
       b"    async with a as b, c:\n        await (yield)\n"]


@pytest.mark.parametrize("source", SOURCES, ids=source_id)
def test_fixtures_generate_as_libcst_does(source: Path) -> None:
    module = cst.parse_module(source.read_bytes())
    assert module_bytes(module) == module.bytes


@pytest.mark.parametrize("data", ODD)
def test_odd_files_generate_as_libcst_does(data: bytes) -> None:
    module = cst.parse_module(data)
    assert module_bytes(module) == module.bytes == data


def test_changed_modules_generate_as_libcst_does() -> None:
    module = cst.parse_module(b"def f(a, b):\n    return a + b\n")
    changed = module.with_changes(body=[*module.body, cst.parse_statement("print(f(1, 2))\n")])
    assert module_bytes(changed) == changed.bytes


def test_parenthesized_expressions_generate_as_libcst_does() -> None:
    module = cst.parse_module(b"x = ((a + b) * (c))\ny = [(i) for (i) in (z)]\n"
                              b"f((lambda: (yield))(), *(a,), **{(k): (v)})\n")
    assert module_bytes(module) == module.bytes


def test_libcst_is_left_as_it_was() -> None:
    """The shortcuts last one generation: LibCST's position metadata, which needs the hooks
    they skip, still sees every node."""
    module = cst.parse_module(b"def f(a):\n    return (a + 1)\n")
    module_bytes(module)
    assert not any("_codegen" in cls.__dict__ for cls in (cst.Name, cst.Return, cst.Module))
    wrapper = cst.MetadataWrapper(module)
    positions = wrapper.resolve(cst.metadata.PositionProvider)
    name = next(n for n in positions if isinstance(n, cst.Name) and n.value == "a")
    assert positions[name].start == cst.metadata.CodePosition(1, 6)


def test_libcst_is_left_as_it_was_after_a_failure() -> None:
    broken = cst.Module(body=[cst.SimpleStatementLine([cst.Expr(cst.Name("x"))])])
    object.__setattr__(broken.body[0].body[0], "value", None)  # fails half-way through
    with pytest.raises(AttributeError):
        module_bytes(broken)
    assert "_codegen" not in cst.SimpleStatementLine.__dict__
    assert cst.Module([]).code_for_node(cst.Name("y")) == "y"
