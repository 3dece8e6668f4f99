"""What each argument of XLA's FSDP and ZeRO-1 constructors becomes natively.

Three outcomes per argument: kept (mapped to its FSDP2 / helper keyword), dropped with a note
(XLA compiler and collective tuning, which changes how fast, not what is computed), or the
whole site is reported (it changes what is computed and has no native keyword). A value the
rule cannot read (a variable where only `None` or `False` maps) is reported too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from neuron_migrate.ruleapi import Kind, Review, Site, bool_value, code, keyword_arg

Keywords = tuple[tuple[str, cst.BaseExpression], ...]


@dataclass(frozen=True)
class Bound:
    """A call's arguments by parameter name; positional ones are named up to `names`."""

    values: dict[str, cst.BaseExpression]
    unnamed: int  # positional arguments past the named ones

    @classmethod
    def of(cls, args: Sequence[cst.Arg], names: tuple[str, ...]) -> "Bound":
        plain = [a for a in args if a.keyword is None and not a.star]
        values = {a.keyword.value: a.value for a in args if a.keyword is not None}
        for name, arg in zip(names, plain):
            values.setdefault(name, arg.value)
        return cls(values, max(0, len(plain) - len(names)))

    def options(self, skip: tuple[str, ...]) -> dict[str, cst.BaseExpression]:
        return {k: v for k, v in self.values.items() if k not in skip}


@dataclass(frozen=True)
class Options:
    """The keywords the native call gets, the note for the message, and the site's kind."""

    keywords: Keywords
    note: str = ""
    kind: Kind | None = None


def _none(value: cst.BaseExpression | None) -> bool:
    return value is None or (isinstance(value, cst.Name) and value.value == "None")


def _float32(value: cst.BaseExpression, site: Site) -> bool:
    return site.qualname_of(value) in ("torch.float32", "torch.float")


def _dropped(names: list[str], why: str) -> str:
    return f"; drop {', '.join(names)} ({why})" if names else ""


_POSITIONAL = ("options passed by position: pass them by keyword (their order changed between "
               "torch_xla releases)")

# ------------------------------------------------------------------ XlaFullyShardedDataParallel
_FSDP_TUNING = frozenset({
    "flatten_parameters", "execute_sharding_on_init", "optimization_barrier_in_forward",
    "optimization_barrier_in_backward", "mark_step_on_finalization", "disable_reshard_on_root",
    "shard_param_on_dim_0", "pin_layout_in_collective_ops", "_shard_size_multiple",
    "_use_xla_patched_linear", "fp32_reduce_scatter"})
_MESH = ("shard over those ranks with fully_shard(module, mesh=...) on a DeviceMesh "
         "(torch.distributed.device_mesh.init_device_mesh)")
_AUTO_WRAP = ("FSDP2 has no auto-wrapping: call fully_shard on each submodule the policy "
              "picked (inner ones first), then on the whole model")
_FSDP_REVIEWED = {
    "sharding_groups": _MESH, "sharding_rank": _MESH, "sharding_world_size": _MESH,
    "auto_wrap_policy": _AUTO_WRAP, "auto_wrapper_callable": _AUTO_WRAP,
    "param_init_fn": "FSDP2 does not materialize meta-device modules: after fully_shard, call "
                     "module.to_empty(device=...) and initialize the parameters by hand",
}
_FSDP_KNOWN = _FSDP_TUNING | set(_FSDP_REVIEWED) | {"module", "reshard_after_forward",
                                                    "compute_dtype", "buffer_dtype"}


def fsdp_options(bound: Bound, site: Site) -> Options | Review:
    """fully_shard's keywords for `XlaFullyShardedDataParallel(module, **options)`."""
    if bound.unnamed:
        return Review(_POSITIONAL)
    options = bound.options(("module",))
    for name, value in options.items():
        if name in _FSDP_REVIEWED and not _none(value):
            return Review(f"`{name}`: {_FSDP_REVIEWED[name]}")
        if name not in _FSDP_KNOWN and not name.startswith("_debug"):
            return Review(f"`{name}` is not an option this rule knows; call "
                          "torch.distributed.fsdp.fully_shard by hand")
    precision = _mixed_precision(options, site)
    if isinstance(precision, Review):
        return precision
    keywords = (*_reshard(options), *precision.keywords)
    used = {"reshard_after_forward", "compute_dtype", "buffer_dtype"}
    if precision.keywords:
        used.add("fp32_reduce_scatter")
    if bool_value(options.get("disable_reshard_on_root", cst.Name("True"))) is False:
        used.add("disable_reshard_on_root")
    tuning = [n for n in options if n not in used and n not in _FSDP_REVIEWED]
    note = _dropped(tuning, "XLA compiler and collective tuning; FSDP2 needs none")
    return Options(keywords, note + precision.note, precision.kind)


def _reshard(options: dict[str, cst.BaseExpression]) -> Keywords:
    """XLA resharded after forward by default, except the root (disable_reshard_on_root),
    which is FSDP2's default too; an explicit choice is passed on."""
    after = options.get("reshard_after_forward")
    if after is not None and bool_value(after) is not True:
        return (("reshard_after_forward", after),)
    if bool_value(options.get("disable_reshard_on_root", cst.Name("True"))) is False:
        return (("reshard_after_forward", cst.Name("True")),)
    return ()


def _mixed_precision(options: dict[str, cst.BaseExpression], site: Site) -> Options | Review:
    """compute_dtype as FSDP2's MixedPrecisionPolicy. XLA also cast the buffers (to
    buffer_dtype, by default compute_dtype); FSDP2 never does."""
    compute, buffer = options.get("compute_dtype"), options.get("buffer_dtype")
    if not _none(buffer) and not _float32(buffer, site):
        return Review(f"buffer_dtype={code(buffer)}: FSDP2 does not cast buffers; cast them "
                      "with module.to(...) by hand")
    if _none(compute) or _float32(compute, site):
        return Options(())
    policy_type = site.ref("torch.distributed.fsdp.MixedPrecisionPolicy")
    if policy_type is None:
        return Review("`torch` means something else here; pass mp_policy=torch.distributed."
                      "fsdp.MixedPrecisionPolicy(param_dtype=...) by hand")
    args = [keyword_arg("param_dtype", compute)]
    fp32 = options.get("fp32_reduce_scatter")
    if fp32 is not None and bool_value(fp32) is None:
        return Review("fp32_reduce_scatter is not a literal: pass mp_policy=MixedPrecisionPolicy("
                      "param_dtype=..., reduce_dtype=torch.float32) where it is True")
    if fp32 is not None and bool_value(fp32):
        args.append(keyword_arg("reduce_dtype", cst.Attribute(cst.Name("torch"),
                                                               cst.Name("float32"))))
    keywords = (("mp_policy", cst.Call(policy_type, args)),)
    if not _none(buffer):
        return Options(keywords)
    return Options(keywords, "; XLA also cast the buffers to compute_dtype, FSDP2 leaves them "
                   "in their dtype: pass buffer_dtype=torch.float32 to make this safe, or cast "
                   "them by hand", Kind.UNSAFE_FIX)


# ------------------------------------------------------------------ ZeroRedundancyOptimizer
_ZERO_TUNING = frozenset({"pin_layout", "coalesce_cc", "bucket_cap_mb_all_gather",
                          "bucket_cap_mb_reduce_scatter"})
_GROUPS = ("ZeRO-1 over a subset of the processes: pass process_group=dist.new_group(ranks) "
           "to torch.distributed.optim.ZeroRedundancyOptimizer and average the gradients (and "
           "their norm) over that group by hand")
_ZERO_NONE_ONLY = {
    "optimizer_dtype": "XLA kept master shards of the parameters in this dtype; the native "
                       "optimizer steps the parameters in their own dtype: keep float32 "
                       "parameters (autocast for bfloat16 compute) or keep master weights by "
                       "hand",
    "sharding_groups": _GROUPS,
    "grad_norm_groups": _GROUPS,
}
_ZERO_FALSE_ONLY = {
    "lazy_init": "the native ZeroRedundancyOptimizer shards when it is made: make it once the "
                 "model is in place and drop init_zero()",
    "use_grad_acc_hook": "XLA accumulated the gradients in optimizer_dtype through hooks; "
                         "keep float32 parameters or accumulate by hand",
    "save_master_weights": "XLA saved its float32 master shards with the state; the native "
                           "state_dict holds none",
    "higher_cc_precision": "XLA averaged the gradients in optimizer_dtype; cast them to "
                           "float32 before the step by hand",
}
_NXD_GROUPS = {"sharding_groups": ("get_data_parallel_group", "get_data_parallel_replica_groups"),
               "grad_norm_groups": ("get_tensor_model_parallel_group",
                                    "get_tensor_model_parallel_replica_groups")}


def zero_options(bound: Bound, site: Site, nxd: bool) -> Options | Review:
    """The helper's keywords for `ZeroRedundancyOptimizer(params, optimizer_class, ...)`:
    grad_clipping and max_norm, then the base optimizer's own keywords. `nxd`: NxD's optimizer
    in a file proven data parallel only, where its data-parallel groups are all processes."""
    if bound.unnamed:
        return Review(_POSITIONAL)
    keywords: list[tuple[str, cst.BaseExpression]] = []
    dropped: list[str] = []
    for name, value in bound.options(("params", "optimizer_class")).items():
        if name in _ZERO_TUNING:
            dropped.append(name)
        elif name in _ZERO_NONE_ONLY:
            if not (_none(value) or _float32_default(name, value, site)
                    or (nxd and _nxd_group(name, value))):
                return Review(f"`{name}={code(value)}`: {_ZERO_NONE_ONLY[name]}")
            dropped.append(name)
        elif name in _ZERO_FALSE_ONLY:
            if bool_value(value) is not False:
                return Review(f"`{name}={code(value)}`: {_ZERO_FALSE_ONLY[name]}")
            dropped.append(name)
        else:  # grad_clipping, max_norm, and the base optimizer's keywords
            keywords.append((name, value))
    return Options(tuple(keywords), _dropped(dropped, "XLA collective tuning and defaults; "
                                                      "nothing to do natively"))


def _float32_default(name: str, value: cst.BaseExpression, site: Site) -> bool:
    """`optimizer_dtype=torch.float32` is XLA's default: the same as leaving it out."""
    return name == "optimizer_dtype" and _float32(value, site)


def _nxd_group(name: str, value: cst.BaseExpression) -> bool:
    """NxD's own data-parallel (or, for the norm, tensor-parallel) groups, named by their
    parallel_state getter: all processes (or each one alone) when the layout is data
    parallel only."""
    if name not in _NXD_GROUPS or not isinstance(value, cst.Call):
        return False
    func = value.func
    last = func.attr.value if isinstance(func, cst.Attribute) else \
        func.value if isinstance(func, cst.Name) else None
    return last in _NXD_GROUPS[name]
