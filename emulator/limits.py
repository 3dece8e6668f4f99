"""TorchNeuron's documented tensor limits, enforced on the emulated device so a smoke run shows
them: float64 executes as float32 there (a warning, counted here; the emulator keeps computing
in float64, so the script's numbers are not changed), and sparse and nested tensors are not
supported (an error).

AWS's release notes list ``torch.sparse`` and ``torch.nested`` among the features TorchNeuron
does not support, without the text of the error it raises, so :class:`UnsupportedOnNeuron`
words its own message and says that it is the documented limit.
"""

from __future__ import annotations

import functools
import traceback
import warnings
from typing import Any, Callable

import torch

from . import NAME
from .counters import COUNTERS

FLOAT64_NOTE = "float64 executes as float32 on TorchNeuron"


class UnsupportedOnNeuron(NotImplementedError):
    """A tensor kind TorchNeuron documents as unsupported reached the neuron device."""


def _layout_name(t: torch.Tensor) -> str | None:
    """What is unsupported about ``t`` on the device, or None for an ordinary tensor."""
    if t.is_nested:
        return "nested tensors (torch.nested)"
    layout = t.layout
    if layout is torch.strided:
        return None
    if layout is torch.jagged:
        return "nested tensors (torch.nested)"
    return f"sparse tensors (torch.sparse, layout {layout})"


def refuse(what: str) -> UnsupportedOnNeuron:
    return UnsupportedOnNeuron(
        f"{what} are not supported on the {NAME} device: TorchNeuron does not support them "
        f"(a documented limit; neuron emulator: TorchNeuron's own error text is not documented)")


def check_output(t: torch.Tensor) -> None:
    """Called for every tensor about to live on the device: refuse sparse and nested ones,
    count float64 ones."""
    if t.dtype is torch.float64:
        note_float64()
    if t.layout is not torch.strided or t.is_nested:
        what = _layout_name(t)
        if what is not None:
            raise refuse(what)


def note_float64() -> None:
    COUNTERS.float64_tensors += 1
    if COUNTERS.float64_first is None:
        COUNTERS.float64_first = [{"file": f.filename, "line": f.lineno, "function": f.name}
                                  for f in traceback.extract_stack()[:-2]]
        warnings.warn(f"neuron emulator: a float64 tensor on the {NAME} device: "
                      f"{FLOAT64_NOTE} (every one is counted in the smoke report)", stacklevel=3)


def patch_nested() -> None:
    """Nested tensors are made in C++ or in Python wrappers around plain tensors, so the
    device sees no nested tensor being made; refuse in torch.nested's constructors, and in
    the jagged NestedTensor's, when the data or the ``device`` argument is the device. (Ops
    on a strided nested tensor made otherwise reach :func:`register_refusals`.)"""
    import torch.nested
    from torch.nested._internal import nested_tensor

    for name in ("nested_tensor", "as_nested_tensor", "nested_tensor_from_jagged", "narrow"):
        original = getattr(torch.nested, name, None)
        if original is not None:
            setattr(torch.nested, name, _refusing_nested(original))
    cls = nested_tensor.NestedTensor
    new = cls.__new__

    def __new__(klass: type, values: torch.Tensor, offsets: torch.Tensor, **kwargs: Any) -> Any:
        if values.device.type == NAME:
            raise refuse("nested tensors (torch.nested)")
        return new(klass, values, offsets, **kwargs)

    cls.__new__ = staticmethod(__new__)  # type: ignore[assignment]


def _on_device(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return value.device.type == NAME
    if isinstance(value, (str, torch.device)):
        return torch.device(value).type == NAME
    if isinstance(value, (list, tuple)):
        return any(_on_device(v) for v in value)
    return False


def _refusing_nested(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def make(*args: Any, **kwargs: Any) -> Any:
        if any(_on_device(a) for a in args if not isinstance(a, str)) or \
                _on_device(kwargs.get("device")) or _on_device(kwargs.get("values")):
            raise refuse("nested tensors (torch.nested)")
        return original(*args, **kwargs)

    return make


def register_refusals(libraries: list[torch.library.Library]) -> None:
    """Ops on a sparse or strided nested tensor of the device reach these dispatch keys."""
    library = torch.library.Library("_", "IMPL")
    for key, what in (("SparsePrivateUse1", "sparse tensors (torch.sparse)"),
                      ("SparseCsrPrivateUse1", "sparse tensors (torch.sparse)"),
                      ("NestedTensorPrivateUse1", "nested tensors (torch.nested)")):
        library.fallback(_refusal(what), key, with_keyset=True)
    libraries.append(library)


def _refusal(what: str) -> Any:
    def kernel(keyset: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
        raise refuse(what)

    return kernel
