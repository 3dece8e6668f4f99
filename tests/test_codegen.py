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
