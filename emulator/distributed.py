"""The ``neuron`` torch.distributed backend (gloo on the CPU payloads) and the replica check.

Collectives reach ``__torch_dispatch__`` as ``c10d::*`` ops on NeuronTensors, are unwrapped,
and gloo runs them on the CPU payloads; DDP's C++ reducer works unchanged on top. The backend
therefore also accepts plain CPU tensors, which the real one may not.
"""

from __future__ import annotations

import datetime
import os
from typing import Any

import torch

from . import NAME
from .counters import COUNTERS
from .layout import current_layout
from .tensor import payload


def register_backend() -> None:
    import torch.distributed as dist

    if not dist.is_available() or NAME in dist.Backend.backend_list:
        return

    def create(*args: Any) -> Any:
        # called as (store, rank, size, timeout), or with one _DistributedBackendOptions
        if len(args) == 1:
            o = args[0]
            store, rank, size, timeout = o.store, o.group_rank, o.group_size, o.timeout
        else:
            store, rank, size, timeout = args[:4]
        COUNTERS.process_group_seen = True
        return dist.ProcessGroupGloo(store, rank, size, timeout)

    dist.Backend.register_backend(NAME, create, devices=["cpu", NAME])


class ReplicasDiverged(RuntimeError):
    """Data-parallel replicas hold different parameters after an optimizer step."""

    def __init__(self, step: int, checksums: list[float]) -> None:
        self.step = step
        self.checksums = checksums
        super().__init__(
            f"data-parallel replicas diverged after optimizer step {step} (parameter checksum "
            f"per rank: {checksums}), though they started equal. The ranks' updates differ: "
            f"gradients not averaged across ranks (or only some of them), or an optimizer "
            f"setting that depends on the rank. Wrap the model in DistributedDataParallel or "
            f"all-reduce every gradient before optimizer.step() (xm.optimizer_step used to "
            f"do this)")


class ReplicasStartApart(RuntimeError):
    """Data-parallel replicas hold different parameters before their first optimizer step."""

    def __init__(self, rank: int, reference: int, checksums: list[float]) -> None:
        self.step = 0
        self.checksums = checksums
        super().__init__(
            f"replicas start from different parameters: rank {rank}'s parameters differ from "
            f"rank {reference}'s before the first optimizer step (parameter checksum per rank: "
            f"{checksums}); the original has the same behaviour unless it broadcast them "
            f"(xm.broadcast_master_param, or DistributedDataParallel, which broadcasts rank "
            f"0's at wrap) or set the same seed on every rank before building the model")


class ReplicaCheck:
    """Compares a parameter checksum across ranks before each optimizer's first step and after
    every step.

    It uses a gloo group of its own, on a store of its own (``NEURON_EMU_CHECK_PORT``), so it
    works whether or not the script builds a process group, and never interleaves with the
    script's collectives. With a DeviceMesh, a rank is compared only with the ranks that hold
    the same parameters (its replica group, emulator/layout.py: the same coordinates on every
    model-parallel and parameter-sharding dimension). Without one, every rank is taken for a
    replica, which is wrong for FSDP over a mesh-less group.
    """

    def __init__(self, rank: int, world_size: int, address: str, port: int) -> None:
        self.rank, self.world_size = rank, world_size
        self.address, self.port = address, port
        self._group: Any = None
        self._started: set[int] = set()  # the optimizers already compared before their first step

    @classmethod
    def from_environment(cls) -> "ReplicaCheck | None":
        port = os.environ.get("NEURON_EMU_CHECK_PORT")
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if not port or world < 2:
            return None
        return cls(int(os.environ.get("RANK", "0")), world,
                   os.environ.get("MASTER_ADDR", "127.0.0.1"), int(port))

    def _gloo(self) -> Any:
        if self._group is None:
            import torch.distributed as dist

            timeout = datetime.timedelta(seconds=120)
            store = dist.TCPStore(self.address, self.port, self.world_size,
                                  is_master=self.rank == 0, timeout=timeout)
            self._group = dist.ProcessGroupGloo(store, self.rank, self.world_size, timeout)
        return self._group

    def close(self) -> bool:
        """Free the group while the interpreter is whole: its destructor, the only call that
        joins gloo's worker threads, lets them drop their last tensors (which takes the GIL).
        True if there was a group to free. (The group holds its store.)"""
        had = self._group is not None
        self._group = None
        return had

    def before_first_step(self, optimizer: torch.optim.Optimizer) -> None:
        """Replicas must start equal: compared once per optimizer, before its first step, so
        that replicas that never agreed (no seed, nothing broadcast) are reported as that,
        not as gradients left unaveraged after the step."""
        if id(optimizer) in self._started:
            return
        self._started.add(id(optimizer))
        gathered = self._gather(optimizer)
        if (apart := _apart(gathered)) is not None:
            raise ReplicasStartApart(*apart, [float(t[0]) for t in gathered])

    def __call__(self, optimizer: torch.optim.Optimizer, step: int) -> None:
        gathered = self._gather(optimizer)
        if _apart(gathered) is not None:
            raise ReplicasDiverged(step, [float(t[0]) for t in gathered])

    def _gather(self, optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
        """Every rank's parameter fingerprint: (sum, sum of squares, its replica group's
        lowest rank)."""
        layout = current_layout(self.rank)
        with torch.no_grad():  # a DTensor's own shard: its sum would be a collective
            params = [payload(getattr(p, "_local_tensor", p)).double()
                      for g in optimizer.param_groups for p in g["params"]]
            local = torch.tensor([sum(float(p.sum()) for p in params),
                                  sum(float((p * p).sum()) for p in params),
                                  min(layout.replica_group) if layout else 0], dtype=torch.float64)
        gathered = [torch.empty_like(local) for _ in range(self.world_size)]
        self._gloo().allgather([gathered], [local]).wait()
        return gathered


def _apart(gathered: list[torch.Tensor]) -> tuple[int, int] | None:
    """The first rank whose fingerprint differs from its replica group's first rank, with that
    rank: (rank, reference); None when every group agrees."""
    for group in sorted({float(t[2]) for t in gathered}):  # ranks with the same replica group
        same = [(rank, t) for rank, t in enumerate(gathered) if float(t[2]) == group]
        reference, first = same[0]
        for rank, t in same[1:]:
            if not (_close([float(first[0]), float(t[0])]) and _close([float(first[1]), float(t[1])])):
                return rank, reference
    return None


def _close(values: list[float]) -> bool:
    return max(values) - min(values) <= 1e-6 * max(1.0, max(abs(v) for v in values))
