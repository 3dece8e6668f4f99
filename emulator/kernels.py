"""Kernels registered on the PrivateUse1 (``neuron``) dispatch keys.

Factories (``torch.randn(4, device="neuron")``) and CPU->neuron copies never see a
NeuronTensor: they reach the PrivateUse1 *backend* key, where a boxed fallback runs them on
the CPU and wraps the result. Two PyTorch 2.13 facts shape the rest:
- a boxed Python fallback is unreachable when an argument already carries the Python key but
  that key is excluded (``torch.tensor(data, device="neuron")`` does this around ``copy_``),
  so the data-moving ops are also registered per op;
- core registers no ``AutocastPrivateUse1`` fallback, so ops outside the autocast lists need
  a fallthrough, and the listed ops need per-op kernels (the same assert rules out a boxed one).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

from . import NAME
from .tensor import NeuronTensor, run_on_cpu

aten = torch.ops.aten

# Only data-moving ops: overriding metadata-only ops (detach, alias, view) on PrivateUse1
# breaks FakeTensor creation under torch.compile.
_PER_OP = ("copy_", "_copy_from", "_copy_from_and_resize", "_to_copy")

# CUDA's autocast lists (aten/src/ATen/autocast_mode.cpp). TorchNeuron's own lists were not
# in the material read, so this is an approximation.
_LOWER_PRECISION = {
    "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "convolution", "_convolution", "prelu", "addmm", "addmv", "addr",
    "matmul", "einsum", "mm", "mv", "linear", "addbmm", "baddbmm", "bmm", "chain_matmul",
    "linalg_multi_dot", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "lstm_cell",
    "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "scaled_dot_product_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
}
_FP32 = {
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm",
    "native_layer_norm", "group_norm", "frobenius_norm", "nuclear_norm", "cosine_similarity",
    "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
    "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss",
    "mse_loss", "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss",
    "triplet_margin_loss", "multi_margin_loss", "binary_cross_entropy_with_logits", "dist",
    "pdist", "cdist", "renorm", "logsumexp", "cross_entropy_loss", "softmax", "log_softmax",
    "_softmax", "_log_softmax", "norm", "prod", "cumsum", "cumprod", "sum",
}


def register(libraries: list[torch.library.Library]) -> None:
    """Register every kernel; the Library objects must outlive the process (kept by caller)."""
    fallback = torch.library.Library("_", "IMPL")
    fallback.fallback(_backend_fallback, "PrivateUse1", with_keyset=True)
    fallback.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    per_op = torch.library.Library("aten", "IMPL")
    for name in _PER_OP:
        per_op.impl(name, _data_kernel(getattr(aten, name).default), "PrivateUse1")
    _register_autocast(per_op)
    libraries.extend([fallback, per_op])
    torch.set_autocast_dtype(NAME, torch.bfloat16)  # what the docs pass; real default unknown


def _backend_fallback(keyset: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    if kwargs.get("pin_memory"):  # no host allocator for PrivateUse1 on a CPU build
        kwargs = dict(kwargs, pin_memory=False)
    if _foreign_device_tensor(args):
        return _meta_redispatch(op, args, kwargs)
    return run_on_cpu(op, args, kwargs)


def _data_kernel(op: Any) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        if _foreign_device_tensor(args):
            return _meta_redispatch(op, args, kwargs)
        return run_on_cpu(op, args, kwargs)

    return kernel


def _foreign_device_tensor(args: Any) -> bool:
    """A tensor that reports a non-CPU device but is not ours: a FakeTensor while tracing."""
    for a in args:
        if isinstance(a, torch.Tensor) and not isinstance(a, NeuronTensor) and a.device.type != "cpu":
            return True
        if type(a) in (list, tuple) and _foreign_device_tensor(a):
            return True
    return False


def _meta_redispatch(op: Any, args: Any, kwargs: Any) -> Any:
    # what FakeTensor's in_kernel_invocation_manager does: prefer the Meta kernels
    with torch._C._PreserveDispatchKeyGuard():
        torch._C._set_meta_in_tls_dispatch_include(True)
        return op(*args, **kwargs)


_AUTOCAST_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)


def _autocast_kernel(op: Any, lower: bool) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        target = torch.get_autocast_dtype(NAME) if lower else torch.float32

        def cast(t: Any) -> Any:
            if (isinstance(t, torch.Tensor) and t.is_floating_point()
                    and t.dtype != torch.float64 and t.device.type == NAME):
                return t.to(target)
            return t

        args, kwargs = pytree.tree_map(cast, (args, kwargs))
        with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_KEYS):
            return op(*args, **kwargs)

    return kernel


def _register_autocast(library: torch.library.Library) -> None:
    for names, lower in ((_LOWER_PRECISION, True), (_FP32, False)):
        for name in sorted(names):
            packet = getattr(aten, name, None)
            if packet is None:
                continue
            for overload in packet.overloads():
                op = getattr(packet, overload)
                if any(a.alias_info is not None and a.alias_info.is_write
                       for a in op._schema.arguments):
                    continue  # out= and in-place overloads are not autocast
                qualified = name if overload == "default" else f"{name}.{overload}"
                library.impl(qualified, _autocast_kernel(op, lower), "AutocastPrivateUse1")
