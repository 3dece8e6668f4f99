"""``neuron:N``-tagged checkpoints, the file layout a real device writes.

``torch.save`` of emulated tensors writes storages tagged ``neuron:N``; ``torch.load`` brings
them back onto the emulated device (or onto the CPU with ``map_location="cpu"``, also in a
process without the emulator). Plain ``torch.load(map_location="neuron")`` would otherwise
segfault: ``torch.UntypedStorage(device="neuron")`` has no allocator.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree

from . import NAME, ordinals

SAVING: dict[int, int] = {}  # CPU storage data_ptr -> neuron index, during torch.save
_LOADED: dict[int, int] = {}  # CPU storage data_ptr -> neuron index, during torch.load


def _tag(storage: Any) -> str | None:
    if storage.device.type == "cpu" and storage.nbytes() > 0 and storage.data_ptr() in SAVING:
        return f"{NAME}:{SAVING[storage.data_ptr()]}"
    return None


def _restore(storage: Any, location: str) -> Any:
    if not location.startswith(NAME):
        return None
    if storage.device.type != "cpu":
        storage = storage.cpu()
    _LOADED[storage.data_ptr()] = ordinals.logical_index(torch.device(location))
    return storage


def _to_device(t: Any) -> Any:
    if type(t) in (torch.Tensor, torch.nn.Parameter) and t.device.type == "cpu" and t.numel():
        index = _LOADED.get(t.untyped_storage().data_ptr())
        if index is not None:
            moved = t.to(torch.device(NAME, index))
            if isinstance(t, torch.nn.Parameter):
                return torch.nn.Parameter(moved, t.requires_grad)
            return moved
    return t


def patch() -> None:
    torch.serialization.register_package(5, _tag, _restore)
    original_save, original_load = torch.save, torch.load

    def save(*args: Any, **kwargs: Any) -> Any:
        try:
            return original_save(*args, **kwargs)
        finally:
            SAVING.clear()

    def load(*args: Any, **kwargs: Any) -> Any:
        try:
            out = original_load(*args, **kwargs)
            return pytree.tree_map(_to_device, out) if _LOADED else out
        finally:
            _LOADED.clear()

    save.__wrapped__, load.__wrapped__ = original_save, original_load  # type: ignore[attr-defined]
    torch.save, torch.load = save, load
