"""A stand-in for ``import torch_neuronx``, which native scripts may do to load the backend.

It offers the native helpers and TorchNeuron's op-tracking API (here: every op that ran on
the emulated device), and answers the XLA-era names (``trace``, ``xla_impl``, ...) with an
AttributeError that says they are gone, so a leftover call is diagnosed.
"""

from __future__ import annotations

import types
from typing import Any

from .counters import COUNTERS

_FROM_DEVICE_MODULE = (
    "synchronize", "device_count", "current_device", "set_device", "is_available",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "memory_stats", "memory_summary", "reset_peak_memory_stats", "empty_cache", "Stream",
    "Event", "get_dynamo_metrics", "reset_dynamo_metrics",
)

MISSING_PREFIX = "torch_neuronx."
MISSING_SUFFIX = "is not part of the native TorchNeuron API"


def build(device_module: types.ModuleType) -> types.ModuleType:
    m = types.ModuleType("torch_neuronx")
    m.__doc__ = "neuron-migrate smoke: stand-in for torch_neuronx (native TorchNeuron)"
    m.__version__ = "0.0.0+emulated"
    m.EMULATED = True  # type: ignore[attr-defined]
    for name in _FROM_DEVICE_MODULE:
        setattr(m, name, getattr(device_module, name))
    m.get_executed_ops = COUNTERS.ops  # type: ignore[attr-defined]
    m.get_fallback_ops = lambda: {}  # type: ignore[attr-defined]  # unknowable on a CPU
    m.clear_op_tracking = COUNTERS.executed.clear  # type: ignore[attr-defined]

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"{MISSING_PREFIX}{name} {MISSING_SUFFIX} (emulated; XLA-era torch_neuronx APIs "
            f"such as trace and xla_impl are gone in TorchNeuron)")

    m.__getattr__ = __getattr__  # type: ignore[attr-defined]
    return m
