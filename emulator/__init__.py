"""An emulated TorchNeuron ``neuron`` device that runs on the CPU.

Loaded into the user's process by ``neuron-migrate smoke`` (never imported by migrated code).
It checks that a script *runs on the device API on CPU*: device placement, API names, backend
names, compile rules, distributed wiring and checkpoints. It says nothing about which ops
Trainium supports, its numerics, its compiler or its speed: every op runs on the CPU.

Importing this package does not import torch; :func:`install` does the work.
"""

from __future__ import annotations

from types import ModuleType

NAME = "neuron"


def install(*, quiet: bool = True) -> ModuleType:
    """Make ``neuron`` a usable device backed by the CPU (idempotent); returns ``torch.neuron``."""
    from .setup import install as _install

    return _install(quiet=quiet)
