"""The ``neuron`` torch.compile backend: Dynamo + AOTAutograd capture, graphs run eagerly.

This is the capture pipeline AWS documents (Dynamo, AOTAutograd, then their compiler); the
emulator stops before the compiler, so it proves that capture works and counts the graphs,
and says nothing about whether neuronx-cc would compile them.
"""

from __future__ import annotations

import types
import warnings
from typing import Any, Callable

import torch

from . import NAME, recompiles


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
    recompiles.note_graph()

    def run_eagerly(graph: torch.fx.GraphModule, inputs: Any) -> Callable[..., Any]:
        return make_boxed_func(graph.forward)

    compiled = aot_autograd(fw_compiler=run_eagerly, bw_compiler=run_eagerly)(gm, example_inputs)
    return _rewrap_fakified_outputs(compiled, _neuron_outputs(gm), _index_of(example_inputs))


def _neuron_outputs(gm: torch.fx.GraphModule) -> list[bool]:
    """Which outputs of the captured graph are neuron tensors (from Dynamo's fake values)."""
    from .tensor import NeuronTensor

    outputs = gm.graph.output_node().args[0]
    flags = []
    for node in outputs if isinstance(outputs, (list, tuple)) else [outputs]:
        meta = getattr(node, "meta", {})
        value = meta.get("val", meta.get("example_value"))
        flags.append(isinstance(value, NeuronTensor)
                     or (isinstance(value, torch.Tensor) and value.device.type == NAME))
    return flags


def _index_of(example_inputs: list[Any]) -> int:
    from . import ordinals
    from .tensor import NeuronTensor

    return next((x._index for x in example_inputs if isinstance(x, NeuronTensor)),
                ordinals.current_index())


def _rewrap_fakified_outputs(compiled: Callable[..., Any], neuron: list[bool],
                             index: int) -> Callable[..., Any]:
    """Dynamo's DDPOptimizer compiles a DDP model's graph bucket by bucket and feeds each
    piece the fake outputs of the previous one, which AOTAutograd returns from its desugared
    graph (``fakify_first_call``): the payloads, without their NeuronTensor wrapper, so the
    next piece would meet "CPU" tensors. Put the wrapper back on exactly those outputs. Real
    runs are untouched: AOTAutograd wraps real outputs itself."""
    from .tensor import NeuronTensor, _is_fake

    def run(*args: Any, **kwargs: Any) -> Any:
        out = compiled(*args, **kwargs)
        context = torch._guards.TracingContext.try_get()
        if not (context is not None and getattr(context, "fakify_first_call", False)):
            return out
        many = isinstance(out, (list, tuple))
        items = list(out) if many else [out]
        for i, (item, wanted) in enumerate(zip(items, neuron)):
            if wanted and _is_fake(item) and not isinstance(item, NeuronTensor):
                items[i] = NeuronTensor(item, index)
        return type(out)(items) if many else items[0]

    for attribute in ("_boxed_call", "zero_grad"):  # keep how Dynamo calls the result
        if hasattr(compiled, attribute):
            setattr(run, attribute, getattr(compiled, attribute))
    return run


def patch_compile(before_first_use: Callable[[], None]) -> None:
    """Apply the documented rules for backend="neuron": dynamic=True is rejected, dynamic=None
    means static shapes with a recompile per new shape, other modes warn and are ignored.
    ``nn.Module.compile`` calls ``torch.compile``, so it follows the same rules. Each compiled
    function is tracked (emulator/recompiles.py) to report its graphs per input shape.
    ``before_first_use`` registers the backend with Dynamo (imported lazily: it is slow)."""
    original = torch.compile

    def compile(model: Any = None, **kwargs: Any) -> Any:
        if model is None:  # @torch.compile(backend="neuron", ...) as a decorator
            return lambda fn: compile(fn, **kwargs)
        neuron = kwargs.get("backend") == NAME
        if neuron:
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
        if not neuron:
            return original(model, **kwargs)
        name = recompiles.label(model)
        compiled = original(_module_call_as_in_torch_2_14(model), **kwargs)
        if isinstance(compiled, torch.nn.Module):
            return recompiles.track_module(compiled, name)
        return recompiles.track(compiled, name) if callable(compiled) else compiled

    compile.__wrapped__ = original  # type: ignore[attr-defined]
    torch.compile = compile


def _module_call_as_in_torch_2_14(model: Any) -> Any:
    """``Module.compile`` compiles the bound ``_call_impl``. Torch 2.13 starts Dynamo on that
    frame, which is in torch.nn and skipped, and a module whose ``forward`` is torch.nn's own
    (``nn.Sequential``, ``nn.Linear``) then compiles nothing: ``model.compile()`` silently runs
    eagerly. Torch 2.14, which TorchNeuron ships with, wraps such a call in a frame Dynamo
    traces (``OptimizedModule._should_wrap_module_call_impl``); do the same on 2.13."""
    from torch._dynamo import eval_frame, external_utils, trace_rules

    if hasattr(eval_frame.OptimizedModule, "_should_wrap_module_call_impl"):
        return model  # torch does it itself
    module = getattr(model, "__self__", None)
    if (getattr(model, "__name__", "") == "_call_impl" and isinstance(module, torch.nn.Module)
            and isinstance(module.forward, types.MethodType)
            and trace_rules.check(module.forward)):
        return external_utils.wrap_inline(model)
    return model
