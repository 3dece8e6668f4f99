"""NM210-NM211: the optimizer step. `xm.optimizer_step` also averaged the gradients."""

from __future__ import annotations

import ast
from collections.abc import Sequence

import libcst as cst

from neuron_migrate.ruleapi import (Example, Insert, Kind, Outcome, Replace, Review, Rule, Site,
                                    argument, code, has_star_args, keep_args, keyword_arg)
from neuron_migrate.ruleapi.analysis import Proof, WRAPPERS, averaged_by_wrapper
from neuron_migrate.rules.data_parallel import DataParallelPlan, data_parallel_plan
from neuron_migrate.rules.emitted_helpers import HELPERS
from neuron_migrate.rules.nxd_layout import mesh_group, replica_dimension

D_DIST = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html"
XM = "torch_xla.core.xla_model"

def _helper_text(name: str) -> str:
    return HELPERS[name].source


class OptimizerStep(Rule):
    id = "NM210"
    name = "optimizer-step"
    kind = Kind.FIX
    summary = ("`xm.optimizer_step(opt)` becomes `opt.step()` with the model trained through "
               "DistributedDataParallel where the loop allows it, else a helper that averages "
               "the gradients in buckets and steps")
    explanation = """\
What it does: `xm.optimizer_step(optimizer)` all-reduced every gradient the optimizer holds
(sum, then divided by the world size) and then called `optimizer.step()`.

Where the loop has the shape DistributedDataParallel needs, the model is trained through it:
`ddp_model = DistributedDataParallel(model, broadcast_buffers=False)` (in a process group, or
wherever WORLD_SIZE > 1, where a missing group then raises as the helper did instead of
letting each process train alone; `ddp_model = model` in a single process) goes before the
statement that holds the loop, the loop's forward call `model(x)` becomes `ddp_model(x)`, and
the step becomes `optimizer.step()`. The shape: one `xm.optimizer_step(optimizer)` in the file, with only the
optimizer, run on every iteration of its loop; one optimizer in the file, built over one
model's `.parameters()`, and that model assigned (not received as a parameter) in the function
around the loop and not reassigned once the loop starts; in the loop one forward call of the
model and one `backward()`, unconditional, and nothing between backward and the step that
reads or changes gradients (clipping, `.grad`, unscaling); no DDP/FSDP in the file already.
`model` itself is not rebound, so `model.state_dict()` keeps its keys (DDP's would be prefixed
with `module.`) and checkpoints stay as they were, and evaluation and the model's own
attributes keep using it unchanged.

Everywhere else (two optimizers as in a GAN, a step under an `if`, gradient accumulation,
clipping before the step, `barrier=`, `optimizer_args=` or `groups=`, a model passed into the
training function) it becomes a helper that averages the gradients in flat buckets (one
all_reduce per bucket of 25 MB, as XLA fused them) and steps. Gradient accumulation keeps the
helper rather than `no_sync()`: DDP would need the step's condition decided before each
forward, and the helper already averages once per step. Averaging gradients that a wrapper
has averaged changes nothing, so the helper is also kept where the file wraps models itself.

With --unsafe-fixes, plain `optimizer.step()` is written where the file wraps the model
itself, but only where the optimizer's parameters provably come from a model wrapped in
DistributedDataParallel or FSDP on every path that reaches the call: every assignment of the
optimizer that can reach it is built from `model.parameters()`, and every assignment of
`model` that can reach it is `DDP(model)` / `FSDP(model)` (or `fully_shard(model)` ran).
`if use_ddp: model = DDP(model)` proves nothing for the path where use_ddp is false.

Why: a bare `optimizer.step()` in a data-parallel script without DDP silently stops averaging
gradients: every replica drifts apart and nothing fails (`neuron-migrate smoke
--check-replicas` detects it). DistributedDataParallel is what a Neuron engineer writes: its
buckets are all-reduced while backward still runs, where the helper waits for backward to end.

What differs: with DDP, rank 0's parameters are broadcast when the model is wrapped (a no-op
where every process seeded alike, as XLA scripts do); buffers (BatchNorm statistics) stay per
process, as under XLA. DDP raises at the next forward if some parameter got no gradient in an
iteration (pass `find_unused_parameters=True` then). With the helper nothing differs:
`optimizer_args=` is passed on to `step()`; `barrier=True` only added a graph cut, which
eager execution does not need; `groups=` is reported for review."""
    doc_url = D_DIST
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\nxm.optimizer_step(optimizer)\n",
        after="import os\n\nimport torch\n\n\n" + _helper_text("_neuron_distributed") + "\n\n"
              + _helper_text("_neuron_average_tensors") + "\n\n"
              + _helper_text("_neuron_reduce_gradients") + "\n\n"
              + _helper_text("_neuron_optimizer_step") + "\n\n_neuron_optimizer_step(optimizer)\n",
    )
    calls = frozenset({f"{XM}.optimizer_step"})
    emits = ("torch.distributed.all_reduce", "torch.distributed.get_world_size",
             "torch.distributed.is_initialized", "torch.nn.parallel.DistributedDataParallel")

    def edits(self, tree: ast.Module, calls: Sequence[tuple[ast.Call, int]]
              ) -> tuple[ast.stmt, ...]:
        plan = data_parallel_plan(tree, calls)
        return plan.statements if isinstance(plan, DataParallelPlan) else ()

    def may_act(self, node: ast.AST, names: frozenset[str]) -> bool:
        return False  # `on_any_call` acts only on statements `edits` flags again

    def on_before(self, site: Site) -> Insert | None:
        plan = _plan(site, self.id)
        if plan is None or site.statement is not plan.holder:
            return None
        wrap = code(site.ref("torch.nn.parallel.DistributedDataParallel"))  # type: ignore[arg-type]
        initialized = code(site.ref("torch.distributed.is_initialized"))  # type: ignore[arg-type]
        environ = code(site.ref("os.environ"))  # type: ignore[arg-type]
        statements = (cst.parse_statement(f"{plan.wrapper} = {plan.model}\n"),
                      cst.parse_statement(
                          f"if {initialized}() or int({environ}.get(\"WORLD_SIZE\", 1)) > 1:\n"
                          f"    {plan.wrapper} = {wrap}({plan.model}, broadcast_buffers=False)\n"))
        return Insert(statements, f"add `{plan.wrapper} = DistributedDataParallel({plan.model}, "
                      "broadcast_buffers=False)` before the training loop (in a process group, "
                      "or wherever WORLD_SIZE > 1, so that a missing group raises instead of "
                      "training each process alone): it all-reduces the gradients in buckets "
                      "while backward runs, where xm.optimizer_step averaged them after it; "
                      f"`{plan.model}` keeps its state_dict keys for checkpoints")

    def on_any_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if not isinstance(node.func, cst.Name):
            return None
        plan = _plan(site, self.id)
        if plan is None or site.statement is not plan.forward or node.func.value != plan.model:
            return None
        new = node.with_changes(func=cst.Name(plan.wrapper))
        return Replace(new, f"`{code(node)}` → `{code(new)}`: the forward runs through "
                       "DistributedDataParallel, so backward averages the gradients")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        optimizer = argument(node.args, 0, "optimizer")
        if optimizer is None or has_star_args(node.args):
            return Review(f"`{code(node)}`: cannot see the optimizer; rewrite by hand")
        plan = _plan(site, self.id)
        if plan is not None and site.statement is plan.step:
            new = cst.Call(cst.Attribute(value=optimizer.value, attr=cst.Name("step")))
            return Replace(new, f"`{code(node)}` → `{code(new)}`: `{plan.wrapper}` "
                           "(DistributedDataParallel, added before the loop) has averaged the "
                           "gradients during backward")
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
    plan = data_parallel_plan(site.module_tree, site.module_calls())
    reason = plan if isinstance(plan, str) else "a notebook's kernel is one process" \
        if site.path.endswith(".ipynb") else "a suppression comment keeps the helper"
    return f"not trained through DistributedDataParallel, since {reason}"


def _plan(site: Site, rule_id: str) -> DataParallelPlan | None:
    """The file's plan, unless a suppression comment silences the rule on one of the
    statements it edits (the edits go together or not at all), or the file is a notebook (a
    kernel is one process: a wrapper there would never have anything to average)."""
    if site.path.endswith(".ipynb"):
        return None
    plan = data_parallel_plan(site.module_tree, site.module_calls())
    if isinstance(plan, str) or any(site.silenced(rule_id, s) for s in plan.statements):
        return None
    return plan


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
