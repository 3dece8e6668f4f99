"""Whether an optimizer only holds parameters that DistributedDataParallel or FSDP average.

`xm.optimizer_step(opt)` averaged the gradients itself. Plain `opt.step()` keeps the replicas
in step only if every parameter `opt` holds belongs to a model that is wrapped in DDP/FSDP on
every path to that call: then the wrapper has averaged the gradients during backward. A file
that merely mentions DDP proves nothing (`if use_ddp: model = DDP(model)`), so the proof
follows the optimizer back to the parameters it was built from, and the model to its
bindings, with `analysis.reaching`.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from neuron_migrate.analysis.locate import ast_dotted
from neuron_migrate.analysis.nodes import walked
from neuron_migrate.analysis.reaching import Definition, InPlace, reaching

if TYPE_CHECKING:  # rules hand their Site in; the analysis needs nothing else of it
    from neuron_migrate.rule import Site

WRAPPERS = frozenset({
    "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_shard",
    "torch.distributed._composable.fsdp.fully_shard",
})
"""Wrappers that average gradients themselves during backward."""

_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_PARAMETERS = frozenset({"parameters", "named_parameters"})


@dataclass(frozen=True)
class Proof:
    """The models whose wrapping was proved, for the message."""

    models: tuple[str, ...]


def averaged_by_wrapper(optimizer: cst.BaseExpression, site: Site) -> Proof | None:
    """A proof that every parameter `optimizer` holds is averaged by DDP/FSDP at this call,
    or None when that cannot be shown."""
    from neuron_migrate.syntax.quote import code

    name = code(optimizer)
    if not _DOTTED.fullmatch(name):
        return None
    wraps = _Wraps(site)
    tree, at = site.module_tree, site.statement
    sources: list[tuple[str, ast.stmt]] = []
    for definition in reaching(tree, at, name, wraps.in_place_for(tree, name)):
        roots = _parameter_roots(definition, tree, wraps, depth=3)
        if not roots or definition.statement is None:
            return None
        sources.extend((root, definition.statement) for root in roots)
    if not sources:
        return None
    for model, built_at in sources:
        if not _wrapped_here(model, built_at, at, tree, wraps):
            return None
    return Proof(tuple(dict.fromkeys(m for m, _ in sources)))


def _wrapped_here(model: str, built_at: ast.stmt, at: ast.stmt, tree: ast.Module,
                  wraps: _Wraps) -> bool:
    """Every binding of `model` live at `at` is a wrapper, and the wrapper holds the
    parameters the optimizer was built from: it wraps `model` itself (`model = DDP(model)`),
    or the optimizer was built from the wrapper (`ddp = DDP(net)`, then `ddp.parameters()`)."""
    in_place = wraps.in_place_for(tree, model)
    here = reaching(tree, at, model, in_place)
    if not here or not all(wraps.is_wrap(d.value) for d in here):
        return False
    if all(wraps.wrapped(d.value) == model for d in here):  # type: ignore[arg-type]
        return True
    at_build = reaching(tree, built_at, model, in_place)
    return bool(at_build) and all(wraps.is_wrap(d.value) for d in at_build) and \
        at_build <= here


def _parameter_roots(definition: Definition, tree: ast.Module, wraps: _Wraps,
                     depth: int) -> set[str]:
    """The models whose `.parameters()` the value of `definition` was built from (an optimizer
    construction, or a parameter list assigned to a name first); empty when unknown."""
    value = definition.value
    if not isinstance(value, ast.Call) or definition.statement is None:
        return set()
    params = value.args[0] if value.args and not isinstance(value.args[0], ast.Starred) else \
        next((k.value for k in value.keywords if k.arg == "params"), None)
    return _roots_of(params, definition.statement, tree, wraps, depth) if params else set()


def _roots_of(expr: ast.expr, where: ast.stmt, tree: ast.Module, wraps: _Wraps,
              depth: int) -> set[str]:
    roots = {ast_dotted(n.func.value) or "" for n in ast.walk(expr)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in _PARAMETERS}
    if roots:
        return set() if "" in roots else roots
    if isinstance(expr, ast.Name) and depth > 0:  # `params = [...]`, then `SGD(params)`
        found: set[str] = set()
        for definition in reaching(tree, where, expr.id, wraps.in_place_for(tree, expr.id)):
            if definition.value is None or definition.statement is None:
                return set()
            inner = _roots_of(definition.value, definition.statement, tree, wraps, depth - 1)
            if not inner:
                return set()
            found |= inner
        return found
    return set()


class _Wraps:
    """Which calls wrap a model in DDP/FSDP, by what their names resolve to in this file."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.known: dict[str, bool] = {}

    def is_wrap(self, value: ast.expr | None) -> bool:
        if not isinstance(value, ast.Call):
            return False
        name = ast_dotted(value.func)
        return name is not None and self._wraps(name)

    def _wraps(self, name: str) -> bool:
        """Whether a call of `name` (dotted) wraps a model, by what it resolves to here."""
        if name not in self.known:
            qualname = self.site.qualname_of(cst.parse_expression(name))
            self.known[name] = qualname in WRAPPERS
        return self.known[name]

    @staticmethod
    def wrapped(call: ast.Call) -> str | None:
        """The model a wrapper call wraps (`DDP(model.to(device), ...)` wraps `model`)."""
        module = call.args[0] if call.args else \
            next((k.value for k in call.keywords if k.arg == "module"), None)
        while isinstance(module, ast.Call) and isinstance(module.func, ast.Attribute):
            module = module.func.value
        return ast_dotted(module) if module is not None else None

    def in_place_for(self, tree: ast.Module, target: str) -> InPlace | None:
        """`in_place`, for following `target` in `tree`; None when no statement of the tree
        could be an in-place wrap of it, which gives the same answers: without a hook the
        flow's answers are kept for the file's next questions (`analysis.reaching`), where an
        optimizer step at each of N statements would otherwise cost a flow over the scope."""
        callees = _in_place_callees(tree).get(target, ())
        return self.in_place if any(self._wraps(name) for name in callees) else None

    def in_place(self, stmt: ast.stmt, target: str) -> ast.expr | None:
        """`fully_shard(model)` as a statement makes `model` a sharded module."""
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                self.is_wrap(stmt.value) and self.wrapped(stmt.value) == target:
            return stmt.value
        return None


@functools.lru_cache(maxsize=4)
def _in_place_callees(tree: ast.Module) -> dict[str, frozenset[str]]:
    """For each name a call statement of the module passes as what `_Wraps.wrapped` takes for
    the model (`fully_shard(model)`, `log(model)`), the functions such statements call:
    `_Wraps.in_place` finds a statement for a name only where one of them is a wrapper. Asked
    for every optimizer step, so the module is walked once (the cache holds the trees)."""
    callees: dict[str, set[str]] = {}
    for node in walked(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                (name := _Wraps.wrapped(node.value)) is not None and \
                (callee := ast_dotted(node.value.func)) is not None:
            callees.setdefault(name, set()).add(callee)
    return {name: frozenset(found) for name, found in callees.items()}
