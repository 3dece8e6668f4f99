"""Did data parallelism survive the migration? Checked at every optimizer step of a worker.

With ``WORLD_SIZE`` > 1, a rank that steps its optimizer must have averaged its gradients with
the other ranks since its previous step (or, for the first step, since the start): through
DistributedDataParallel's bucket all-reduce (run by its C++ reducer in backward hooks, which
reaches the device as ``c10d::allreduce_``), FSDP's or ZeRO's reduce-scatter, or a hand-written
``all_reduce`` of each gradient. Replicas that never exchange gradients may still agree (when
every rank reads the same data), so this does not rely on comparing parameters.

What counts as the gradients' reduction: an all-reduce or reduce-scatter on the device since
the previous step, at least as large as the largest gradient the optimizer holds (its local
shard, for a DTensor). A one-element ``all_reduce`` of the loss for logging is not one.

With a DeviceMesh (emulator/layout.py), only the mesh's data-parallel dimensions average
gradients: the reduction must run over a group holding every rank of this rank's
data-parallel group (the ranks sharing its model-parallel coordinates); tensor parallelism's
own all-reduces, over the tensor-parallel group, are not one. A rank without data-parallel
peers (tensor parallelism alone, dp size 1) has nothing to average and is not checked. Reductions inside the step count too
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
from .layout import Layout, current_layout

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
        group = _group_of(func, args)
        COUNTERS.reductions[group] = max(COUNTERS.reductions.get(group, 0), _elements(args))


def _group_of(func: Any, args: tuple) -> frozenset[int] | None:
    """The ranks a collective reduces over, from its process group argument: a ProcessGroup
    object (c10d ops), a group name (functional collectives, its last string) or a list of
    ranks (the legacy functional ones); None when it cannot be told."""
    import torch.distributed as dist

    namespace = func._schema.name.partition("::")[0]
    try:
        if namespace == "c10d":
            box = next(a for a in args if isinstance(a, torch.ScriptObject))
            return frozenset(dist.get_process_group_ranks(dist.ProcessGroup.unbox(box)))
        if namespace == "c10d_functional":
            return frozenset(next(a for a in args if type(a) is list and a and type(a[0]) is int))
        from torch.distributed.distributed_c10d import _resolve_process_group

        name = [a for a in args if isinstance(a, str)][-1]
        return frozenset(dist.get_process_group_ranks(_resolve_process_group(name)))
    except Exception:  # noqa: BLE001 - an unknown shape of arguments: any group may be meant
        return None


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
        reductions, COUNTERS.reductions = COUNTERS.reductions, {}
        problem = self._problem(grads, reductions, step)
        if problem is None:
            return None
        self.steps_without_averaging += 1
        if self.first_problem is None:  # kept when strict too: a script may swallow the error
            self.first_problem = problem
        if self.strict:
            raise DataParallelismLost(problem["message"], step, problem["key"])
        return problem

    def _problem(self, grads: list[torch.Tensor], reductions: dict[frozenset[int] | None, int],
                 step: int) -> dict[str, Any] | None:
        import torch.distributed as dist

        where = f"optimizer step {step} on rank {self.rank} (WORLD_SIZE={self.world_size})"
        if not (dist.is_available() and dist.is_initialized()):
            return {"key": "no-process-group-world", "step": step, "message": (
                f"data parallelism lost: {where} ran without a process group, so every process "
                f"trains alone on its own data. Call torch.distributed.init_process_group"
                f"(\"neuron\") at the start of each worker (xmp.spawn and PJRT set this up) and "
                f"average the gradients (DistributedDataParallel)")}
        COUNTERS.process_group_seen = True
        layout = current_layout(self.rank)
        if layout is not None and len(layout.data_group) < 2:
            return None  # no data-parallel peers (model parallelism alone): nothing to average
        on_device = [_local(g).numel() for g in grads if g.device.type == NAME]
        reduced = _reduced_over(reductions, layout)
        if not on_device or reduced >= max(on_device):
            return None
        return {"key": "no-gradient-collective", "step": step,
                "message": _lost_message(where, layout, step, reduced, max(on_device))}


def _local(grad: torch.Tensor) -> torch.Tensor:
    """A DTensor gradient's own shard (what a data-parallel reduction carries), else itself."""
    return getattr(grad, "_local_tensor", grad)


def _reduced_over(reductions: dict[frozenset[int] | None, int], layout: Layout | None) -> int:
    """Elements in the largest reduction that averaged over this rank's data-parallel group:
    without a mesh, any reduction (every rank is a replica); with one, a reduction over a group
    holding the whole data-parallel group, or over a group that could not be told."""
    if layout is None:
        return max(reductions.values(), default=0)
    wanted = frozenset(layout.data_group)
    return max((size for group, size in reductions.items() if group is None or group >= wanted),
               default=0)


def _lost_message(where: str, layout: Layout | None, step: int, reduced: int,
                  largest: int) -> str:
    since = "since the previous step" if step > 1 else "before it"
    over = "" if layout is None else (
        f" over its data-parallel group (ranks {', '.join(map(str, layout.data_group))} of "
        f"mesh {layout.describe()})")
    seen = (f"the largest all_reduce or reduce_scatter{over} {since} had {reduced} element"
            f"{'s' if reduced > 1 else ''}, a logged loss or metric perhaps, while its largest "
            f"gradient has {largest}" if reduced
            else f"no all_reduce or reduce_scatter{over or ' on the device'} {since}")
    return (f"data parallelism lost: {where} stepped without averaging its gradients ({seen}), "
            f"so every {'data-parallel replica' if layout else 'process'} trains alone on its "
            f"own data. xm.optimizer_step all-reduced them; wrap the model in "
            f"DistributedDataParallel (over the data-parallel mesh dimension, with a mesh) or "
            f"all-reduce each gradient before optimizer.step()")
