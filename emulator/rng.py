"""The emulated device's random number generator: one of its own, with a CUDA-like state.

Random ops on the device draw from a generator kept apart from the CPU's, as on real
hardware (a `torch.randn` on the CPU between two dropout masks does not shift them). Its
state, as `torch.neuron.get_rng_state()` gives it, is CUDA's philox shape, 16 bytes of seed
and offset: DTensor's RNG tracker reads and writes that shape to give each shard of a
sharded random op (`weight.data.normal_()` on a tensor-parallel weight) its own offset.
The emulator's generator is not counter-based, so a state is replayed exactly when it was
read here before (activation checkpointing's save and restore), and otherwise the generator
is seeded from the (seed, offset) pair: deterministic, the same on every rank holding the
same shard, but not the values an unsharded op would have drawn at those positions.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any, Callable

import torch

_SNAPSHOTS = 256  # states kept for an exact replay (each about 5 KB)


class DeviceRng:
    def __init__(self) -> None:
        self.generator = torch.Generator()
        self.seed = self.generator.initial_seed()
        self.offset = 0
        self.snapshots: OrderedDict[tuple[int, int], torch.Tensor] = OrderedDict()

    def manual_seed(self, seed: int) -> None:
        self.generator.manual_seed(int(seed))
        self.seed, self.offset = int(seed), 0
        self.snapshots.clear()

    def get_state(self) -> torch.Tensor:
        key = (self.seed, self.offset)
        self.snapshots[key] = self.generator.get_state()
        self.snapshots.move_to_end(key)
        while len(self.snapshots) > _SNAPSHOTS:
            self.snapshots.popitem(last=False)
        # the seed's bits as int64 (two's complement), as philox's packed uint64 would be
        seed = self.seed - (1 << 64) if self.seed >= (1 << 63) else self.seed
        return torch.tensor([seed, self.offset], dtype=torch.int64).view(torch.uint8)

    def set_state(self, state: torch.Tensor) -> None:
        if state.numel() != 16:  # a whole generator state (the CPU's format)
            self.generator.set_state(state)
            return
        seed, offset = (int(v) for v in state.cpu().view(torch.int64))
        seed &= (1 << 64) - 1
        snapshot = self.snapshots.get((seed, offset))
        if snapshot is not None:
            self.generator.set_state(snapshot)
        else:
            self.generator.manual_seed(hash((seed, offset)) & ((1 << 63) - 1))
        self.seed, self.offset = seed, offset

    def run(self, op: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a random op on CPU payloads, drawing from this generator (from the CPU's
        under `neuron-migrate verify`, which draws the original's device randomness from the
        CPU generator too, so that both sides draw the same numbers)."""
        if _DRAW_FROM_CPU:
            return op(*args, **kwargs)
        cpu = torch.default_generator.get_state()
        torch.default_generator.set_state(self.generator.get_state())
        try:
            return op(*args, **kwargs)
        finally:
            self.generator.set_state(torch.default_generator.get_state())
            torch.default_generator.set_state(cpu)
            self.offset += 4  # philox offsets advance in fours


DEVICE_RNG = DeviceRng()
_DRAW_FROM_CPU = os.environ.get("NEURON_EMU_CPU_RNG") == "1"
_random_ops: dict[Any, bool] = {}


def is_random(func: Any) -> bool:
    found = _random_ops.get(func)
    if found is None:
        found = _random_ops[func] = torch.Tag.nondeterministic_seeded in getattr(func, "tags", ())
    return found
