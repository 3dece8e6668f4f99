"""Import bookkeeping: drop XLA imports nothing uses any more, add the ones replacements need."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import libcst as cst

from neuron_migrate.helper_code import Helper
from neuron_migrate.registry import STAR_IMPORT, UNMAPPED, UNUSED_IMPORT, Registry
from neuron_migrate.analysis.scopes import Binding, Scope
from neuron_migrate.syntax.names import attribute_chain
from neuron_migrate.engine.lazy_imports import import_inside
from neuron_migrate.engine.placement import (helper_index, import_index, imported_modules,
                                             same_section)


@dataclass(frozen=True)
class ImportNote:
    """A finding about an import statement, positioned at the statement."""

    rule_id: str
    message: str
    statement: ast.stmt
    applied: bool


def plan_removals(imports: Sequence[Binding], used: set[int], registry: Registry,
                  silenced: Callable[[str, ast.stmt], bool] = lambda rule_id, unit: False,
                  kept: Callable[[Binding], str | None] = lambda binding: None,
                  ) -> tuple[dict[int, set[int]], list[ImportNote]]:
    """Which aliases of which import statements go, keyed by id of the `ast` statement.

    An XLA import stays while any remaining reference resolves to it. Side-effect imports
    (`torch_xla.distributed.xla_backend`) go even so, unless they are the only binding of a
    name that is still used. `kept` gives the reason an import nothing the rewrite read uses
    must stay (a name in `__all__`), which is reported.
    """
    removals: dict[int, set[int]] = {}
    notes: list[ImportNote] = []
    for binding in imports:
        statement = binding.statement
        assert statement is not None
        if binding.star:
            if silenced(STAR_IMPORT, statement):
                continue
            notes.append(ImportNote(STAR_IMPORT, f"`from {binding.module} import *`: remove it "
                                    "by hand once nothing from it is used", statement, False))
            continue
        side_effect = registry.by_import.get(binding.module or "")
        if side_effect is not None and not registry.enabled(side_effect):
            continue
        if id(binding) in used and (side_effect is None or _sole_binding(binding, imports,
                                                                            registry)):
            continue
        reason = kept(binding)
        if reason is not None:
            rule = registry.by_id.get(UNMAPPED)
            if rule is not None and registry.enabled(rule) and not silenced(UNMAPPED, statement):
                notes.append(ImportNote(UNMAPPED, f"`{_import_text(binding)}` stays: {reason}",
                                        statement, False))
            continue
        if side_effect is None and not registry.enabled(registry.by_id[UNUSED_IMPORT]):
            continue
        rule_id = side_effect.id if side_effect else UNUSED_IMPORT
        if silenced(rule_id, statement):
            continue
        removals.setdefault(id(statement), set()).add(binding.alias_index)
        what = _import_text(binding)
        reason = ("its only effect was registering the XLA backend" if side_effect
                  else "nothing uses it after the migration")
        notes.append(ImportNote(rule_id, f"remove `{what}`: {reason}",
                                statement, True))
    return removals, notes


def _import_text(binding: Binding) -> str:
    statement = binding.statement
    alias = (statement.names[binding.alias_index]  # type: ignore[union-attr]
             if statement is not None else None)
    if alias is None:
        return binding.name
    name = f"{alias.name} as {alias.asname}" if alias.asname else alias.name
    if isinstance(statement, ast.ImportFrom):
        return f"from {'.' * statement.level}{statement.module or ''} import {name}"
    return f"import {name}"


def _sole_binding(binding: Binding, imports: Sequence[Binding], registry: Registry) -> bool:
    """No other import binds the same name, so removing this one would leave it unbound."""
    return not any(other is not binding and other.name == binding.name
                   and other.module not in registry.by_import for other in imports)


def remove_aliases(node: cst.Import | cst.ImportFrom,
                   indices: set[int]) -> cst.Import | cst.ImportFrom | cst.RemovalSentinel:
    names = node.names
    if isinstance(names, cst.ImportStar):
        return node
    kept = [alias for i, alias in enumerate(names) if i not in indices]
    if not kept:
        return cst.RemovalSentinel.REMOVE
    trailing = names[-1].comma
    keep_trailing = isinstance(trailing, cst.Comma) and isinstance(node, cst.ImportFrom) \
        and node.rpar is not None
    kept[-1] = kept[-1].with_changes(comma=trailing if keep_trailing else cst.MaybeSentinel.DEFAULT)
    return node.with_changes(names=kept)


def add_imports(body: Sequence[cst.BaseStatement], modules: set[str]) -> list[cst.BaseStatement]:
    """Insert `import m` for each module into the file's import block, where isort would put
    it (its section, alphabetical order), with a blank line between sections and before the
    code that follows the imports."""
    statements = list(body)
    for module in _outermost(modules):
        index = import_index(statements, module)
        line = cst.SimpleStatementLine(
            body=[cst.Import(names=[cst.ImportAlias(attribute_chain(*_split(module)))])])
        previous = statements[index - 1] if index > 0 else None
        following = statements[index] if index < len(statements) else None
        if previous is not None and imported_modules(previous) and \
                not same_section(previous, line):
            line = line.with_changes(leading_lines=[cst.EmptyLine()])
        if following is not None:
            lines = list(following.leading_lines)
            commented = any(e.comment is not None for e in lines)
            if imported_modules(following) and commented:
                # comments above an import (a heading, a notebook's cell marker) stay above
                # the block it starts: the new line takes them
                line = line.with_changes(leading_lines=lines)
                lines = [] if same_section(following, line) else [cst.EmptyLine()]
            elif same_section(following, line):
                lines = []  # the new line now opens this section (or continues it)
            elif not lines:
                lines = [cst.EmptyLine()]
            statements[index] = following.with_changes(leading_lines=lines)
        statements.insert(index, line)
    return statements


def _split(module: str) -> tuple[str, list[str]]:
    root, *attrs = module.split(".")
    return root, attrs


def _outermost(modules: set[str]) -> list[str]:
    """The modules to import, sorted, without a bare package that a dotted import of one of
    its submodules binds anyway (`import torch.distributed.tensor.parallel` binds `torch`)."""
    return sorted(m for m in modules
                  if not any(other.startswith(m + ".") for other in modules))


def add_helpers(body: Sequence[cst.BaseStatement], names: list[str],
                table: Mapping[str, Helper], module_scope: Scope | None,
                newline: str = "\n", inside: frozenset[str] = frozenset()
                ) -> list[cst.BaseStatement]:
    """Define the requested helper functions once, after the imports; the modules of
    `inside` are imported in the body of each helper that reads them (`lazy_imports`).

    A helper the file already defines (from an earlier run) is not added again; `table`
    holds the helpers' code by name."""
    statements = list(body)
    defined = set(module_scope.bindings) if module_scope is not None else set()
    new: list[cst.BaseStatement] = []
    for name in names:
        if name in defined:
            continue
        # the file's line ending, also inside the helper's multi-line docstrings
        parsed = _parsed_helper(table[name].source, newline)
        for module in sorted(inside & set(table[name].imports)):
            parsed = [import_inside(parsed[0], module, newline), *parsed[1:]]
        two_blank = [cst.EmptyLine(), cst.EmptyLine()]
        new.append(parsed[0].with_changes(leading_lines=two_blank))
        new.extend(parsed[1:])
    if not new:
        return statements
    index = helper_index(statements, names)
    following = statements[index:]
    if following and len(following[0].leading_lines) < 2:
        missing = 2 - len(following[0].leading_lines)
        following[0] = following[0].with_changes(
            leading_lines=[*[cst.EmptyLine()] * missing, *following[0].leading_lines])
    return statements[:index] + new + following


@functools.lru_cache(maxsize=None)
def _parsed_helper(source: str, newline: str) -> Sequence[cst.BaseStatement]:
    """LibCST nodes are immutable, so one parse serves every file (a parse costs ~1 ms)."""
    return cst.parse_module(source.replace("\n", newline)).body


_XLA_WORD = re.compile(r"(?i)(?<![\w.])(torch[_-]?xla|xla|pjrt|xm|xmp)(?!\w)")


def xla_heading(lines: Sequence[cst.EmptyLine]) -> int | None:
    """The index of a section comment such as `# XLA imports` directly above an import: a
    comment line of its own (not part of a longer comment), of a few words, that names XLA.
    Anything longer may be about something else, and stays."""
    if not lines or lines[-1].comment is None:
        return None
    if len(lines) > 1 and lines[-2].comment is not None:
        return None
    text = lines[-1].comment.value.lstrip("#").strip()
    if len(text.split()) > 6 or not _XLA_WORD.search(text):
        return None
    return len(lines) - 1
