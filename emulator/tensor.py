"""``NeuronTensor``: a tensor that reports device ``neuron:N`` and keeps its data on the CPU.

One ``__torch_dispatch__`` handler serves every aten op: unwrap the CPU payloads, run the op
on the CPU, re-wrap the outputs. A non-scalar CPU tensor meeting a neuron tensor raises
PyTorch's own "Expected all tensors to be on the same device" error, which is how a batch
left on the CPU by a migration shows up.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from . import NAME, ordinals
from .counters import COUNTERS
from .limits import check_output
from .parallelism import note_op
from .rng import DEVICE_RNG, is_random
from .serialization import SAVING

aten = torch.ops.aten
CPU = torch.device("cpu")


class NeuronTensor(torch.Tensor):
    """A wrapper subclass whose only payload, ``_elem``, is an ordinary CPU tensor.

    It keeps a ``__dict__`` (no ``__slots__``): ``Module.to()`` swaps parameters with
    ``torch.utils.swap_tensors``, which refuses tensors whose slots differ.
    """

    _elem: torch.Tensor
    _index: int

    @staticmethod
    def __new__(cls, elem: torch.Tensor, index: int = 0) -> "NeuronTensor":
        if isinstance(elem, NeuronTensor) or elem.device.type != "cpu":
            raise AssertionError(f"NeuronTensor payload must be a CPU tensor, got {elem.device}")
        wrapper = torch.Tensor._make_wrapper_subclass(
            cls, elem.size(), strides=elem.stride(), storage_offset=elem.storage_offset(),
            dtype=elem.dtype, layout=elem.layout, device=torch.device(NAME, 0),
            requires_grad=False)
        wrapper._elem = elem
        wrapper._index = index
        return wrapper

    @property
    def device(self) -> torch.device:  # what Python sees; C++ sees neuron:0 (see ordinals)
        return torch.device(NAME, self._index)

    def get_device(self) -> int:
        return self._index

    __torch_function__ = torch._C._disabled_torch_function_impl

    # Without these two, Dynamo treats the tensor as an opaque object and every graph breaks.
    def __tensor_flatten__(self) -> tuple[list[str], int]:
        return ["_elem"], self._index

    @staticmethod
    def __tensor_unflatten__(inner: dict[str, torch.Tensor], index: int, outer_size: Any,
                             outer_stride: Any) -> "NeuronTensor":
        return NeuronTensor(inner["_elem"], index)

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        body = repr(self._elem)
        suffix = f", device='{self.device}'"
        if self.requires_grad and "grad_fn" not in body:
            suffix += (", requires_grad=True" if self.grad_fn is None
                       else f", grad_fn=<{type(self.grad_fn).__name__}>")
        return body[:-1] + suffix + ")" if body.endswith(")") else body

    def tolist(self) -> Any:  # refused for subclasses by default
        return self._elem.tolist()

    def data_ptr(self) -> int:
        # the wrapper's storage is a placeholder (0 for every tensor); code that identifies
        # tensors by storage (HF save_pretrained) needs the payload's
        return self._elem.data_ptr()

    def untyped_storage(self) -> torch.UntypedStorage:
        # ...but torch itself (Dynamo's meta conversion) must see the placeholder
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if (caller == "torch" or caller.startswith("torch.")) and \
                not caller.startswith(_PAYLOAD_STORAGE_CALLERS):
            placeholder = super().untyped_storage()
            # ...except an empty one around a FakeTensor, which meta conversion resizes to 0
            # bytes: on the placeholder that needs a C++ PrivateUse1 hook
            # (resizePrivateUse1Bytes) Python cannot register; the fake payload's is meta
            if placeholder.nbytes() or not _is_fake(self._elem):
                return placeholder
        return self._elem.untyped_storage()

    def __reduce_ex__(self, proto: int) -> Any:
        # torch.save: pickle the payload; serialization tags its storage neuron:N
        SAVING[self._elem.untyped_storage().data_ptr()] = self._index
        func, args = self._elem._reduce_ex_internal(proto)
        if func is torch._utils._rebuild_tensor_v2:
            args = args[:4] + (self.requires_grad,) + args[5:]
        return func, args

    def numpy(self, *, force: bool = False) -> Any:
        if force:
            return self._elem.numpy()
        raise TypeError(f"can't convert {self.device} device type tensor to numpy. "
                        "Use Tensor.cpu() to copy the tensor to host memory first.")

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        return run_on_cpu(func, args, kwargs or {})


_PAYLOAD_STORAGE_CALLERS = ("torch.distributed.fsdp.",)
"""torch code that gets the payload's storage, not the placeholder: FSDP2 frees an unsharded
parameter's memory after forward (`storage.resize_(0)`) and allocates it again before the next
all-gather writes into it, which the placeholder refuses ("invalid python storage")."""


def _is_fake(t: torch.Tensor) -> bool:
    fake = sys.modules.get("torch._subclasses.fake_tensor")
    return fake is not None and isinstance(t, fake.FakeTensor)


def payload(t: torch.Tensor) -> torch.Tensor:
    """The CPU tensor behind ``t`` (``t`` itself if it is not emulated); no op is recorded."""
    return t._elem if isinstance(t, NeuronTensor) else t


# ops that may legitimately see a CPU tensor next to a neuron tensor
_CROSS_DEVICE_OK = {
    aten.copy_.default, aten._to_copy.default, aten._copy_from.default,
    aten._copy_from_and_resize.default, aten.index.Tensor, aten.index_put_.default,
    aten.index_put.default, aten._index_put_impl_.default, aten.set_.source_Tensor,
}


class _Unwrapper:
    """One pass over an op's arguments (flat, or one level of lists, as aten schemas allow):
    swap NeuronTensors for payloads and neuron devices for cpu, remember the first neuron
    index and the first non-scalar CPU tensor. A hand-rolled walk: pytree costs twice as much."""

    __slots__ = ("elems", "index", "cpu", "has_neuron")

    def __init__(self) -> None:
        self.elems: dict[int, NeuronTensor] = {}
        self.index: int | None = None
        self.cpu: torch.Tensor | None = None
        self.has_neuron = False

    def __call__(self, a: Any) -> Any:
        if isinstance(a, NeuronTensor):
            self.has_neuron = True
            if self.index is None:
                self.index = a._index
            self.elems[id(a._elem)] = a
            return a._elem
        if isinstance(a, torch.Tensor):
            if a.device.type == "cpu":
                if self.cpu is None and a.dim() > 0:
                    self.cpu = a
            elif a.device.type == NAME:
                # a FakeTensor made by a factory inside a torch.compile trace
                self.has_neuron = True
                return aten._to_copy.default(a, device=CPU)
            return a
        if type(a) in (list, tuple):
            return type(a)(self(x) for x in a)
        if isinstance(a, torch.device) and a.type == NAME:
            return CPU
        return a


def _rewrap(out: Any, elems: dict[int, NeuronTensor], index: int) -> Any:
    if isinstance(out, torch.Tensor):
        if isinstance(out, NeuronTensor):
            return out
        original = elems.get(id(out))
        if original is not None:  # in-place / out= returned its input: keep the wrapper
            return original
        if out.device.type != "cpu":
            return out
        if out.dtype is torch.float64 or out.layout is not torch.strided or out.is_nested:
            _check_limits(out)
        return NeuronTensor(out, index)
    if type(out) in (list, tuple):
        return type(out)(_rewrap(x, elems, index) for x in out)
    return out


def _check_limits(out: torch.Tensor) -> None:
    """TorchNeuron's documented limits (emulator/limits.py); not while Dynamo traces, whose
    fake tensors would count every float64 op twice."""
    if not _is_fake(out):
        check_output(out)


def run_on_cpu(func: Any, args: tuple, kwargs: dict) -> Any:
    """Run one op on the payloads; wrap the results unless it asks for a non-neuron device."""
    COUNTERS.executed[func] += 1
    note_op(func, args)
    unwrap = _Unwrapper()
    cpu_args = tuple(unwrap(a) for a in args)
    cpu_kwargs = {k: unwrap(v) for k, v in kwargs.items()} if kwargs else {}
    if unwrap.cpu is not None and unwrap.has_neuron and func not in _CROSS_DEVICE_OK:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, "
            f"{NAME}:{unwrap.index or 0} and cpu! (when checking argument for {func}) "
            f"[neuron emulator: a tensor of shape {tuple(unwrap.cpu.shape)} was left on the CPU]")
    index = ordinals.current_index() if unwrap.index is None else unwrap.index
    wrap = True
    target = kwargs.get("device") if kwargs else None
    if target is not None:
        target = torch.device(target)
        if target.type != NAME:
            wrap = False
        elif target.index not in (None, 0) or not unwrap.has_neuron:
            index = ordinals.logical_index(target)
    if is_random(func) and "generator" not in cpu_kwargs:
        out = DEVICE_RNG.run(func, *cpu_args, **cpu_kwargs)
    else:
        out = func(*cpu_args, **cpu_kwargs)
    return _rewrap(out, unwrap.elems, index) if wrap else out
