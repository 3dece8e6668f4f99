"""NM205-NM209: collectives. XLA's return values and defaults are kept through small
helpers; group and layout options need a person."""

from __future__ import annotations

import re
from typing import ClassVar

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, ReplaceStatement, Review, Role,
                                    Rule, Site, argument, code, dotted, has_star_args, keyword_arg,
                                    string_value, template)
from neuron_migrate.rules.emitted_helpers import defined
from neuron_migrate.rules.review_base import ReviewRule
from neuron_migrate.rules.nxd_layout import mesh_group, replica_dimension

D_DIST = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html"
XM = "torch_xla.core.xla_model"

_REDUCE_OPS = {"REDUCE_SUM": "SUM", "REDUCE_MUL": "PRODUCT", "REDUCE_MIN": "MIN",
               "REDUCE_MAX": "MAX"}
_REDUCE_STRINGS = {"sum": "SUM", "mul": "PRODUCT", "min": "MIN", "max": "MAX"}


class Rendezvous(Rule):
    id = "NM205"
    name = "rendezvous"
    kind = Kind.FIX
    summary = "`xm.rendezvous()` becomes a barrier, or an all_gather_object with a payload"
    explanation = """\
What it does: a bare `xm.rendezvous(tag)` statement becomes
`if dist.is_initialized(): dist.barrier()`. When a payload is passed, or the result is used,
the call becomes a helper that gathers every process's payload with
`torch.distributed.all_gather_object` and returns them in rank order, as rendezvous did.
`xm.mesh_reduce(tag, data, reduce_fn)` becomes a helper that gathers `data` (moved to the
CPU) from every process and returns `reduce_fn(list)`.

Why: rendezvous was a barrier that could also exchange bytes; torch.distributed has both.
The tag only named the barrier for debugging and is dropped.

What differs: nothing for the result. Without an initialised process group (one process)
the replacements return at once, as the XLA calls did; the helpers raise when WORLD_SIZE > 1
and no group exists (each process would go on alone). `replicas=` (a subset of processes) is
reported for review: create a group with `dist.new_group(ranks)` instead."""
    doc_url = D_DIST
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\nxm.rendezvous(\"checkpoint\")\n",
        after="import torch\n\nif torch.distributed.is_initialized():\n"
              "    torch.distributed.barrier()\n",
    )
    calls = frozenset({f"{XM}.rendezvous", f"{XM}.mesh_reduce"})
    emits = ("torch.distributed.barrier", "torch.distributed.all_gather_object")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if has_star_args(node.args):
            return Review(f"`{code(node)}`: unpacked arguments; rewrite by hand")
        if site.qualname == f"{XM}.mesh_reduce":
            data, reduce_fn = argument(node.args, 1, "data"), argument(node.args, 2, "reduce_fn")
            if data is None or reduce_fn is None:
                return Review(f"`{code(node)}`: expected (tag, data, reduce_fn)")
            new = cst.Call(site.helper("_neuron_mesh_reduce"),
                           [cst.Arg(data.value, comma=cst.Comma(
                               whitespace_after=cst.SimpleWhitespace(" "))),
                            cst.Arg(reduce_fn.value)])
            return Replace(new, f"`{code(node)}` → `{code(new)}` (gathers on the host)")
        replicas = argument(node.args, 2, "replicas")
        if replicas is not None and code(replicas.value) not in ("[]", "None"):
            return Review(f"`{code(node)}`: `replicas` selects a subset of processes; create "
                          "that group with dist.new_group(ranks) and call dist.barrier(group)")
        payload = argument(node.args, 1, "payload")
        if payload is None and site.role is Role.STATEMENT:
            dist = site.ref("torch.distributed")
            if dist is None:
                return Review(f"`{code(node)}`: `torch` means something else here")
            barrier = cst.If(
                test=template("{d}.is_initialized()", d=dist),
                body=cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Expr(
                    template("{d}.barrier()", d=dist))])]))
            return ReplaceStatement((barrier,), f"`{code(node)}` → a barrier across all "
                                    "processes (skipped when there is no process group)")
        value = payload.value if payload is not None else cst.SimpleString('b""')
        new = cst.Call(site.helper("_neuron_gather_objects"), [cst.Arg(value)])
        return Replace(new, f"`{code(node)}` → `{code(new)}`: every process's payload, in "
                       "rank order")


class ReduceOpConstant(Rule):
    id = "NM206"
    name = "reduce-op-constant"
    kind = Kind.FIX
    summary = "`xm.REDUCE_SUM` / `MAX` / `MIN` / `MUL` become `torch.distributed.ReduceOp` members"
    explanation = """\
What it does: replaces the XLA reduction names with torch.distributed's: REDUCE_SUM → SUM,
REDUCE_MAX → MAX, REDUCE_MIN → MIN, REDUCE_MUL → PRODUCT.

Why: torch.distributed collectives (and the helpers neuron-migrate writes for xm.all_reduce)
take a `ReduceOp`; the XLA constants were plain strings.

What differs: the XLA constants were strings ("sum", "max"), so a constant is rewritten only
where its value goes straight into a collective that takes a ReduceOp once migrated: the
reduction of `xm.all_reduce` / `xm.reduce_scatter` (which NM207 rewrites) or `op=` of a
torch.distributed call. When that collective itself stays for review (`groups=`,
`pin_layout=`), the constant stays as it is too, reported with it: a ReduceOp inside an XLA
collective runs on neither stack. Anywhere else (compared, a dict key, a parameter's default, assigned,
returned, passed to another function) it is reported with the member to use: the code that
reads it may still expect the string, and is changed with it by hand. REDUCE_AND and
REDUCE_OR are reported too: whether the neuron backend supports the bitwise reductions is not
confirmed by AWS's documentation."""
    doc_url = D_DIST
    example = Example(
        before="import torch.distributed as dist\nimport torch_xla.core.xla_model as xm\n\n"
               "dist.all_reduce(loss, op=xm.REDUCE_SUM)\n",
        after="import torch.distributed as dist\n\ndist.all_reduce(loss, op=dist.ReduceOp.SUM)\n",
    )
    names = frozenset(f"{XM}.{name}" for name in (*_REDUCE_OPS, "REDUCE_AND", "REDUCE_OR"))
    emits = ("torch.distributed.ReduceOp",)

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        name = (site.qualname or "").rsplit(".", 1)[-1]
        member = _REDUCE_OPS.get(name)
        if member is None:
            return Review(f"`{code(node)}`: check that the neuron backend supports this "
                          "reduction (torch.distributed.ReduceOp.BAND / BOR)")
        new = site.ref(f"torch.distributed.ReduceOp.{member}")
        if new is None:
            return Review(f"`{code(node)}`: `torch` means something else here")
        where = _elsewhere(site)
        if where is not None:
            return Review(f"`{code(node)}` is the string {name[7:].lower()!r}; here it is "
                          f"{where}, where code may still read it as that string (a "
                          "comparison, a lookup): change it together with what reads it",
                          suggestion=code(new))
        return Replace(new, f"`{code(node)}` → `{code(new)}`")


_TAKES_OP = frozenset({f"{XM}.all_reduce", f"{XM}.reduce_scatter"})
"""The XLA collectives whose rewrite (NM207) takes a ReduceOp as its first argument."""


def _elsewhere(site: Site) -> str | None:
    """Where the constant's value goes, unless it is straight into a collective that takes a
    ReduceOp once migrated: the op of xm.all_reduce / xm.reduce_scatter, or `op=` of a
    torch.distributed call. The XLA constant was a string, so a comparison, a dict key, a
    default or another function may still expect one."""
    found = site.argument_of
    if found is not None:
        call, arg = found
        qualname = site.qualname_of(call.func) or ""
        keyword = arg.keyword.value if arg.keyword is not None else None
        if qualname in _TAKES_OP and (keyword == "reduce_type" or
                                      keyword is None and call.args[0] is arg):
            return None
        if qualname.startswith("torch.distributed.") and keyword == "op":
            return None
        return f"passed to `{code(call.func)}`"
    parent = site.parent
    if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
        return "compared"
    if isinstance(parent, (cst.DictElement, cst.Dict)):
        return "a key or value of a dict"
    if isinstance(parent, cst.Param):
        return "a parameter's default"
    if isinstance(parent, cst.Return):
        return "returned"
    if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.AssignTarget)):
        return "assigned"
    return "used"


class TensorCollectives(Rule):
    id = "NM207"
    name = "tensor-collectives"
    kind = Kind.FIX
    summary = "`xm.all_reduce` / `all_gather` / `reduce_scatter` keep their XLA semantics"
    explanation = """\
What it does: rewrites the three XLA tensor collectives to helpers written with
torch.distributed that return what the XLA calls returned:
`xm.all_reduce(op, t, scale=s)` reduces a single tensor OUT OF PLACE and returns the new tensor
(multiplied by `scale`), and reduces a list of tensors in place; `xm.all_gather(t, dim)`
returns the tensors of all processes concatenated along `dim`; `xm.reduce_scatter(op, t,
scale, scatter_dim, shard_count)` returns this process's reduced shard.

Why: `torch.distributed.all_reduce` works in place and returns nothing, so a mechanical
rename (`t = dist.all_reduce(t)`) would silently set `t` to None or leave it unreduced.

What differs: nothing for these arguments; in a single process without a process group the
helpers return the input (scaled), and with WORLD_SIZE > 1 and no group they raise instead of
reducing nothing. `groups=`, `pin_layout=` and `output=` have no direct equivalent and are
reported for review: use `dist.new_group(ranks)` for groups; pin_layout has no meaning
natively. `groups=` that lists NeuronX Distributed's data- or tensor-parallel replica groups
(`parallel_state.get_data_parallel_replica_groups()`) becomes `group=` the matching
dimension's group of the DeviceMesh that replaced NxD's layout (NM240), for all three."""
    doc_url = D_DIST
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\n"
               "total = xm.all_reduce(xm.REDUCE_SUM, loss, scale=0.5)\n",
        after="import os\n\nimport torch\n\n\n" + defined("_neuron_all_reduce")
              + "\n\n"
              "total = _neuron_all_reduce(torch.distributed.ReduceOp.SUM, loss, scale=0.5)\n",
    )
    calls = frozenset({f"{XM}.all_reduce", f"{XM}.all_gather", f"{XM}.reduce_scatter"})
    emits = ("torch.distributed.all_reduce", "torch.distributed.all_gather",
             "torch.distributed.reduce_scatter", "torch.cat")

    _HELPERS: ClassVar[dict[str, str]] = {"all_reduce": "_neuron_all_reduce",
                                          "all_gather": "_neuron_all_gather",
                                          "reduce_scatter": "_neuron_reduce_scatter"}
    _RENAMED: ClassVar[dict[str, str]] = {"reduce_type": "op", "inputs": "value",
                                          "input": "value"}
    _REVIEW: ClassVar[tuple[str, ...]] = ("groups", "output", "pin_layout")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        name = (site.qualname or "").rsplit(".", 1)[-1]
        if has_star_args(node.args):
            return Review(f"`{code(node)}`: unpacked arguments; rewrite by hand")
        group = self._mesh_group(name, node.args, site)
        option = next((a.keyword.value for a in node.args
                       if a.keyword is not None and a.keyword.value in self._REVIEW
                       and (group is None or a.keyword.value != "groups")), None)
        positional_limit = 2 if name == "all_gather" else 5 if name == "reduce_scatter" else 3
        if option is not None or sum(a.keyword is None for a in node.args) > positional_limit:
            what = f"`{option}`" if option else "groups passed by position"
            return Review(f"`{code(node)}`: {what} has no direct native equivalent; use "
                          "torch.distributed with a group from dist.new_group(ranks)")
        args = list(node.args)
        if name != "all_gather":
            op = argument(args, 0, "reduce_type")
            new_op = _reduce_op(op.value, site) if op is not None else None
            if op is None or new_op is None:
                return Review(f"`{code(node)}`: the reduction is not one of xm.REDUCE_*; "
                              "pass a torch.distributed.ReduceOp to torch.distributed")
            args[args.index(op)] = op.with_changes(value=new_op)
        args = [a.with_changes(keyword=cst.Name(self._RENAMED[a.keyword.value]))
                if a.keyword is not None and a.keyword.value in self._RENAMED else a
                for a in args]
        if group is not None:
            args = [keyword_arg("group", group) if a.keyword is not None and
                    a.keyword.value == "groups" else a for a in args]
        new = node.with_changes(func=site.helper(self._HELPERS[name]), args=args)
        return Replace(new, f"`{code(node)}` → `{code(new)}` (same result as the XLA call)")

    @staticmethod
    def _mesh_group(name: str, args: list[cst.Arg] | tuple[cst.Arg, ...], site: Site
                    ) -> cst.BaseExpression | None:
        """For `groups=<NxD's replica groups>`: the process group of the mesh dimension that
        replaced them (the same processes, so the same collective)."""
        groups = next((a for a in args if a.keyword is not None and a.keyword.value == "groups"),
                      None)
        dim = None if groups is None else replica_dimension(groups.value, site)
        return None if dim is None else mesh_group(dim, site)


def _reduce_op(value: cst.BaseExpression, site: Site) -> cst.BaseExpression | None:
    qualname = site.qualname_of(value) or dotted(value) or ""
    if re.search(r"(^|\.)ReduceOp\.(SUM|PRODUCT|MIN|MAX)$", qualname):
        return value  # already a ReduceOp (an xm.REDUCE_* constant rewritten by NM206)
    member = _REDUCE_STRINGS.get(string_value(value) or "")
    return site.ref(f"torch.distributed.ReduceOp.{member}") if member else None


class BroadcastMasterParam(Rule):
    id = "NM208"
    name = "broadcast-master-param"
    kind = Kind.FIX
    summary = "`xm.broadcast_master_param(model)` becomes a broadcast of rank 0's parameters"
    explanation = """\
What it does: replaces `xm.broadcast_master_param(model)` with a helper that broadcasts
every parameter and buffer from rank 0 with `torch.distributed.broadcast`.

Why: scripts call it once after building the model so that every replica starts from the
same weights. DistributedDataParallel does this itself when it wraps the model, so if you
wrap the model in DDP you may delete the call.

What differs: nothing; in a single process without a process group it does nothing, as
before (with WORLD_SIZE > 1 and no group it raises)."""
    doc_url = D_DIST
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\nxm.broadcast_master_param(model)\n",
        after="import os\n\nimport torch\n\n\n" + defined("_neuron_broadcast_master_param")
              + "\n\n"
              "_neuron_broadcast_master_param(model)\n",
    )
    calls = frozenset({f"{XM}.broadcast_master_param"})
    emits = ("torch.distributed.broadcast",)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        new = node.with_changes(func=site.helper("_neuron_broadcast_master_param"))
        return Replace(new, f"`{code(node)}` → `{code(new)}`")


class OtherCollectives(ReviewRule):
    id = "NM209"
    name = "other-collectives"
    summary = "XLA's other collectives have torch.distributed counterparts to choose by hand"
    explanation = """\
What it does: reports `xm.all_to_all`, `xm.collective_permute`, `xm.send`, `xm.recv`,
`xm.collective_broadcast` and the autograd-aware collectives in `torch_xla.core.functions`.

Why: their argument conventions (split/concat dimensions, source-target pairs, groups)
differ from torch.distributed's, so each call needs a decision.

What to do: use `dist.all_to_all_single`, `dist.send`/`dist.recv` or
`dist.batch_isend_irecv`, `dist.broadcast`, and `torch.distributed.nn.functional` for
collectives that must propagate gradients."""
    doc_url = D_DIST
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\nout = xm.all_to_all(x, 0, 0, 4)\n",
        after="import torch_xla.core.xla_model as xm\n\nout = xm.all_to_all(x, 0, 0, 4)\n",
    )
    guidance = {
        f"{XM}.all_to_all": "use torch.distributed.all_to_all_single (split and concat "
                            "dimensions are handled by reshaping around it)",
        f"{XM}.collective_permute": "use torch.distributed.batch_isend_irecv with the "
                                    "source-target pairs",
        f"{XM}.send": "use torch.distributed.send",
        f"{XM}.recv": "use torch.distributed.recv",
        f"{XM}.collective_broadcast": "use torch.distributed.broadcast",
        "torch_xla.core.functions": "use torch.distributed.nn.functional, whose collectives "
                                    "propagate gradients",
    }


RULES: tuple[type[Rule], ...] = (Rendezvous, ReduceOpConstant, TensorCollectives,
                                 BroadcastMasterParam, OtherCollectives)
