"""`text_lines` numbers a word's lines as the parser does, whatever ends the lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from neuron_migrate.analysis.readiness_plan import text_lines
from tests.conftest import SOURCES, source_id

WORDS = {"xm": False, "torch": False, "cuda": True, "x": False}


def _parsed_lines(data: bytes) -> set[int]:
    """The lines the parser puts each name of `WORDS` (or, for a prefix, starting so) on."""
    return {n.lineno for n in ast.walk(ast.parse(data)) if isinstance(n, ast.Name) and (
        WORDS.get(n.id) is not None or any(n.id.startswith(w) for w, p in WORDS.items() if p))}


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_lines_counted_as_the_parser_counts_them(ending: bytes) -> None:
    lines = [b"torch.x = 1", b"", b"y = 1", b"z = (x +", b"     cudax)", b"s = '''a", b"b'''",
             b"w = xm"]
    data = ending.join(lines) + ending
    assert text_lines(data, WORDS) == _parsed_lines(data) == {1, 4, 5, 8}


def test_mixed_line_endings() -> None:
    data = b"a = 1\r\nb = 2\rc = 3\nd = xm\r\n\re = torch\n"
    assert text_lines(data, WORDS) == _parsed_lines(data) == {4, 6}


def test_words_inside_longer_identifiers_are_not_theirs() -> None:
    assert text_lines(b"xmx = 1\nfoo_xm = 2\nprecuda = 3\ncuda_ok = 4\n", WORDS) == {4}


@pytest.mark.parametrize("source", SOURCES[::5], ids=source_id)
def test_every_name_s_line_is_found(source: Path) -> None:
    data = source.read_bytes()
    if data.isascii():
        assert _parsed_lines(data) <= text_lines(data, WORDS)
