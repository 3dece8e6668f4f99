"""The XLA RNG state read and restored: `s = xm.get_rng_state()` ... `xm.set_rng_state(s)`
migrate together (NM404).

`xm.get_rng_state()` returned the device generator's seed, an integer, and `xm.set_rng_state`
took one back. Natively the state is a tensor (`torch.neuron.get_rng_state()`), restored with
`torch.neuron.set_rng_state(state)`; `torch.neuron.manual_seed` takes an integer. So a read and
the restore that takes its value are one change: both native (`get_rng_state` /
`set_rng_state`) where every value the name holds is a read state and every use of it is a
restore, or both left for review. A restore rewritten to `manual_seed` beside a read left for
review would break as soon as the review's advice (store the tensor) is followed.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from neuron_migrate.ruleapi.analysis import UNKNOWN, ast_dotted, parents_by_id, reaching, walked

XM = "torch_xla.core.xla_model"
GET, SET = f"{XM}.get_rng_state", f"{XM}.set_rng_state"
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (*_FUNCTIONS, ast.Lambda, ast.ClassDef)


@dataclass(frozen=True)
class RngFacts:
    """The file's XLA RNG reads and restores: `pairs` maps the id of each call that migrates
    as part of a native pair to the statements of its whole pair; `escaping` holds the lines
    of reads whose value goes where it cannot be followed (returned, stored, passed on), which
    stay for review."""

    pairs: dict[int, tuple[ast.stmt, ...]]
    escaping: tuple[int, ...]


def statement_calls(statement: ast.stmt, tree: ast.Module, qualname: str) -> list[ast.Call]:
    """The calls of `qualname` (GET or SET) in a statement, outside the blocks it holds."""
    names = _xla_names(tree)
    found: list[ast.Call] = []
    pending: list[ast.AST] = [c for c in ast.iter_child_nodes(statement)
                              if not isinstance(c, ast.stmt)]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Call) and _qualname(node.func, names) == qualname:
            found.append(node)
        pending.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.stmt))
    return found


@functools.lru_cache(maxsize=4)
def rng_facts(tree: ast.Module) -> RngFacts:
    """Worked out once per file (the cache holds the trees, so an id is never reused)."""
    names = _xla_names(tree)
    calls = [n for n in walked(tree) if isinstance(n, ast.Call)]
    gets = [c for c in calls if _qualname(c.func, names) == GET]
    if not gets:
        return RngFacts({}, ())
    sets = {id(c) for c in calls if _qualname(c.func, names) == SET}
    parents = parents_by_id(tree)
    uses = _NameUses()
    pairs: dict[int, tuple[ast.stmt, ...]] = {}
    escaping: list[int] = []
    for get in gets:
        pair = _pair(get, tree, parents, sets, names, uses)
        if pair is None:
            escaping.append(get.lineno)
            continue
        statements = tuple(_statement_of(c, parents) for c in pair)
        pairs.update((id(c), statements) for c in pair)
    return RngFacts(pairs, tuple(sorted(escaping)))


def _statement_of(node: ast.AST, parents: dict[int, ast.AST]) -> ast.stmt:
    while not isinstance(node, ast.stmt):
        node = parents[id(node)]
    return node


class _NameUses:
    """Each scope's names, found in one walk of it however many reads it holds: every `Name`
    by identifier, in the walk's order, and the identifiers a `global` or `nonlocal` declares
    (nested scopes included, as a read's pair is judged over all of them)."""

    def __init__(self) -> None:
        self._by_owner: dict[int, tuple[dict[str, list[ast.Name]], set[str]]] = {}

    def of(self, owner: ast.AST) -> tuple[dict[str, list[ast.Name]], set[str]]:
        known = self._by_owner.get(id(owner))
        if known is None:
            found: dict[str, list[ast.Name]] = {}
            declared: set[str] = set()
            for node in ast.walk(owner):
                if isinstance(node, ast.Name):
                    found.setdefault(node.id, []).append(node)
                elif isinstance(node, (ast.Global, ast.Nonlocal)):
                    declared.update(node.names)
            known = self._by_owner[id(owner)] = (found, declared)
        return known


def _pair(get: ast.Call, tree: ast.Module, parents: dict[int, ast.AST], sets: set[int],
          names: dict[str, str], uses: _NameUses) -> list[ast.Call] | None:
    """`get` and the restores of its value, when `s = get()` is the only kind of
    value `s` ever holds in its scope and every use of `s` is `xm.set_rng_state(s)`."""
    statement = parents.get(id(get))
    if get.args or get.keywords or not isinstance(statement, ast.Assign) or \
            len(statement.targets) != 1 or not isinstance(statement.targets[0], ast.Name):
        return None
    name = statement.targets[0].id
    owner: ast.AST = statement
    while owner is not tree and not isinstance(owner, _FUNCTIONS):
        owner = parents[id(owner)]
    if _parameter(owner, name):
        return None
    occurrences, declared = uses.of(owner)
    if name in declared:
        return None
    found = [get]
    for node in occurrences.get(name, ()):
        if isinstance(node.ctx, ast.Store):
            assigned = parents.get(id(node))
            if not (isinstance(assigned, ast.Assign) and assigned.targets == [node]
                    and isinstance(assigned.value, ast.Call) and not assigned.value.args
                    and _qualname(assigned.value.func, names) == GET):
                return None
            found.append(assigned.value)
            continue
        restore = parents.get(id(node))
        if not (isinstance(restore, ast.Call) and id(restore) in sets) or \
                restore.args != [node] or restore.keywords:
            return None
        found.append(restore)
    return found if len(found) > 1 else None  # a read nothing restores is no pair


def seed_like(value: ast.expr, tree: ast.Module, at: ast.stmt, depth: int = 3) -> bool:
    """Whether a restore's argument is visibly an integer seed made here (a number, arithmetic
    on numbers, a name only ever assigned such), not a value that may be a read state."""
    if isinstance(value, ast.Constant):
        return isinstance(value.value, int) and not isinstance(value.value, bool)
    if isinstance(value, ast.UnaryOp):
        return seed_like(value.operand, tree, at, depth)
    if isinstance(value, ast.BinOp):
        return seed_like(value.left, tree, at, depth) and seed_like(value.right, tree, at, depth)
    if isinstance(value, ast.Name) and depth:
        found = reaching(tree, at, value.id)
        return bool(found) and UNKNOWN not in found and all(
            d.value is not None and d.statement is not None
            and seed_like(d.value, tree, d.statement, depth - 1) for d in found)
    return False


def _parameter(owner: ast.AST, name: str) -> bool:
    if not isinstance(owner, _FUNCTIONS):
        return False
    args = owner.args
    return any(a is not None and a.arg == name for a in (
        *args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg))


@functools.lru_cache(maxsize=4)
def _xla_names(tree: ast.Module) -> dict[str, str]:
    """What the file's imports bind, anywhere in it, to xla_model or its two RNG functions."""
    names: dict[str, str] = {}
    for node in walked(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == XM and alias.asname:
                    names[alias.asname] = XM
                elif alias.name.startswith("torch_xla"):
                    names["torch_xla"] = "torch_xla"
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full == XM or full in (GET, SET):
                    names[alias.asname or alias.name] = full
    return names


def _qualname(func: ast.expr, names: dict[str, str]) -> str | None:
    dotted = ast_dotted(func)
    if dotted is None:
        return None
    root, _, rest = dotted.partition(".")
    bound = names.get(root)
    if bound is None:
        return None
    return f"{bound}.{rest}" if rest else bound
