"""NM210-NM211: the optimizer step. `xm.optimizer_step` also averaged the gradients."""

from __future__ import annotations

import libcst as cst

from neuron_migrate.model import Kind
from neuron_migrate.rule import Example, Outcome, Replace, Review, Rule, Site
from neuron_migrate.engine.quote import code
from neuron_migrate.rules.helpers import HELPERS
from neuron_migrate.rules.nxd_layout import mesh_group, replica_dimension
from neuron_migrate.rules.support import argument, has_star_args, keep_args, keyword_arg
from neuron_migrate.rules.wrapped import WRAPPERS, Proof, averaged_by_wrapper

D_DIST = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html"
XM = "torch_xla.core.xla_model"

def _helper_text(name: str) -> str:
    return HELPERS[name].source


class OptimizerStep(Rule):
    id = "NM210"
    name = "optimizer-step"
    kind = Kind.FIX
    summary = ("`xm.optimizer_step(opt)` becomes a helper that averages the gradients and "
               "steps; plain `opt.step()` only where DDP/FSDP is proved (unsafe)")
    explanation = """\
What it does: `xm.optimizer_step(optimizer)` all-reduced every gradient the optimizer holds
(sum, then divided by the world size) and then called `optimizer.step()`. It becomes a helper
that does exactly that with torch.distributed, so the replicas keep training the same model.
This is the default everywhere, DistributedDataParallel or not: averaging gradients that DDP
has already averaged changes nothing.

With --unsafe-fixes, plain `optimizer.step()` is written instead, but only where the
optimizer's parameters provably come from a model wrapped in DistributedDataParallel or FSDP
on every path that reaches the call: every assignment of the optimizer that can reach it is
built from `model.parameters()`, and every assignment of `model` that can reach it is
`DDP(model)` / `FSDP(model)` (or `fully_shard(model)` ran). `if use_ddp: model = DDP(model)`
proves nothing for the path where use_ddp is false, and an optimizer passed in as a parameter
proves nothing either: there the averaging stays and no unsafe alternative is offered.

Why: a bare `optimizer.step()` in a data-parallel script without DDP silently stops averaging
gradients: every replica drifts apart and nothing fails. This is the most dangerous
migration bug; `neuron-migrate smoke --check-replicas` detects it at run time.

What differs: nothing with the helper. `optimizer_args=` is passed on to `step()`;
`barrier=True` only added a graph cut, which eager execution does not need; `groups=` is
reported for review. The unsafe `optimizer.step()` also stops averaging where backward ran
outside the wrapper (`with model.no_sync():`, or a forward through the unwrapped module).
Wrapping the model in DistributedDataParallel is the faster long-term replacement: it overlaps
the all-reduce with the backward pass."""
    doc_url = D_DIST
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\nxm.optimizer_step(optimizer)\n",
        after="import os\n\nimport torch\n\n\n" + _helper_text("_neuron_distributed") + "\n\n"
              + _helper_text("_neuron_average_tensors") + "\n\n"
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
        step_args = argument(node.args, 2, "optimizer_args")
        if groups is not None and replica_dimension(groups.value, site) == "dp":
            return _over_data_parallel(node, site, optimizer, step_args, step=True)
        if groups is not None and code(groups.value) != "None":
            return Review(f"`{code(node)}`: `groups` averages over subsets of processes; "
                          "use DistributedDataParallel with process_group=dist.new_group(...)")
        proof = averaged_by_wrapper(optimizer.value, site)
        if proof is not None and site.options.unsafe_fixes:
            step = cst.Attribute(value=optimizer.value, attr=cst.Name("step"))
            args = [cst.Arg(step_args.value, star="**")] if step_args is not None else []
            new = cst.Call(step, args)
            return Replace(new, f"`{code(node)}` → `{code(new)}`: {_wrapped(proof.models)} on "
                           "every path to this call, so its gradients are averaged during "
                           "backward; check that backward runs through the wrapper (not in "
                           "`no_sync()`)", kind=Kind.UNSAFE_FIX)
        kept = [a for a in (optimizer, step_args) if a is not None]
        new = node.with_changes(func=site.helper("_neuron_optimizer_step"),
                                args=keep_args(node.args, kept))
        return Replace(new, f"`{code(node)}` → `{code(new)}`: averages the gradients over all "
                       f"processes, then steps, as optimizer_step did; "
                       f"{_why(proof, code(optimizer.value), site)}")


def _wrapped(models: tuple[str, ...]) -> str:
    names = ", ".join(f"`{m}`" for m in models)
    return f"DistributedDataParallel/FSDP wraps {names}"


def _why(proof: Proof | None, optimizer: str, site: Site) -> str:
    if proof is not None:
        return (f"{_wrapped(proof.models)} on every path here, so averaging again changes "
                f"nothing; --unsafe-fixes writes plain `{optimizer}.step()` instead")
    if site.module_mentions(WRAPPERS):
        return ("this file uses DistributedDataParallel/FSDP, but it cannot be shown that they "
                f"wrap the model whose parameters `{optimizer}` holds on every path to this "
                f"call, so plain `{optimizer}.step()` could stop the averaging here and is not "
                "offered")
    return "no DDP/FSDP wrapper in this file"


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
        after="import os\n\nimport torch\n\n\n" + _helper_text("_neuron_distributed") + "\n\n"
              + _helper_text("_neuron_average_tensors") + "\n\n"
              + _helper_text("_neuron_reduce_gradients")
              + "\n\n_neuron_reduce_gradients(optimizer)\n",
    )
    calls = frozenset({f"{XM}.reduce_gradients"})
    emits = ("torch.distributed.all_reduce",)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        optimizer = argument(node.args, 0, "optimizer")
        groups = argument(node.args, 1, "groups")
        if optimizer is not None and groups is not None and not has_star_args(node.args) \
                and replica_dimension(groups.value, site) == "dp":
            return _over_data_parallel(node, site, optimizer, None, step=False)
        if optimizer is None or has_star_args(node.args) or \
                (groups is not None and code(groups.value) != "None"):
            return Review(f"`{code(node)}`: groups or unpacked arguments; average the "
                          "gradients with torch.distributed.all_reduce by hand")
        new = node.with_changes(func=site.helper("_neuron_reduce_gradients"),
                                args=keep_args(node.args, [optimizer]))
        return Replace(new, f"`{code(node)}` → `{code(new)}`")


def _over_data_parallel(node: cst.Call, site: Site, optimizer: cst.Arg,
                        step_args: cst.Arg | None, step: bool) -> Outcome:
    """`groups=` NxD's data-parallel replica groups: average over the mesh's "dp" group, in
    one collective per dtype (the tensor-parallel ranks hold different shards, so averaging
    over all processes would mix them)."""
    args = [cst.Arg(optimizer.value), cst.Arg(mesh_group("dp", site))]
    if step_args is not None:
        args.append(keyword_arg("optimizer_args", step_args.value))
    if step:
        args.append(keyword_arg("step", cst.Name("True")))
    new = cst.Call(site.helper("_neuron_average_in_group"), args)
    what = "then steps, " if step else ""
    return Replace(new, f"`{code(node)}` → `{code(new)}`: averages the gradients over the "
                   f"data-parallel group of the mesh, {what}as the XLA call did over NxD's "
                   "data-parallel replica groups")


RULES: tuple[type[Rule], ...] = (OptimizerStep, ReduceGradients)
