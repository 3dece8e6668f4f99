"""Statements whose only XLA-era names are APIs no rule rewrites, reported from the `ast`.

Most statements of NeuronX Distributed, transformers-neuronx or XLA-era torch_neuronx code,
and many of torch_xla's own (internals, metrics, SPMD, experimental APIs), only name APIs no
rule rewrites (NM709, NM710, NM705, NM707, NM708, NM701): LibCST would parse them, every hook
would pass them by, and the scan for leftovers would report each name. In real checkouts these
are about two fifths of all findings, and some are the largest statements of a file (tables
of rank groups), so parsing them cost a sixth of a `check`. Here such a statement is taken off
the rewrite's path and its findings are made from the `ast`, the same rule, message and
position the leftover scan gives (`neuron_migrate.engine.residual`); the imports its names
resolve to count as used, as the scan counts them, so they stay.

Only when nothing could act on the statement: a simple statement or the header of an `if`,
`while`, `for`, `with`, `def` or `class` (no `:=` in it); every
name in it resolved without doubt, none owned by a rule's `on_call` or `on_reference` or
bound by an import the rewrite tracks, and none that LibCST alone reads as a name (a
keyword, a parameter, `attr` in `f().attr`) meaning an import; no string holding an XLA-era
token; and every generic hook (`on_any_call`, `on_assign`, `on_string`, `on_attribute`)
declining it through `Rule.may_act`, which says yes unless a rule says otherwise. Anything
else goes through LibCST as before.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from neuron_migrate.analysis.analyse import Analysis
from neuron_migrate.analysis.locate import Locator
from neuron_migrate.analysis.scopes import Binding, Resolution
from neuron_migrate.engine.residual import describe
from neuron_migrate.model import Finding, Kind, Options
from neuron_migrate.registry import UNMAPPED, Registry
from neuron_migrate.engine.suppress import Suppressions, span

_SIMPLE = (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.Raise,
           ast.Assert, ast.Delete)
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_BINDS_LOCALS = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(frozen=True)
class _Report:
    rule_id: str
    message: str
    node: ast.AST


Demoted = list[tuple[ast.stmt, list[_Report]]]


def demote(analysis: Analysis, registry: Registry, options: Options) -> Demoted:
    """Take the statements that need no LibCST off the rewrite's path (out of `flagged`;
    `on_path` rebuilt without them): each with what it reports, for `findings`."""
    if not analysis.review_only or options.annotate:
        return []  # --annotate writes notes above statements: those go through LibCST
    reader = _Reader(analysis, registry)
    demoted: Demoted = []
    for unit in analysis.review_only:
        reports = reader.reports(unit)
        if reports is not None:
            demoted.append((unit, reports))
            analysis.used.update(reader.used)  # the imports they name stay
    if not demoted:
        return []
    for unit, _ in demoted:
        analysis.flagged.discard(id(unit))
    if not analysis.flagged and all(_stays(b, analysis, registry) for b in analysis.xla_imports):
        analysis.xla_imports = []  # nothing left to rewrite, and every import is still used
    analysis.on_path.clear()
    analysis.mark_paths()
    return demoted


def _stays(binding: Binding, analysis: Analysis, registry: Registry) -> bool:
    """Whether an XLA-era import certainly stays as it is: a statement reported from the
    `ast` uses it, and it is neither a star import nor one that goes for its side effect."""
    return id(binding) in analysis.used and not binding.star and \
        (binding.module or "") not in registry.by_import


def findings(path: str, demoted: Demoted, flagged: set[int], suppressions: Suppressions,
             locator: Locator) -> list[Finding]:
    """The findings of the demoted statements still off the path (a readiness fix may have
    flagged one again since), as the leftover scan would give them."""
    out: list[Finding] = []
    for unit, reports in demoted:
        if id(unit) in flagged:
            continue
        first, last = span(unit)
        for report in reports:
            if suppressions.silences(report.rule_id, first, last):
                continue
            line, column = locator.at(report.node)
            out.append(Finding(path, line, column, report.rule_id, Kind.REVIEW, report.message))
    return out


class _Reader:
    """Reads one statement: its findings, or None when the statement needs LibCST."""

    def __init__(self, analysis: Analysis, registry: Registry) -> None:
        self.analysis = analysis
        self.registry = registry
        self.tokens = tuple(t.decode() for t in registry.tokens)
        self.calls, self.assigns = registry.any_call, registry.assign
        self.strings, self.attributes = registry.string, registry.attribute
        # the names the lambdas and comprehensions around the node being read bind: as to
        # LibCST's leftover scan, they mean nothing here (in their whole subtree)
        self.locals: list[set[str]] = []

    def reports(self, unit: ast.stmt) -> list[_Report] | None:
        """What the statement reports, or None when it needs LibCST; `used` then holds the
        bindings its names resolve to."""
        self.scope = self.analysis.scope_of[id(unit)]
        self.out: list[_Report] = []
        self.used: set[int] = set()
        header = self._header(unit)
        if header is None:
            return None
        if isinstance(unit, (ast.Assign, ast.AugAssign)) and self.assigns:
            targets = unit.targets if isinstance(unit, ast.Assign) else [unit.target]
            names = frozenset(name for target in targets if isinstance(target, ast.Subscript)
                              for name in self._names(target.value))
            if any(rule.may_act(unit, names) for rule in self.assigns):
                return None
        return self.out if all(self._read(node) for node in header) else None

    def _header(self, unit: ast.stmt) -> list[ast.AST] | None:
        """What LibCST reads as the statement (a block's statements are units of their
        own); None for statements left to LibCST."""
        kind = type(unit)
        if kind in _SIMPLE:
            return [unit]
        if kind is ast.If or kind is ast.While:
            return [unit.test]  # type: ignore[attr-defined]
        if kind is ast.For or kind is ast.AsyncFor:
            return [unit.target, unit.iter]  # type: ignore[attr-defined]
        if kind is ast.With or kind is ast.AsyncWith:
            return list(unit.items)  # type: ignore[attr-defined]
        if kind not in _DEFINITIONS or getattr(unit, "type_params", None):
            return None
        # LibCST reads the defined name and the parameters' names as names of this scope
        names = [unit.name]  # type: ignore[attr-defined]
        if isinstance(unit, ast.ClassDef):
            header = [*unit.decorator_list, *unit.bases, *unit.keywords]
        else:
            arguments = unit.args  # type: ignore[attr-defined]
            names += [a.arg for a in (*arguments.posonlyargs, *arguments.args,
                                      *arguments.kwonlyargs, arguments.vararg,
                                      arguments.kwarg) if a is not None]
            header = [*unit.decorator_list, arguments]  # type: ignore[attr-defined]
            if unit.returns is not None:  # type: ignore[attr-defined]
                header.append(unit.returns)  # type: ignore[attr-defined]
        if any(self._resolve(name, []) is not None for name in names):
            return None
        return header

    def _read(self, node: ast.AST) -> bool:
        """Reads `node` and what it holds in source order; False when LibCST is needed."""
        kind = type(node)
        if kind is ast.NamedExpr:
            return False
        if kind in _BINDS_LOCALS:
            self.locals.append(_local_names(node))
            try:
                return all(self._read(child) for child in ast.iter_child_nodes(node))
            finally:
                self.locals.pop()
        if kind is ast.Name or kind is ast.Attribute:
            return self._reference(node)  # type: ignore[arg-type]
        if kind is ast.Constant:
            value = node.value  # type: ignore[attr-defined]
            return type(value) is not str or self._string(node, value)
        if kind is ast.JoinedStr:
            if any(rule.may_act(node, frozenset()) for rule in self.strings):
                return False
            texts = [v.value for v in node.values  # type: ignore[attr-defined]
                     if type(v) is ast.Constant]
            if any(not self._plain(text) for text in texts):
                return False
        elif kind is ast.Call:
            if not self._call(node):  # type: ignore[arg-type]
                return False
        elif kind is ast.keyword and node.arg is not None:  # type: ignore[attr-defined]
            # LibCST reads the keyword as a name: it must resolve to nothing
            if self._resolve(node.arg, []) is not None:  # type: ignore[attr-defined]
                return False
        for child in ast.iter_child_nodes(node):
            if not self._read(child):
                return False
        return True

    def _reference(self, node: ast.Name | ast.Attribute) -> bool:
        parts: list[str] = []
        base: ast.AST = node
        while type(base) is ast.Attribute:
            parts.append(base.attr)  # type: ignore[attr-defined]
            base = base.value  # type: ignore[attr-defined]
        if self.attributes and type(node) is ast.Attribute and \
                any(rule.may_act(node, frozenset()) for rule in self.attributes):
            return False
        if type(base) is not ast.Name:
            # `f().a.b`: LibCST reads `a` and `b` as names of their own, which must mean
            # nothing here
            if any(self._resolve(part, []) is not None for part in parts):
                return False
            return self._read(base)
        parts.reverse()
        resolution = self._resolve(base.id, parts)  # type: ignore[attr-defined]
        if resolution is None:
            return True
        registry = self.registry
        if resolution.ambiguous or any(b.star for b in resolution.bindings) or \
                registry.name_rule(resolution.qualnames) is not None or \
                registry.call_rule(resolution.qualnames) is not None:
            return False
        self.used.update(id(b) for b in resolution.bindings)
        qualname = resolution.qualnames[0]
        rule = registry.prefix_rule(qualname)
        if rule is not None:
            if registry.enabled(rule):
                self.out.append(_Report(rule.id, rule.leftover_reference(qualname), node))
        elif resolution.touches_xla:
            self.out.append(_Report(UNMAPPED, describe(resolution, type(node) is ast.Name),
                                    node))
        return True

    def _call(self, node: ast.Call) -> bool:
        if not self.calls:
            return True
        names = self._names(node.func)
        return not any(rule.may_act(node, names) for rule in self.calls)

    def _names(self, node: ast.AST) -> frozenset[str]:
        """What a hook could know `node` by: an attribute's name, a plain name and the last
        part of what it was imported as."""
        if type(node) is ast.Attribute:
            return frozenset((node.attr,))  # type: ignore[attr-defined]
        if type(node) is not ast.Name:
            return frozenset()
        name: str = node.id  # type: ignore[attr-defined]
        resolution = self._resolve(name, [])
        if resolution is None:
            return frozenset((name,))
        return frozenset((name, *(q.rsplit(".", 1)[-1] for q in resolution.qualnames)))

    def _string(self, node: ast.Constant, value: str) -> bool:
        if not self._plain(value):
            return False
        return not any(rule.may_act(node, frozenset()) for rule in self.strings)

    def _plain(self, text: str) -> bool:
        """A string no rule reads: it holds none of the prefilter's tokens (every string a
        rule reports or rewrites does)."""
        return not any(token in text for token in self.tokens)

    def _resolve(self, root: str, attrs: list[str]) -> Resolution | None:
        if self.locals and any(root in names for names in self.locals):
            return None
        return self.scope.resolve_cached(root, attrs)


def _local_names(node: ast.AST) -> set[str]:
    """What a lambda (its parameters) or a comprehension (its `for` targets) binds, as
    LibCST's scan counts them (`neuron_migrate.engine.transform`)."""
    if isinstance(node, ast.Lambda):
        arguments = node.args
        return {a.arg for a in (*arguments.posonlyargs, *arguments.args,
                                *arguments.kwonlyargs, arguments.vararg, arguments.kwarg)
                if a is not None}
    names: set[str] = set()
    for comprehension in node.generators:  # type: ignore[attr-defined]
        names |= _target_names(comprehension.target)
    return names


def _target_names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, (ast.Tuple, ast.List)):
        return {name for element in node.elts for name in _target_names(element)}
    if isinstance(node, ast.Starred):
        return _target_names(node.value)
    return set()
