"""Statements worth a look for rules that match names under `torch` or attributes of any
object: the CUDA rules (`--from cuda`).

The analysis (`neuron_migrate.analysis.analyse`) follows only the names of XLA-era imports and of the
packages rules watch; `torch` itself is everywhere and would flag every statement of every
file. A run that migrates CUDA code asks for more: `torch.cuda.*`, `torch.backends.cudnn.*`,
`torch.compile`, `x.cuda()`, `t.is_cuda`. This second, cheap pass over the stdlib `ast` flags
the statements that mention one of them, and only runs when some rule in force asks.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Iterable

from neuron_migrate.analysis.analyse import Analysis
from neuron_migrate.analysis.locate import ast_dotted
from neuron_migrate.analysis.nodes import every_node
from neuron_migrate.analysis.readiness_plan import line_numbers, may_declare_encoding, text_lines
from neuron_migrate.registry import Registry

_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def flag_watched(analysis: Analysis, registry: Registry, data: bytes | None = None) -> None:
    """Flag (and put on the rewrite's path) every statement whose own expressions name a
    watched qualified name or use a watched attribute or keyword.

    `data`, the bytes `analysis.tree` was parsed from, lets a run that watches attributes
    only (the XLA rules watch `state_dict`, `clip_grad_norm_`, ... on any object) skip every
    statement on whose lines none of those names is written: most statements of most files.
    """
    if not registry.watches and not registry.attributes:
        return
    lines = attribute_lines(data, registry.attributes) \
        if data is not None and not registry.watches else None
    if lines is not None and not lines:
        return
    flagger = _Flagger(analysis, registry, lines)
    flagger.block(analysis.tree.body, ())
    if flagger.roots:  # the rewrite's scan for leftovers reads code that names them
        analysis.import_names = analysis.import_names | flagger.roots


_NON_ASCII = re.compile(rb"[\x80-\xff]+")


def attribute_lines(data: bytes, attributes: frozenset[str]) -> list[int] | None:
    """The sorted numbers of the lines an attribute or keyword named in `attributes` can be
    written on, or None when the bytes cannot tell.

    An identifier is its own spelling unless it holds a character outside ASCII (which Python
    normalises, so `ｓtate_dict` is `state_dict`): the lines are those holding one of the
    names as text, and every line holding a byte outside ASCII. A file with a `\r` or a
    coding cookie is not told."""
    if b"\r" in data or may_declare_encoding(data):
        return None
    lines = text_lines(data, dict.fromkeys(attributes, False))
    if not data.isascii():
        lines |= line_numbers(data, (match.start() for match in _NON_ASCII.finditer(data)))
    return sorted(lines)


class _Flagger:
    def __init__(self, analysis: Analysis, registry: Registry,
                 lines: list[int] | None = None) -> None:
        self.analysis = analysis
        self.watches = registry.watches
        self.attributes = registry.attributes
        self.lines = lines  # where watched attributes can be, when that is known
        self.roots: set[str] = set()
        self.import_prefixes = tuple(p for p in registry.watches if p.startswith("torch.cuda"))

    def _may_hold(self, stmt: ast.stmt) -> bool:
        """Whether a watched attribute can be written within `stmt` (decorators included)."""
        lines = self.lines
        if lines is None:
            return True
        first = stmt.lineno
        for decorator in getattr(stmt, "decorator_list", ()):
            first = min(first, decorator.lineno)
        index = bisect.bisect_left(lines, first)
        return index < len(lines) and lines[index] <= (stmt.end_lineno or stmt.lineno)

    def block(self, body: Iterable[ast.AST], parents: tuple[ast.stmt, ...]) -> None:
        for node in body:
            if isinstance(node, ast.stmt):
                self.statement(node, parents)
            elif isinstance(node, (ast.ExceptHandler, ast.match_case)):
                self.block(node.body, parents)  # its type, pattern, guard: rarely CUDA

    def statement(self, stmt: ast.stmt, parents: tuple[ast.stmt, ...]) -> None:
        if not self._may_hold(stmt):
            return
        inner = (*parents, stmt)
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self.imports(stmt, inner)
            return
        header: list[ast.AST] = []
        for name, value in ast.iter_fields(stmt):
            if name in _BODIES:
                self.block(value, inner)
            elif isinstance(value, list):
                header.extend(v for v in value if isinstance(v, ast.AST))
            elif isinstance(value, ast.AST):
                header.append(value)
        # watched names add their roots as they are found, in `ast.walk`'s order; attributes
        # alone add nothing, so any walk will do
        walk = every_node if not self.watches else ast.walk
        if any(self.watched(node, stmt) for part in header for node in walk(part)):
            self.flag(inner)

    def imports(self, stmt: ast.Import | ast.ImportFrom, statements: tuple[ast.stmt, ...]
                ) -> None:
        """Names bound to a watched module's members (`from torch.cuda.amp import autocast`,
        `import torch.cuda.nvtx as nvtx`) are looked after like XLA imports: every statement
        that uses one is flagged, so once the rules have rewritten those uses the engine
        removes the import nothing uses any more. `import torch.cuda` binds `torch` itself,
        which stays."""
        scope = self.analysis.scope_of.get(id(stmt))
        if scope is None or not self.import_prefixes:
            return
        for bindings in scope.bindings.values():
            for binding in bindings:
                qualname = binding.qualname or ""
                if binding.statement is stmt and not binding.star and any(
                        qualname == p or qualname.startswith(p + ".")
                        for p in self.import_prefixes):
                    self.analysis.xla_imports.append(binding)
                    self.analysis.on_path.update(id(s) for s in statements)

    def watched(self, node: ast.AST, stmt: ast.stmt) -> bool:
        kind = type(node)
        if kind is ast.keyword:
            return node.arg in self.attributes  # type: ignore[attr-defined]
        if kind is ast.Attribute and node.attr in self.attributes:  # type: ignore[attr-defined]
            return True
        if not self.watches or kind is not ast.Attribute and kind is not ast.Name:
            return False
        dotted = ast_dotted(node)
        scope = self.analysis.scope_of.get(id(stmt))
        if dotted is None or scope is None:
            return False
        qualname = scope.qualname(dotted)
        if qualname is None or not any(
                qualname == p or qualname.startswith(p + ".") for p in self.watches):
            return False
        self.roots.add(dotted.split(".", 1)[0])
        return True

    def flag(self, statements: tuple[ast.stmt, ...]) -> None:
        self.analysis.flagged.add(id(statements[-1]))
        self.analysis.on_path.update(id(s) for s in statements)
