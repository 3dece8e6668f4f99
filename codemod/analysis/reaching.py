"""Which assignments of a name can reach a statement, over the stdlib `ast`.

Some rewrites are equivalent only when something holds on every path to the call: plain
`optimizer.step()` replaces `xm.optimizer_step(optimizer)` only if the model whose parameters
the optimizer holds is wrapped in DistributedDataParallel wherever that call can run. This
module answers "which bindings of `model` (or `self.model`) may be live here" and errs on the
side of more: a jump (`return`, `break`, `continue`, an exception) carries its state where it
goes, and a value that comes from outside what can be seen (a parameter, another module) is
`UNKNOWN`. A proof built on these answers can fail where the code is fine; it cannot succeed
where some path breaks it.
"""

from __future__ import annotations

import ast
import bisect
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from neuron_migrate.analysis.statements import statements
from neuron_migrate.analysis.locate import ast_dotted
from neuron_migrate.analysis.nodes import walked

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (*_FUNCTIONS, ast.ClassDef, ast.Lambda)


@dataclass(frozen=True)
class Definition:
    """One place that gives the name its value: `value` is the expression assigned (None when
    it cannot be told: unpacking, `for`, `with ... as`, augmented assignment)."""

    statement: ast.stmt | None
    value: ast.expr | None


UNKNOWN = Definition(None, None)
"""The value came from somewhere this file does not show (a parameter, a caller, `global`)."""

InPlace = Callable[[ast.stmt, str], ast.expr | None]
"""For a statement that changes what `target` is without assigning it (`fully_shard(model)`),
the expression that stands for its new value."""

State = frozenset[Definition]


def reaching(tree: ast.Module, at: ast.stmt, target: str,
             in_place: InPlace | None = None) -> State:
    """The definitions of `target` (a name, or `self.attr`) that can be live when `at` runs."""
    chain = ancestors(tree, at)
    if chain is None or _declared_elsewhere(tree, target):
        return frozenset({UNKNOWN})
    owner = next((n for n in reversed(chain) if isinstance(n, (*_FUNCTIONS, ast.Module))),
                 tree)
    memo = _memo(tree)
    if in_place is None:
        state = memo.found(owner, target, at)
    else:
        state = _Flow(target, at, in_place, memo.facts).found_in(owner)
    if UNKNOWN not in state:
        return state
    outer = memo.outer(chain, owner, target, in_place)
    return (state - {UNKNOWN}) | outer


def ancestors(tree: ast.Module, at: ast.stmt) -> list[ast.AST] | None:
    """The scopes and compound statements around `at`, outermost first (None if not in tree)."""
    parents = _parents(tree)
    parent = parents.get(id(at))
    if parent is None:
        return None
    path: list[ast.AST] = []
    while parent is not tree:
        path.append(parent)
        parent = parents[id(parent)]
    return [tree, *reversed(path)]


@functools.lru_cache(maxsize=4)
def _parents(tree: ast.Module) -> dict[int, ast.AST]:
    """Each statement, `except` clause and `case` of the module, by id, with what holds it:
    asked for every call a rule follows, so the module is walked once (as `_declared`: the
    cache holds the trees, so an id is never reused)."""
    parents: dict[int, ast.AST] = {}
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                parents[id(child)] = node
                stack.append(child)
    return parents


def definitions_of(tree: ast.Module, at: ast.stmt, dotted: str
                   ) -> list[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda] | None:
    """The functions `dotted` (a name, or `self.method`) names at `at`, when every binding of
    it that can reach there is a `def` (or a lambda) in this file; None otherwise."""
    chain = ancestors(tree, at)
    if chain is None:
        return None
    if dotted.startswith("self.") and dotted.count(".") == 1:
        cls = next((n for n in reversed(chain) if isinstance(n, ast.ClassDef)), None)
        if cls is None:
            return None
        found = _memo(tree).methods(cls).get(dotted.split(".", 1)[1])
        return list(found) if found else None
    if dotted not in _callables(tree).defined and not _callables(tree).lambdas:
        return None  # no binding of it can be a function of this file: skip the flow
    found_defs: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda] = []
    for definition in reaching(tree, at, dotted):
        node, value = definition.statement, definition.value
        if isinstance(node, _FUNCTIONS) and node.name == dotted:
            found_defs.append(node)
        elif isinstance(value, ast.Lambda):
            found_defs.append(value)
        else:
            return None
    return found_defs or None


@dataclass(frozen=True)
class _Callables:
    defined: frozenset[str]
    """The names of every `def` of the module, at any depth."""
    lambdas: bool
    """Whether the module holds a lambda anywhere (a binding's value may be one)."""


@functools.lru_cache(maxsize=4)
def _callables(tree: ast.Module) -> _Callables:
    """What `definitions_of` can ever find in the module. The flow behind it walks the whole
    scope for each question, and a rule asks once per call that passes a model, so a file of
    a thousand `model = ...; log(model)` pairs would cost a million statement visits for a
    name (`log`) that no `def` or lambda of the file can be."""
    defined: set[str] = set()
    lambdas = False
    for node in walked(tree):
        if isinstance(node, _FUNCTIONS):
            defined.add(node.name)
        elif isinstance(node, ast.Lambda):
            lambdas = True
    return _Callables(frozenset(defined), lambdas)


# ------------------------------------------------------------------------------- the flow
@dataclass
class _Frame:
    breaks: set[Definition] = field(default_factory=set)
    continues: set[Definition] = field(default_factory=set)


class _Flow:
    """Runs a body's statements over sets of definitions."""

    def __init__(self, target: str, at: ast.stmt | None, in_place: InPlace | None,
                 facts: _Facts | None = None, record: bool = False) -> None:
        self.target = target
        self.at = at
        self.in_place = in_place
        self.facts = facts
        self.visits: dict[int, State | list[State]] | None = {} if record else None
        """With `record`, the state each statement is reached with, by the statement's id (a
        list when it is reached more than once, as in a loop), for every statement at once."""
        self.runs: dict[tuple[int, int], list[State]] | None = {} if record else None
        """With `record`, the states each run of statements passed together is reached with,
        by its block's id and its first statement's index (see `block`)."""
        self.plans: dict[int, list[int]] = {}
        """The indices of the statements of each block the flow runs one by one."""
        self.found: set[Definition] = set()
        self.returns: set[Definition] = set()
        self.loops: list[_Frame] = []
        self.handlers: list[set[Definition]] = []
        self.start: ast.stmt | None = None
        self.recording = False

    def found_in(self, owner: ast.AST) -> State:
        self.block(owner.body, frozenset({UNKNOWN}))  # type: ignore[attr-defined]
        return frozenset(self.found)

    def since(self, scope: ast.AST, start: ast.stmt) -> State:
        """Every state from the moment `start` runs to the end of `scope`: what a function
        defined by `start` can find in the names it reads from `scope` whenever it is called."""
        self.start = start
        end = self.block(scope.body, frozenset({UNKNOWN}))  # type: ignore[attr-defined]
        if self.recording:
            self.found |= end | self.returns
        return frozenset(self.found)

    def at_exit(self, function: ast.AST) -> State:
        end = self.block(function.body, frozenset({UNKNOWN}))  # type: ignore[attr-defined]
        return end | frozenset(self.returns)

    def block(self, body: list[ast.stmt], state: State) -> State:
        if self.facts is None or self.in_place is not None:
            for stmt in body:
                state = self.statement(stmt, state)
            return state
        # the statements between those that may bind the target, jump or hold a block leave
        # the state as it is: they are passed together, so a flow for a name costs what the
        # statements about it cost, and N names in N statements not N²
        start = 0
        for index in self._plan(body):
            if index > start:
                state = self._passed(body, start, state)
            state = self.statement(body[index], state)
            start = index + 1
        if start < len(body):
            state = self._passed(body, start, state)
        return state

    def _plan(self, body: list[ast.stmt]) -> list[int]:
        plan = self.plans.get(id(body))
        if plan is None:
            indices = set(self.facts.eventful(body, self.target))  # type: ignore[union-attr]
            for stmt in (self.at, self.start):
                where = self.facts.position(stmt) if stmt is not None else None  # type: ignore[union-attr]
                if where is not None and where[0] is body:
                    indices.add(where[1])
            plan = self.plans[id(body)] = sorted(indices)
        return plan

    def _passed(self, body: list[ast.stmt], start: int, state: State) -> State:
        """What `statement` does for each of the statements from `body[start]` to the next
        in the plan: none of them is `at` or `start`, and none changes the state."""
        if self.recording:
            self.found |= state
        for handler in self.handlers:
            handler |= state
        if self.runs is not None:
            self.runs.setdefault((id(body), start), []).append(state)
        return state

    def statement(self, stmt: ast.stmt, state: State) -> State:
        if stmt is self.at:
            self.found |= state
        if self.visits is not None:
            before = self.visits.get(id(stmt))
            if before is None:
                self.visits[id(stmt)] = state
            elif isinstance(before, list):
                before.append(state)
            else:
                self.visits[id(stmt)] = [before, state]
        if stmt is self.start:
            self.recording = True
        if self.recording:
            self.found |= state
        for handler in self.handlers:
            handler |= state
        state = self._walrus(stmt, state)
        handle = _HANDLERS.get(type(stmt))
        state = handle(self, stmt, state) if handle else self._simple(stmt, state)
        for handler in self.handlers:
            handler |= state
        return state

    def _simple(self, stmt: ast.stmt, state: State) -> State:
        if isinstance(stmt, (ast.Return, ast.Raise)):
            if isinstance(stmt, ast.Return):
                self.returns |= state
            return frozenset()
        if isinstance(stmt, (ast.Break, ast.Continue)) and self.loops:
            frame = self.loops[-1]
            (frame.breaks if isinstance(stmt, ast.Break) else frame.continues).update(state)
            return frozenset()
        if self.in_place is not None and (value := self.in_place(stmt, self.target)) is not None:
            return frozenset({Definition(stmt, value)})
        if self.facts is not None and self.target not in self.facts.named(stmt):
            return state  # none of the bindings below can be of the target
        if isinstance(stmt, ast.Assign):
            return self._assign(stmt, stmt.targets, stmt.value, state)
        if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            return self._assign(stmt, [stmt.target], stmt.value, state)
        if isinstance(stmt, ast.AugAssign) and self._matches(stmt.target):
            return frozenset({Definition(stmt, None)})
        if isinstance(stmt, ast.Delete) and any(self._binds(t) for t in stmt.targets):
            return frozenset({Definition(stmt, None)})
        if isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)) and stmt.name == self.target:
            return frozenset({Definition(stmt, None)})
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name.split(".", 1)[0]) == self.target for a in stmt.names):
            return frozenset({Definition(stmt, None)})
        return state

    def binding(self, stmt: ast.stmt) -> Definition | None:
        """The definition `stmt` itself makes, whatever its branches do; None if none."""
        if isinstance(stmt, (ast.For, ast.AsyncFor)) and self._binds(stmt.target) or \
                isinstance(stmt, (ast.With, ast.AsyncWith)) and any(
                    i.optional_vars is not None and self._binds(i.optional_vars)
                    for i in stmt.items) or \
                isinstance(stmt, ast.Try) and any(h.name == self.target for h in stmt.handlers):
            return Definition(stmt, None)
        if isinstance(stmt, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
            return None
        state = self._simple(stmt, frozenset({UNKNOWN}))
        return next(iter(state)) if state != frozenset({UNKNOWN}) else None

    def _assign(self, stmt: ast.stmt, targets: list[ast.expr], value: ast.expr,
                state: State) -> State:
        for target in targets:
            if self._matches(target):
                state = frozenset({Definition(stmt, value)})
            elif self._binds(target):
                state = frozenset({Definition(stmt, None)})
        return state

    def _matches(self, node: ast.expr) -> bool:
        return ast_dotted(node) == self.target

    def _binds(self, node: ast.expr) -> bool:
        return any(isinstance(n, (ast.Name, ast.Attribute)) and self._matches(n)
                   for n in ast.walk(node))

    def _walrus(self, stmt: ast.stmt, state: State) -> State:
        names = self.facts.walruses(stmt) if self.facts is not None else _walruses(stmt)
        for name in names:
            if name == self.target:
                state = state | {Definition(stmt, None)}
        return state

    # ---------------------------------------------------------------- compound statements
    def _if(self, stmt: ast.If, state: State) -> State:
        return self.block(stmt.body, state) | self.block(stmt.orelse, state)

    def _loop(self, stmt: ast.For | ast.AsyncFor | ast.While, state: State) -> State:
        frame = _Frame()
        self.loops.append(frame)
        head = state
        while True:
            entry = head
            if isinstance(stmt, (ast.For, ast.AsyncFor)) and self._binds(stmt.target):
                entry = frozenset({Definition(stmt, None)})
            end = self.block(stmt.body, entry)
            new_head = head | end | frame.continues
            if new_head == head:
                break
            head = new_head
        self.loops.pop()
        return self.block(stmt.orelse, head) | frozenset(frame.breaks)

    def _with(self, stmt: ast.With | ast.AsyncWith, state: State) -> State:
        if any(i.optional_vars is not None and self._binds(i.optional_vars) for i in stmt.items):
            state = frozenset({Definition(stmt, None)})
        return self.block(stmt.body, state)

    def _try(self, stmt: ast.Try, state: State) -> State:
        seen: set[Definition] = set(state)
        self.handlers.append(seen)
        body = self.block(stmt.body, state)
        self.handlers.pop()
        after = self.block(stmt.orelse, body)
        for handler in stmt.handlers:
            entry = frozenset(seen)
            if handler.name == self.target:
                entry = frozenset({Definition(stmt, None)})
            after |= self.block(handler.body, entry)
        if stmt.finalbody:
            # the final block also runs on the way out of a jump or an exception
            after = self.block(stmt.finalbody, after | frozenset(seen))
        return after

    def _match(self, stmt: ast.stmt, state: State) -> State:
        out = state  # no case matched
        for case in stmt.cases:  # type: ignore[attr-defined]
            entry = state
            if any(isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name == self.target
                   for n in ast.walk(case.pattern)):
                entry = frozenset({Definition(stmt, None)})
            out |= self.block(case.body, entry)
        return out


_HANDLERS: dict[type, Callable[[_Flow, ast.stmt, State], State]] = {
    ast.If: _Flow._if,  # type: ignore[dict-item]
    ast.For: _Flow._loop,  # type: ignore[dict-item]
    ast.AsyncFor: _Flow._loop,  # type: ignore[dict-item]
    ast.While: _Flow._loop,  # type: ignore[dict-item]
    ast.With: _Flow._with,  # type: ignore[dict-item]
    ast.AsyncWith: _Flow._with,  # type: ignore[dict-item]
    ast.Try: _Flow._try,  # type: ignore[dict-item]
    ast.Match: _Flow._match,
}
if hasattr(ast, "TryStar"):  # Python 3.11+
    _HANDLERS[ast.TryStar] = _Flow._try  # type: ignore[assignment]


def _walruses(stmt: ast.stmt) -> tuple[str, ...]:
    """The names `stmt`'s own expressions bind with `:=`, once per `:=`."""
    return tuple(node.target.id for node in expressions(stmt) if isinstance(node, ast.NamedExpr))


def _named(stmt: ast.stmt) -> frozenset[str]:
    """Every name (or `a.b`) that `_Flow._simple` could find `stmt` binds: a target not among
    them leaves the state as it is, whatever the flow follows."""
    names: set[str | None] = set()
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Delete)):
        targets = stmt.targets if not isinstance(stmt, ast.AnnAssign) else [stmt.target]
        for target in targets:
            names.add(ast_dotted(target))
            names.update(ast_dotted(n) for n in ast.walk(target)
                         if isinstance(n, (ast.Name, ast.Attribute)))
    elif isinstance(stmt, ast.AugAssign):
        names.add(ast_dotted(stmt.target))
    elif isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
        names.add(stmt.name)
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        names.update(a.asname or a.name.split(".", 1)[0] for a in stmt.names)
    names.discard(None)
    return frozenset(names)  # type: ignore[arg-type]


_EVENTFUL = (*_HANDLERS, ast.Return, ast.Raise, ast.Break, ast.Continue)
"""Statements a flow runs one by one whatever it follows: they hold blocks, or jump."""


class _Facts:
    """What each statement of one module binds and where it stands, worked out once: a flow
    asks it of every statement it passes, for each name it follows."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self._walruses: dict[int, tuple[str, ...]] = {}
        self._named: dict[int, frozenset[str]] = {}
        self._positions: dict[int, tuple[list[ast.stmt], int]] | None = None
        self._blocks: dict[int, tuple[list[int], dict[str, list[int]]]] = {}

    def position(self, stmt: ast.stmt) -> tuple[list[ast.stmt], int] | None:
        """The block that holds `stmt` and its index there (None for a statement of no block
        of the module)."""
        if self._positions is None:
            self._positions = {}
            pending: list[ast.AST] = [self.tree]
            while pending:
                node = pending.pop()
                for block in ("body", "orelse", "finalbody", "handlers", "cases"):
                    value = getattr(node, block, None)
                    if not isinstance(value, list):
                        continue
                    pending.extend(value)
                    for index, child in enumerate(value):
                        if isinstance(child, ast.stmt):
                            self._positions[id(child)] = (value, index)
        return self._positions.get(id(stmt))

    def eventful(self, body: list[ast.stmt], target: str) -> list[int]:
        """The indices of the statements of `body` that may change the state of a flow for
        `target`: those that hold blocks or jump, and those that may bind it."""
        found = self._blocks.get(id(body))
        if found is None:
            always: list[int] = []
            by_name: dict[str, list[int]] = {}
            for index, stmt in enumerate(body):
                if isinstance(stmt, _EVENTFUL):
                    always.append(index)
                for name in {*self.named(stmt), *self.walruses(stmt)}:
                    by_name.setdefault(name, []).append(index)
            found = self._blocks[id(body)] = (always, by_name)
        always, by_name = found
        return [*always, *by_name.get(target, ())]

    def walruses(self, stmt: ast.stmt) -> tuple[str, ...]:
        found = self._walruses.get(id(stmt))
        if found is None:
            found = self._walruses[id(stmt)] = _walruses(stmt)
        return found

    def named(self, stmt: ast.stmt) -> frozenset[str]:
        found = self._named.get(id(stmt))
        if found is None:
            found = self._named[id(stmt)] = _named(stmt)
        return found


_RECORDED = 2_000_000
"""How many statement states one module's recorded flows may keep in all; past it a question
is answered by a flow of its own, as slow as it is without the memo but in bounded memory."""


class _Memo:
    """The answers of one module's flows, kept for its next questions. A rule asks about the
    same name at many statements (the function `f` at each of a thousand `f(model)` calls), and
    a flow over the whole scope per question would make a file of N such statements cost N².
    One flow records the state every statement of the scope is reached with (once for a run of
    statements that cannot change it), in the order the flow reaches it, so each answer is
    built from the same states in the same order as a flow that stops for that statement alone
    would build it."""

    def __init__(self, tree: ast.Module) -> None:
        self.facts = _Facts(tree)
        self._flows: dict[tuple[ast.AST, str], _Flow] = {}
        self._outer: dict[tuple[ast.AST, str, InPlace | None, ast.AST | None], State] = {}
        self._methods: dict[ast.ClassDef, dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]] = {}
        self._room = _RECORDED

    def found(self, owner: ast.AST, target: str, at: ast.stmt) -> State:
        """What `_Flow(target, at, None).found_in(owner)` finds."""
        flow = self._flows.get((owner, target))
        if flow is None:
            if self._room <= 0:
                return _Flow(target, at, None, self.facts).found_in(owner)
            flow = self._flows[(owner, target)] = _Flow(target, None, None, self.facts, True)
            flow.found_in(owner)
            self._room -= len(flow.visits) + len(flow.runs)  # type: ignore[arg-type]
        states = flow.visits.get(id(at))  # type: ignore[union-attr]
        if states is None:  # passed in a run, or never reached
            where = self.facts.position(at)
            plan = flow.plans.get(id(where[0])) if where is not None else None
            if where is not None and plan is not None:
                index = bisect.bisect_left(plan, where[1])
                if index == len(plan) or plan[index] != where[1]:
                    start = plan[index - 1] + 1 if index else 0
                    states = flow.runs.get((id(where[0]), start))  # type: ignore[union-attr]
        found: set[Definition] = set()
        for state in [] if states is None else states if isinstance(states, list) else [states]:
            found |= state
        return frozenset(found)

    def outer(self, chain: list[ast.AST], owner: ast.AST, target: str,
              in_place: InPlace | None) -> State:
        """`_outer`'s answer, which depends on `owner` and the scopes around it alone (and,
        for `self.attr`, on the class around the statement)."""
        cls = next((n for n in reversed(chain) if isinstance(n, ast.ClassDef)), None) \
            if target.startswith("self.") else None
        key = (owner, target, in_place, cls)
        if key not in self._outer:
            self._outer[key] = _outer(chain, owner, target, in_place, self.facts)
        return self._outer[key]

    def methods(self, cls: ast.ClassDef) -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
        """The methods of `cls`, by name, in the order of its body."""
        if cls not in self._methods:
            by_name: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
            for stmt in cls.body:
                if isinstance(stmt, _FUNCTIONS):
                    by_name.setdefault(stmt.name, []).append(stmt)
            self._methods[cls] = by_name
        return self._methods[cls]


@functools.lru_cache(maxsize=4)
def _memo(tree: ast.Module) -> _Memo:
    """The memo of `tree` (the cache holds the tree, so the ids its memo keys on stay its
    statements')."""
    return _Memo(tree)


def expressions(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The expression nodes of `stmt` itself: not its nested statements, not nested scopes."""
    stack: list[ast.AST] = [c for c in ast.iter_child_nodes(stmt) if not isinstance(c, ast.stmt)]
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.Lambda, ast.excepthandler)):
            stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.stmt))


# --------------------------------------------------------------- values from outside a body
def _outer(chain: list[ast.AST], owner: ast.AST, target: str, in_place: InPlace | None,
           facts: _Facts | None = None) -> State:
    """What `target` holds when `owner` starts: for `self.attr` in a method, what the one
    method that assigns it leaves there; for a free name, every binding in the module."""
    if isinstance(owner, ast.Module):
        return frozenset()  # not bound yet at module level: the load would fail, not differ
    if target.startswith("self.") and target.count(".") == 1:
        cls = next((n for n in reversed(chain) if isinstance(n, ast.ClassDef)), None)
        if cls is None:
            return frozenset({UNKNOWN})
        setters = [m for m in cls.body if isinstance(m, _FUNCTIONS)
                   and m is not owner and _assigns(m, target)]
        if len(setters) != 1 or _assigns(owner, target):
            return frozenset({UNKNOWN})
        return _Flow(target, None, in_place, facts).at_exit(setters[0])
    if _assigned_in_body(owner, target) or _is_parameter(owner, target):
        return frozenset({UNKNOWN})
    return _free(chain, chain.index(owner), target, in_place, facts)


def _free(chain: list[ast.AST], inner: int, target: str, in_place: InPlace | None,
          facts: _Facts | None) -> State:
    """What a free name holds in the function `chain[inner]`: whatever the nearest enclosing
    function (or the module) that binds it holds from the definition of the nested function
    on, since the function reads it when it is called, not when it is defined."""
    for index in range(inner - 1, -1, -1):
        scope = chain[index]
        if not isinstance(scope, (*_FUNCTIONS, ast.Module)):
            continue  # compound statements; class bodies are not seen by their methods
        module = isinstance(scope, ast.Module)
        if not module and not (_assigned_in_body(scope, target) or _is_parameter(scope, target)):
            continue
        start = next(n for n in chain[index + 1:] if isinstance(n, (*_FUNCTIONS, ast.ClassDef)))
        state = _Flow(target, None, in_place, facts).since(scope, start)  # type: ignore[arg-type]
        if module:
            return (state - {UNKNOWN}) or frozenset({UNKNOWN})
        return frozenset({UNKNOWN}) if UNKNOWN in state else state
    return frozenset({UNKNOWN})


def _assigns(function: ast.AST, target: str) -> bool:
    flow = _Flow(target, None, None)
    return any(flow.binding(n) is not None for n in _own_statement_nodes(function))


@functools.lru_cache(maxsize=256)
def _assigned_in_body(function: ast.AST, target: str) -> bool:
    """Asked again for each call a rule follows in the same function: kept (ast nodes are
    keys by identity, and the cache holds them)."""
    return _assigns(function, target) or target in _walrus_targets(function)


@functools.lru_cache(maxsize=64)
def _own_statement_nodes(function: ast.AST) -> tuple[ast.stmt, ...]:
    """The statements `_own_statements` reaches, found once per function: a rule asks about
    one name after another in the same function (the module's own code, for a script: every
    one of its statements, for every name)."""
    return tuple(n for n in _own_statements(function) if isinstance(n, ast.stmt))


@functools.lru_cache(maxsize=64)
def _walrus_targets(function: ast.AST) -> frozenset[str]:
    """The names `:=` binds anywhere in the function, read once per function, as above."""
    return frozenset(n.target.id for n in ast.walk(function) if isinstance(n, ast.NamedExpr))


def _own_statements(function: ast.AST) -> Iterator[ast.AST]:
    stack = list(getattr(function, "body", []))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))


def _is_parameter(function: ast.AST, name: str) -> bool:
    args = function.args  # type: ignore[attr-defined]
    every = (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
    return any(a is not None and a.arg == name for a in every)


def _declared_elsewhere(tree: ast.Module, target: str) -> bool:
    """`global x` / `nonlocal x` anywhere lets code this flow does not follow rebind `x`."""
    return target.split(".", 1)[0] in _declared(tree)


@functools.lru_cache(maxsize=4)
def _declared(tree: ast.Module) -> frozenset[str]:
    """The names any `global` or `nonlocal` statement of the module declares: asked for
    every call a rule follows, so the module is walked once (the cache holds the trees
    themselves, so a key is never a tree that was freed)."""
    return frozenset(name for node in statements(tree.body)
                     if isinstance(node, (ast.Global, ast.Nonlocal)) for name in node.names)

