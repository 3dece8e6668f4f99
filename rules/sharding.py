"""NM704, NM706: XLA's sharded data parallelism. FSDP becomes FSDP2's `fully_shard`; the ZeRO-1
optimizers become PyTorch's ZeroRedundancyOptimizer with XLA's averaging and clipping kept.

What each XLA argument becomes is decided in `rules/sharding_args.py`; this module holds the
rules, their documentation and the follow-up sites (methods the XLA objects had and the native
ones lack or change: `clip_grad_norm_`, `state_dict`, `init_zero`, ...).
"""

from __future__ import annotations

import ast

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Review, Rule, Site, argument,
                                    code, has_star_args, keyword_arg, relaid)
from neuron_migrate.ruleapi.analysis import ast_dotted
from neuron_migrate.rules.emitted_helpers import defined
from neuron_migrate.rules.sharding_args import Bound, Options, fsdp_options, zero_options
from neuron_migrate.rules.sharding_sites import (
    NATIVE_ZERO as _NATIVE_ZERO, NXD_ZERO, XLA_ZERO, XLA_ZERO_MODULE, ZERO_CLASSES, bound_to, proven_pure_data_parallel)

D_DIST = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html"
D_FSDP2 = "https://docs.pytorch.org/docs/stable/distributed.fsdp.fully_shard.html"
D_ZERO = "https://docs.pytorch.org/docs/stable/distributed.optim.html"
XLA_FSDP = "torch_xla.distributed.fsdp"
FSDP_CLASSES = frozenset({
    f"{XLA_FSDP}.XlaFullyShardedDataParallel",
    f"{XLA_FSDP}.xla_fully_sharded_data_parallel.XlaFullyShardedDataParallel",
})


class XlaFsdp(Rule):
    id = "NM704"
    name = "xla-fsdp"
    kind = Kind.FIX
    summary = ("`XlaFullyShardedDataParallel(module)` becomes FSDP2's `fully_shard(module)`; "
               "options without an FSDP2 form are reported")
    explanation = """\
What it does: `XlaFullyShardedDataParallel(module, ...)` becomes a call of
`torch.distributed.fsdp.fully_shard(module, ...)` (FSDP2) through a small helper defined in
your file, which makes sure a process group exists first (XLA's FSDP also ran in one process
without one). fully_shard shards the parameters over the processes in place, moves them to
the neuron device and returns the module, so `model = FSDP(model)` keeps working; nested
wrapping (inner layers first, then the whole model) maps one to one. `compute_dtype=`
becomes `mp_policy=MixedPrecisionPolicy(param_dtype=...)` (with `reduce_dtype=torch.float32`
for `fp32_reduce_scatter=True`); `reshard_after_forward=False` is kept. `model.clip_grad_norm_(
max_norm)` becomes `torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)`, which
computes the global norm over FSDP2's sharded gradients.

Why: TorchNeuron runs PyTorch's own FSDP2 on the `neuron` backend. Like XLA's FSDP it
averages the gradients over the processes during backward, so `optimizer.step()` stays as it
is (and `xm.optimizer_step` was already wrong with FSDP).

What differs: XLA-compiler options (`flatten_parameters`, `execute_sharding_on_init`, the
optimization barriers, `mark_step_on_finalization`, `pin_layout_in_collective_ops`,
`shard_param_on_dim_0`, `_shard_size_multiple`, ...) are dropped: FSDP2 shards each parameter
on dim 0 and needs none of them. XLA cast the buffers to `buffer_dtype` (by default
`compute_dtype`); FSDP2 leaves buffers alone, so `compute_dtype=` without
`buffer_dtype=torch.float32` is an unsafe fix. Reported for review: `auto_wrap_policy` /
`auto_wrapper_callable` (call fully_shard on each submodule, then on the root),
`sharding_groups` (pass `mesh=` a DeviceMesh), `param_init_fn`, other `buffer_dtype`s; a
model's `state_dict()` / `load_state_dict()` (FSDP2's hold DTensor shards: save with
`torch.distributed.checkpoint`) and `get_shard_metadata()`; the rest of
`torch_xla.distributed.fsdp` (`checkpoint_module` is `torch.utils.checkpoint`,
`consolidate_sharded_model_checkpoints` has no counterpart)."""
    doc_url = D_FSDP2
    example = Example(
        before="from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n\n"
               "model = FSDP(model, flatten_parameters=True)\n",
        after="import os\n\nimport torch.distributed.fsdp\n\n\n"
              + defined("_neuron_fully_shard") + "\n\nmodel = _neuron_fully_shard(model)\n",
    )
    calls = FSDP_CLASSES
    prefixes = (XLA_FSDP,)
    attributes = frozenset({"clip_grad_norm_", "state_dict", "load_state_dict",
                            "get_shard_metadata"})
    emits = ("torch.distributed.fsdp.fully_shard", "torch.distributed.fsdp.MixedPrecisionPolicy",
             "torch.distributed.init_process_group", "torch.distributed.HashStore",
             "torch.nn.utils.clip_grad_norm_")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        module = argument(node.args, 0, "module")
        if module is None or has_star_args(node.args):
            return Review(f"`{code(node)}`: cannot see the module; call "
                          "torch.distributed.fsdp.fully_shard(module) by hand")
        options = fsdp_options(Bound.of(node.args, ("module",)), site)
        if isinstance(options, Review):
            return Review(f"`{code(node)}`: {options.message}")
        args = [cst.Arg(module.value), *(keyword_arg(k, v) for k, v in options.keywords)]
        new = node.with_changes(func=site.helper("_neuron_fully_shard"),
                                args=relaid(node.args, args))
        return Replace(new, f"`{code(node)}` → `{code(new)}`: FSDP2 shards the parameters in "
                       f"place and averages the gradients during backward{options.note}",
                       kind=options.kind)

    def may_act(self, node: ast.AST, names: frozenset[str]) -> bool:
        func = node.func if isinstance(node, ast.Call) else node
        return isinstance(func, ast.Attribute) and func.attr in self.attributes

    def on_any_call(self, node: cst.Call, site: Site) -> Outcome | None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "clip_grad_norm_"
                and bound_to(func.value, site, FSDP_CLASSES)):
            return None
        groups = argument(node.args, 2, "groups")
        if has_star_args(node.args) or (groups is not None and code(groups.value) != "None"):
            return Review(f"`{code(node)}`: groups or unpacked arguments; use "
                          "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)")
        clip = site.ref("torch.nn.utils.clip_grad_norm_")
        if clip is None:
            return Review(f"`{code(node)}`: `torch` means something else here; use "
                          "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)")
        parameters = cst.Call(cst.Attribute(func.value, cst.Name("parameters")))
        kept = [a for a in node.args if a is not groups]
        new = cst.Call(clip, [cst.Arg(parameters), *(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                                                     for a in kept)])
        return Replace(new, f"`{code(node)}` → `{code(new)}`: the global norm over FSDP2's "
                       "sharded gradients (a DTensor)")

    def on_attribute(self, node: cst.Attribute, site: Site) -> Outcome | None:
        method = node.attr.value
        if method == "clip_grad_norm_" or not bound_to(node.value, site, FSDP_CLASSES):
            return None
        if method == "get_shard_metadata":
            return Review(f"`{code(node)}`: FSDP2 has no shard metadata; save and load sharded "
                          "state with torch.distributed.checkpoint")
        return Review(f"`{code(node)}`: FSDP2's {method} holds DTensor shards, not XLA's "
                      "flattened per-rank shards; save with torch.distributed.checkpoint "
                      "(dcp.save / dcp.load), or get_model_state_dict(model, "
                      "options=StateDictOptions(full_state_dict=True)) for one whole file")

    def leftover_reference(self, qualname: str) -> str:
        if qualname.endswith("checkpoint_module"):
            return (f"`{qualname}`: wrap the block's forward in torch.utils.checkpoint."
                    "checkpoint (or checkpoint_wrapper from torch.distributed.algorithms)")
        return (f"`{qualname}`: no FSDP2 counterpart; sharded checkpoints go through "
                "torch.distributed.checkpoint")


class ZeroRedundancy(Rule):
    id = "NM706"
    name = "xla-zero1"
    kind = Kind.FIX
    summary = ("XLA's ZeRO-1 optimizer becomes ZeroRedundancyOptimizer, NxD's an optimizer "
               "with state sharded over the mesh's data-parallel ranks; averaging and "
               "clipping kept")
    explanation = """\
What it does: `ZeroRedundancyOptimizer(params, optimizer_class, ...)` from
`torch_xla.distributed.zero_redundancy_optimizer`, and NxD's `NeuronZero1Optimizer`, become a
small subclass of `torch.distributed.optim.ZeroRedundancyOptimizer` defined in your file. The
optimizer state is sharded over the processes as before; its `step()` first does what XLA's
did besides: average the gradients over the processes (one all_reduce per ~25 MB bucket of
flattened gradients), and with `grad_clipping` (the default) clip them to `max_norm` (default
1.0) by their global norm, kept in `optimizer.grad_norm` as XLA and NxD kept it. The base
optimizer's keyword arguments (`lr=`, `betas=`, ...) are passed on.

Why: PyTorch's ZeroRedundancyOptimizer only shards the optimizer state; it expects
DistributedDataParallel to have averaged the gradients. Without the averaging each process
would step with its own gradients; without the clipping, training would change.

What differs: native ZeRO gives each process whole parameters to update (XLA gave each a
slice of every parameter); for element-wise optimizers (SGD, Adam, AdamW) the result is the
same. The parameters are updated in their own dtype: XLA kept float32 master shards
(`optimizer_dtype`) of bfloat16 parameters. `pin_layout`, `coalesce_cc` and the bucket sizes
are dropped (XLA collective tuning). A process group is needed, even in one process (the
helper makes one there). Reported for review: `optimizer_dtype`, `sharding_groups` /
`grad_norm_groups` (use `process_group=` a `dist.new_group(...)`), `lazy_init` and
`init_zero()`, `use_grad_acc_hook`, `save_master_weights`, `higher_cc_precision`; and the state:
`optimizer.state_dict()` needs `optimizer.consolidate_state_dict(to=0)` on every process first
and then holds the whole state on rank 0 (XLA's held this process's shard), and
`load_state_dict()` takes that whole state.

NxD's `NeuronZero1Optimizer` becomes `_NeuronParallelOptimizer(optimizer_class(params, ...),
{"optimizer_config": {"zero_one_enabled": True, ...}})` instead: the optimizer the script
asked for, with NxD's step (gradients averaged over the DeviceMesh's data-parallel ranks,
clipped by the whole model's norm, `grad_norm` kept) and its state sharded over those ranks:
each rank keeps the state of, and updates, the parameters it owns (the largest first, to the
least loaded rank), then sends their new values to the other replicas. Unlike PyTorch's
ZeroRedundancyOptimizer it holds tensor-parallel (DTensor) parameters, and its
`state_dict()` is this rank's share under the whole model's numbering, which
`torch.distributed.checkpoint` saves and loads at any layout (`get_optimizer_state_dict`;
`set_optimizer_state_dict` with `StateDictOptions(strict=False)`, as each rank loads only its
share), so NxD's checkpoint calls beside it migrate too."""
    doc_url = D_ZERO
    example = Example(
        before="from torch_xla.distributed.zero_redundancy_optimizer import "
               "ZeroRedundancyOptimizer\n\n"
               "optimizer = ZeroRedundancyOptimizer(model.parameters(), torch.optim.AdamW, "
               "lr=1e-3, max_norm=0.5)\n",
        after="import os\n\nimport torch.distributed.optim\n\n\n"
              + defined("_NeuronZeroRedundancyOptimizer") + "\n\n"
              "optimizer = _NeuronZeroRedundancyOptimizer(model.parameters(), "
              "torch.optim.AdamW, lr=1e-3, max_norm=0.5)\n",
    )
    calls = ZERO_CLASSES
    prefixes = (XLA_ZERO_MODULE,)
    attributes = frozenset({"state_dict", "load_state_dict", "init_zero",
                            "save_sharded_state_dict", "load_sharded_state_dict"})
    emits = ("torch.distributed.optim.ZeroRedundancyOptimizer",
             "torch.distributed.optim.ZeroRedundancyOptimizer.consolidate_state_dict",
             "torch.distributed.all_reduce", "torch.distributed.init_process_group",
             "torch.distributed.HashStore", "torch.nn.utils.clip_grad_norm_", "torch.cat")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        return zero_migration(node, site, nxd=site.qualname in NXD_ZERO)

    def may_act(self, node: ast.AST, names: frozenset[str]) -> bool:
        return isinstance(node, ast.Attribute) and node.attr in self.attributes

    def on_attribute(self, node: cst.Attribute, site: Site) -> Outcome | None:
        if not bound_to(node.value, site, XLA_ZERO) and not (
                node.attr.value not in _SAME_ON_NXD and bound_to(node.value, site, NXD_ZERO)):
            return None
        method, owner = node.attr.value, code(node.value)
        if method == "state_dict":
            return Review(f"`{code(node)}`: the native ZeroRedundancyOptimizer's state_dict() "
                          f"raises until `{owner}.consolidate_state_dict(to=0)` ran on every "
                          "process, and then holds the whole state on rank 0 only (XLA's held "
                          "this process's shard): consolidate, then save on rank 0")
        if method == "load_state_dict":
            return Review(f"`{code(node)}`: the native load_state_dict takes the whole "
                          "consolidated state (from state_dict() on rank 0 after "
                          "consolidate_state_dict), not one process's XLA shard")
        return Review(f"`{code(node)}`: the native ZeroRedundancyOptimizer has no {method}; "
                      "it shards when it is made, and its state is saved with "
                      "consolidate_state_dict(to=0) and state_dict() on rank 0")

    def leftover_reference(self, qualname: str) -> str:
        return (f"`{qualname}`: use torch.distributed.optim.ZeroRedundancyOptimizer and average "
                "the gradients before its step (DDP, or all_reduce)")



def _zero_options(node: cst.Call, site: Site, nxd: bool) -> Options | Review:
    """The options NM706 passes on for a ZeRO-1 optimizer's construction, or why it cannot
    (`nxd`: NxD's class). Deciding writes nothing into the file."""
    if argument(node.args, 0, "params") is None or has_star_args(node.args) or \
            argument(node.args, 1, "optimizer_class") is None:
        return Review(f"`{code(node)}`: cannot see the parameters and the optimizer class;"
                      " use torch.distributed.optim.ZeroRedundancyOptimizer by hand and "
                      "average the gradients before its step")
    options = zero_options(Bound.of(node.args, ("params", "optimizer_class")), site, nxd=nxd)
    return Review(f"`{code(node)}`: {options.message}") if isinstance(options, Review) \
        else options


def zero_migration(node: cst.Call, site: Site, nxd: bool) -> Outcome:
    """What NM706 makes of a ZeRO-1 optimizer's construction (`nxd`: NxD's class). NxD's
    data-parallel groups passed to XLA's class mean what they mean for NxD's: all processes
    where the file is proven data parallel only (elsewhere XLA's class is reported)."""
    options = _zero_options(node, site, nxd or proven_pure_data_parallel(site))
    if isinstance(options, Review):
        return options
    params = argument(node.args, 0, "params")
    optimizer_class = argument(node.args, 1, "optimizer_class")
    assert params is not None and optimizer_class is not None  # checked by _zero_options
    if nxd:
        return _nxd_zero_one(node, site, params.value, optimizer_class.value, options)
    args = [cst.Arg(params.value), cst.Arg(optimizer_class.value),
            *(keyword_arg(k, v) for k, v in options.keywords)]
    new = node.with_changes(func=site.helper("_NeuronZeroRedundancyOptimizer"),
                            args=relaid(node.args, args))
    return Replace(new, f"`{code(node)}` → `{code(new)}`: the optimizer state stays "
                   "sharded; its step averages the gradients over the processes (and "
                   f"clips them, with grad_clipping) as XLA's did{options.note}")


def shards_optimizer_state(site: Site) -> bool:
    """Whether the file builds an optimizer whose sharded state torch.distributed.checkpoint
    cannot save: XLA's or PyTorch's ZeroRedundancyOptimizer, or NxD's ZeRO-1 unless NM706
    makes every one of them the NxD optimizer helper, whose state DCP saves rank by rank. The
    answer is the same before and after the migration, so a second apply changes nothing."""
    if site.module_mentions(XLA_ZERO | _NATIVE_ZERO):
        return True
    if not site.module_mentions(NXD_ZERO):
        return False
    built = [call for call, _ in site.module_calls() if (dotted := ast_dotted(call.func))
             and site.qualname_of(cst.parse_expression(dotted)) in NXD_ZERO]
    if not built:  # made elsewhere: it may be anything
        return True
    return any(isinstance(_zero_options(node, site, nxd=True), Review)
               for node in (cst.parse_expression(ast.unparse(call)) for call in built)
               if isinstance(node, cst.Call))


_CLIPPING = ("grad_clipping", "max_norm")
_SAME_ON_NXD = frozenset({"state_dict", "load_state_dict"})
"""Methods of NxD's ZeRO-1 optimizer that the migrated one keeps: its state dict is this
rank's share, as NxD's was."""


def _nxd_zero_one(node: cst.Call, site: Site, params: cst.BaseExpression,
                  optimizer_class: cst.BaseExpression, options: Options) -> Outcome:
    """NxD's ZeRO-1 optimizer: the optimizer over the parameters, with NxD's step (gradients
    averaged over the mesh's data-parallel ranks, clipped by the whole model's norm), its
    state sharded over those ranks by the helper. PyTorch's ZeroRedundancyOptimizer would
    not do: it cannot hold the DTensor parameters of tensor-parallel layers, and its state
    dict is not one DCP writes shard by shard, as NxD's checkpoints were written."""
    chosen = dict(options.keywords)
    settings = cst.Dict([
        cst.DictElement(cst.SimpleString('"zero_one_enabled"'), cst.Name("True")),
        cst.DictElement(cst.SimpleString('"grad_clipping"'),
                        chosen.get("grad_clipping", cst.Name("True"))),
        cst.DictElement(cst.SimpleString('"max_grad_norm"'),
                        chosen.get("max_norm") or cst.Float("1.0"))])
    config = cst.Dict([cst.DictElement(cst.SimpleString('"optimizer_config"'), settings)])
    base = [keyword_arg(k, v) for k, v in options.keywords if k not in _CLIPPING]
    built = cst.Call(optimizer_class, [cst.Arg(params), *base])
    new = cst.Call(site.helper("_NeuronParallelOptimizer"), [cst.Arg(built), cst.Arg(config)])
    return Replace(new, f"`{code(node)}` → `{code(new)}`: the optimizer state "
                   "sharded over the mesh's data-parallel ranks (each keeps and updates the "
                   "parameters it owns, then shares them), the gradients averaged over those "
                   "ranks and clipped by the whole model's norm (kept in grad_norm) first, as "
                   "NxD's ZeRO-1 did, tensor-parallel layers included; its state saves with "
                   f"torch.distributed.checkpoint at any layout{options.note}")


RULES: tuple[type[Rule], ...] = (XlaFsdp, ZeroRedundancy)
