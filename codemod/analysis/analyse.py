"""One cheap pass over the stdlib `ast`: scopes, bindings, and which statements need work.

LibCST's QualifiedNameProvider costs several parses per file; this pass costs a fraction of
one. It records every binding per scope, resolves the loads that could matter, and flags the
statements that mention an XLA name or a string the rules care about. The rewriter then touches
only those statements. The walk itself is `neuron_migrate.analysis.scope_walk`; this module
holds what it produces and resolves the loads it recorded once every binding is known.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from neuron_migrate.analysis.device_getters import mark_helper_devices
from neuron_migrate.analysis.scope_walk import ScopeWalker
from neuron_migrate.analysis.scopes import Binding, Scope, is_xla
from neuron_migrate.analysis.script_entry import entry_statement

if TYPE_CHECKING:
    from neuron_migrate.analysis.flow import Flows


@dataclass(frozen=True)
class Use:
    """Where a value is used: the expression, with the parent nodes that say what for."""

    node: ast.AST
    scope: Scope
    parent: ast.AST | None
    grandparent: ast.AST | None


@dataclass
class Analysis:
    tree: ast.Module
    flagged: set[int] = field(default_factory=set)
    on_path: set[int] = field(default_factory=set)
    scope_of: dict[int, Scope] = field(default_factory=dict)
    xla_imports: list[Binding] = field(default_factory=list)
    module_scope: Scope | None = None
    flows: Flows | None = None  # built on demand, once (`neuron_migrate.analysis.flow`)
    # every name that can resolve, somewhere in the file, to an XLA or watched import; code
    # without them holds nothing the residual scan looks for
    import_names: frozenset[str] = frozenset()
    # the statement of the `__main__` block where a worker's set-up goes, when some rule
    # asks (`neuron_migrate.analysis.script_entry`)
    entry: ast.stmt | None = None
    # every call in the file, with the index of the top-level statement that holds it: the
    # walk sees them all, and some rules ask about the whole file (`Site.module_calls`)
    calls: list[tuple[ast.Call, int]] = field(default_factory=list)
    # flagged statements flagged only for naming XLA-era imports (torch_xla, or a watched
    # package: torch_neuronx, neuronx_distributed, ...): many only have references to
    # report, which `neuron_migrate.engine.review_only` can do without LibCST
    review_only: list[ast.stmt] = field(default_factory=list)
    # bindings that statements reported from the `ast` name: the imports the rewrite keeps
    used: set[int] = field(default_factory=set)
    # each statement's enclosing statement, by id (None at the top of the module)
    parents: dict[int, ast.stmt | None] = field(default_factory=dict)
    # statements a rule's plan over the whole file rewrites too (`Rule.edits`), by id
    edited: set[int] = field(default_factory=set)

    def mark_path(self, stmt: ast.stmt | None) -> None:
        """Put `stmt` and the statements around it on the rewrite's path."""
        on_path, parents = self.on_path, self.parents
        while stmt is not None and id(stmt) not in on_path:
            on_path.add(id(stmt))
            stmt = parents.get(id(stmt))

    def mark_paths(self) -> None:
        """Put what the rewrite reaches on its path: the flagged statements, the XLA
        imports and the script's entry, with the statements around them."""
        for unit_id in self.flagged:  # ids: `mark_path` goes on from the parent
            self.on_path.add(unit_id)
            self.mark_path(self.parents.get(unit_id))
        for binding in self.xla_imports:
            self.mark_path(binding.statement)
        self.mark_path(self.entry)

    @property
    def needs_rewrite(self) -> bool:
        return bool(self.flagged or self.xla_imports)


def analyse(
    tree: ast.Module,
    interesting_string: Callable[[str], bool],
    star_names: frozenset[str] = frozenset(),
    watched_roots: frozenset[str] = frozenset(),
    device_calls: frozenset[str] = frozenset(),
    entry: bool = False,
) -> Analysis:
    """`watched_roots` are top-level packages besides torch_xla whose names some rule reports
    (torch_neuronx, neuronx_distributed, ...); with `entry`, a file with something to migrate
    gets its script entry found (and put on the path, so the rewriter reaches it)."""
    walker = ScopeWalker(interesting_string, star_names, watched_roots, device_calls)
    for index, statement in enumerate(tree.body):
        walker.top = index
        walker.statement(statement)
    analysis = _finish(walker, tree)
    if entry and analysis.needs_rewrite:
        analysis.entry = entry_statement(tree, lambda s: id(s) in analysis.on_path)
        analysis.mark_path(analysis.entry)
    return analysis


def _finish(walker: ScopeWalker, tree: ast.Module) -> Analysis:
    result = Analysis(tree, scope_of=walker.scope_of, module_scope=walker.module_scope,
                      xla_imports=walker.imports, calls=walker.calls,
                      parents=walker.stmt_parent)
    _resolve_loads(walker, result)
    result.flagged.update(id(unit) for unit in walker.flagged_units)
    for unit in walker.named_units:
        if id(unit) not in result.flagged:
            result.review_only.append(unit)
            result.flagged.add(id(unit))
    result.mark_paths()
    return result


def _mark_device_bindings(walker: ScopeWalker) -> set[str]:
    names: set[str] = set()
    # a dotted call's qualified name ends as it does (`xm.xla_device`); only a bare name
    # can be an alias of another (`from ... import xla_device as device`)
    last = {q.rsplit(".", 1)[-1] for q in walker.device_calls}
    for binding, scope in walker.call_bindings:
        call = binding.call_value
        dot = call.rfind(".")  # type: ignore[union-attr]
        if dot >= 0 and call[dot + 1:] not in last:  # type: ignore[index]
            continue
        if scope.qualname(call) in walker.device_calls:
            binding.device_value = True
            names.add(binding.name)
    return names | mark_helper_devices(walker.call_bindings, walker.functions,
                                       walker.device_calls)


def _resolve_loads(walker: ScopeWalker, result: Analysis) -> None:
    device_names = _mark_device_bindings(walker) | walker.string_names
    star_short = {q.rsplit(".", 1)[1] for q in walker.module_scope.star_names} \
        if walker.module_scope.stars else set()
    imported = {b.name for b in walker.imports} | walker.watched_names
    result.import_names = frozenset(imported | star_short)
    names = imported | device_names
    moved = walker.moved
    for node, scope, unit in walker.loads:
        name = node.id
        if name not in names and name not in star_short:
            continue
        bindings = scope.lookup(name)
        if not bindings:
            continue
        for binding in bindings:
            if binding.string_value is not None or binding.device_value:
                if id(node) in moved:
                    walker.flag(unit)  # `x.to(device)`: rules may act on the placement
            elif binding.qualname is not None and (
                    is_xla(binding.qualname)
                    or binding.qualname.split(".", 1)[0] in walker.watched_roots):
                walker.named_units.append(unit)
