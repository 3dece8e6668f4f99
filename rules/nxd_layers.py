"""NM241: NxD's tensor-parallel layers.

Each NxD layer held its own shard and did its own collectives. The native form is the
full-size `torch.nn` layer sharded by `parallelize_module` with a parallel style, written
where the layer is built: the style is the layer's NxD arguments said natively, and the
reviewer reads it next to the code it replaces (docs/model-parallelism.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Review, Rule, Site, bool_value,
                                    code, has_star_args, keep_args, keyword_arg, positional,
                                    template)
from neuron_migrate.rules.emitted_helpers import defined
from neuron_migrate.rules.nxd_layout import qualnames

D_TP = "https://docs.pytorch.org/docs/stable/distributed.tensor.parallel.html"
LAYERS = "neuronx_distributed.parallel_layers.layers"
TP = "torch.distributed.tensor.parallel"
PLACEMENTS = "torch.distributed.tensor"


class _Spec:
    """One NxD layer's constructor: the torch.nn layer it becomes and which of its arguments
    carry over (`native`: NxD keyword → torch.nn keyword, in positional order)."""

    def __init__(self, native: str, positional: Sequence[str], passed: Sequence[str],
                 style: Sequence[str], dropped: Sequence[str] = ()) -> None:
        self.native = native
        self.positional = tuple(positional)  # NxD's leading positional parameters we accept
        self.passed = tuple(passed)  # keywords passed on to the torch.nn layer as they are
        self.style = tuple(style)  # keywords that decide the parallel style
        self.dropped = tuple(dropped)  # keywords with no effect natively


_LINEAR_PASSED = ("bias", "dtype")
_SPECS = {
    "ColumnParallelLinear": _Spec(
        "torch.nn.Linear", ("input_size", "output_size", "bias"), _LINEAR_PASSED,
        ("gather_output", "sequence_parallel_enabled", "sequence_dimension"),
        ("keep_master_weight",)),
    "RowParallelLinear": _Spec(
        "torch.nn.Linear", ("input_size", "output_size", "bias"), _LINEAR_PASSED,
        ("input_is_parallel", "sequence_parallel_enabled", "sequence_dimension"),
        ("keep_master_weight",)),
    "ParallelEmbedding": _Spec(
        "torch.nn.Embedding", ("num_embeddings", "embedding_dim", "padding_idx"),
        ("padding_idx", "scale_grad_by_freq", "dtype"),
        ("shard_across_embedding",)),
}
_DEFAULT_FALSE = ("skip_bias_add", "pad", "keep_padded_output", "sparse", "use_spmd_rank",
                  "tile_cc", "sequence_parallel_enabled")
"""Arguments the rewrite leaves out of the native layer; present with a value other than
False, the layer is reported. (sequence_parallel_enabled is allowed where `style` takes it.)"""
_WHY_NOT = {
    "skip_bias_add": "the layer returned (output, bias) unadded; build the torch.nn.Linear "
                     "without bias and keep a separate bias Parameter (Replicate) to add where "
                     "the original added it",
    "pad": "the weight was padded to a multiple of the tensor-parallel size (inference only); "
           "pad the size yourself so it divides",
    "stride": "a strided (interleaved) split whose output is gathered, or whose stride is not "
              "a literal, has no parallel style; split the fused layer into one layer per "
              "part, each with ColwiseParallel(output_layouts=Replicate())",
    "tensor_model_parallel_group": "a custom tensor-parallel group: shard over the matching "
                                   "DeviceMesh dimension with parallelize_module",
    "rank_ordering": "a custom placement of shards over ranks has no parallel style",
    "reduce_dtype": "the collective ran in another dtype; DTensor reduces in the tensor's own",
    "reduce_output": "the partial output was left unreduced; use RowwiseParallel("
                     "output_layouts=Partial()) with use_local_output=False and reduce it "
                     "where the original did",
    "collect_output": "the partial output was left ungathered; use use_local_output=True "
                      "with the sharded output layout",
    "device": "the layer was allocated on a chosen device (often meta, for deferred "
              "initialisation); build it on the meta device with torch.device('meta') and "
              "call to_empty() and your initialisation after parallelize_module",
    "max_norm": "embedding renormalisation of a sharded weight; renormalise after gathering",
    "sequence_parallel_enabled": "a sequence-parallel embedding returned its output "
                                 "transposed to [sequence, batch, hidden] and scattered; use "
                                 "RowwiseParallel(input_layouts=Replicate(), "
                                 "output_layouts=Shard(0)) on an input you transpose first",
    "use_spmd_rank": "an SPMD rank tensor for traced inference has no native counterpart",
    "sparse": "sparse gradients are not supported on the neuron device",
    "keep_padded_output": "padding is not rewritten",
    "pad_alignment_size_per_rank": "padding is not rewritten",
    "tile_cc": "tiled collectives are a compiler detail of the XLA path",
    "norm_type": "embedding renormalisation of a sharded weight; renormalise after gathering",
}


class TensorParallelLayers(Rule):
    id = "NM241"
    name = "nxd-tensor-parallel-layers"
    kind = Kind.FIX
    summary = ("`ColumnParallelLinear` / `RowParallelLinear` / `ParallelEmbedding` become "
               "full-size torch.nn layers sharded with `parallelize_module` and a parallel style")
    explanation = """\
What it does: each NxD tensor-parallel layer becomes the full-size `torch.nn` layer,
sharded where it is built by `parallelize_module` over the DeviceMesh's "tp" dimension
(`_neuron_tensor_parallel(layer, style)`), with the style that does what the NxD arguments
did:
- `ColumnParallelLinear(i, o)` (gather_output=True) → `ColwiseParallel(output_layouts=
  Replicate())`; `gather_output=False` → `ColwiseParallel()` (output split on its last
  dimension); `sequence_parallel_enabled=True` → `input_layouts=Shard(sequence_dimension)`
  (NxD's default dimension 0).
- `RowParallelLinear(i, o, input_is_parallel=True)` → `RowwiseParallel()`;
  `input_is_parallel=False` (the default) → `RowwiseParallel(input_layouts=Replicate())`;
  `sequence_parallel_enabled=True` → `output_layouts=Shard(sequence_dimension)`.
- `ParallelEmbedding(v, d)` (vocabulary split) → `RowwiseParallel(input_layouts=
  Replicate())` on `torch.nn.Embedding(v, d)`; `shard_across_embedding=True` →
  `ColwiseParallel(output_layouts=Replicate())`.
A flag that is not a literal is kept as a conditional (`Replicate() if flag else Shard(-1)`).
`bias`, `dtype`, `padding_idx` and `scale_grad_by_freq` pass to the torch.nn layer, except a
`padding_idx` of 0, which NxD ignored (`if padding_idx`: row 0 trained like any other) and
which therefore goes (a computed one becomes `p or None`); `init_method` is applied to the whole weight before sharding; `keep_master_weight` has no
meaning natively and goes. A fused layer (`ColumnParallelLinear(h, 3 * d, stride=3,
gather_output=False)`, as for q, k and v) becomes `_NeuronStridedColumns`: three
column-parallel layers of `d` outputs whose local outputs are concatenated, so each rank
holds its slice of q, of k and of v in that order, as NxD's strided split gave it.

Why: NxD is XLA-based and does not run on TorchNeuron; DTensor tensor parallelism does.
Each style shards the same dimension NxD did and leaves the output local
(`use_local_output=True`), so module code that sizes itself from the tensor-parallel degree
(`heads // tp`) keeps working on the same local shapes. Sharding starts from rank 0's
full weight (NxD split one master weight the same way), so a model starts the same at every
layout, which is what makes losses comparable across layouts (`smoke --layout`).

What differs: after the rewrite the weights are DTensors: `weight.data.normal_()` and
`bias.zero_()` still work on them, while code that indexes the local shard reads
`weight.to_local()`. NxD initialised a row-parallel bias with a bound from the local fan-in;
the native layer uses the whole fan-in. The embedding's padding row starts at zero.
A fused layer's parameters are named `parts.0.weight`, `parts.1.weight`, ... instead of
`weight`. `skip_bias_add`, a gathered `stride`, `pad`, custom groups, `device=` and the other
arguments without a style are reported with what to write instead, as are
`GQAQKVColumnParallelLinear` and NxD's other modules."""
    doc_url = D_TP
    example = Example(
        before="from neuronx_distributed.parallel_layers import layers\n\n"
               "proj = layers.ColumnParallelLinear(512, 2048, gather_output=False)\n",
        after="import torch.distributed.tensor.parallel\n\n\n"
              + defined("_neuron_tensor_parallel") + "\n\n"
              "proj = _neuron_tensor_parallel(torch.nn.Linear(512, 2048), "
              "torch.distributed.tensor.parallel.ColwiseParallel())\n",
    )
    calls = qualnames(LAYERS, *_SPECS)
    emits = ("torch.nn.Linear", "torch.nn.Embedding",
             f"{TP}.ColwiseParallel", f"{TP}.RowwiseParallel", f"{TP}.parallelize_module",
             f"{PLACEMENTS}.Replicate", f"{PLACEMENTS}.Shard")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        layer = (site.qualname or "").rsplit(".", 1)[-1]
        spec = _SPECS[layer]
        problem = _unsupported(node.args, spec)
        if problem is not None:
            return Review(f"`{code(node)}`: {problem}")
        native = site.ref(spec.native)
        if native is None or site.ref(TP) is None:
            return Review(f"`{code(node)}`: `torch` means something else here")
        stride = _strided(node.args) if layer == "ColumnParallelLinear" else None
        if stride is not None:
            return _fused(node, site, stride, native)
        style = _style(layer, node.args, site)
        init = _value(node.args, "init_method")
        args = [cst.Arg(cst.Call(native, _native_args(node.args, spec))), cst.Arg(style)]
        if init is not None:
            args.append(keyword_arg("init_method", init))
        new = cst.Call(site.helper("_neuron_tensor_parallel"), args)
        return Replace(new, f"`{code(node)}` → `{code(new)}`: the full-size layer, sharded "
                       "over the \"tp\" mesh dimension as NxD sharded it")


def _strided(args: Sequence[cst.Arg]) -> int | None:
    """The number of fused parts of a `ColumnParallelLinear(..., stride=k, gather_output=False)`
    (fused QKV: 3, gate and up: 2), when the rewrite can split it into k layers."""
    stride, gathered = _value(args, "stride"), _flag(args, "gather_output", True)
    if not isinstance(stride, cst.Integer) or int(stride.value) < 2 or gathered is not False:
        return None
    return int(stride.value)


def _fused(node: cst.Call, site: Site, stride: int, native: cst.BaseExpression) -> Outcome:
    """A strided column-parallel layer as `stride` column-parallel layers whose local outputs
    are concatenated: each rank holds its slice of every fused part, as NxD's strided split
    gave it, while every part is an ordinary DTensor that reshards at any layout."""
    tp = site.ref(TP)
    assert tp is not None  # checked by the caller
    spec = _SPECS["ColumnParallelLinear"]
    args = _native_args(node.args, spec)
    out = next((a for a in args if a.keyword is not None and a.keyword.value == "out_features"),
               None) or positional(args, 1)
    if out is None:
        return Review(f"`{code(node)}`: the output size is not given; split the fused layer "
                      "into one ColwiseParallel layer per part by hand")
    args = _one_line([a.with_changes(value=_part(out.value, stride)) if a is out else a
                      for a in args])
    layer = [cst.Arg(cst.Call(native, args)),
             cst.Arg(cst.Call(cst.Attribute(value=tp, attr=cst.Name("ColwiseParallel"))))]
    init = _value(node.args, "init_method")
    if init is not None:
        layer.append(keyword_arg("init_method", init))
    built = template(f"[{{layer}} for _ in range({stride})]",
                     layer=cst.Call(site.helper("_neuron_tensor_parallel"), layer))
    call_args = [cst.Arg(built)]
    sequence = _flag(node.args, "sequence_parallel_enabled", False)
    dim = _value(node.args, "sequence_dimension") or cst.Integer("0")
    if sequence is True:
        call_args.append(keyword_arg("sequence_dim", dim))
    elif not isinstance(sequence, bool):
        call_args.append(keyword_arg("sequence_dim",
                                     template("{d} if {f} else None", d=dim, f=sequence)))
    new = cst.Call(site.helper("_NeuronStridedColumns"), call_args)
    return Replace(new, f"`{code(node)}` → `{code(new)}`: {stride} column-parallel layers, "
                   "each rank holding its slice of every part as NxD's strided split did "
                   "(parameters `parts.0.weight`, ... instead of `weight`)")


def _part(size: cst.BaseExpression, stride: int) -> cst.BaseExpression:
    """One part's output size: `X * Y` for `stride * X * Y`, else `(size) // stride`."""
    stripped = _without_factor(size, stride)
    if stripped is not None:
        return stripped
    if not isinstance(size, (cst.Name, cst.Integer, cst.Attribute)):
        size = size.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return template(f"{{o}} // {stride}", o=size)


def _without_factor(size: cst.BaseExpression, factor: int) -> cst.BaseExpression | None:
    """`size` without a leading literal factor (`3 * heads * dim` → `heads * dim`)."""
    if not isinstance(size, cst.BinaryOperation) or not isinstance(size.operator, cst.Multiply) \
            or size.lpar:
        return None
    if isinstance(size.left, cst.Integer) and size.left.evaluated_value == factor:
        return size.right
    left = _without_factor(size.left, factor)
    return None if left is None else size.with_changes(left=left)


def _one_line(args: list[cst.Arg]) -> list[cst.Arg]:
    """The arguments on one line (a new call nested in another reads badly with the line
    breaks of the call it came from)."""
    out = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
                          whitespace_after_arg=cst.SimpleWhitespace(""))
           for a in args]
    if out:
        out[-1] = out[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return out


def _value(args: Sequence[cst.Arg], name: str) -> cst.BaseExpression | None:
    arg = next((a for a in args if a.keyword is not None and a.keyword.value == name), None)
    return None if arg is None else arg.value


def _unsupported(args: Sequence[cst.Arg], spec: _Spec) -> str | None:
    if has_star_args(args):
        return "unpacked arguments; rewrite the layer by hand"
    if positional(args, len(spec.positional)) is not None:
        return "arguments by position beyond the sizes; pass them by keyword or rewrite by hand"
    known = {*spec.positional, *spec.passed, *spec.style, *spec.dropped, "init_method"}
    for arg in args:
        if arg.keyword is None:
            continue
        name = arg.keyword.value
        if name in known or (name in _DEFAULT_FALSE and bool_value(arg.value) is False):
            continue
        if name == "stride" and (code(arg.value) == "1" or _strided(args) is not None):
            continue
        if name in ("reduce_output", "collect_output") and bool_value(arg.value) is True:
            continue
        reason = _WHY_NOT.get(name, "an argument with no parallel-style counterpart")
        return f"`{name}=`: {reason}"
    return None


_NATIVE_NAMES = {"input_size": "in_features", "output_size": "out_features"}


def _native_args(args: Sequence[cst.Arg], spec: _Spec) -> list[cst.Arg]:
    """The NxD arguments the torch.nn layer takes, as they were written, NxD's keyword names
    for the linear sizes renamed."""
    kept = [a for a in args if a.keyword is None or a.keyword.value in
            {*spec.positional, *spec.passed}]
    native = [a.with_changes(keyword=cst.Name(_NATIVE_NAMES[a.keyword.value]))
              if a.keyword is not None and a.keyword.value in _NATIVE_NAMES else a
              for a in keep_args(args, kept)]
    return _padding(native) if "padding_idx" in spec.positional else native


def _padding(args: list[cst.Arg]) -> list[cst.Arg]:
    """NxD's ParallelEmbedding ignored a padding_idx of 0 (`if padding_idx`), so row 0 was
    trained and initialised like any other; torch.nn.Embedding would zero it and freeze its
    gradient. A literal 0 goes (None where positional), a computed one becomes `(p) or None`."""
    arg = next((a for a in args if a.keyword is not None and a.keyword.value == "padding_idx"),
               None) or positional(args, 2)
    if arg is None or code(arg.value) == "None" or (
            isinstance(arg.value, cst.Integer) and arg.value.evaluated_value != 0):
        return args
    if isinstance(arg.value, cst.Integer):
        if arg.keyword is not None:
            return keep_args(args, [a for a in args if a is not arg])
        value: cst.BaseExpression = cst.Name("None")
    else:
        value = template("{p} or None", p=arg.value)
    return [a.with_changes(value=value) if a is arg else a for a in args]


def _flag(args: Sequence[cst.Arg], name: str, default: bool) -> cst.BaseExpression | bool:
    """A boolean keyword argument: its literal value, or the expression that decides it."""
    value = _value(args, name)
    if value is None:
        return default
    literal = bool_value(value)
    return value if literal is None else literal


def _layout(flag: cst.BaseExpression | bool, yes: str, no: str, default: str,
            **values: cst.BaseExpression) -> cst.BaseExpression | None:
    """The placement `yes` where the flag holds and `no` where not; a conditional where the
    flag is not a literal; None where the choice is the style's `default`."""
    if isinstance(flag, bool):
        chosen = yes if flag else no
        return None if chosen == default else template(chosen, **values)
    return template(f"{yes} if {{flag}} else {no}", flag=flag, **values)


_REPLICATE, _LAST = "{p}.Replicate()", "{p}.Shard(-1)"
_SEQUENCE = "{p}.Shard({seq})"


def _style(layer: str, args: Sequence[cst.Arg], site: Site) -> cst.BaseExpression:
    tp, placements = site.ref(TP), site.ref(PLACEMENTS)
    assert tp is not None and placements is not None  # checked by the caller
    refs = {"p": placements, "seq": _value(args, "sequence_dimension") or cst.Integer("0")}
    sequence = _flag(args, "sequence_parallel_enabled", False)
    if layer == "ColumnParallelLinear":
        return _call(tp, "ColwiseParallel",
                     input_layouts=_layout(sequence, _SEQUENCE, _REPLICATE, _REPLICATE, **refs),
                     output_layouts=_layout(_flag(args, "gather_output", True), _REPLICATE,
                                            _LAST, _LAST, **refs))
    if layer == "RowParallelLinear":
        return _call(tp, "RowwiseParallel",
                     input_layouts=_layout(_flag(args, "input_is_parallel", False), _LAST,
                                           _REPLICATE, _LAST, **refs),
                     output_layouts=_layout(sequence, _SEQUENCE, _REPLICATE, _REPLICATE,
                                            **refs))
    columns = _call(tp, "ColwiseParallel", output_layouts=template(_REPLICATE, **refs))
    rows = _call(tp, "RowwiseParallel", input_layouts=template(_REPLICATE, **refs))
    across = _flag(args, "shard_across_embedding", False)
    if isinstance(across, bool):
        return columns if across else rows
    return template("{c} if {flag} else {r}", c=columns, r=rows, flag=across)


def _call(tp: cst.BaseExpression, style: str, **layouts: cst.BaseExpression | None) -> cst.Call:
    return cst.Call(cst.Attribute(value=tp, attr=cst.Name(style)), _keywords(**layouts))


def _keywords(**values: cst.BaseExpression | None) -> list[cst.Arg]:
    return [keyword_arg(name, value) for name, value in values.items() if value is not None]


RULES = (TensorParallelLayers,)
