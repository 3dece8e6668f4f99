"""NM242, NM243, NM253: NxD's vocabulary-parallel loss, its gradient clipping and averaging.

Both read what the tensor-parallel layers (NM241) leave behind: logits split over the
vocabulary, and gradients that are DTensors next to plain ones.
"""

from __future__ import annotations

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Review, Rule, Site, argument,
                                    bool_value, code, has_star_args, keep_args, keyword_arg)
from neuron_migrate.rules.emitted_helpers import defined
from neuron_migrate.rules.nxd_layout import mesh_group, qualnames

D_TP = "https://docs.pytorch.org/docs/stable/distributed.tensor.parallel.html"
D_CLIP = "https://docs.pytorch.org/docs/stable/generated/torch.nn.utils.clip_grad_norm_.html"


class ParallelCrossEntropy(Rule):
    id = "NM242"
    name = "nxd-parallel-cross-entropy"
    kind = Kind.FIX
    summary = ("`parallel_cross_entropy(logits, target)` becomes a helper that gathers the "
               "vocabulary shards and takes the per-token cross entropy")
    explanation = """\
What it does: NxD's `parallel_cross_entropy(vocab_parallel_logits, target,
label_smoothing=0.0)` becomes `_neuron_parallel_cross_entropy(...)` with the same arguments:
a helper that gathers the logits' vocabulary shards over the "tp" mesh dimension
(`DTensor.from_local(..., [Shard(-1)]).full_tensor()`, which is differentiable) and returns
`F.cross_entropy(..., reduction="none")` per token, in the shape of `target`, as NxD did.

Why: the logits come from a `ColwiseParallel` head (NxD's `ColumnParallelLinear(...,
gather_output=False)`), so each rank holds a slice of the vocabulary. The native alternative
that never gathers them is `torch.distributed.tensor.parallel.loss_parallel()`, but it needs
the backward pass inside the same context, which is in the training loop, usually in another
function or file: a local rewrite could not place it safely. Gathering keeps the meaning
everywhere.

What differs: the whole vocabulary's logits are materialised on each tensor-parallel rank for
the loss (memory of batch x sequence x vocabulary per rank). For a large vocabulary, switch
to `loss_parallel()` by hand: keep the head's output as a DTensor (`use_local_output=False`)
and run both the loss and `backward()` inside `with loss_parallel():`."""
    doc_url = D_TP
    example = Example(
        before="from neuronx_distributed.parallel_layers.loss_functions import "
               "parallel_cross_entropy\n\nloss = parallel_cross_entropy(logits, labels).mean()\n",
        after="import torch\n\n\n" + defined("_neuron_parallel_cross_entropy") + "\n\n"
              "loss = _neuron_parallel_cross_entropy(logits, labels).mean()\n",
    )
    calls = qualnames("neuronx_distributed.parallel_layers.loss_functions",
                      "parallel_cross_entropy")
    names = calls
    emits = ("torch.distributed.tensor.DTensor.from_local",
             "torch.distributed.tensor.DTensor.full_tensor", "torch.nn.functional.cross_entropy")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if has_star_args(node.args) or len(node.args) > 3:
            return Review(f"`{code(node)}`: rewrite with F.cross_entropy on gathered logits")
        new = node.with_changes(func=site.helper("_neuron_parallel_cross_entropy"))
        return Replace(new, f"`{code(node)}` → `{code(new)}`: the vocabulary shards are "
                       "gathered over the \"tp\" mesh dimension, then the per-token loss")

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        """The function as a value (`loss_fct = parallel_cross_entropy`): the helper takes the
        same arguments, so it stands in wherever the function is called later."""
        if isinstance(site.parent, cst.Call) and site.parent.func is node:
            return None  # a call: on_call decides
        new = site.helper("_neuron_parallel_cross_entropy")
        return Replace(new, f"`{code(node)}` → `{code(new)}`: the same arguments; the "
                       "vocabulary shards are gathered, then the per-token loss")


class ClipGradNorm(Rule):
    id = "NM243"
    name = "nxd-clip-grad-norm"
    kind = Kind.FIX
    summary = ("NxD's `clip_grad_norm(params, max_norm)` becomes a helper that clips by the "
               "whole model's norm, sharded gradients included")
    explanation = """\
What it does: `neuronx_distributed.parallel_layers.grads.clip_grad_norm(parameters,
max_norm, norm_type=2)` becomes `_neuron_clip_grad_norm(parameters, max_norm, norm_type)`,
which returns the total norm like NxD's.

Why: NxD counted a tensor-parallel weight's gradient over all its shards and a replicated
one once. After the migration the tensor-parallel gradients are DTensors: the helper takes
each gradient's norm (a DTensor's is reduced over its shards) and clips every gradient by
the total. `torch.nn.utils.clip_grad_norm_` cannot take a mix of DTensor and plain
gradients, which a partly tensor-parallel model has.

What differs: nothing. `zero1_optimizer=True` (the norm of ZeRO-1 shards over the
data-parallel group) is reported: the migrated ZeRO-1 optimizer clips itself."""
    doc_url = D_CLIP
    example = Example(
        before="from neuronx_distributed.parallel_layers import grads\n\n"
               "grads.clip_grad_norm(model.parameters(), 1.0)\n",
        after="import torch\n\n\n" + defined("_neuron_clip_grad_norm") + "\n\n"
              "_neuron_clip_grad_norm(model.parameters(), 1.0)\n",
    )
    calls = qualnames("neuronx_distributed.parallel_layers.grads", "clip_grad_norm")
    emits = ("torch.linalg.vector_norm", "torch.distributed.tensor.DTensor.full_tensor")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if has_star_args(node.args):
            return Review(f"`{code(node)}`: unpacked arguments; rewrite by hand")
        kept = [argument(node.args, i, n) for i, n in
                enumerate(("parameters", "max_norm", "norm_type"))]
        known = [a for a in kept if a is not None]
        for arg in node.args:
            if any(arg is k for k in known):
                continue
            if arg.keyword is not None and arg.keyword.value == "force_spmd":
                continue
            if arg.keyword is not None and arg.keyword.value == "zero1_optimizer_groups" and \
                    code(arg.value) == "None":
                continue
            if arg.keyword is not None and arg.keyword.value == "zero1_optimizer" and \
                    bool_value(arg.value) is False:
                continue
            return Review(f"`{code(node)}`: `{code(arg)}` clipped ZeRO-1 shards over the "
                          "data-parallel group; the migrated ZeRO-1 optimizer clips itself")
        new = node.with_changes(func=site.helper("_neuron_clip_grad_norm"),
                                args=keep_args(node.args, known))
        return Replace(new, f"`{code(node)}` → `{code(new)}`: the norm over the whole "
                       "model, tensor-parallel shards included")


class BucketAllreduce(Rule):
    id = "NM253"
    name = "nxd-bucket-allreduce"
    kind = Kind.FIX
    summary = ("NxD's `bucket_allreduce_gradients(grads)` becomes a bucketed average over the "
               "mesh's data-parallel group")
    explanation = """\
What it does: `neuronx_distributed.parallel_layers.grads.bucket_allreduce_gradients(grads)`
becomes `_neuron_average_tensors(grads, group=_neuron_mesh().get_group("dp"))`: the
gradients averaged over the data-parallel ranks of the DeviceMesh that replaced NxD's layout,
in flat buckets of about 25 MB per dtype, one all-reduce each, as NxD bucketed them.

Why: scripts that drive the optimizer themselves average the gradients with it before
clipping; without the average each replica would step with its own gradients.

What differs: NxD reversed the list so the last layers' buckets went first (a scheduling
detail of XLA's graph). `reduce_over_ep_group=True` (expert parallelism) is reported."""
    doc_url = D_TP
    example = Example(
        before="from neuronx_distributed.parallel_layers import grads\n\n"
               "grads.bucket_allreduce_gradients(gradients)\n",
        after="import os\n\nimport torch\n\n\n" + defined("_neuron_average_tensors") + "\n\n"
              + defined("_neuron_mesh").split("\n\n\n")[-1] + "\n\n"
              "_neuron_average_tensors(gradients, group=_neuron_mesh().get_group(\"dp\"))\n",
    )
    calls = qualnames("neuronx_distributed.parallel_layers.grads", "bucket_allreduce_gradients")
    emits = ("torch.distributed.all_reduce",)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        grads = argument(node.args, 0, "grads_list")
        expert = argument(node.args, 1, "reduce_over_ep_group")
        if grads is None or has_star_args(node.args) or \
                (expert is not None and bool_value(expert.value) is not False):
            return Review(f"`{code(node)}`: average over the expert-parallel group by hand")
        new = cst.Call(site.helper("_neuron_average_tensors"),
                       [cst.Arg(grads.value), keyword_arg("group", mesh_group("dp", site))])
        return Replace(new, f"`{code(node)}` → `{code(new)}`: averaged over the mesh's "
                       "data-parallel ranks, in buckets")


RULES = (ParallelCrossEntropy, ClipGradNorm, BucketAllreduce)
