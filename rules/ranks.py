"""NM203-NM205: who am I? Ordinals, world size, and the master-only helpers."""

from __future__ import annotations

import ast
import weakref

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, ReplaceStatement, Review, Rule,
                                    Site, argument, bool_value, code, has_star_args, keyword,
                                    template)
from neuron_migrate.ruleapi.analysis import parents_by_id
from neuron_migrate.rules.launch import named_calls

D_DIST = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html"

XM = "torch_xla.core.xla_model"
XR = "torch_xla.runtime"

_GLOBAL_RANK = frozenset({f"{XM}.get_ordinal", f"{XR}.global_ordinal"})
_LOCAL_RANK = frozenset({f"{XM}.get_local_ordinal", f"{XR}.local_ordinal"})
_WORLD_SIZE = frozenset({f"{XM}.xrt_world_size", f"{XR}.world_size"})
_LOCAL_WORLD = frozenset({f"{XR}.local_process_count"})
_MASTERS = frozenset({f"{XM}.is_master_ordinal", f"{XM}.master_print"})


def global_rank(site: Site) -> cst.BaseExpression | None:
    return _distributed_or_environment(site, "get_rank", "RANK", 0)


def world_size(site: Site) -> cst.BaseExpression | None:
    return _distributed_or_environment(site, "get_world_size", "WORLD_SIZE", 1)


_HELPER_OF = {"get_rank": "_neuron_rank", "get_world_size": "_neuron_world_size"}
_HELPER_FROM = 3


def _repeated(site: Site, getter: str) -> bool:
    """Whether the file asks for the global rank (or the world size) at least three times:
    from there one small helper (7 lines with its docstring and spacing) is shorter than the
    same 95-character conditional expression at every use, and reads better. Counted over
    the XLA calls that the rules turn into that expression."""
    tree, calls = site.module_tree, site.module_calls()
    if getter == "get_world_size":
        return len(named_calls(tree, calls, _WORLD_SIZE)) >= _HELPER_FROM
    found = named_calls(tree, calls, _GLOBAL_RANK | _MASTERS)
    return sum(1 for name, call, _ in found if _asks_global_rank(name, call)) >= _HELPER_FROM


def _asks_global_rank(qualname: str | None, call: ast.Call) -> bool:
    """Whether the rules write this call with the global rank (`master_print` without
    `local=True`, `is_master_ordinal(local=False)`, an ordinal without arguments)."""
    local = next((k.value for k in call.keywords if k.arg == "local"),
                 call.args[0] if qualname == f"{XM}.is_master_ordinal" and call.args else None)
    if qualname == f"{XM}.master_print":
        return not (isinstance(local, ast.Constant) and local.value is True)
    if qualname == f"{XM}.is_master_ordinal":
        return isinstance(local, ast.Constant) and local.value is False
    return not call.args and not call.keywords


def _distributed_or_environment(site: Site, getter: str, variable: str,
                                default: int) -> cst.BaseExpression | None:
    """torch.distributed's answer, else torchrun's environment: a worker torchrun started
    knows its rank before (or without) a process group, as PJRT's did; alone, 0 and 1."""
    dist, os_ = site.ref("torch.distributed"), site.ref("os")
    if dist is None or os_ is None:
        return None
    if _repeated(site, getter):
        return cst.Call(func=site.helper(_HELPER_OF[getter]))
    return template(f'{{d}}.{getter}() if {{d}}.is_initialized() else '
                    f'int({{os}}.environ.get("{variable}", {default}))', d=dist, os=os_)


def local_rank(site: Site) -> cst.BaseExpression | None:
    os_ = site.ref("os")
    if os_ is None:
        return None
    return template('int({os}.environ.get("LOCAL_RANK", 0))', os=os_)


class RankAndWorldSize(Rule):
    id = "NM203"
    name = "rank-and-world-size"
    kind = Kind.FIX
    summary = "ordinals and world size come from torch.distributed and torchrun's environment"
    explanation = """\
What it does: `xm.get_ordinal()` / `xr.global_ordinal()` become
`dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", 0))`;
`xm.xrt_world_size()` / `xr.world_size()` become
`dist.get_world_size() if dist.is_initialized() else int(os.environ.get("WORLD_SIZE", 1))`;
`xm.get_local_ordinal()` / `xr.local_ordinal()` become `int(os.environ.get("LOCAL_RANK", 0))`
and `xr.local_process_count()` becomes `int(os.environ.get("LOCAL_WORLD_SIZE", 1))`.

Why: TorchNeuron runs one process per NeuronCore under torchrun and the `neuron`
torch.distributed backend; the rank and world size are torch.distributed's, and torchrun
publishes the local rank in LOCAL_RANK (which the neuron backend itself reads).

What differs: nothing when the script runs under torchrun, with or without a process group
yet (torchrun's RANK and WORLD_SIZE answer before one exists, as PJRT answered without one).
Like the XLA calls, the replacements also work in a single process (rank 0, world size 1).
The expression is put in parentheses where it needs them. A file that asks for the global
rank (or the world size) three times or more, counting `master_print` and
`is_master_ordinal(local=False)`, gets the same answer from one small helper,
`_neuron_rank()` (`_neuron_world_size()`), instead of the expression at every use. The
process group cannot stand in for it: the migration creates one only when WORLD_SIZE > 1,
so `dist.get_rank()` alone would raise in a single process."""
    doc_url = D_DIST
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\nrank = xm.get_ordinal()\n"
               "world = xm.xrt_world_size()\n",
        after="import os\n\nimport torch\n\nrank = torch.distributed.get_rank() if "
              "torch.distributed.is_initialized() else int(os.environ.get(\"RANK\", 0))\n"
              "world = torch.distributed.get_world_size() if "
              "torch.distributed.is_initialized() else int(os.environ.get(\"WORLD_SIZE\", 1))\n",
    )
    calls = _GLOBAL_RANK | _LOCAL_RANK | _WORLD_SIZE | _LOCAL_WORLD
    emits = ("torch.distributed.get_rank", "torch.distributed.is_initialized",
             "torch.distributed.get_world_size")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if node.args:
            return Review(f"`{code(node)}`: arguments have no native equivalent; use "
                          "torch.distributed.get_rank() / get_world_size() or LOCAL_RANK")
        qualname = site.qualname or ""
        if qualname in _GLOBAL_RANK:
            new = global_rank(site)
        elif qualname in _LOCAL_RANK:
            new = local_rank(site)
        elif qualname in _WORLD_SIZE:
            new = world_size(site)
        else:
            os_ = site.ref("os")
            new = None if os_ is None else template(
                'int({os}.environ.get("LOCAL_WORLD_SIZE", 1))', os=os_)
        if new is None:
            return Review(f"`{code(node)}`: `torch` or `os` means something else here")
        if not _helper_call(new):
            new = site.parenthesized(new)
        return Replace(new, f"`{code(node)}` → `{code(new)}`")


class MasterOnly(Rule):
    id = "NM204"
    name = "master-ordinal"
    kind = Kind.FIX
    summary = ("`xm.is_master_ordinal()` (local by default) and `xm.master_print()` (global) "
               "become rank checks")
    explanation = """\
What it does: `xm.is_master_ordinal()` becomes `int(os.environ.get("LOCAL_RANK", 0)) == 0`
and `xm.is_master_ordinal(local=False)` becomes a global rank-0 check (`not
xm.is_master_ordinal()` reads `... != 0`). `xm.master_print(...)`
becomes `print(...)` guarded by the same global rank-0 check (`fd=` becomes `file=`;
`local=True` guards on LOCAL_RANK instead).

Why: the defaults differ and are easy to get wrong: `is_master_ordinal` defaulted to the
LOCAL master (one process per host), while `master_print` printed on the GLOBAL master only.
The replacements keep each default, and work without an initialised process group: before
one exists, torchrun's RANK answers, so a message printed during set-up still appears once.

What differs: nothing. master_print evaluated its arguments on every rank; where they call
anything but a builtin or an accessor such as `.item()` (a forward pass or a reduction, which
every rank must join, or the printed message could hang the job), the other ranks still
evaluate them in an `else:` branch. A `master_print` whose value is used, or a `local=` that
is not a literal, is reported for review with the suggested code."""
    doc_url = D_DIST
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\nif xm.is_master_ordinal():\n"
               "    save()\nxm.master_print(\"done\")\n",
        after="import os\n\nimport torch\n\nif int(os.environ.get(\"LOCAL_RANK\", 0)) == 0:\n"
              "    save()\nif (torch.distributed.get_rank() if torch.distributed.is_initialized() "
              "else int(os.environ.get(\"RANK\", 0))) == 0:\n    print(\"done\")\n",
    )
    calls = frozenset({f"{XM}.is_master_ordinal", f"{XM}.master_print"})
    emits = ("torch.distributed.get_rank", "torch.distributed.is_initialized")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if has_star_args(node.args) and site.qualname == f"{XM}.is_master_ordinal":
            return Review(f"`{code(node)}`: unpacked arguments")
        if site.qualname == f"{XM}.is_master_ordinal":
            return self._is_master(node, site)
        return self._master_print(node, site)

    def _is_master(self, node: cst.Call, site: Site) -> Outcome:
        local_arg = argument(node.args, 0, "local")
        local = True if local_arg is None else bool_value(local_arg.value)
        if local is None:
            return Review(f"`{code(node)}`: `local` is computed; use LOCAL_RANK == 0 for the "
                          "local master and torch.distributed.get_rank() == 0 for the global one")
        rank = local_rank(site) if local else global_rank(site)
        if rank is None:
            return Review(f"`{code(node)}`: `torch` or `os` means something else here")
        if not local:
            rank = _grouped(rank)
        new = site.parenthesized(template("{r} == 0", r=rank), comparison=True)
        which = "local" if local else "global"
        return Replace(new, f"`{code(node)}` → `{code(new)}` (the {which} master, as before)")

    def _master_print(self, node: cst.Call, site: Site) -> Outcome:
        local_arg = keyword(node.args, "local")
        local = False if local_arg is None else bool_value(local_arg.value)
        if local is None:
            return Review(f"`{code(node)}`: `local` is computed; guard print() by hand")
        args = []
        for arg in node.args:
            name = arg.keyword.value if arg.keyword else None
            if name == "local":
                continue
            if name == "fd":
                arg = arg.with_changes(keyword=cst.Name("file"))
            args.append(arg)
        if args and args[-1] is not node.args[-1]:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        printed = node.with_changes(func=cst.Name("print"), args=args)
        rank = local_rank(site) if local else global_rank(site)
        condition = None if rank is None else template(
            "{r} == 0", r=rank if local else _grouped(rank))
        if condition is None:
            return Review(f"`{code(node)}`: `torch` or `os` means something else here")
        which = "local" if local else "global"
        if _inside_master_check(site, local):
            return ReplaceStatement((cst.SimpleStatementLine(body=[cst.Expr(printed)]),),
                                    f"`{code(node)}` → `{code(printed)}`: it runs only where "
                                    f"an enclosing `if` already tests for the {which} master, "
                                    "which does not change within a process")
        orelse = None
        values = [a.value for a in args if _may_communicate(a.value)]
        if values:
            # master_print evaluated its arguments on every rank: a call in them may run
            # collectives (a forward pass, a reduction) that every rank must join
            evaluated = cst.Tuple([cst.Element(v) for v in values]) if len(values) > 1 \
                else values[0]
            if "\n" in code(evaluated) and not evaluated.lpar:
                # an argument written over several lines continued them inside the call's
                # parentheses; as a statement of its own it needs parentheses to stay one
                evaluated = evaluated.with_changes(lpar=[cst.LeftParen()],
                                                   rpar=[cst.RightParen()])
            orelse = cst.Else(body=cst.IndentedBlock(body=[cst.SimpleStatementLine(
                body=[cst.Expr(evaluated)],
                trailing_whitespace=cst.TrailingWhitespace(
                    whitespace=cst.SimpleWhitespace("  "),
                    comment=cst.Comment("# evaluated on every rank, as master_print did"),
                    newline=cst.Newline()))]))
        guarded = cst.If(test=condition, body=cst.IndentedBlock(
            body=[cst.SimpleStatementLine(body=[cst.Expr(printed)])]), orelse=orelse)
        also = "; its arguments are still evaluated on every rank (they call code that may " \
            "run collectives)" if orelse is not None else ""
        return ReplaceStatement((guarded,), f"`{code(node)}` → print() on the {which} master "
                                f"only, as master_print did{also}")


def _inside_master_check(site: Site, local: bool) -> bool:
    """Whether the statement runs only in the body of an `if` of the same function that
    tests for the same master (`xm.is_master_ordinal(local=False)` for the global one,
    `xm.is_master_ordinal()` for the local one, or the ordinal `== 0`): a second guard
    would test again what cannot have changed."""
    tree = site.module_tree
    masters = {id(call): (name, call) for name, call, _ in named_calls(
        tree, site.module_calls(), _MASTERS | _GLOBAL_RANK | _LOCAL_RANK)}
    parents = _parents(tree)
    child: ast.AST = site.statement
    while id(child) in parents:
        parent = parents[id(child)]
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                               ast.Lambda)):
            return False
        if isinstance(parent, ast.If) and any(s is child for s in parent.body) and \
                _tests_master(parent.test, masters, local):
            return True
        child = parent
    return False


def _tests_master(test: ast.expr, masters: dict[int, tuple[str | None, ast.Call]],
                  local: bool) -> bool:
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and \
            isinstance(test.ops[0], ast.Eq) and isinstance(right := test.comparators[0],
                                                           ast.Constant) and right.value == 0:
        name, call = masters.get(id(test.left), (None, None))
        wanted = _LOCAL_RANK if local else _GLOBAL_RANK
        return call is not None and name in wanted and not call.args and not call.keywords
    name, call = masters.get(id(test), (None, None))
    if call is None or name != f"{XM}.is_master_ordinal":
        return False
    flag = next((k.value for k in call.keywords if k.arg == "local"),
                call.args[0] if call.args else None)
    if flag is None:
        return local
    return isinstance(flag, ast.Constant) and flag.value is local


_PARENTS: weakref.WeakKeyDictionary[ast.Module, dict[int, ast.AST]] = \
    weakref.WeakKeyDictionary()


def _parents(tree: ast.Module) -> dict[int, ast.AST]:
    """The node holding each node of the module, worked out once per file."""
    found = _PARENTS.get(tree)
    if found is None:
        found = _PARENTS[tree] = parents_by_id(tree)
    return found


def _grouped(rank: cst.BaseExpression) -> cst.BaseExpression:
    """The conditional expression in parentheses before `== 0`; a helper call needs none."""
    if _helper_call(rank):
        return rank
    return rank.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _helper_call(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and \
        expr.func.value in _HELPER_OF.values()


_QUIET_CALLS = frozenset({"str", "repr", "len", "int", "float", "round", "format", "abs", "min",
                          "max", "type", "sorted", "list", "tuple", "dict", "hex", "bool"})
_QUIET_METHODS = frozenset({"item", "tolist", "numel", "size", "dim", "format", "join",
                            "upper", "lower", "strip", "keys", "values", "items", "get",
                            "isoformat", "strftime"})
"""Calls that cannot run a collective: builtins, reading a number or a string out of a value."""


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.loud = False

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func
        quiet = (isinstance(func, cst.Name) and func.value in _QUIET_CALLS) or \
            (isinstance(func, cst.Attribute) and func.attr.value in _QUIET_METHODS)
        self.loud = self.loud or not quiet
        return not self.loud

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False  # not called here


def _may_communicate(value: cst.BaseExpression) -> bool:
    """Whether evaluating `value` calls something other than a quiet builtin or accessor."""
    calls = _Calls()
    value.visit(calls)
    return calls.loud


RULES: tuple[type[Rule], ...] = (RankAndWorldSize, MasterOnly)
