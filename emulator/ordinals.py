"""Which emulated NeuronCore is current, and how many there are.

Every emulated tensor is *physically* ``neuron:0`` for PyTorch's C++ side (its Python device
guard reports exactly one device, and the autograd engine keeps one ready queue per device);
the logical index lives in Python. The current index is process-wide, not thread-local,
because the autograd engine runs backward on its own thread.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from . import NAME

_current = [0]


def device_count() -> int:
    """``NEURON_EMU_DEVICE_COUNT``, else max(2, LOCAL_WORLD_SIZE): one core per local worker."""
    configured = os.environ.get("NEURON_EMU_DEVICE_COUNT")
    if configured:
        return int(configured)
    return max(2, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


def current_index() -> int:
    return _current[0]


def set_current(index: int) -> None:
    _current[0] = check_index(index)


def check_index(index: int) -> int:
    count = device_count()
    if index < 0 or index >= count:
        raise RuntimeError(
            f"invalid device ordinal {NAME}:{index} (device_count()={count}; the emulator "
            f"reads NEURON_EMU_DEVICE_COUNT to emulate more NeuronCores)")
    return index


def index_of(device: Any) -> int:
    """The index a user-supplied device (int, str, torch.device or None) names."""
    if device is None:
        return current_index()
    if isinstance(device, int):
        return check_index(device)
    device = torch.device(device)
    return current_index() if device.index is None else check_index(device.index)


def logical_index(device: torch.device | None) -> int:
    """A ``neuron:0`` coming from C++ (``tensor.options()``) means "the current device"."""
    if device is None or device.index in (None, 0):
        return current_index()
    return check_index(device.index)
