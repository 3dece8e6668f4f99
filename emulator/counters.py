"""What the emulated run did: the aten op inventory, optimizer steps, graphs compiled.

The op inventory is the list a user compares with AWS's operator support table; the emulator
itself cannot say which of these ops Trainium supports (every op runs on the CPU here).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Counters:
    # keyed by the OpOverload object: hashing it is cheaper than formatting a name per call
    executed: Counter[Any] = field(default_factory=Counter)
    optimizer_steps: int = 0
    graphs_compiled: int = 0
    # data parallelism (emulator/parallelism.py): elements in the largest cross-rank reduction
    # since the last optimizer step per group of ranks (None: a group not resolved), and
    # whether a process group was ever seen
    reductions: dict[frozenset[int] | None, int] = field(default_factory=dict)
    process_group_seen: bool = False
    # the loss of each optimizer step (emulator/losses.py): the sum of the scalars backward()
    # was called on since the previous step (None: no such call), and the sum so far
    losses: list[float | None] = field(default_factory=list)
    pending_loss: float | None = None
    # TorchNeuron's limits (emulator/limits.py): float64 tensors made on the device, and the
    # stack where the first one was made
    float64_tensors: int = 0
    float64_first: list[dict[str, Any]] | None = None
    # per compiled function (emulator/recompiles.py), in the order they were compiled
    compiled: dict[int, Any] = field(default_factory=dict)

    def ops(self) -> dict[str, int]:
        """Executions per op packet (``aten::addmm``), overloads folded together."""
        by_name: Counter[str] = Counter()
        for op, count in self.executed.items():
            schema = getattr(op, "_schema", None)
            by_name[schema.name if schema is not None else str(op)] += count
        return dict(sorted(by_name.items()))

    def snapshot(self) -> dict[str, Any]:
        return {"optimizer_steps": self.optimizer_steps,
                "graphs_compiled": self.graphs_compiled,
                "ops": self.ops(),
                "float64_tensors": self.float64_tensors,
                "float64_first": self.float64_first,
                "compiled": [stats.as_dict() for stats in self.compiled.values()],
                "losses": list(self.losses)}


COUNTERS = Counters()
