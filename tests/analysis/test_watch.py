"""The watched-attribute pass skips statements on whose lines no watched name is written;
that must flag exactly what the pass over every statement flags."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from neuron_migrate.analysis.analyse import Analysis, analyse
from neuron_migrate.analysis.watch import attribute_lines, flag_watched
from neuron_migrate.engine import review_only
from neuron_migrate.model import Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from tests.conftest import FIXTURES, SOURCES, source_id

CUDA_SOURCES = sorted((FIXTURES / "cuda").glob("*.before.py"))
REGISTRIES = {
    "xla": Registry(all_rules(), Options()),
    "xla-unsafe": Registry(all_rules(), Options(unsafe_fixes=True)),
    "cuda": Registry(all_rules(), Options(sources=frozenset({"xla", "cuda"}))),
}


def _analysis(data: bytes, registry: Registry) -> Analysis:
    analysis = analyse(ast.parse(data), registry.interesting_string, registry.star_names,
                       registry.watched_roots, registry.device_calls, bool(registry.entry))
    review_only.demote(analysis, registry, registry.options)
    return analysis


def _flagged_lines(source: str, registry: Registry = REGISTRIES["xla"]) -> list[int]:
    data = source.encode("utf-8")
    analysis = _analysis(data, registry)
    before = set(analysis.flagged)
    flag_watched(analysis, registry, data)
    slow = _analysis(data, registry)
    flag_watched(slow, registry, None)
    found = sorted(n.lineno for n in ast.walk(analysis.tree)
                   if isinstance(n, ast.stmt) and id(n) in analysis.flagged - before)
    expected = sorted(n.lineno for n in ast.walk(slow.tree)
                      if isinstance(n, ast.stmt) and id(n) in slow.flagged - before)
    assert found == expected
    return found


@pytest.mark.parametrize("registry", REGISTRIES.values(), ids=REGISTRIES.keys())
@pytest.mark.parametrize("source", [*SOURCES, *CUDA_SOURCES], ids=source_id)
def test_skipping_by_line_flags_what_the_whole_pass_flags(source: Path,
                                                          registry: Registry) -> None:
    data = source.read_bytes()
    tree = ast.parse(data)  # one tree for both passes: what they flag is compared by id
    results = []
    for told in (True, False):
        analysis = analyse(tree, registry.interesting_string, registry.star_names,
                           registry.watched_roots, registry.device_calls, bool(registry.entry))
        review_only.demote(analysis, registry, registry.options)
        flag_watched(analysis, registry, data if told else None)
        results.append((sorted(analysis.flagged), sorted(analysis.on_path),
                        [id(b.statement) for b in analysis.xla_imports],
                        analysis.import_names))
    assert results[0] == results[1]


def test_the_fixtures_mostly_take_the_line_skipping_path() -> None:
    attributes = REGISTRIES["xla"].attributes
    told = [attribute_lines(s.read_bytes(), attributes) is not None for s in SOURCES]
    assert sum(told) > len(told) * 0.9


def test_a_watched_attribute_on_a_statement_s_last_line() -> None:
    assert _flagged_lines("x = f(\n    1,\n    model.state_dict())\ny = 2\n") == [1]


def test_a_watched_keyword() -> None:
    assert _flagged_lines("a = 1\nsave(\n    state_dict=sd)\n") == [2]


def test_a_watched_attribute_in_a_decorator_above_its_definition() -> None:
    source = "import hooks\n\n\n@hooks.on(model.load_state_dict)\ndef f():\n    return 1\n"
    assert _flagged_lines(source) == [5]


def test_a_watched_attribute_in_a_nested_block() -> None:
    source = ("class A:\n    def f(self):\n        if x:\n            pass\n"
              "        else:\n            return self.model.state_dict()\n")
    assert _flagged_lines(source) == [6]


def test_an_identifier_spelled_outside_ascii_is_its_normal_form() -> None:
    # Python reads `ｓtate_dict` (a full-width s) as `state_dict`
    assert _flagged_lines("a = 1\nb = model.\uff53tate_dict()\n") == [2]


def test_bytes_whose_lines_the_parser_counts_otherwise_are_not_told() -> None:
    names = frozenset({"state_dict"})
    assert attribute_lines(b"a = 1\r\nb = m.state_dict()\r\n", names) is None
    assert attribute_lines(b"# -*- coding: latin-1 -*-\nb = m.state_dict()\n", names) is None
    assert attribute_lines(b"#!/bin/python\n# coding: cp1252\nb = m.state_dict()\n", names) is None
    assert attribute_lines(b"# coding: no-such-codec\nb = m.state_dict()\n", names) is None
    # a cookie that declares UTF-8 leaves the bytes as they seem
    assert attribute_lines(b"# coding=utf-8\na = 1\nb = m.state_dict()\n", names) == [3]
    assert attribute_lines(b"# -*- coding: UTF8 -*-\nb = m.state_dict()\n", names) == [2]
    # (the byte order mark is outside ASCII: its line is one more to look at)
    assert attribute_lines(b"\xef\xbb\xbf# coding: utf-8\nb = m.state_dict()\n", names) == [1, 2]
    assert attribute_lines(b"a = 1\nb = 2\n", names) == []
    assert attribute_lines(b"a = 1\nb = m.state_dict()\n", names) == [2]
    assert attribute_lines("# caf\u00e9\nb = 2\nc = m.state_dict()\n".encode(), names) == [1, 3]


def test_a_file_naming_no_watched_attribute_is_left_alone() -> None:
    assert _flagged_lines("import torch\nx = torch.ones(2)\n") == []
