"""The loss of every optimizer step, recorded without the script printing anything.

`smoke --layout` compares a script's training at several layouts (1 process against 2 data-
parallel ones, tensor parallelism 1 against 2) step by step. What the script optimises is the
scalar it calls ``backward()`` on, so that is what is recorded: ``Tensor.backward`` and
``torch.autograd.backward`` are wrapped, and a call on one tensor of one element adds its value
to the step's loss. The optimizer step hook (emulator/session.py) then closes the step.

Several backward calls before one step (gradient accumulation) are summed: a script that
accumulates N micro-batches divides each loss by N, so the sum is the step's mean loss, the
value one process without accumulation (or N data-parallel ones) computes for the same batch;
a script that does not divide sums its gradients too, and the sum is again what was optimised.
Backward calls after the last step are not a step and are dropped.

Reading the value must not disturb the run: the CPU payload is read directly (no op reaches
the emulated device, so the op inventory is unchanged) and nothing is recorded for a backward
run inside another one (reentrant checkpointing), for a call on several tensors or a
non-scalar, or for a DTensor whose value is a partial sum (reading it would be a collective).
A loss scaled by a GradScaler is recorded scaled.
"""

from __future__ import annotations

from typing import Any

import torch

from .counters import COUNTERS
from .tensor import payload

_inside: list[bool] = []  # a wrapped backward is running (Tensor.backward calls the other)


def watch() -> None:
    """Wrap both entry points of a backward pass; Tensor.backward's call of
    torch.autograd.backward is not recorded twice."""
    tensor_backward = torch.Tensor.backward
    autograd_backward = torch.autograd.backward

    def backward(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        return _recording(tensor_backward, self, self, *args, **kwargs)

    def autograd(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        return _recording(autograd_backward, tensors, tensors, *args, **kwargs)

    for wrapper, original in ((backward, tensor_backward), (autograd, autograd_backward)):
        wrapper.__doc__, wrapper.__wrapped__ = original.__doc__, original  # type: ignore[attr-defined]
    torch.Tensor.backward = backward  # type: ignore[method-assign]
    torch.autograd.backward = autograd


def _recording(original: Any, tensors: Any, *args: Any, **kwargs: Any) -> Any:
    """Run the backward pass; add its loss to the step's once it succeeded."""
    if _inside or torch._C._current_graph_task_id() != -1:
        return original(*args, **kwargs)
    _inside.append(True)
    try:
        result = original(*args, **kwargs)
    finally:
        _inside.pop()
    value = scalar_value(tensors)
    if value is not None:
        COUNTERS.pending_loss = value + (COUNTERS.pending_loss or 0.0)
    return result


def scalar_value(tensors: Any) -> float | None:
    """The value of one one-element tensor (alone or the only item of a sequence), read from
    its CPU payload; None for anything else or a value that cannot be read without an op."""
    if isinstance(tensors, (list, tuple)):
        if len(tensors) != 1:
            return None
        tensors = tensors[0]
    if not isinstance(tensors, torch.Tensor) or tensors.numel() != 1:
        return None
    local = _local_value(tensors)
    if local is None:
        return None
    try:
        return float(payload(local).detach().reshape(()))
    except Exception:  # noqa: BLE001 - a fake or functional tensor under a trace
        return None


def _local_value(tensor: torch.Tensor) -> torch.Tensor | None:
    """A DTensor's local tensor when every rank holds the whole value (not a partial sum)."""
    local = getattr(tensor, "_local_tensor", None)
    if local is None:
        return tensor
    placements = getattr(tensor, "placements", ())
    if any(placement.is_partial() for placement in placements):
        return None
    return local


def close_step() -> None:
    """End an optimizer step: its loss is what backward() was called on since the last one."""
    COUNTERS.losses.append(COUNTERS.pending_loss)
    COUNTERS.pending_loss = None
