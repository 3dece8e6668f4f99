"""The ``neuron`` torch.compile backend: Dynamo + AOTAutograd capture, graphs run eagerly.

This is the capture pipeline AWS documents (Dynamo, AOTAutograd, then their compiler); the
emulator stops before the compiler, so it proves that capture works and counts the graphs,
and says nothing about whether neuronx-cc would compile them.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import torch

from emulator import NAME
from emulator.counters import COUNTERS


class DynamicShapesRejected(RuntimeError):
    """torch.compile(backend="neuron", dynamic=True): TorchNeuron compiles static shapes only."""


def _is_symbolic(x: Any) -> bool:
    if isinstance(x, torch.SymInt):
        return True
    return isinstance(x, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in x.shape)


def backend(gm: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Callable[..., Any]:
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    if any(_is_symbolic(x) for x in example_inputs):
        raise DynamicShapesRejected(
            "the neuron torch.compile backend needs static shapes (compile with "
            "dynamic=False); got a symbolic shape")
    COUNTERS.graphs_compiled += 1

    def run_eagerly(graph: torch.fx.GraphModule, inputs: Any) -> Callable[..., Any]:
        return make_boxed_func(graph.forward)

    return aot_autograd(fw_compiler=run_eagerly, bw_compiler=run_eagerly)(gm, example_inputs)


def patch_compile(before_first_use: Callable[[], None]) -> None:
    """Apply the documented rules for backend="neuron": dynamic=True is rejected, dynamic=None
    means static shapes with a recompile per new shape, other modes warn and are ignored.
    ``nn.Module.compile`` calls ``torch.compile``, so it follows the same rules.
    ``before_first_use`` registers the backend with Dynamo (imported lazily: it is slow)."""
    original = torch.compile

    def compile(model: Any = None, **kwargs: Any) -> Any:
        if kwargs.get("backend") == NAME:
            if kwargs.get("dynamic") is True:
                raise DynamicShapesRejected(
                    "torch.compile(backend='neuron', dynamic=True) is rejected by TorchNeuron; "
                    "use dynamic=False (a new shape recompiles)")
            kwargs["dynamic"] = False
            mode = kwargs.pop("mode", None)
            if mode not in (None, "default"):
                warnings.warn(f"neuron backend: mode={mode!r} has no effect; using 'default'",
                              stacklevel=2)
        before_first_use()
        return original(model, **kwargs) if model is not None else original(**kwargs)

    compile.__wrapped__ = original  # type: ignore[attr-defined]
    torch.compile = compile
