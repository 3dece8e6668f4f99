"""FSDP2 (``fully_shard``) on the emulated device.

fully_shard moves a module's parameters and buffers to the device with
``tensor.data = tensor.to(device)``. The real device allows that; a CPU tensor and an emulated
``NeuronTensor`` (a Python subclass) refuse it ("incompatible tensor type"). ``Module.to``
swaps the tensors instead (the emulator turns on swap_module_params_on_conversion), and so
does this patch before FSDP2's own move. It is applied when FSDP2 is imported: importing it
up front would cost every smoke run seconds.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import torch

from . import NAME
from .tensor import NeuronTensor

_TARGET = "torch.distributed.fsdp._fully_shard._fsdp_init"


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the real loader of FSDP2's init module to patch it."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if name != _TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            load(module)
            _patch(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Patch FSDP2 now if it is imported already, else when it is."""
    if _TARGET in sys.modules:
        _patch(sys.modules[_TARGET])
    elif not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())


def _patch(module: ModuleType) -> None:
    move: Callable[..., None] = module._move_states_to_device

    def move_states_to_device(params: list[torch.nn.Parameter], buffers: list[torch.Tensor],
                              device: torch.device) -> None:
        if device.type == NAME:
            for tensor in (*params, *buffers):
                _swap_to_device(tensor, device)
        move(params, buffers, device)

    module._move_states_to_device = move_states_to_device


def _swap_to_device(tensor: torch.Tensor, device: torch.device) -> None:
    """Give `tensor` (a CPU tensor or parameter) the device's payload in place, as Module.to
    does with swap_tensors; DTensors, meta tensors and tensors already there are left to
    FSDP2."""
    if isinstance(tensor, NeuronTensor) or tensor.device.type != "cpu" or \
            type(tensor) not in (torch.Tensor, torch.nn.Parameter):
        return
    with torch.no_grad():
        moved = tensor.to(device)
        if isinstance(tensor, torch.nn.Parameter):
            moved = torch.nn.Parameter(moved, requires_grad=tensor.requires_grad)
    torch.utils.swap_tensors(tensor, moved)
