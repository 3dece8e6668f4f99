"""Positions for findings, taken from the stdlib `ast`.

LibCST only knows positions through PositionProvider, which costs about a parse per file. The
`ast` already has them. A finding's LibCST node is matched to the `ast` node of the same
statement with the same signature (see `transform.signature`) and the same rank in source
order.
"""

from __future__ import annotations

import ast
import re

_NEWLINE = re.compile(r"\r\n|\r|\n")


def ast_dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def ast_signature(node: ast.AST) -> tuple[str, str | None] | None:
    kind = type(node)
    if kind is ast.Call:
        return ("call", ast_dotted(node.func))  # type: ignore[attr-defined]
    if kind is ast.Name or kind is ast.Attribute:
        name = ast_dotted(node)
        return ("name", name) if name else None
    if kind is ast.Constant and type(node.value) is str:  # type: ignore[attr-defined]
        return ("str", node.value)  # type: ignore[attr-defined]
    if kind is ast.JoinedStr:
        return ("fstr", None)
    if kind is ast.Compare:
        return ("cmp", None)
    if kind is ast.arg:
        return ("param", node.arg)  # type: ignore[attr-defined]
    return None


_CHAIN = (ast.Name, ast.Attribute)


def _signed(node: ast.AST, index: dict[tuple[str, str | None], list[ast.AST]],
            inner: bool = False) -> None:
    """Index `node` and what it holds outside nested statements by signature; the inner parts
    of a dotted chain (`a` and `a.b` in `a.b.c`) are not indexed, the chain is."""
    if not inner:
        sig = ast_signature(node)
        if sig is not None:
            index.setdefault(sig, []).append(node)
    chain = type(node) is ast.Attribute and type(node.value) in _CHAIN  # type: ignore[attr-defined]
    if type(node) is ast.JoinedStr:  # its texts are not strings of their own (LibCST agrees)
        for part in node.values:  # type: ignore[attr-defined]
            if type(part) is ast.FormattedValue:
                _signed(part, index)
        return
    for name in node._fields:
        value = getattr(node, name, None)
        if type(value) is list:
            for item in value:
                if isinstance(item, ast.AST) and not isinstance(item, ast.stmt):
                    _signed(item, index)
        elif isinstance(value, ast.AST) and not isinstance(value, ast.stmt):
            _signed(value, index, chain and name == "value")


class Locator:
    """Maps (statement, signature, rank) to a 1-based line and character column."""

    def __init__(self, text: str) -> None:
        # in ASCII text a byte is a character: no line needs to be looked at (and
        # `isascii` is a flag of the string, not a scan)
        self._lines: list[str] | None = None if text.isascii() else _NEWLINE.split(text)
        self._cache: dict[int, dict[tuple[str, str | None], list[ast.AST]]] = {}

    def position(self, stmt: ast.stmt, signature: tuple[str, str | None] | None,
                 rank: int) -> tuple[int, int]:
        node: ast.AST = stmt
        if signature is not None:
            candidates = self._index(stmt).get(signature, [])
            if rank < len(candidates):
                node = candidates[rank]
        line = getattr(node, "lineno", stmt.lineno)
        return line, self._column(line, getattr(node, "col_offset", stmt.col_offset))

    def at(self, node: ast.AST) -> tuple[int, int]:
        """The position of an `ast` node itself."""
        line = node.lineno  # type: ignore[attr-defined]
        return line, self._column(line, node.col_offset)  # type: ignore[attr-defined]

    def _index(self, stmt: ast.stmt) -> dict[tuple[str, str | None], list[ast.AST]]:
        index = self._cache.get(id(stmt))
        if index is None:
            index = {}
            _signed(stmt, index)
            for nodes in index.values():
                nodes.sort(key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]
            self._cache[id(stmt)] = index
        return index

    def _column(self, line: int, byte_offset: int) -> int:
        """`ast` columns count UTF-8 bytes; reports count characters, from 1."""
        if self._lines is not None and 0 < line <= len(self._lines):
            text = self._lines[line - 1]
            return len(text.encode("utf-8")[:byte_offset].decode("utf-8", "replace")) + 1
        return byte_offset + 1
