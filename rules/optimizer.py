"""NM210-NM211: the optimizer step. `xm.optimizer_step` also averaged the gradients."""

from __future__ import annotations

import libcst as cst

from codemod.model import Kind
from codemod.rule import Example, Outcome, Replace, Review, Rule, Site
from codemod.quote import code
from rules.helpers import HELPERS
from rules.support import argument, has_star_args

D_DIST = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html"
XM = "torch_xla.core.xla_model"

WRAPPERS = frozenset({
    "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_shard",
    "torch.distributed._composable.fsdp.fully_shard",
})
"""Wrappers that average gradients themselves during backward."""


def _helper_text(name: str) -> str:
    return HELPERS[name].source


class OptimizerStep(Rule):
    id = "NM210"
    name = "optimizer-step"
    kind = Kind.FIX
    summary = ("`xm.optimizer_step(opt)` keeps its gradient averaging; plain `opt.step()` "
               "only under DDP/FSDP (unsafe)")
    explanation = """\
What it does: `xm.optimizer_step(optimizer)` all-reduced every gradient the optimizer holds
(sum, then divided by the world size) and then called `optimizer.step()`. Without a
DistributedDataParallel or FSDP wrapper in the file, it becomes a helper that does exactly
that with torch.distributed, so the replicas keep training the same model. When the file
visibly wraps the model in DistributedDataParallel or FSDP (which average the gradients during
backward), the suggested rewrite is plain `optimizer.step()`; that is an unsafe fix, applied
only with --unsafe-fixes, because neuron-migrate cannot prove the wrapped model is the one this
optimizer steps.

Why: a bare `optimizer.step()` in a data-parallel script without DDP silently stops averaging
gradients: every replica drifts apart and nothing fails. This is the most dangerous
migration bug; `neuron-migrate smoke --check-replicas` detects it at run time.

What differs: nothing with the helper. `optimizer_args=` is passed on to `step()`;
`barrier=True` only added a graph cut, which eager execution does not need; `groups=` is
reported for review. Wrapping the model in DistributedDataParallel is the faster long-term
replacement: it overlaps the all-reduce with the backward pass."""
    doc_url = D_DIST
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\nxm.optimizer_step(optimizer)\n",
        after="import os\nimport torch\n\n\n" + _helper_text("_neuron_distributed") + "\n\n"
              + _helper_text("_neuron_reduce_gradients") + "\n\n"
              + _helper_text("_neuron_optimizer_step") + "\n\n_neuron_optimizer_step(optimizer)\n",
    )
    calls = frozenset({f"{XM}.optimizer_step"})
    emits = ("torch.distributed.all_reduce", "torch.distributed.get_world_size")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        optimizer = argument(node.args, 0, "optimizer")
        if optimizer is None or has_star_args(node.args):
            return Review(f"`{code(node)}`: cannot see the optimizer; rewrite by hand")
        groups = argument(node.args, 3, "groups")
        if groups is not None and code(groups.value) != "None":
            return Review(f"`{code(node)}`: `groups` averages over subsets of processes; "
                          "use DistributedDataParallel with process_group=dist.new_group(...)")
        step_args = argument(node.args, 2, "optimizer_args")
        if site.module_mentions(WRAPPERS):
            step = cst.Attribute(value=optimizer.value, attr=cst.Name("step"))
            args = [cst.Arg(step_args.value, star="**")] if step_args is not None else []
            new = cst.Call(step, args)
            return Replace(new, f"`{code(node)}` → `{code(new)}`: this file wraps a model in "
                           "DistributedDataParallel/FSDP, which average the gradients; check "
                           "that this optimizer belongs to that model", kind=Kind.UNSAFE_FIX)
        args = [cst.Arg(optimizer.value)]
        if step_args is not None:
            args = [cst.Arg(optimizer.value, comma=cst.Comma(
                whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(step_args.value)]
        new = cst.Call(site.helper("_neuron_optimizer_step"), args)
        return Replace(new, f"`{code(node)}` → `{code(new)}`: averages the gradients over all "
                       "processes, then steps, as optimizer_step did (no DDP/FSDP wrapper in "
                       "this file)")


class ReduceGradients(Rule):
    id = "NM211"
    name = "reduce-gradients"
    kind = Kind.FIX
    summary = "`xm.reduce_gradients(opt)` becomes a helper that averages the gradients"
    explanation = """\
What it does: replaces `xm.reduce_gradients(optimizer)` with a helper that all-reduces each
gradient held by the optimizer (sum over processes, divided by the world size), as the XLA
call did.

Why: scripts that clip gradients call reduce_gradients before clipping and stepping; the
averaging must stay or the replicas diverge.

What differs: nothing; without a process group (one process) it does nothing, and with
WORLD_SIZE > 1 and no group it raises. `groups=` is reported for review. DistributedDataParallel does this averaging during backward and is faster."""
    doc_url = D_DIST
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\nxm.reduce_gradients(optimizer)\n",
        after="import os\nimport torch\n\n\n" + _helper_text("_neuron_distributed") + "\n\n"
              + _helper_text("_neuron_reduce_gradients")
              + "\n\n_neuron_reduce_gradients(optimizer)\n",
    )
    calls = frozenset({f"{XM}.reduce_gradients"})
    emits = ("torch.distributed.all_reduce",)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        optimizer = argument(node.args, 0, "optimizer")
        groups = argument(node.args, 1, "groups")
        if optimizer is None or has_star_args(node.args) or \
                (groups is not None and code(groups.value) != "None"):
            return Review(f"`{code(node)}`: groups or unpacked arguments; average the "
                          "gradients with torch.distributed.all_reduce by hand")
        new = cst.Call(site.helper("_neuron_reduce_gradients"), [cst.Arg(optimizer.value)])
        return Replace(new, f"`{code(node)}` → `{code(new)}`")


RULES: tuple[type[Rule], ...] = (OptimizerStep, ReduceGradients)
