"""Positions for findings, taken from the stdlib `ast`.

LibCST only knows positions through PositionProvider, which costs about a parse per file. The
`ast` already has them. A finding's LibCST node is matched to the `ast` node of the same
statement with the same signature (see `transform.signature`) and the same rank in source
order.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

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
    if isinstance(node, ast.Call):
        return ("call", ast_dotted(node.func))
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = ast_dotted(node)
        return ("name", name) if name else None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return ("str", node.value)
    if isinstance(node, ast.JoinedStr):
        return ("fstr", None)
    if isinstance(node, ast.Compare):
        return ("cmp", None)
    if isinstance(node, ast.arg):
        return ("param", node.arg)
    return None


def header_nodes(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of a statement outside its nested statements, whole dotted chains only."""
    stack: list[ast.AST] = [stmt]
    inner: set[int] = set()
    while stack:
        node = stack.pop()
        if node is not stmt:
            if isinstance(node, ast.stmt):
                continue
            if id(node) not in inner:
                yield node
        if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name, ast.Attribute)):
            inner.add(id(node.value))
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


class Locator:
    """Maps (statement, signature, rank) to a 1-based line and character column."""

    def __init__(self, text: str) -> None:
        self._lines = _NEWLINE.split(text)
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

    def _index(self, stmt: ast.stmt) -> dict[tuple[str, str | None], list[ast.AST]]:
        index = self._cache.get(id(stmt))
        if index is None:
            index = {}
            for node in header_nodes(stmt):
                sig = ast_signature(node)
                if sig is not None:
                    index.setdefault(sig, []).append(node)
            for nodes in index.values():
                nodes.sort(key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]
            self._cache[id(stmt)] = index
        return index

    def _column(self, line: int, byte_offset: int) -> int:
        """`ast` columns count UTF-8 bytes; reports count characters, from 1."""
        if 0 < line <= len(self._lines):
            text = self._lines[line - 1]
            return len(text.encode("utf-8")[:byte_offset].decode("utf-8", "replace")) + 1
        return byte_offset + 1
