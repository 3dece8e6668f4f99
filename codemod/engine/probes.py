"""Imports that detected the XLA stack: `try: import torch_xla... except ImportError:`, or
`with suppress(ImportError): import torch_xla...`.

Removing such an import is right for the migration (the code it guarded is TorchNeuron code
now), but it changes what the `try` decides: its body always runs and its `except` branch
never does for want of torch_xla, on every machine. That is reported (NM715), unless the
whole statement goes (a dead import guard) or the branch could only stop the program (a
missing torch_xla was an error, which it no longer is).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from neuron_migrate.analysis.analyse import Analysis
from neuron_migrate.analysis.import_guards import catches_import_error, is_import_error, stops
from neuron_migrate.analysis.locate import ast_dotted
from neuron_migrate.engine.imports import ImportNote
from neuron_migrate.registry import XLA_BY_NAME, Registry


def probe_notes(analysis: Analysis, removals: dict[int, set[int]], registry: Registry,
                silenced: Callable[[str, ast.stmt], bool],
                gone: Callable[[ast.Try], bool]) -> list[ImportNote]:
    """A review note on each `try` (or `with suppress(ImportError)`) that loses an XLA import
    its `except ImportError` branch (or the rest of its body) depended on. `gone`: whether the
    rewrite removes the whole `try`."""
    rule = registry.by_id.get(XLA_BY_NAME)
    if rule is None or not registry.enabled(rule):
        return []
    notes: list[ImportNote] = []
    seen: set[int] = set()
    for binding in analysis.xla_imports:
        statement = binding.statement
        if statement is None or binding.alias_index not in removals.get(id(statement), ()):
            continue
        parent = analysis.parents.get(id(statement))
        if not isinstance(parent, (ast.Try, ast.With)) or id(parent) in seen or \
                not any(s is statement for s in parent.body):
            continue
        seen.add(id(parent))
        if isinstance(parent, ast.With):
            if not _suppresses_import_error(parent):
                continue
            branch = None
        else:
            handlers = [h for h in parent.handlers if catches_import_error(h) and not stops(h)]
            if not handlers or gone(parent):
                continue
            branch = handlers[0].lineno
        if silenced(XLA_BY_NAME, parent) or _still_probes(parent, analysis, removals):
            continue
        notes.append(ImportNote(XLA_BY_NAME, rule.import_probe(  # type: ignore[attr-defined]
            parent.lineno, branch), parent, False))
    return notes


def _suppresses_import_error(unit: ast.With) -> bool:
    """`with contextlib.suppress(ImportError):` (or ModuleNotFoundError, Exception)."""
    for item in unit.items:
        call = item.context_expr
        if isinstance(call, ast.Call) and ast_dotted(call.func) in _SUPPRESS and \
                any(is_import_error(a) for a in call.args):
            return True
    return False


_SUPPRESS = frozenset({"suppress", "contextlib.suppress"})


def _still_probes(unit: ast.Try | ast.With, analysis: Analysis,
                  removals: dict[int, set[int]]) -> bool:
    """Whether a torch_xla import the rewrite keeps is still in the `try` body, so that the
    `try` still fails without torch_xla."""
    body = {id(statement) for statement in unit.body}
    return any(id(b.statement) in body and b.alias_index not in removals.get(id(b.statement), ())
               for b in analysis.xla_imports)
