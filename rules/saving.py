"""NM230-NM231: checkpoints. `xm.save` chose which process writes; xser used its own format."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Review, Rule, Site, argument,
                                    bool_value, code, has_star_args)
from neuron_migrate.rules.emitted_helpers import defined
from neuron_migrate.rules.nxd_layout import may_shard
from neuron_migrate.rules.one_process import one_process
from neuron_migrate.rules.review_base import ReviewRule

D_DIST = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html"
XLA_XSER = "https://pytorch.org/xla/release/1.9/_modules/torch_xla/utils/serialization.html"


class Save(Rule):
    id = "NM230"
    name = "xm-save"
    kind = Kind.FIX
    summary = "`xm.save` becomes a helper that keeps its CPU copy, writer choice and barrier"
    explanation = """\
What it does: replaces `xm.save(data, path, master_only=True, global_master=False)` with a
helper that does what it did: move every tensor in `data` to the CPU, write with
`torch.save` from the LOCAL master of each host by default (LOCAL_RANK 0), from global rank 0
with `global_master=True`, or from every process with `master_only=False`, and then wait at a
barrier so that no process reads the file before it is written.

Why: a plain `torch.save` on every process would have each process of a host write the same
file at once, and tensors saved from the device would be tagged with the neuron device.

In a program that uses NeuronX Distributed's tensor parallelism (its layers or its trainer
API appear in the file, or its layout with a tensor-parallel size other than a literal 1,
whose layers may be built elsewhere) it is reported instead: the migrated layers hold
DTensor parameters, whose state dict torch.distributed.checkpoint saves from every process.

In a file that provably runs as one process (a script or notebook that names no rank,
world, collective or launcher, and that nothing in its repository starts with torchrun or a
similar launcher, or imports), there is no other process to choose among or wait for: the
call becomes `torch.save(_neuron_to_device(data, "cpu"), path)`, the CPU copy alone.

What differs: nothing. Note the default: on a multi-host job every host writes its own copy
(to shared storage that means N writes of one file); pass `global_master=True` if one copy
is what you want."""
    doc_url = D_DIST
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\nxm.save(model.state_dict(), path)\n",
        after="import os\n\nimport torch\n\n\n" + defined("_neuron_save")
              + "\n\n_neuron_save(model.state_dict(), path)\n",
    )
    calls = frozenset({"torch_xla.core.xla_model.save"})
    emits = ("torch.save", "torch.distributed.barrier")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if may_shard(site):
            return Review(f"`{code(node)}`: this program may shard its model with NeuronX "
                          "Distributed, whose migrated layers hold DTensor parameters: a state "
                          "dict of them is not one process's to write. Save it with "
                          "torch.distributed.checkpoint on every process (dcp.save("
                          "get_model_state_dict(model), checkpoint_id=path)), which any layout "
                          "can load")
        alone = self._one_process_save(node, site)
        if alone is not None:
            return alone
        args = [a.with_changes(keyword=cst.Name("path"))
                if a.keyword is not None and a.keyword.value == "file_or_path" else a
                for a in node.args]
        new = node.with_changes(func=site.helper("_neuron_save"), args=args)
        return Replace(new, f"`{code(node)}` → `{code(new)}`: CPU copy, written by "
                       f"{_writer(node.args)} (as before), then a barrier")


    @staticmethod
    def _one_process_save(node: cst.Call, site: Site) -> Replace | None:
        """`torch.save` of the CPU copy, where the file runs as one process: the writer
        choice and the barrier have nothing to choose or wait for. The flags are dropped only
        where evaluating them does nothing (literals, names)."""
        args = node.args
        if has_star_args(args) or not 2 <= len(args) <= 4 or \
                any(a.keyword is not None and a.keyword.value not in _SAVE_PARAMS[i:]
                    for i, a in enumerate(args)) or \
                any(not _inert(a.value) for a in args[2:]):
            return None
        data, path = args[0], args[1]
        if data.keyword is not None and data.keyword.value != "data" or \
                path.keyword is not None and path.keyword.value != "file_or_path":
            return None  # keyword order other than the parameters': keep the helper
        if not one_process(site):
            return None
        save = site.ref("torch.save")
        if save is None:
            return None
        copy = cst.Call(func=site.helper("_neuron_to_device"), args=[
            data.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT,
                              comma=cst.MaybeSentinel.DEFAULT),
            cst.Arg(cst.SimpleString('"cpu"'))])
        new = cst.Call(func=save, args=[
            cst.Arg(copy), path.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT,
                                             comma=cst.MaybeSentinel.DEFAULT)])
        return Replace(new, f"`{code(node)}` → `{code(new)}`: this file runs as one process "
                       "(a script no launcher in its repository starts several times, with "
                       "no ranks or collectives), so its one process writes the CPU copy, as "
                       "xm.save did, with no writer choice or barrier")


_SAVE_PARAMS = ("data", "file_or_path", "master_only", "global_master")


def _inert(node: cst.BaseExpression) -> bool:
    """Whether evaluating `node` can do nothing but produce its value."""
    return isinstance(node, (cst.Name, cst.Integer, cst.SimpleString)) or \
        isinstance(node, cst.Attribute) and _inert(node.value)


def _writer(args: Sequence[cst.Arg]) -> str:
    """Which process writes, in words, as xm.save's two flags chose it."""
    master_only, global_master = argument(args, 2, "master_only"), argument(args, 3,
                                                                             "global_master")
    only = True if master_only is None else bool_value(master_only.value)
    one = False if global_master is None else bool_value(global_master.value)
    if only is False:
        return "every process"
    if only is None or one is None:
        flags = " and ".join(f"`{code(a)}`" for a in (master_only, global_master) if a)
        return f"the processes {flags} choose"
    return "global rank 0" if one else "the local master of each host"


class XserCheckpoint(ReviewRule):
    id = "NM231"
    name = "xser-checkpoint"
    summary = "`torch_xla.utils.serialization` (xser) checkpoints need a one-time conversion"
    explanation = """\
What it does: reports `xser.save` and `xser.load`.

Why: xser wrote a pickled main file whose tensors are placeholders, with the tensors
themselves in a `<path>.tensors/tensor_<i>.pt` folder; plain `torch.load` cannot reassemble
it without torch_xla's classes.

What to do: use `torch.save` / `torch.load` (tensors moved to the CPU first) or
`torch.distributed.checkpoint` for sharded state. To keep existing checkpoints, convert them
once in the old environment: `state = xser.load(path)` then `torch.save(state, new_path)`."""
    doc_url = XLA_XSER
    example = Example(
        before="import torch_xla.utils.serialization as xser\n\nstate = xser.load(path)\n",
        after="import torch_xla.utils.serialization as xser\n\nstate = xser.load(path)\n",
    )
    guidance = {"torch_xla.utils.serialization": (
        "xser's on-disk format needs torch_xla to read; use torch.save/torch.load (or "
        "torch.distributed.checkpoint) and convert old checkpoints once in the XLA "
        "environment: torch.save(xser.load(path), new_path)")}


RULES: tuple[type[Rule], ...] = (Save, XserCheckpoint)
