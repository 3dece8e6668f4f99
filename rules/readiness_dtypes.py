"""NM901-NM903: float64 on the device. TorchNeuron executes float64 as float32 (with a
warning), so code that asks for double precision on the device silently gets single."""

from __future__ import annotations

import ast

from neuron_migrate.ruleapi import Example, Kind
from neuron_migrate.ruleapi.readiness import (Facts, Limit, ReadinessRule, Where, applied, code,
                                              is_device, is_float64, keyword, lines_of, method,
                                              numpy_float64, on_device)
from neuron_migrate.rules.readiness_links import D_MEMGL

_FACTORIES_WITH_DTYPE = ("to", "type", "new_tensor", "new_zeros", "new_ones", "new_empty",
                         "new_full")
_DOUBLE_TENSORS = frozenset({"torch.DoubleTensor", "torch.cuda.DoubleTensor"})
_WHY = ("TorchNeuron executes float64 as float32 (with a warning): the device computes with "
        "about 7 significant digits, not 16")


class Float64OnDevice(ReadinessRule):
    id = "NM901"
    name = "float64-on-device"
    kind = Kind.REVIEW
    limit = Limit.NUMERICS
    needs = (b"float64", b"double", b"Double")
    summary = "float64 tensors on the device (`torch.float64` / `torch.double` dtypes, `.double()`) run as float32"
    explanation = """\
What it does: reports float64 on the device: a tensor made or converted with
`dtype=torch.float64` (or `torch.double`), `.double()`, `.to(torch.float64)` or
`.type(torch.DoubleTensor)`, where it is on the device: moved there in the same expression
(`.to(device)`, `.cuda()`, `device=`, in the chain before it too), derived from a name the
file moves or makes there (`a = torch.randn(3, device=device)`) or from what a model on the
device returns (`logits = model(batch)`), or computed in compiled code, a training step or a
loop over a compiled model. A chain that goes back to the host (`.cpu()`,
`.numpy()`, `.item()`) is not reported.

Why: TorchNeuron has no native 64-bit floating point: float64 tensors execute as float32,
with a warning. Code that uses double precision on purpose (a numerically delicate
reduction, a loss that cancels large terms) silently loses it.

What differs: nothing is rewritten, since the intent decides the fix: keep the tensor in
float32 (or bfloat16) on the device and compute the delicate part on the CPU in float64
(`x.cpu().double()`), or accept float32 after checking the results against a CPU run."""
    doc_url = D_MEMGL
    example = Example.unchanged(
        "import torch\n\ndevice = torch.device(\"neuron\")\n"
        "weights = torch.zeros(10, dtype=torch.float64, device=device)\n"
        "scores = model(batch.to(device)).double()\n")

    def candidates(self, facts: Facts, data: bytes) -> set[int]:
        """The calls that make or convert to float64, whatever the device: `check` needs
        the rest (on the device?) only for them."""
        named = facts.calls_named(("double", *_FACTORIES_WITH_DTYPE))
        typed = (c for c in facts.calls if any(k.arg == "dtype" for k in c.keywords))
        return lines_of(call for call in (*named, *typed)
                        if method(call, "double") and not call.args or
                        _float64_dtype(call, facts) is not None)

    def check(self, node: ast.AST, where: Where) -> str | None:
        call: ast.Call = node  # type: ignore[assignment]
        if method(call, "double") and not call.args and on_device(call, where):
            return f"`{code(call)}` makes a float64 tensor on the device; {_WHY}"
        if _float64_dtype(call, where.facts) is None:
            return None
        placed = method(call, *_FACTORIES_WITH_DTYPE) or \
            is_device(keyword(call, "device"), where.facts) or \
            any(m.func.attr in ("to", "cuda") for m in applied(call, where))  # type: ignore[attr-defined]
        if placed and on_device(call, where):
            return f"`{code(call)}`: float64 on the device; {_WHY}"
        return None


def _float64_dtype(call: ast.Call, facts: Facts) -> ast.expr | None:
    """The float64 dtype a call is given: `dtype=`, or an argument of a conversion."""
    dtype = keyword(call, "dtype")
    if dtype is None and method(call, *_FACTORIES_WITH_DTYPE):
        dtype = next((a for a in call.args if _double(a, facts)), None)
    if dtype is None or not _double(dtype, facts):
        return None
    return dtype


def _double(expr: ast.AST, facts: Facts) -> bool:
    return is_float64(expr, facts) or facts.qualname(expr) in _DOUBLE_TENSORS


class Float64Default(ReadinessRule):
    id = "NM902"
    name = "float64-default-dtype"
    kind = Kind.REVIEW
    limit = Limit.NUMERICS
    needs = (b"set_default_",)
    summary = "`torch.set_default_dtype(torch.float64)` makes every new float tensor float64, which runs as float32 on the device"
    explanation = """\
What it does: reports `torch.set_default_dtype(torch.float64)` (or `torch.double`) and
`torch.set_default_tensor_type(torch.DoubleTensor)`.

Why: after this call every floating-point tensor created without a dtype (parameters of new
modules included) is float64. TorchNeuron executes float64 as float32 with a warning, so the
program asks for double precision everywhere and gets single precision on the device, and
pays for float64 copies between host and device.

What differs: nothing is rewritten. If double precision was only needed on the CPU, set the
default back to float32 before the model is built; if the model really needs it, compare a
float32 run with the float64 one before moving to Trainium."""
    doc_url = D_MEMGL
    example = Example.unchanged(
        "import torch\n\ntorch.set_default_dtype(torch.float64)\n"
        "model = Net().to(\"neuron\")\n")

    def candidates(self, facts: Facts, data: bytes) -> set[int]:
        return lines_of(facts.calls_named(("set_default_dtype", "set_default_tensor_type")))

    def check(self, node: ast.AST, where: Where) -> str | None:
        call: ast.Call = node  # type: ignore[assignment]
        qualname = where.qualname(call.func)
        if qualname == "torch.set_default_dtype" and call.args and \
                is_float64(call.args[0], where.facts):
            return (f"`{code(call)}`: every new float tensor is float64, and {_WHY}")
        if qualname == "torch.set_default_tensor_type" and call.args:
            value = call.args[0]
            name = value.value if isinstance(value, ast.Constant) else where.qualname(value)
            if name in _DOUBLE_TENSORS:
                return f"`{code(call)}`: every new float tensor is float64, and {_WHY}"
        return None


class Float64FromNumpy(ReadinessRule):
    id = "NM903"
    name = "float64-from-numpy"
    kind = Kind.REVIEW
    limit = Limit.NUMERICS
    needs = (b"from_numpy", b"as_tensor", b"tensor(")
    also = (b"numpy",)
    summary = "`torch.from_numpy` of a float64 numpy array moved to the device stays float64, which runs as float32"
    explanation = """\
What it does: reports `torch.from_numpy(a)`, `torch.as_tensor(a)` and `torch.tensor(a)` (no
dtype) of a numpy array that is float64 (numpy's default: `np.zeros(n)`,
`np.random.rand(n)`, `np.array([0.5, 1.5])`, `.astype(np.float64)`, or a name assigned one)
when the tensor is moved to the device without `.float()` first.

Why: these calls keep numpy's dtype, so the device receives float64 tensors, which
TorchNeuron executes as float32 with a warning, and the host-to-device copy moves twice the
bytes. Mixing them with the model's float32 parameters usually fails with a dtype mismatch
anyway.

What differs: nothing is rewritten. Convert before the move:
`torch.from_numpy(a).float().to(device)`, or make the array float32 in numpy
(`a.astype(np.float32)`)."""
    doc_url = D_MEMGL
    example = Example.unchanged(
        "import numpy as np\nimport torch\n\nnoise = np.random.randn(16, 8)\n"
        "x = torch.from_numpy(noise).to(\"neuron\")\n")

    def candidates(self, facts: Facts, data: bytes) -> set[int]:
        """The tensors made from numpy float64 arrays, wherever they go."""
        return lines_of(call for call in facts.calls_named(("from_numpy", "as_tensor", "tensor"))
                        if _from_numpy_float64(call, facts))

    def check(self, node: ast.AST, where: Where) -> str | None:
        call: ast.Call = node  # type: ignore[assignment]
        if not _from_numpy_float64(call, where.facts):
            return None
        moved = False
        for later in applied(call, where):
            attr = later.func.attr  # type: ignore[attr-defined]
            if attr in ("float", "half", "bfloat16", "int", "long") or (
                    attr in ("to", "type") and any(not _device_arg(a, where)
                                                   for a in later.args)) or \
                    (attr == "to" and keyword(later, "dtype") is not None):
                return None
            if attr in ("to", "cuda", "neuron"):
                moved = True
        if not moved and not is_device(keyword(call, "device"), where.facts):
            return None
        return (f"`{code(call)}` makes a float64 tensor from a numpy float64 array and moves "
                f"it to the device; {_WHY}: add `.float()` before the move")


def _from_numpy_float64(call: ast.Call, facts: Facts) -> bool:
    """`torch.from_numpy(a)`, `torch.as_tensor(a)`, `torch.tensor(a)` without a dtype, of
    a numpy float64 array."""
    qualname = facts.qualname(call.func)
    if qualname not in ("torch.from_numpy", "torch.as_tensor", "torch.tensor") or \
            not call.args or keyword(call, "dtype") is not None:
        return False
    if qualname != "torch.from_numpy" and len(call.args) > 1:
        return False
    return numpy_float64(call.args[0], facts)


def _device_arg(expr: ast.AST, where: Where) -> bool:
    return is_device(expr, where.facts) or (isinstance(expr, ast.Name) and
                                           "device" in expr.id.lower())


RULES: tuple[type[ReadinessRule], ...] = (Float64OnDevice, Float64Default, Float64FromNumpy)
