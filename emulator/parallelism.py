"""Did data parallelism survive the migration? Checked at every optimizer step of a worker.

With ``WORLD_SIZE`` > 1, a rank that steps its optimizer must have averaged its gradients with
the other ranks since its previous step (or, for the first step, since the start): through
DistributedDataParallel's bucket all-reduce (run by its C++ reducer in backward hooks, which
reaches the device as ``c10d::allreduce_``), FSDP's or ZeRO's reduce-scatter, or a hand-written
``all_reduce`` of each gradient. Replicas that never exchange gradients may still agree (when
every rank reads the same data), so this does not rely on comparing parameters.

What counts as the gradients' reduction: an all-reduce or reduce-scatter on the device since
the previous step, at least as large as the largest gradient the optimizer holds. A one-element
``all_reduce`` of the loss for logging is not one. Reductions inside the step count too
(optimizers that reduce-scatter their gradients in ``step()``). Only gradients on the emulated
device are checked: collectives on CPU tensors never reach the emulator.

Legitimate cases that pass: gradient accumulation (several backward passes, one reduction,
one step), evaluation that never steps, a single process, a step with no gradients (a no-op),
and wrapper optimizers (ZeroRedundancyOptimizer steps an inner optimizer: only the outermost
step is checked).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import torch

from . import NAME
from .counters import COUNTERS

# c10d and functional-collective ops that reduce over ranks, by namespace and name
_NAMESPACES = ("c10d", "_c10d_functional", "c10d_functional", "_c10d_functional_autograd")
_REDUCING = ("allreduce", "all_reduce", "reduce_scatter")
_is_reduction_cache: dict[Any, bool] = {}


class DataParallelismLost(RuntimeError):
    """A data-parallel rank stepped its optimizer without averaging its gradients."""

    def __init__(self, message: str, step: int, key: str) -> None:
        super().__init__(message)
        self.step = step
        self.key = key


def _is_reduction(func: Any) -> bool:
    schema = getattr(func, "_schema", None)
    namespace, _, name = (schema.name if schema is not None else "").partition("::")
    return namespace in _NAMESPACES and any(word in name for word in _REDUCING)


def note_op(func: Any, args: tuple) -> None:
    """Called for every op on the device: remember the size of each cross-rank reduction."""
    reducing = _is_reduction_cache.get(func)
    if reducing is None:
        reducing = _is_reduction_cache[func] = _is_reduction(func)
    if reducing:
        COUNTERS.process_group_seen = True
        COUNTERS.largest_reduction = max(COUNTERS.largest_reduction, _elements(args))


def _elements(args: Any) -> int:
    """Elements of every tensor in an op's arguments (lists and lists of lists included)."""
    if isinstance(args, torch.Tensor):
        return args.numel()
    if type(args) in (list, tuple):
        return sum(_elements(a) for a in args)
    return 0


_STEP_WRAPPER = (os.path.join("torch", "optim", "optimizer.py"), "wrapper")


def nested_step() -> bool:
    """Whether this optimizer step runs inside another one's (ZeroRedundancyOptimizer and other
    wrappers step an inner optimizer): the step hooks fire for both. Read from the stack, so an
    exception that escaped an earlier step leaves nothing stale behind."""
    frame, wrappers = sys._getframe(1), 0
    while frame is not None:
        code = frame.f_code
        if code.co_name == _STEP_WRAPPER[1] and code.co_filename.endswith(_STEP_WRAPPER[0]):
            wrappers += 1
            if wrappers > 1:
                return True
        frame = frame.f_back
    return False


@dataclass
class ParallelismCheck:
    """Checks each outermost optimizer step of one rank; raises when ``strict`` (the smoke run's
    --check-replicas), else keeps the first problem for the report as a warning."""

    rank: int
    world_size: int
    strict: bool
    first_problem: dict[str, Any] | None = None
    steps_without_averaging: int = 0

    @classmethod
    def from_environment(cls) -> "ParallelismCheck | None":
        world = int(os.environ.get("WORLD_SIZE", "1") or 1)
        if world < 2:
            return None
        return cls(int(os.environ.get("RANK", "0") or 0), world,
                   strict=bool(os.environ.get("NEURON_EMU_CHECK_PORT")))

    def __call__(self, optimizer: torch.optim.Optimizer, step: int) -> dict[str, Any] | None:
        """The problem with this step, if any (raised when strict)."""
        grads = [p.grad for group in optimizer.param_groups for p in group["params"]
                 if isinstance(p, torch.Tensor) and p.grad is not None]
        if not grads:
            return None  # a step without gradients changes nothing: nothing to average
        reduced, COUNTERS.largest_reduction = COUNTERS.largest_reduction, 0
        problem = self._problem(grads, reduced, step)
        if problem is None:
            return None
        self.steps_without_averaging += 1
        if self.first_problem is None:  # kept when strict too: a script may swallow the error
            self.first_problem = problem
        if self.strict:
            raise DataParallelismLost(problem["message"], step, problem["key"])
        return problem

    def _problem(self, grads: list[torch.Tensor], reduced: int, step: int) -> dict[str, Any] | None:
        import torch.distributed as dist

        where = f"optimizer step {step} on rank {self.rank} (WORLD_SIZE={self.world_size})"
        if not (dist.is_available() and dist.is_initialized()):
            return {"key": "no-process-group-world", "step": step, "message": (
                f"data parallelism lost: {where} ran without a process group, so every process "
                f"trains alone on its own data. Call torch.distributed.init_process_group"
                f"(\"neuron\") at the start of each worker (xmp.spawn and PJRT set this up) and "
                f"average the gradients (DistributedDataParallel)")}
        COUNTERS.process_group_seen = True
        on_device = [g.numel() for g in grads if g.device.type == NAME]
        if not on_device or reduced >= max(on_device):
            return None
        since = "since the previous step" if step > 1 else "before it"
        seen = (f"the largest all_reduce or reduce_scatter {since} had {reduced} element"
                f"{'s' if reduced > 1 else ''}, a logged loss or metric perhaps, while its "
                f"largest gradient has {max(on_device)}" if reduced
                else f"no all_reduce or reduce_scatter on the device {since}")
        return {"key": "no-gradient-collective", "step": step, "message": (
            f"data parallelism lost: {where} stepped without averaging its gradients ({seen}), "
            f"so every process trains alone on its own data. xm.optimizer_step all-reduced "
            f"them; wrap the model in DistributedDataParallel or all-reduce each gradient "
            f"before optimizer.step()")}
