"""A module that imports torch only inside its functions, to stay cheap to import (a CLI
that answers `--help` at once, a package whose `__init__` must not pull torch in), keeps
that property: the helpers the migration adds import torch in their own bodies instead of a
new module-level `import torch`.

Only when every added helper that needs torch can: a plain function (no decorator, no
default that names torch, not a class whose base is a torch class), and no replacement in
the module's own code names torch where the file has not imported it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping

import libcst as cst

from neuron_migrate.analysis.nodes import walked
from neuron_migrate.helper_code import Helper

LAZY = "torch"


def lazy_modules(tree: ast.Module, needs: set[str], named: set[str],
                 helpers: Iterable[str], table: Mapping[str, Helper]) -> frozenset[str]:
    """The modules of `needs` to import inside the helpers (named in `table`) rather than at
    the top."""
    if LAZY not in needs or LAZY in named or not _imported_in_functions(tree):
        return frozenset()
    for name in helpers:
        helper = table[name]
        if LAZY in helper.imports and not _can_import_inside(helper.source):
            return frozenset()
    return frozenset({LAZY})


def import_inside(definition: cst.BaseStatement, module: str, newline: str
                  ) -> cst.BaseStatement:
    """`definition` (a helper function) with `import module` first in its body, after the
    docstring, and a blank line after it."""
    assert isinstance(definition, cst.FunctionDef) and \
        isinstance(definition.body, cst.IndentedBlock)
    body = list(definition.body.body)
    at = 1 if body and _docstring(body[0]) else 0
    line = cst.parse_statement(f"import {module}{newline}")
    rest = body[at:]
    if rest:
        rest[0] = rest[0].with_changes(leading_lines=[cst.EmptyLine(indent=False), *rest[0].leading_lines])
    return definition.with_changes(body=definition.body.with_changes(
        body=[*body[:at], line, *rest]))


def _imported_in_functions(tree: ast.Module) -> bool:
    """Whether torch is imported inside a function and never at the top level."""
    if any(_imports_torch(node) for node in _run_at_import(tree.body)):
        return False
    return any(_imports_torch(node) for node in walked(tree)
               if isinstance(node, (ast.Import, ast.ImportFrom)))


def _run_at_import(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements that run when the module is imported: all but function bodies."""
    for node in body:
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    yield from _run_at_import([child])
                elif isinstance(child, (ast.excepthandler, ast.match_case)):
                    yield from _run_at_import(child.body)


def _imports_torch(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name == LAZY or a.name.startswith(LAZY + ".") for a in node.names)
    return isinstance(node, ast.ImportFrom) and not node.level and node.module is not None \
        and (node.module == LAZY or node.module.startswith(LAZY + "."))


def _can_import_inside(source: str) -> bool:
    tree = ast.parse(source)
    definition = tree.body[0]
    if not isinstance(definition, ast.FunctionDef) or definition.decorator_list:
        return False
    defaults = [*definition.args.defaults, *(d for d in definition.args.kw_defaults if d)]
    return not any(isinstance(n, ast.Name) and n.id == LAZY
                   for d in defaults for n in ast.walk(d))


def _docstring(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and \
        isinstance(statement.body[0], cst.Expr) and \
        isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
