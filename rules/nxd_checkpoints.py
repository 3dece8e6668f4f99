"""NM246-NM249: NeuronX Distributed's checkpoints become torch.distributed.checkpoint (DCP).

NxD saved one file per tensor-parallel rank (`tp_rank_XX_pp_rank_XX`), so a checkpoint loaded
only at the layout that wrote it. After the migration the tensor-parallel weights are DTensors
(NM241); DCP writes each rank's shards and reshards them on load, so a checkpoint saved at one
layout loads at another. The helpers (rules/emitted_checkpoint.py) keep what each NxD call
did around the tensors: which keys it returned, the `done` marker of a complete tag, the
scheduler and user content beside the state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Remove, Replace, Review, Rule, Site,
                                    code, has_star_args, keyword_arg, relaid)
from neuron_migrate.rules.emitted_checkpoint import CONVERT, ZERO1
from neuron_migrate.rules.emitted_helpers import defined
from neuron_migrate.rules.nxd_layout import qualnames
from neuron_migrate.rules.sharding import shards_optimizer_state

D_DCP = "https://docs.pytorch.org/docs/stable/distributed.checkpoint.html"
CHECKPOINTING = "neuronx_distributed.parallel_layers.checkpointing"
TRAINER = "neuronx_distributed.trainer.checkpoint"
DCP = "torch.distributed.checkpoint"


def trainer_qualnames(*names: str) -> frozenset[str]:
    """The trainer API's names where NxD exports them: the package, `trainer` (save and load
    only) and the module that defines them."""
    found = {f"{module}.{name}" for name in names
             for module in ("neuronx_distributed", TRAINER)}
    return frozenset(found | {f"neuronx_distributed.trainer.{name}" for name in names
                              if name in ("save_checkpoint", "load_checkpoint")})


_LOAD_NOTE = f"checkpoints saved before the migration (per-TP-rank files) do not load: {CONVERT}"
_XSER = "DCP has one format of its own"
_OWN_SHARE = ("the ZeRO-1 optimizer made from NxD's has a state dict of this rank's share, "
              "which DCP writes and reads on each rank as NxD's ZeRO-1 checkpoints were")
_PER_RANK = ("every data-parallel rank wrote its own copy, for state that differs between "
             "them (ZeRO-1); DCP writes one copy of a value the ranks share, so such state "
             "would be lost: keep it as DTensors (FSDP2) or save it per rank with torch.save")


def _conversion(where: str) -> str:
    """The explanation's paragraph on checkpoints saved before the migration."""
    return f"""\
Each load is reported for review: a checkpoint saved before the migration (one file per
tensor-parallel rank, torch.save or xser) does not load. Convert it once on the XLA stack to
a full state dict with NxD's checkpoint converter (`--convert_to_full_state`), then to DCP
with `torch.distributed.checkpoint.format_utils.torch_save_to_dcp(full_file, folder)`
({where}).
The helper stops with the same words if it meets such a checkpoint."""


@dataclass(frozen=True)
class _Signature:
    """An NxD function's parameters in order, and what becomes of each in the helper call:
    `passed` go to the helper under the same name, `dropped` go whatever their value (with
    why), `allowed` go only with the value given (else the call is reported, with why)."""

    order: tuple[str, ...]
    passed: frozenset[str]
    dropped: dict[str, str] = field(default_factory=dict)
    allowed: dict[str, tuple[str, str]] = field(default_factory=dict)


def _translate(node: cst.Call, signature: _Signature) -> tuple[list[cst.Arg], list[str]] | str:
    """The helper call's arguments (as written; a positional one after a dropped one by
    keyword) and a note for each dropped argument; or why the call is left for review."""
    if has_star_args(node.args):
        return "unpacked arguments; rewrite it by hand"
    kept: list[cst.Arg] = []
    notes: list[str] = []
    shifted = False
    positional = [a for a in node.args if a.keyword is None]
    for index, arg in enumerate(node.args):
        name = arg.keyword.value if arg.keyword is not None else \
            (signature.order[index] if index < len(signature.order) else None)
        if name is None or name not in signature.order:
            return f"`{code(arg)}`: not an argument NxD's function takes"
        if name in signature.passed:
            by_position = arg.keyword is None and not shifted
            kept.append(arg if by_position or arg.keyword is not None else
                        keyword_arg(name, arg.value).with_changes(comma=arg.comma))
            continue
        shifted = shifted or any(arg is p for p in positional)
        if name in signature.allowed:
            value, why = signature.allowed[name]
            if code(arg.value) != value:
                return f"`{name}={code(arg.value)}`: {why}"
            notes.append(f"drop `{name}={value}`")
            continue
        notes.append(f"drop `{name}={code(arg.value)}`: {signature.dropped[name]}")
    return relaid(node.args, kept), notes


def _rewrite(node: cst.Call, site: Site, signature: _Signature, helper: str, what: str,
             kind: Kind | None = None) -> Outcome:
    """The call of `helper` in place of `node`, or a review where an argument forbids it."""
    translated = _translate(node, signature)
    if isinstance(translated, str):
        return Review(f"`{code(node)}`: {translated}")
    args, notes = translated
    new = node.with_changes(func=site.helper(helper), args=args)
    message = "; ".join([f"`{code(node)}` → `{code(new)}`: {what}", *notes])
    return Replace(new, message, kind=kind)


def _passed_as_value(node: cst.Name | cst.Attribute, site: Site, helper: str,
                     note: str = "", kind: Kind | None = None) -> Outcome | None:
    """A checkpoint function passed as a value (`xm.add_step_closure(nxd.save_checkpoint,
    (...))`): the helper in its place, which takes NxD's parameters in NxD's order."""
    parent = site.parent
    if isinstance(parent, cst.Call) and parent.func is node:
        return None  # a call: on_call decides
    if shards_optimizer_state(site):
        return Review(f"`{code(node)}`: {ZERO1}")
    return Replace(site.helper(helper), f"`{code(node)}` → `{helper}`, passed as a value: "
                   "the helper takes NxD's parameters in NxD's order, those without a native "
                   f"meaning ignored (check the arguments it is called with){note}", kind=kind)


_SAVE = _Signature(
    order=("checkpoint", "output_dir", "save_serially", "save_xser", "down_cast_bf16",
           "master_dp_only"),
    passed=frozenset({"checkpoint", "output_dir", "down_cast_bf16"}),
    dropped={"save_serially": "it staggered the tensor-parallel ranks' writes to bound host "
                              "memory; each rank writes only its own shards now",
             "save_xser": _XSER},
    allowed={"master_dp_only": ("True", _PER_RANK)},
)


class CheckpointingSave(Rule):
    id = "NM246"
    name = "nxd-checkpointing-save"
    kind = Kind.FIX
    summary = ("NxD's `checkpointing.save(checkpoint, output_dir)` becomes "
               "`torch.distributed.checkpoint.save` of the same dict, loadable at any layout")
    explanation = """\
What it does: `neuronx_distributed.parallel_layers.checkpointing.save(checkpoint,
output_dir, ...)` (also spelled `parallel_layers.save`) becomes
`_neuron_dcp_save(checkpoint, output_dir)`, a helper that writes the dict with
`torch.distributed.checkpoint.save` (DCP) to the folder `output_dir`.
`down_cast_bf16=True` still casts the float32 tensors to bfloat16 first.

Why: NxD wrote one `tp_rank_XX_pp_rank_XX` file per tensor-parallel rank, its shard of each
weight, so the checkpoint loaded only at the layout that saved it. After the migration the
tensor-parallel weights are DTensors (NM241): DCP has each rank write its own shards, and one
rank each value the ranks share (the step, the scheduler's state, replicated weights), as
NxD's data-parallel rank 0 did; a load reshards to the loading job's layout, so a model
saved at tensor-parallel size 2 loads at 1 and back.

What differs: the folder holds DCP's files (`.metadata`, `__<rank>_0.distcp`), read with
`checkpointing.load`'s replacement (NM247) or `torch.distributed.checkpoint.load`, and
convertible to one `torch.save` file with `format_utils.dcp_to_torch_save`. `save_xser` and
`save_serially` go (DCP has one format and writes only each rank's shards).
`master_dp_only=False`, which had every data-parallel rank write its own copy of state that
differs between them (ZeRO-1), is reported: DCP would keep one copy."""
    doc_url = D_DCP
    example = Example(
        before="from neuronx_distributed.parallel_layers import checkpointing\n\n"
               "checkpointing.save({\"model\": model.state_dict(), \"step\": step}, out, "
               "save_xser=True)\n",
        after="import torch\n\n\n" + defined("_neuron_dcp_save") + "\n\n"
              "_neuron_dcp_save({\"model\": model.state_dict(), \"step\": step}, out)\n",
    )
    calls = qualnames(CHECKPOINTING, "save")
    names = calls
    emits = (f"{DCP}.save", "torch.Tensor.to")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        return _rewrite(node, site, _SAVE, "_neuron_dcp_save",
                        "DCP writes each rank's shards, so it loads at any layout")

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        return _passed_as_value(node, site, "_neuron_dcp_save")


_LOAD = _Signature(
    order=("chkpt_path", "model", "model_or_optimizer", "model_key", "load_xser", "sharded",
           "strict", "master_dp_only", "weights_only"),
    passed=frozenset({"chkpt_path", "model", "model_or_optimizer", "model_key", "sharded",
                      "strict"}),
    dropped={"load_xser": _XSER,
             "master_dp_only": "DCP reads what each rank needs, whoever wrote it",
             "weights_only": "DCP unpickles the non-tensor values it saved itself (load "
                             "checkpoints from trusted sources only)"},
)


class CheckpointingLoad(Rule):
    id = "NM247"
    name = "nxd-checkpointing-load"
    kind = Kind.FIX
    summary = ("NxD's `checkpointing.load(path, model)` becomes a helper that reads the DCP "
               "checkpoint at this layout, loads the model and returns the rest; each load is "
               "reported, since checkpoints saved before the migration need converting")
    explanation = f"""\
What it does: `neuronx_distributed.parallel_layers.checkpointing.load(chkpt_path, model,
...)` (also `parallel_layers.load`) becomes `_neuron_dcp_load(chkpt_path, model, ...)`: it
reads what `_neuron_dcp_save` (NM246) wrote with `torch.distributed.checkpoint.load`,
loads `checkpoint[model_key]` into the model with `set_model_state_dict` (`strict` kept),
and returns the rest of the checkpoint dict, the whole dict without a model and None with
`model_key=None`, as NxD did. `sharded=False` (one file of the full state dict) loads it
with `torch.load` and `set_model_state_dict(..., full_state_dict=True)`, which shards each
weight as its layer is sharded, as NxD did.

Why: DCP reshards on load: the model's state dict (`get_model_state_dict`) is read at the
loading job's layout, whatever layout saved it. The other values come back whole (a tensor
that was sharded, in full).

What differs: `load_xser`, `master_dp_only` and `weights_only` go (DCP has one format, reads
what each rank needs, and unpickles the values it saved itself). An optimizer passed as
`model_or_optimizer` raises at run time: its sharded state loads with its model
(`set_optimizer_state_dict`).

{_conversion("`full_file` holding the dict that was saved, the model's full state dict "
             "under its key")}"""
    doc_url = D_DCP
    example = Example(
        before="from neuronx_distributed.parallel_layers import checkpointing\n\n"
               "state = checkpointing.load(out, model, load_xser=True)\n",
        after="import torch\n\n\n" + defined("_neuron_dcp_load") + "\n\n"
              "state = _neuron_dcp_load(out, model)\n",
    )
    calls = qualnames(CHECKPOINTING, "load")
    names = calls
    emits = (f"{DCP}.load", f"{DCP}.FileSystemReader", f"{DCP}.state_dict.StateDictOptions",
             f"{DCP}.state_dict.get_model_state_dict", f"{DCP}.state_dict.set_model_state_dict",
             "torch.load", "torch.empty")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        return _rewrite(node, site, _LOAD, "_neuron_dcp_load",
                        f"read at this layout, the model loaded, the rest returned; {_LOAD_NOTE}",
                        Kind.REVIEW)

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        return _passed_as_value(node, site, "_neuron_dcp_load", f"; {_LOAD_NOTE}", Kind.REVIEW)


_SAVE_CHECKPOINT = _Signature(
    order=("checkpoint_dir_str", "tag", "model", "optimizer", "scheduler", "user_content",
           "num_workers", "use_xser", "num_kept_ckpts", "async_save", "zero1_optimizer",
           "use_zero1_dcp", "avoid_saving_lower_precision_weights"),
    passed=frozenset({"checkpoint_dir_str", "tag", "model", "optimizer", "scheduler",
                      "user_content", "num_kept_ckpts"}),
    dropped={"num_workers": "it bounded how many ranks of a host wrote at once; each rank "
                            "writes only its own shards now",
             "use_xser": _XSER,
             "async_save": "the checkpoint is written before the call returns (the same "
                           "files, while training waits); for overlap, use "
                           "torch.distributed.checkpoint.async_save by hand",
             "avoid_saving_lower_precision_weights": "the model's weights are always saved",
             "zero1_optimizer": _OWN_SHARE, "use_zero1_dcp": _OWN_SHARE},
)


class SaveCheckpoint(Rule):
    id = "NM248"
    name = "nxd-save-checkpoint"
    kind = Kind.FIX
    summary = ("NxD's `save_checkpoint(dir, tag, model, optimizer, ...)` becomes a helper "
               "that writes `get_state_dict` with torch.distributed.checkpoint; "
               "`has_checkpoint` and `finalize_checkpoint` follow")
    explanation = """\
What it does: the trainer API's `neuronx_distributed.save_checkpoint(checkpoint_dir_str,
tag, model, optimizer, scheduler, user_content, ...)` becomes `_neuron_save_checkpoint(...)`
with the same arguments: the model's and the optimizer's state dicts
(`get_model_state_dict`, `get_optimizer_state_dict`) are written with
`torch.distributed.checkpoint.save` to `<dir>/<tag>/model` and `<dir>/<tag>/optim`; rank 0
writes `scheduler.pt` (the scheduler's state dict) and `user_content.pt` beside them, then,
once every rank has written, the `done` file that marks a complete tag, and removes the
oldest complete tags beyond `num_kept_ckpts`. `has_checkpoint(dir)` becomes
`_neuron_has_checkpoint(dir)` (a complete tag exists), and `finalize_checkpoint()`, which
waited for asynchronous saves, goes.

Why: NxD wrote one file per data-parallel group and tensor-parallel rank, loadable only at
that layout. The tensor-parallel weights are DTensors after the migration, and DCP writes
each rank's shards and reshards on load, so the tag loads at another layout
(`load_checkpoint`'s replacement, NM249).

What differs: the tag's files are DCP's. `num_workers` and `use_xser` go (each rank writes
its own shards; DCP has one format); `async_save=True` saves before the call returns (the
same files; use `torch.distributed.checkpoint.async_save` by hand to overlap);
`avoid_saving_lower_precision_weights` goes (the weights are always saved), as do
`zero1_optimizer` and `use_zero1_dcp`: NxD's ZeRO-1 optimizer, once migrated (NM706), has a
state dict of each rank's share, which DCP writes rank by rank. A file that builds XLA's
ZeRO-1 optimizer is reported: PyTorch's ZeroRedundancyOptimizer, what it becomes, has no
sharded state dict. NxD also removed tags left
incomplete by an interrupted removal; the helper leaves them."""
    doc_url = D_DCP
    example = Example(
        before="import neuronx_distributed as nxd\n\n"
               "nxd.save_checkpoint(\"ckpt\", f\"step_{step}\", model=model, "
               "optimizer=optimizer,\n                    user_content={\"step\": step}, "
               "use_xser=True)\n",
        after="import os\n\nimport torch\n\n\n" + defined("_neuron_save_checkpoint") + "\n\n"
              "_neuron_save_checkpoint(\"ckpt\", f\"step_{step}\", model=model, "
              "optimizer=optimizer,\n                    user_content={\"step\": step})\n",
    )
    calls = trainer_qualnames("save_checkpoint", "has_checkpoint", "finalize_checkpoint")
    names = trainer_qualnames("save_checkpoint")
    emits = (f"{DCP}.save", f"{DCP}.state_dict.get_model_state_dict",
             f"{DCP}.state_dict.get_optimizer_state_dict", "torch.save",
             "torch.distributed.barrier", "torch.distributed.get_rank")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        name = (site.qualname or "").rsplit(".", 1)[-1]
        if name == "finalize_checkpoint":
            return Remove(f"delete `{code(node)}`: it waited for asynchronous saves, and the "
                          "migrated saves finish before they return")
        if name == "has_checkpoint":
            return _rewrite(node, site, _Signature(("checkpoint_dir_str",),
                                                   frozenset({"checkpoint_dir_str"})),
                            "_neuron_has_checkpoint", "whether a complete tag is there")
        if shards_optimizer_state(site):
            return Review(f"`{code(node)}`: {ZERO1}")
        return _rewrite(node, site, _SAVE_CHECKPOINT, "_neuron_save_checkpoint",
                        "the state dicts written with DCP, loadable at any layout")

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        return _passed_as_value(node, site, "_neuron_save_checkpoint")


_LOAD_CHECKPOINT = _Signature(
    order=("path", "tag", "model", "optimizer", "scheduler", "num_workers", "strict",
           "use_zero1_dcp"),
    passed=frozenset({"path", "tag", "model", "optimizer", "scheduler", "strict"}),
    dropped={"num_workers": "DCP reads each rank's part itself", "use_zero1_dcp": _OWN_SHARE},
)


class LoadCheckpoint(Rule):
    id = "NM249"
    name = "nxd-load-checkpoint"
    kind = Kind.FIX
    summary = ("NxD's `load_checkpoint(dir, tag, model, optimizer, ...)` becomes a helper "
               "that reads the DCP checkpoint at this layout with `set_state_dict`; each load "
               "is reported, since checkpoints saved before the migration need converting")
    explanation = f"""\
What it does: the trainer API's `neuronx_distributed.load_checkpoint(path, tag, model,
optimizer, scheduler, ...)` becomes `_neuron_load_checkpoint(...)` with the same arguments:
the newest complete tag when `tag` is None (as NxD chose it), the model's and the
optimizer's state read with `torch.distributed.checkpoint.load` into the state dicts of this
job's layout and set with `set_model_state_dict` (`strict` kept) and
`set_optimizer_state_dict`, the scheduler's state loaded; it returns the saved
`user_content`, or None, as NxD did.

Why: what `save_checkpoint`'s replacement (NM248) wrote reshards on load, so a run saved
at tensor-parallel size 2 resumes at 1, or the other way round, with the same model and
optimizer state.

What differs: `num_workers` and `use_zero1_dcp` go (each rank reads its part; a migrated
NxD ZeRO-1 optimizer loads its own share, with `strict=False` for the optimizer since the
rest of the state is other ranks'). A file that builds XLA's ZeRO-1 optimizer is reported,
as for saving.

{_conversion("`folder` the tag's `model` folder, with a `done` file beside it")}"""
    doc_url = D_DCP
    example = Example(
        before="import neuronx_distributed as nxd\n\n"
               "user_content = nxd.load_checkpoint(\"ckpt\", model=model, optimizer=optimizer, "
               "num_workers=8)\n",
        after="import torch\n\n\n" + defined("_neuron_load_checkpoint") + "\n\n"
              "user_content = _neuron_load_checkpoint(\"ckpt\", model=model, "
              "optimizer=optimizer)\n",
    )
    calls = trainer_qualnames("load_checkpoint")
    names = trainer_qualnames("load_checkpoint")
    emits = (f"{DCP}.load", f"{DCP}.state_dict.StateDictOptions",
             f"{DCP}.state_dict.get_model_state_dict",
             f"{DCP}.state_dict.get_optimizer_state_dict",
             f"{DCP}.state_dict.set_model_state_dict",
             f"{DCP}.state_dict.set_optimizer_state_dict", "torch.load")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if shards_optimizer_state(site):
            return Review(f"`{code(node)}`: {ZERO1}")
        return _rewrite(node, site, _LOAD_CHECKPOINT, "_neuron_load_checkpoint",
                        f"read at this layout with set_state_dict; {_LOAD_NOTE}", Kind.REVIEW)

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        return _passed_as_value(node, site, "_neuron_load_checkpoint", f"; {_LOAD_NOTE}",
                                Kind.REVIEW)


RULES = (CheckpointingSave, CheckpointingLoad, SaveCheckpoint, LoadCheckpoint)
