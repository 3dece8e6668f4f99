"""Graphs per compiled function: TorchNeuron compiles static shapes only, so every new input
shape compiles another graph (minutes each with neuronx-cc). Each function compiled with
``backend="neuron"`` is tracked here: the graphs its calls compiled, the distinct input shapes
it was called with, and its recompiles (graphs compiled after its first call). With
``NEURON_EMU_MAX_RECOMPILES`` set, a call that takes a function past that many recompiles
raises :class:`TooManyRecompiles`, which ends the smoke run as a failure.

The tracking wrapper stays out of Dynamo's way: it carries the compiled function's
``_torchdynamo_inline``, so a trace that meets it (a compiled module inside a compiled
model) inlines the user's function as it would without the emulator.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_leaves

from .counters import COUNTERS


class TooManyRecompiles(RuntimeError):
    """A compiled function recompiled more often than --max-recompiles allows."""


@dataclass
class CompiledStats:
    function: str
    graphs: int = 0
    calls: int = 0
    recompiles: int = 0
    shapes: set[tuple[Any, ...]] = field(default_factory=set)

    def as_dict(self) -> dict[str, Any]:
        return {"function": self.function, "graphs": self.graphs, "shapes": len(self.shapes),
                "recompiles": self.recompiles, "calls": self.calls}


_current: list[CompiledStats] = []  # the compiled functions being called, innermost last


def note_graph() -> None:
    """The backend compiled a graph: count it for the function being called, if known."""
    COUNTERS.graphs_compiled += 1
    if _current:
        _current[-1].graphs += 1


def _signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    return tuple((tuple(x.shape), x.dtype) for x in tree_leaves((args, kwargs))
                 if isinstance(x, torch.Tensor))


def _limit() -> int | None:
    value = os.environ.get("NEURON_EMU_MAX_RECOMPILES", "")
    return int(value) if value.strip() else None


def label(model: Any) -> str:
    """How the report names a compiled callable: ``Net.forward`` for a module (or its
    ``_call_impl``, which ``Module.compile`` compiles), else the function's qualified name."""
    module = getattr(model, "__self__", None) if not isinstance(model, torch.nn.Module) else model
    if isinstance(module, torch.nn.Module):
        return f"{type(module).__name__}.forward"
    return getattr(model, "__qualname__", None) or type(model).__name__


def track(compiled: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``compiled`` (what torch.compile returned for a function), counting its calls."""
    stats = CompiledStats(name)
    COUNTERS.compiled[id(stats)] = stats
    limit = _limit()

    @functools.wraps(compiled)
    def call(*args: Any, **kwargs: Any) -> Any:
        stats.shapes.add(_signature(args, kwargs))
        before = stats.graphs
        _current.append(stats)
        try:
            result = compiled(*args, **kwargs)
        finally:
            _current.pop()
            stats.calls += 1
            if stats.calls > 1:
                stats.recompiles += stats.graphs - before
        if limit is not None and stats.recompiles > limit and stats.graphs > before:
            raise TooManyRecompiles(_too_many(stats, limit))
        return result

    # functools.wraps copied the Dynamo wrapper's attributes, _torchdynamo_inline among them;
    # make torch._dynamo's innermost_fn see through this wrapper as through its own
    call._torchdynamo_orig_callable = compiled  # type: ignore[attr-defined]
    call._torchdynamo_wrapper_id = id(call)  # type: ignore[attr-defined]
    return call


def _too_many(stats: CompiledStats, limit: int) -> str:
    return (f"{stats.function} recompiled {stats.recompiles} times, more than "
            f"--max-recompiles {limit} allows: {stats.graphs} graphs for {len(stats.shapes)} "
            f"input shapes so far; TorchNeuron compiles a graph per input shape "
            f"(static shapes): pad or bucket the inputs")


def track_module(optimized: torch.nn.Module, name: str) -> torch.nn.Module:
    """``torch.compile(module)`` returns an OptimizedModule whose ``forward`` is the compiled
    call: track that."""
    forward = optimized.__dict__.get("forward")
    if callable(forward):
        optimized.forward = track(forward, name)  # type: ignore[method-assign]
    return optimized
