"""NM301-NM302: data loading. XLA's device loaders become the DataLoader plus a device move."""

from __future__ import annotations

import ast

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Review, Rule, Site, argument,
                                    code, has_star_args)
from neuron_migrate.rules.emitted_helpers import HELPERS

D_XLA_PG = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/frameworks/torch/"
            "torch-neuronx/programming-guide/training/pytorch-neuron-programming-guide.html")
PL = "torch_xla.distributed.parallel_loader"
_DROPPED = ("batches_per_execution", "loader_prefetch_size", "device_prefetch_size",
            "host_to_device_transfer_threads", "fixed_batch_size")


def _loader(site: Site, loader: cst.BaseExpression, device: cst.BaseExpression,
            original: cst.Call, dropped: list[str]) -> Outcome:
    new = cst.Call(site.helper("_NeuronDeviceLoader"),
                   [cst.Arg(loader, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                    cst.Arg(device)])
    note = f"; drop {', '.join(dropped)} (XLA prefetch tuning)" if dropped else ""
    return Replace(new, f"`{code(original)}` → `{code(new)}`: the same batches, each moved to "
                   f"the device{note}")


class DeviceLoader(Rule):
    id = "NM301"
    name = "mp-device-loader"
    kind = Kind.FIX
    summary = ("`pl.MpDeviceLoader(loader, device)` and `ParallelLoader(...).per_device_loader()`"
               " become the loader with a per-batch device move")
    explanation = """\
What it does: replaces `pl.MpDeviceLoader(loader, device)` and
`pl.ParallelLoader(loader, [device]).per_device_loader(device)` with a small class defined in
your file that iterates `loader` and moves every batch (tensors inside tuples, lists, dicts and
named tuples too) to `device`. It can be iterated once per epoch, like the loader it wraps,
and has the same length.

Why: MpDeviceLoader copied batches to the XLA device in background threads and cut the graph
after each batch. With eager TorchNeuron there is no graph to cut; moving the batch with
`.to(device, non_blocking=True)` is what remains.

What differs: prefetching options (`batches_per_execution`, `loader_prefetch_size`,
`device_prefetch_size`, `host_to_device_transfer_threads`) are dropped; use the DataLoader's
`num_workers`, `pin_memory` and `prefetch_factor` instead. `input_sharding=` (SPMD) is
reported for review. A ParallelLoader kept in a variable and used later cannot be followed and
is reported."""
    doc_url = D_XLA_PG
    example = Example(
        before="import torch_xla.distributed.parallel_loader as pl\n\n"
               "train_loader = pl.MpDeviceLoader(loader, device)\n",
        after="import torch\n\n\n" + HELPERS["_neuron_to_device"].source + "\n\n"
              + HELPERS["_NeuronDeviceLoader"].source
              + "\n\ntrain_loader = _NeuronDeviceLoader(loader, device)\n",
    )
    calls = frozenset({f"{PL}.MpDeviceLoader", f"{PL}.ParallelLoader"})
    prefixes = (PL,)
    emits = ("torch.Tensor.to",)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if site.qualname == f"{PL}.ParallelLoader":
            return None  # handled with its .per_device_loader(...) by on_any_call
        if has_star_args(node.args):
            return Review(f"`{code(node)}`: unpacked arguments; rewrite by hand")
        if argument(node.args, 2, "input_sharding") is not None:
            return Review(f"`{code(node)}`: input_sharding is SPMD sharding; use DTensor "
                          "(distribute_tensor) on the batches instead")
        loader, device = argument(node.args, 0, "loader"), argument(node.args, 1, "device")
        if loader is None or device is None:
            return Review(f"`{code(node)}`: expected (loader, device)")
        dropped = [a.keyword.value for a in node.args
                   if a.keyword is not None and a.keyword.value in _DROPPED]
        return _loader(site, loader.value, device.value, node, dropped)

    def may_act(self, node: ast.AST, names: frozenset[str]) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "per_device_loader"

    def on_any_call(self, node: cst.Call, site: Site) -> Outcome | None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "per_device_loader"
                and isinstance(func.value, cst.Call)
                and site.qualname_of(func.value.func) == f"{PL}.ParallelLoader"):
            return None
        inner = func.value
        loader = argument(inner.args, 0, "loader")
        device = argument(node.args, 0, "device")
        if loader is None or device is None or has_star_args(inner.args):
            return Review(f"`{code(node)}`: expected ParallelLoader(loader, devices)"
                          ".per_device_loader(device)")
        return _loader(site, loader.value, device.value, node, [])

    def leftover_reference(self, qualname: str) -> str:
        return (f"`{qualname}`: iterate the DataLoader itself and move each batch with "
                "`.to(device)`; a ParallelLoader kept in a variable cannot be followed")


RULES: tuple[type[Rule], ...] = (DeviceLoader,)
