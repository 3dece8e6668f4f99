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
from collections.abc import Iterable

from neuron_migrate.analysis.analyse import Analysis
from neuron_migrate.analysis.locate import ast_dotted
from neuron_migrate.registry import Registry

_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def flag_watched(analysis: Analysis, registry: Registry) -> None:
    """Flag (and put on the rewrite's path) every statement whose own expressions name a
    watched qualified name or use a watched attribute or keyword."""
    if not registry.watches and not registry.attributes:
        return
    flagger = _Flagger(analysis, registry)
    flagger.block(analysis.tree.body, ())
    if flagger.roots:  # the rewrite's scan for leftovers reads code that names them
        analysis.import_names = analysis.import_names | flagger.roots


class _Flagger:
    def __init__(self, analysis: Analysis, registry: Registry) -> None:
        self.analysis = analysis
        self.watches = registry.watches
        self.attributes = registry.attributes
        self.roots: set[str] = set()
        self.import_prefixes = tuple(p for p in registry.watches if p.startswith("torch.cuda"))

    def block(self, body: Iterable[ast.AST], parents: tuple[ast.stmt, ...]) -> None:
        for node in body:
            if isinstance(node, ast.stmt):
                self.statement(node, parents)
            elif isinstance(node, (ast.ExceptHandler, ast.match_case)):
                self.block(node.body, parents)  # its type, pattern, guard: rarely CUDA

    def statement(self, stmt: ast.stmt, parents: tuple[ast.stmt, ...]) -> None:
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
        if any(self.watched(node, stmt) for part in header for node in ast.walk(part)):
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
        if kind is not ast.Attribute and kind is not ast.Name:
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
