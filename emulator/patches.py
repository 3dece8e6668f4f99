"""Small patches where PyTorch's python-backend device support stops short.

- ``torch.accelerator.synchronize()`` raises with the Python device guard ("Backend doesn't
  support synchronizing all streams"); the emulated device has nothing to wait for.
- ``DataLoader(pin_memory=True)`` needs a PrivateUse1 host allocator a CPU build lacks;
  pinning is a no-op here.
"""

from __future__ import annotations

from typing import Any

import torch

from . import NAME, device_module
from .tensor import NeuronTensor


def patch_accelerator() -> None:
    original = torch.accelerator.synchronize

    def synchronize(device: Any = None) -> None:
        current = torch.accelerator.current_accelerator()
        if current is not None and current.type == NAME:
            return device_module.synchronize(device)
        return original(device)

    torch.accelerator.synchronize = synchronize


def patch_pin_memory() -> None:
    original = torch.Tensor.pin_memory

    def pin_memory(self: torch.Tensor, device: Any = None) -> torch.Tensor:
        if device is None or torch.device(device).type in (NAME, "cpu"):
            return original(self) if isinstance(self, NeuronTensor) else self
        return original(self, device)

    torch.Tensor.pin_memory = pin_memory  # type: ignore[method-assign]
    torch.Tensor.is_pinned = lambda self, device=None: False  # type: ignore[method-assign]
