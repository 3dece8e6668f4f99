"""NM252: NxD's trainer API (`neuronx_distributed_config`, `initialize_parallel_model`,
`initialize_parallel_optimizer`) becomes helpers that do the same with native parallelism.

The three calls hand one settings dict around; a training script passes it on, reads it and
sometimes edits it. The helpers keep the dict (with NxD's defaults) and the call shapes, so
the script around them keeps working, and do natively what NxD did with each setting.
"""

from __future__ import annotations

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Review, Rule, Site, argument,
                                    bool_value, code)
from neuron_migrate.rules.emitted_helpers import defined

D_NXDT = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/announcements/"
          "neuron2.x/announce-eos-nxdt-nxd-core-training.html")

_HELPERS = {"neuronx_distributed_config": "_neuron_parallel_config",
            "initialize_parallel_model": "_neuron_parallel_model",
            "initialize_parallel_optimizer": "_neuron_parallel_optimizer"}
_MODULES = ("neuronx_distributed", "neuronx_distributed.trainer",
            "neuronx_distributed.trainer.trainer")
_SIZES = ("pipeline_parallel_size", "expert_parallel_size", "context_parallel_size")
_NATIVE = {"pipeline": "torch.distributed.pipelining",
           "expert": "expert-parallel MoE layers written with DTensor or all_to_all",
           "context": "torch.distributed.tensor.experimental.context_parallel"}
_NOT_NATIVE = {"lora_config": "apply LoRA with peft on the native model",
               "pipeline_config": "pipeline with torch.distributed.pipelining",
               "pad_model": "pad the attention heads to a multiple of the tensor-parallel size"}


class TrainerApi(Rule):
    id = "NM252"
    name = "nxd-trainer-api"
    kind = Kind.FIX
    summary = ("NxD's `neuronx_distributed_config` / `initialize_parallel_model` / "
               "`initialize_parallel_optimizer` become helpers doing the same natively")
    explanation = """\
What it does: the three calls of NxD's trainer API keep their arguments and become helpers
written in plain PyTorch:
- `neuronx_distributed_config(...)` → `_neuron_parallel_config(...)`: the same settings
  dict, with NxD's defaults (gradient clipping at 1.0, no ZeRO-1), and the ("dp", "tp")
  DeviceMesh once a process group exists (NM240).
- `initialize_parallel_model(config, model_fn, include_buffers, *args)` →
  `_neuron_parallel_model(...)`: the model built by `model_fn` (its NxD layers, migrated by
  NM241, shard themselves over the mesh), moved to the neuron device, with activation
  checkpointing (`apply_activation_checkpointing`) on the layer classes the config names
  ("full": a Hugging Face model's `_no_split_modules`). It returns a thin wrapper with NxD's
  `run_train`, `local_modules()` and `original_module()`; parameters and state dict are the
  model's own.
- `initialize_parallel_optimizer(config, cls, params, **kw)` →
  `_neuron_parallel_optimizer(...)`: `cls(params, **kw)` wrapped so that `step()` sums the
  gradients of parameters marked `sequence_parallel_enabled` over the tensor-parallel ranks
  (with `sequence_parallel=True`), averages the gradients over the mesh's data-parallel
  ranks in buckets and clips them by the whole model's norm (kept in `grad_norm`), as
  NxDOptimizer did; with `zero_one_enabled` and no tensor parallelism, the ZeRO-1 optimizer
  of NM706. With ZeRO-1 the clipping norm is `max_norm` among `kw` (1.0 by default), not
  the config's `max_grad_norm`: NxD never passed that one to its ZeRO-1 optimizer.

Why: NxD's trainer API is XLA-based and ended with its training support. What it did with
each setting has a native counterpart; the helpers keep the call shapes so the rest of the
script (which passes the config on and reads it) keeps working.

With `model_init_config={"meta_device_init": True, "param_init_fn": fn}` the parameters are
created on the meta device (each tensor-parallel layer shards itself there), then allocated
on the neuron device and filled by `fn(module, device)` for every module, as NxD did; the
model is never whole in memory. Buffers stay real unless `include_buffers`.

What differs: pipeline, expert and context parallelism, `pad_model` and LoRA have no native
counterpart here: written as literals they are reported; read
from variables (`tensor_parallel_size=args.tp, context_parallel_size=args.cp`) the helpers
stop the run with what to do when the value is not 1. ZeRO-1 over a model with
tensor-parallel layers (whose parameters are DTensors, at any tensor-parallel size) trains
the same but does not shard the optimizer state (PyTorch's ZeroRedundancyOptimizer cannot
hold DTensor parameters): the helper warns, and FSDP2 on the "dp" dimension is the native way
to shard it. NxD's
mixed-precision settings (`use_master_weights`, `use_fp32_grad_acc`) are kept in the dict but
have no effect: use autocast or FSDP2's MixedPrecisionPolicy."""
    doc_url = D_NXDT
    example = Example(
        before="import neuronx_distributed as nxd\n\n"
               "config = nxd.neuronx_distributed_config(tensor_parallel_size=2)\n"
               "model = nxd.initialize_parallel_model(config, build)\n",
        after="import torch\n\n\n" + defined("_neuron_parallel_config") + "\n\n"
              + defined("_neuron_parallel_model").split("\n\n\n", 2)[-1] + "\n\n"
              "config = _neuron_parallel_config(tensor_parallel_size=2)\n"
              "model = _neuron_parallel_model(config, build)\n",
    )
    calls = frozenset(f"{module}.{name}" for module in _MODULES for name in _HELPERS)
    emits = ("torch.distributed.algorithms._checkpoint.checkpoint_wrapper."
             "apply_activation_checkpointing", "torch.optim.Optimizer")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        name = (site.qualname or "").rsplit(".", 1)[-1]
        if name == "neuronx_distributed_config":
            problem = _config_problem(node)
            if problem is not None:
                return Review(f"`{code(node)}`: {problem}")
        new = node.with_changes(func=site.helper(_HELPERS[name]))
        return Replace(new, f"`{code(node)}` → `{code(new)}`: {_WHAT[name]}")


_WHAT = {
    "neuronx_distributed_config": "the same settings dict, and the (\"dp\", \"tp\") mesh; the "
                                  "helper stops the run if a size read from a variable asks "
                                  "for pipeline, expert or context parallelism",
    "initialize_parallel_model": "the model built, moved to the neuron device and "
                                 "activation-checkpointed as the config says, in a wrapper "
                                 "with NxD's run_train and module accessors",
    "initialize_parallel_optimizer": "the optimizer, whose step averages the gradients over "
                                     "the data-parallel ranks and clips them as NxD's did",
}


def _config_problem(node: cst.Call) -> str | None:
    """Why a `neuronx_distributed_config(...)` call is reported rather than rewritten."""
    if any(a.keyword is None for a in node.args):
        return "settings passed by position; pass them by keyword"
    for size in _SIZES:
        arg = argument(node.args, 99, size)
        if arg is not None and isinstance(arg.value, cst.Integer) and arg.value.value != "1":
            kind = size.split("_")[0]
            return (f"{kind} parallelism has no mechanical native form; build a DeviceMesh with "
                    f"a '{kind[0]}p' dimension and use {_NATIVE[kind]} by hand")
    for option, instead in _NOT_NATIVE.items():
        arg = argument(node.args, 99, option)
        if arg is not None and code(arg.value) not in ("None", "False", "{}") and \
                bool_value(arg.value) is not False:
            return f"`{option}` was NxD's: {instead}"
    return None


RULES = (TrainerApi,)
