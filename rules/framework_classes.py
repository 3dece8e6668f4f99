"""A file's own subclasses of a framework's classes: a strategy class deriving from Lightning's
`TPUSpawnStrategy`, perhaps through another class of the same file."""

from __future__ import annotations

import ast
import weakref
from collections.abc import Callable

import libcst as cst

from neuron_migrate.ruleapi import Site
from neuron_migrate.ruleapi.analysis import walked

_CLASSES: weakref.WeakKeyDictionary[ast.Module, dict[str, ast.ClassDef]] = \
    weakref.WeakKeyDictionary()


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    """The file's classes by name (the first definition of a name wins), found once per
    file: the question is asked at every call that passes a strategy or plugin."""
    found = _CLASSES.get(tree)
    if found is None:
        found = {}
        for node in walked(tree):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, node)
        _CLASSES[tree] = found
    return found


def local_subclass_of(site: Site, name: str, wanted: Callable[[str], bool]
                      ) -> tuple[int, str] | None:
    """When `name` is a class this file defines that derives, directly or through other
    classes of the file, from a class whose qualified name `wanted` accepts: the line of its
    definition and that base's qualified name. Bases are resolved where the site is, which is
    where the class is used; a base the file rebinds is not followed."""
    classes = _classes(site.module_tree)
    seen: set[str] = set()
    todo = [name]
    start = classes.get(name)
    if start is None:
        return None
    while todo:
        current = classes.get(todo.pop())
        if current is None or current.name in seen:
            continue
        seen.add(current.name)
        for base in current.bases:
            try:
                expression = cst.parse_expression(ast.unparse(base))
            except cst.ParserSyntaxError:
                continue
            qualname = site.qualname_of(expression)
            if qualname is not None and wanted(qualname):
                return start.lineno, qualname
            if isinstance(base, ast.Name):
                todo.append(base.id)
    return None
