"""NM244, NM250, NM251: NxD's region mappings, its sequence-parallel LayerNorm, its device move
and its utilities.

NxD's model code moved activations between tensor-parallel layouts by hand with autograd
functions (`copy_to_tensor_model_parallel_region`, ...); each one is a DTensor
redistribution between two placements over the mesh's "tp" dimension, whose backward is the
collective NxD wrote by hand.
"""

from __future__ import annotations

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Review, Rule, Site, argument,
                                    code, has_star_args, keep_args, keyword_arg, template)
from neuron_migrate.rules.emitted_helpers import defined
from neuron_migrate.rules.nxd_layout import qualnames

D_DTENSOR = "https://docs.pytorch.org/docs/stable/distributed.tensor.html"
D_TP = "https://docs.pytorch.org/docs/stable/distributed.tensor.parallel.html"
MAPPINGS = "neuronx_distributed.parallel_layers.mappings"
PLACEMENTS = "torch.distributed.tensor"

# mapping → (source, target, gradient placement or None); {d} is the sequence dimension
_REGIONS = {
    "copy_to_tensor_model_parallel_region": ("Replicate()", "Replicate()", "Partial()"),
    "reduce_from_tensor_model_parallel_region": ("Partial()", "Replicate()", None),
    "scatter_to_tensor_model_parallel_region": ("Replicate()", "Shard(-1)", None),
    "gather_from_tensor_model_parallel_region": ("Shard(-1)", "Replicate()", None),
    "scatter_to_sequence_parallel_region": ("Replicate()", "Shard({d})", None),
    "gather_from_sequence_parallel_region": ("Shard({d})", "Replicate()", "Partial()"),
    "reduce_scatter_to_sequence_parallel_region": ("Partial()", "Shard({d})", None),
}
_SEQUENCE = ("scatter_to_sequence_parallel_region", "gather_from_sequence_parallel_region",
             "reduce_scatter_to_sequence_parallel_region")


class RegionMappings(Rule):
    id = "NM244"
    name = "nxd-region-mappings"
    kind = Kind.FIX
    summary = ("NxD's `*_tensor_model_parallel_region` / `*_sequence_parallel_region` mappings "
               "become DTensor redistributions over the \"tp\" mesh dimension")
    explanation = """\
What it does: each NxD mapping becomes `_neuron_redistribute(x, source, target, grad=...)`,
a helper that reads the local tensor as a DTensor with the `source` placement on the "tp"
mesh dimension, redistributes it to `target` and returns the local part:
- `copy_to_tensor_model_parallel_region(x)`: Replicate → Replicate, gradient Partial
  (identity forward, all-reduce backward);
- `reduce_from_tensor_model_parallel_region(x)`: Partial → Replicate (all-reduce forward);
- `scatter_to_tensor_model_parallel_region(x)`: Replicate → Shard(-1) (this rank's slice of
  the last dimension; all-gather backward);
- `gather_from_tensor_model_parallel_region(x)`: Shard(-1) → Replicate (all-gather);
- `scatter_to_sequence_parallel_region(x, d)`: Replicate → Shard(d);
- `gather_from_sequence_parallel_region(x, d)`: Shard(d) → Replicate, gradient Partial
  (reduce-scatter backward; `to_model_parallel=False`: split backward);
- `reduce_scatter_to_sequence_parallel_region(x, d)`: Partial → Shard(d).

Why: NxD wrote each of these as an autograd function over XLA collectives; DTensor's
redistribution has the same forward and backward collectives and runs on the neuron
backend.

What differs: nothing. An explicit `process_group=` other than the tensor-parallel one,
`tile_cc=True` and `dtype=` are reported."""
    doc_url = D_DTENSOR
    example = Example(
        before="from neuronx_distributed.parallel_layers import mappings\n\n"
               "x = mappings.reduce_from_tensor_model_parallel_region(x)\n",
        after="import torch.distributed.tensor\n\n\n" + defined("_neuron_redistribute") + "\n\n"
              "x = _neuron_redistribute(x, torch.distributed.tensor.Partial(), "
              "torch.distributed.tensor.Replicate())\n",
    )
    calls = qualnames(MAPPINGS, *_REGIONS)
    emits = (f"{PLACEMENTS}.DTensor.from_local", f"{PLACEMENTS}.DTensor.redistribute",
             f"{PLACEMENTS}.DTensor.to_local", f"{PLACEMENTS}.Replicate",
             f"{PLACEMENTS}.Shard", f"{PLACEMENTS}.Partial")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        name = (site.qualname or "").rsplit(".", 1)[-1]
        tensor = argument(node.args, 0, "input_")
        if tensor is None or has_star_args(node.args):
            return Review(f"`{code(node)}`: rewrite with DTensor.from_local(...).redistribute()")
        sequence = argument(node.args, 1, "sequence_dimension") if name in _SEQUENCE else None
        to_model = argument(node.args, 2, "to_model_parallel") \
            if name == "gather_from_sequence_parallel_region" else None
        known = [a for a in (tensor, sequence, to_model) if a is not None]
        extra = [a for a in node.args if not any(a is k for k in known)]
        if extra:
            return Review(f"`{code(node)}`: `{code(extra[0])}` has no counterpart in the "
                          "redistribution; write it with DTensor by hand")
        placements = site.ref(PLACEMENTS)
        if placements is None:
            return Review(f"`{code(node)}`: `torch` means something else here")
        source, target, grad = _REGIONS[name]
        if to_model is not None and code(to_model.value) == "False":
            grad = None
        elif to_model is not None and code(to_model.value) != "True":
            return Review(f"`{code(node)}`: `to_model_parallel` is not a literal; choose the "
                          "gradient placement (Partial() or none) by hand")
        dim = sequence.value if sequence is not None else cst.Integer("0")

        def placement(text: str) -> cst.BaseExpression:
            return template("{p}." + text.format(d="{d}"), p=placements, d=dim)

        args = [cst.Arg(tensor.value), cst.Arg(placement(source)), cst.Arg(placement(target))]
        if grad is not None:
            args.append(keyword_arg("grad", placement(grad)))
        new = cst.Call(site.helper("_neuron_redistribute"), args)
        return Replace(new, f"`{code(node)}` → `{code(new)}`: the same collectives, forward "
                       "and backward, over the \"tp\" mesh dimension")


class SequenceParallelNorm(Rule):
    id = "NM250"
    name = "nxd-sequence-parallel-norm"
    kind = Kind.FIX
    summary = ("NxD's `LayerNorm(..., sequence_parallel_enabled=True)` becomes "
               "`torch.nn.LayerNorm` under `SequenceParallel`; its gradient all-reduce goes")
    explanation = """\
What it does: `neuronx_distributed.parallel_layers.layer_norm.LayerNorm(shape, ...,
sequence_parallel_enabled=True)` becomes `torch.nn.LayerNorm(shape, ...)` parallelised with
`SequenceParallel(sequence_dim=0, use_local_output=True)`; without sequence parallelism it is
plain `torch.nn.LayerNorm`. `grads.allreduce_sequence_parallel_gradients(optimizer)` becomes
`_neuron_allreduce_sequence_parallel_gradients(optimizer)`, which sums over the "tp" group
only the gradients that are still plain tensors on parameters marked
`sequence_parallel_enabled` (a norm of the script's own, as NxD's Llama RMSNorm marks its
weight). `move_model_to_device(model, device)` becomes `_neuron_move_model(model, device)`:
`model.to(device)`, keeping those marks as NxD's did (a move can make new parameter objects).

Why: with sequence parallelism each tensor-parallel rank normalises its own slice of the
sequence, so the norm's weight and bias get a partial gradient on each rank; NxD marked them
and summed their gradients over the tensor-parallel group before the optimizer step. Under
`SequenceParallel` the parameters are replicated DTensors and that sum happens in backward,
so the helper skips them (summing again would count it twice), while a marked parameter the
migration did not put under a parallel style keeps NxD's all-reduce.

What differs: nothing. NxD's norm upcast its input to float64 when XLA_DOWNCAST_BF16=1 (an
XLA precision setting with no native meaning). A sequence dimension other than 0 is written
by hand (`SequenceParallel(sequence_dim=d)`)."""
    doc_url = D_TP
    example = Example(
        before="from neuronx_distributed.parallel_layers.layer_norm import LayerNorm\n\n"
               "norm = LayerNorm(1024, sequence_parallel_enabled=True)\n",
        after="import torch.distributed.tensor.parallel\n\n\n"
              + defined("_neuron_tensor_parallel") + "\n\n"
              "norm = _neuron_tensor_parallel(torch.nn.LayerNorm(1024), "
              "torch.distributed.tensor.parallel.SequenceParallel(sequence_dim=0, "
              "use_local_output=True))\n",
    )
    calls = (qualnames("neuronx_distributed.parallel_layers.layer_norm", "LayerNorm")
             | qualnames("neuronx_distributed.parallel_layers.grads",
                         "allreduce_sequence_parallel_gradients")
             | qualnames("neuronx_distributed.parallel_layers.utils", "move_model_to_device")
             | qualnames("neuronx_distributed.utils.model_utils", "move_model_to_device"))
    emits = ("torch.nn.LayerNorm", "torch.distributed.tensor.parallel.SequenceParallel")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        name = (site.qualname or "").rsplit(".", 1)[-1]
        if has_star_args(node.args):
            return Review(f"`{code(node)}`: unpacked arguments; rewrite by hand")
        if name == "allreduce_sequence_parallel_gradients":
            if len(node.args) != 1:
                return Review(f"`{code(node)}`: sum the marked parameters' gradients over "
                              "the \"tp\" mesh dimension's group by hand")
            new = node.with_changes(func=site.helper(
                "_neuron_allreduce_sequence_parallel_gradients"))
            return Replace(new, f"`{code(node)}` → `{code(new)}`: the gradients of parameters "
                           "marked sequence_parallel_enabled (a norm of the script's own) are "
                           "summed over the \"tp\" mesh dimension; a norm under "
                           "SequenceParallel has DTensor gradients its backward already summed")
        if name == "move_model_to_device":
            return _moved(node, site)
        return _norm(node, site)


def _moved(node: cst.Call, site: Site) -> Outcome:
    model, device = argument(node.args, 0, "model"), argument(node.args, 1, "device")
    if model is None or device is None or len(node.args) != 2:
        return Review(f"`{code(node)}`: move the model with `model.to(device)`")
    new = cst.Call(site.helper("_neuron_move_model"),
                   [cst.Arg(model.value), cst.Arg(device.value)])
    return Replace(new, f"`{code(node)}` → `{code(new)}`: model.to(device) keeping the "
                   "parameters' sequence_parallel_enabled marks, as NxD did")


def _norm(node: cst.Call, site: Site) -> Outcome:
    sequence = next((a for a in node.args if a.keyword is not None
                     and a.keyword.value == "sequence_parallel_enabled"), None)
    kept = keep_args(node.args, [a for a in node.args if a is not sequence])
    native = site.ref("torch.nn.LayerNorm")
    if native is None:
        return Review(f"`{code(node)}`: `torch` means something else here")
    norm = cst.Call(native, kept)
    flag = None if sequence is None else sequence.value
    if flag is None or code(flag) == "False":
        return Replace(norm, f"`{code(node)}` → `{code(norm)}`: no sequence parallelism, "
                       "a plain LayerNorm")
    tp = site.ref("torch.distributed.tensor.parallel")
    assert tp is not None
    style = cst.Call(cst.Attribute(value=tp, attr=cst.Name("SequenceParallel")),
                     [keyword_arg("sequence_dim", cst.Integer("0")),
                      keyword_arg("use_local_output", cst.Name("True"))])
    parallel = cst.Call(site.helper("_neuron_tensor_parallel"), [cst.Arg(norm), cst.Arg(style)])
    new = parallel if code(flag) == "True" else \
        template("{p} if {flag} else {n}", p=parallel, flag=flag, n=norm)
    return Replace(new, f"`{code(node)}` → `{code(new)}`: replicated parameters whose "
                   "gradients SequenceParallel reduces over the \"tp\" mesh dimension")


class Utilities(Rule):
    id = "NM251"
    name = "nxd-utilities"
    kind = Kind.FIX
    summary = ("NxD's `parallel_layers.utils.divide(a, b)` and `get_local_world_size()` become "
               "a checked division and torchrun's LOCAL_WORLD_SIZE")
    explanation = """\
What it does: `divide(numerator, denominator)` from `neuronx_distributed.parallel_layers.utils`
becomes `_neuron_divide(numerator, denominator)`: the quotient, after checking that the
division is exact; `get_local_world_size()` becomes `int(os.environ.get("LOCAL_WORLD_SIZE",
1))`, the processes on this host as torchrun publishes it.

Why: model code sizes its local shards with `divide` (`divide(heads, tp_size)`) and staggers
loading by host with the local world size; NxD fails to import on TorchNeuron, and a bare
`//` would drop the check that a size splits evenly over the tensor-parallel ranks.

What differs: the failed check raises ValueError where NxD's assertion raised
AssertionError."""
    doc_url = D_TP
    example = Example(
        before="from neuronx_distributed.parallel_layers.utils import divide\n\n"
               "heads = divide(num_heads, tp_size)\n",
        after=defined("_neuron_divide") + "\n\nheads = _neuron_divide(num_heads, tp_size)\n",
    )
    calls = qualnames("neuronx_distributed.parallel_layers.utils", "divide",
                      "get_local_world_size")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if (site.qualname or "").endswith(".get_local_world_size"):
            os_ = site.ref("os")
            if node.args or os_ is None:
                return Review(f"`{code(node)}`: read LOCAL_WORLD_SIZE from the environment")
            new = site.parenthesized(template('int({os}.environ.get("LOCAL_WORLD_SIZE", 1))',
                                              os=os_))
            return Replace(new, f"`{code(node)}` → `{code(new)}`: torchrun's count of the "
                           "processes on this host")
        if len(node.args) != 2 or has_star_args(node.args):
            return Review(f"`{code(node)}`: divide exactly, checking the remainder")
        new = node.with_changes(func=site.helper("_neuron_divide"))
        return Replace(new, f"`{code(node)}` → `{code(new)}`")


RULES = (RegionMappings, SequenceParallelNorm, Utilities)
