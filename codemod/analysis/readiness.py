"""Readiness checks (NM9xx): what will not run, runs slowly, or computes differently on
TorchNeuron, in any PyTorch file, XLA-era or not.

They read the stdlib `ast` only (one walk per file for `neuron_migrate.analysis.readiness_facts`,
then one into the statements `readiness_plan` says a rule may report in), so `audit` can
afford them on every file that mentions torch. Rules are `ReadinessRule`s: the
walk hands each the nodes of the types it asks for, with a `Where` that says what surrounds
the node (compiled code? run on every training step?). A rule says what is wrong; only the
compile rule that has a fix (NM920) also rewrites, through the LibCST engine, on the
statements this walk flags for it.
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from neuron_migrate.engine.failsafe import never_raise
from neuron_migrate.model import BY_POSITION, FileResult, Finding, Kind, parsed
from neuron_migrate.analysis.readiness_facts import Facts, facts_of
from neuron_migrate.analysis.readiness_plan import Plan, Scope
from neuron_migrate.rule import Rule
from neuron_migrate.engine.suppress import Suppressions, read_suppressions, span

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPOUND = (*_LOOPS, ast.If, ast.Try, *([ast.TryStar] if hasattr(ast, "TryStar") else []),
             ast.With, ast.AsyncWith, ast.Match)
"""Statements with statements inside (besides functions and classes)."""


class Limit(str, enum.Enum):
    """Which documented TorchNeuron limit a finding meets; `audit` sums findings by it."""

    BLOCKS = "blocks"
    UNCONFIRMED = "unconfirmed"
    SLOWS = "slows"
    NUMERICS = "numerics"

    def __str__(self) -> str:
        return self.value


TITLES = {
    Limit.BLOCKS: "blocks: will not run on TorchNeuron as written",
    Limit.UNCONFIRMED: "may not run: not in TorchNeuron's supported features (verify on a "
                       "Trainium instance)",
    Limit.SLOWS: "slows: runs, but recompiles, breaks graphs or waits for the device",
    Limit.NUMERICS: "changes numerics: runs with another precision",
}


@dataclass(frozen=True)
class Where:
    """What surrounds a node. Valid during the `check` call it is given to (it reads the
    walk's live stack of ancestors)."""

    facts: Facts
    statement: ast.stmt
    stack: list[ast.AST]
    depth: int
    function: ast.FunctionDef | ast.AsyncFunctionDef | None
    compiled: bool
    """Inside code torch.compile traces (a compiled function, a compiled module's forward)."""
    per_step: bool
    """Runs on every step, unconditionally (a loop body that calls backward or a compiled
    model, or a step function called from one, outside any `if`)."""

    @property
    def ancestors(self) -> tuple[ast.AST, ...]:
        """From the statement's expressions down to the node's parent."""
        return tuple(self.stack[:self.depth])

    @property
    def parent(self) -> ast.AST | None:
        return self.stack[self.depth - 1] if self.depth else None

    def qualname(self, expr: ast.AST) -> str | None:
        return self.facts.qualname(expr)


class ReadinessRule(Rule):
    """A rule over the stdlib `ast`: `check` receives every node of the types in `nodes`
    (the walk may leave out those `scope`, `applies` and `candidates` say it cannot report)."""

    limit: ClassVar[Limit]
    nodes: ClassVar[tuple[type[ast.AST], ...]] = (ast.Call,)
    scope: ClassVar[Scope] = Scope.ANYWHERE
    needs: ClassVar[tuple[bytes, ...]] = ()
    """Bytes one of which every file this rule can report on contains (an import or a
    call spells it out): other files skip the rule, and a file no rule needs skips the
    walk."""
    also: ClassVar[tuple[bytes, ...]] = ()
    """Bytes every one of which such a file contains too."""

    def wanted(self, data: bytes | Tokens) -> bool:
        """Whether a file with these bytes may hold something this rule reports."""
        return all(token in data for token in self.also) and \
            (not self.needs or any(token in data for token in self.needs))

    def applies(self, facts: Facts) -> bool:
        """False if `check` reports nothing in a file with these facts."""
        return True

    def candidates(self, facts: Facts, data: bytes) -> Iterable[int] | None:
        """Lines of the file such that any node `check` reports spans one of them (more lines
        are fine: they are only walked for nothing), or None: any node of `nodes` anywhere.
        The walk looks for this rule's nodes only in statements that span such a line."""
        return None

    def check(self, node: ast.AST, where: Where) -> str | None:
        """The finding's message for this node, or None."""
        raise NotImplementedError


class Tokens(dict):  # type: ignore[type-arg]
    """`token in Tokens(data)` is `token in data`, searched once per token: the rules'
    `needs` share many tokens."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self.data = data

    def __missing__(self, token: bytes) -> bool:
        self[token] = found = token in self.data
        return found

    def __contains__(self, token: object) -> bool:
        return self[token]  # type: ignore[no-any-return]


@dataclass
class Readiness:
    findings: list[Finding] = field(default_factory=list)
    fixes: list[tuple[ast.stmt, tuple[ast.stmt, ...]]] = field(default_factory=list)
    """Statements holding something a fix rule rewrites, each with the statements around it."""

    def flag(self, flagged: set[int], on_path: set[int]) -> None:
        """Hand the statements to fix to the engine (an `Analysis`' sets)."""
        for statement, outer in self.fixes:
            flagged.add(id(statement))
            on_path.update(id(s) for s in (*outer, statement))


def check_tree(path: str, data: bytes, tree: ast.Module, rules: Sequence[ReadinessRule],
               suppressions: Suppressions, engine: bool) -> Readiness:
    """The readiness findings of a file. With `engine`, a fix rule's hits are left to the
    engine to apply and report (they are returned in `fixes`); without, they are reported
    as fixes not applied."""
    ready = Readiness()
    tokens = Tokens(data)
    rules = [r for r in rules if r.wanted(tokens)]
    if not rules:
        return ready
    facts = facts_of(tree)
    plan = Plan(facts, data, rules)
    if plan.rules:
        walk = _Walk(path, facts, plan, suppressions, engine, ready)
        walk.block(tree.body, None, False, False, ())
        ready.findings.sort(key=BY_POSITION)
    return ready


class _Walk:
    def __init__(self, path: str, facts: Facts, plan: Plan,
                 suppressions: Suppressions, engine: bool, ready: Readiness) -> None:
        self.path = path
        self.facts = facts
        self.plan = plan
        self.suppressions = suppressions
        self.engine = engine
        self.ready = ready
        self.seen: set[tuple[str, int]] = set()

    def block(self, body: Iterable[ast.stmt], function: ast.FunctionDef | None,
              compiled: bool, per_step: bool, outer: tuple[ast.stmt, ...]) -> None:
        for statement in body:
            self.statement(statement, function, compiled, per_step, outer)

    def statement(self, node: ast.stmt, function: ast.FunctionDef | None, compiled: bool,
                  per_step: bool, outer: tuple[ast.stmt, ...]) -> None:
        by_type, inside = self.plan.by_type(node, compiled, per_step)
        if isinstance(node, _FUNCTIONS):
            if by_type is not None:
                self.expressions(node, [*node.decorator_list, *node.args.defaults,
                                        *(d for d in node.args.kw_defaults if d is not None)],
                                 by_type, function, compiled, per_step, outer)
            if inside:
                self.block(node.body, node, compiled or id(node) in self.facts.compiled,  # type: ignore[arg-type]
                           id(node) in self.facts.step_functions, (*outer, node))
            return
        if isinstance(node, ast.ClassDef):
            if by_type is not None:
                self.expressions(node, [*node.decorator_list, *node.bases], by_type, function,
                                 compiled, per_step, outer)
            if inside:
                self.block(node.body, None, False, False, (*outer, node))
            return
        if by_type is not None:
            headers = [child for child in ast.iter_child_nodes(node)
                       if not isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case))]
            self.expressions(node, headers, by_type, function, compiled, per_step, outer)
        if not inside or not isinstance(node, _COMPOUND):
            return
        inner = (*outer, node)
        if isinstance(node, _LOOPS):
            step = per_step or self.facts.loop_steps(node)
            self.block(node.body, function, compiled, step, inner)
            self.block(node.orelse, function, compiled, per_step, inner)
        elif isinstance(node, ast.If):
            self.block(node.body, function, compiled, False, inner)
            self.block(node.orelse, function, compiled, False, inner)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            self.block(node.body, function, compiled, per_step, inner)  # type: ignore[attr-defined]
            for handler in node.handlers:  # type: ignore[attr-defined]
                self.block(handler.body, function, compiled, False, inner)
            self.block(node.orelse, function, compiled, per_step, inner)  # type: ignore[attr-defined]
            self.block(node.finalbody, function, compiled, per_step, inner)  # type: ignore[attr-defined]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            self.block(node.body, function, compiled, per_step, inner)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                self.block(case.body, function, compiled, False, inner)

    def expressions(self, statement: ast.stmt, roots: list[ast.AST],
                    by_type: dict[type[ast.AST], list[ReadinessRule]],
                    function: ast.FunctionDef | None, compiled: bool, per_step: bool,
                    outer: tuple[ast.stmt, ...]) -> None:
        stack: list[ast.AST] = []
        fields = self.plan.fields

        def visit(node: ast.AST) -> None:
            kind = type(node)
            rules = by_type.get(kind)
            if rules:
                where = Where(self.facts, statement, stack, len(stack), function, compiled,
                              per_step)
                for rule in rules:
                    message = rule.check(node, where)
                    if message is not None:
                        self.hit(rule, node, statement, outer, message)
            names = fields[kind]
            if not names:
                return  # a leaf, or no node at all (a None key in a dict display)
            stack.append(node)
            for name in names:
                value = getattr(node, name)
                if type(value) is list:
                    for item in value:
                        visit(item)
                elif value is not None:
                    visit(value)
            stack.pop()

        for root in roots:
            visit(root)

    def hit(self, rule: ReadinessRule, node: ast.AST, statement: ast.stmt,
            outer: tuple[ast.stmt, ...], message: str) -> None:
        line = getattr(node, "lineno", statement.lineno)
        if (rule.id, line) in self.seen:
            return
        self.seen.add((rule.id, line))
        if rule.kind is not Kind.REVIEW and self.engine:
            self.ready.fixes.append((statement, outer))
            return
        if self.suppressions.silences(rule.id, *span(statement)):
            return
        column = getattr(node, "col_offset", 0) + 1
        self.ready.findings.append(Finding(self.path, line, column, rule.id, rule.kind,
                                           message))


def audit_source(path: str, data: bytes, rules: Sequence[ReadinessRule]) -> FileResult:
    """`audit` of one file: its readiness findings, whether or not it has anything XLA-era.
    Never raises for bad input."""
    return never_raise(path, data, lambda: _audit(path, data, rules))


def _audit(path: str, data: bytes, rules: Sequence[ReadinessRule]) -> FileResult:
    if not mentions_torch(data):
        return FileResult(path, original=data)
    suppressions = read_suppressions(data)
    if suppressions.whole_file:
        return FileResult(path, original=data)
    tree = parsed(path, data)
    if isinstance(tree, FileResult):
        return tree
    ready = check_tree(path, data, tree, rules, suppressions, engine=False)
    return FileResult(path, findings=tuple(ready.findings), original=data)


def mentions_torch(data: bytes) -> bool:
    """Whether a file may use PyTorch: the only files `audit` reads."""
    return b"torch" in data
