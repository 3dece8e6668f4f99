"""What one process of a verify run records, per optimizer step, into a JSON file.

- the loss: the one-element tensor ``backward()`` was called on, summed over the backward
  calls since the previous step (the semantics of smoke's layout comparison);
- the gradient norm the optimizer is about to apply (after any all-reduce: read in the
  optimizer's step pre-hook) and the parameter norm after the step;
- the parameter norm before the first step (same seed, same initial parameters?);
- a fingerprint of every batch a DataLoader yields, in order, with the number of batches
  taken by each step (a device loader's prefetching thread takes them ahead of the steps).

Values are read without disturbing the run: on the emulated device from the CPU payload (no op
reaches the device, so smoke's op counts are unchanged); on an XLA device in one transfer.
Everything is computed in float64 on the CPU, the same way on both sides.

For a deterministic comparison the run is also steered, the same way on both sides: dropout
is neutralised (unless asked to keep it), random tensors made on the device are drawn from
the CPU generator, and, for the noise baseline, the parameters are perturbed by a relative
``NEURON_VERIFY_PERTURB`` right before the first step. After ``NEURON_VERIFY_STEPS`` steps
the process ends (the emulator ends the migrated run itself).
"""

import json
import os
import sys
import threading

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

NUMERICS_VARIABLES = ("XLA_USE_BF16", "XLA_DOWNCAST_BF16", "XLA_USE_FP16", "XLA_DOWNCAST_FP16",
                      "NEURON_RT_STOCHASTIC_ROUNDING_EN")
_state = {"steps": [], "batches": [], "pending_loss": None, "initial_params": None,
          "numerics_env": {}, "depth": 0}
_inside = []
_lock = threading.Lock()


def install():
    _watch_backward()
    _watch_batches()
    if os.environ.get("NEURON_VERIFY_KEEP_DROPOUT") != "1":
        _neutralise_dropout()
    register_optimizer_step_pre_hook(_before_step)
    register_optimizer_step_post_hook(_after_step)


# ------------------------------------------------------------------------- reading values
def _cpu(tensors):
    """CPU copies of ``tensors`` without an op on the emulated device, in one XLA transfer."""
    emulated = sys.modules.get("emulator.tensor")
    if emulated is not None:
        return [emulated.payload(t).detach() for t in tensors]
    if tensors and tensors[0].device.type == "xla":
        return sys.modules["_neuron_verify_xla_bridge"].to_cpu(tensors)
    return [t.detach().cpu() for t in tensors]


def _norm(tensors):
    total = 0.0
    for t in _cpu(tensors):
        t = _local(t)
        if t is not None and t.is_floating_point():
            total += float(t.double().pow(2).sum())
    return total ** 0.5


def _local(t):
    local = getattr(t, "_local_tensor", None)
    return t if local is None else local


# ----------------------------------------------------------------------------- the loss
def _watch_backward():
    tensor_backward = torch.Tensor.backward
    autograd_backward = torch.autograd.backward

    def backward(self, *args, **kwargs):
        return _recording(tensor_backward, self, self, *args, **kwargs)

    def autograd(tensors, *args, **kwargs):
        return _recording(autograd_backward, tensors, tensors, *args, **kwargs)

    for wrapper, original in ((backward, tensor_backward), (autograd, autograd_backward)):
        wrapper.__doc__, wrapper.__wrapped__ = original.__doc__, original
    torch.Tensor.backward = backward
    torch.autograd.backward = autograd


def _recording(original, tensors, *args, **kwargs):
    if _inside or torch._C._current_graph_task_id() != -1:
        return original(*args, **kwargs)
    _inside.append(True)
    try:
        result = original(*args, **kwargs)
    finally:
        _inside.pop()
    if isinstance(tensors, (list, tuple)) and len(tensors) == 1:
        tensors = tensors[0]
    if isinstance(tensors, torch.Tensor) and tensors.numel() == 1:
        try:
            value = float(_cpu([tensors])[0].reshape(()).double())
        except Exception:  # noqa: BLE001 - a fake tensor under a trace: nothing to record
            return result
        _state["pending_loss"] = value + (_state["pending_loss"] or 0.0)
    return result


# ---------------------------------------------------------------------------- the data
def _watch_batches():
    from torch.utils.data import dataloader

    iterator = dataloader._BaseDataLoaderIter
    original = iterator.__next__

    def __next__(self):
        batch = original(self)
        try:
            fingerprint = _fingerprint(batch)
        except Exception:  # noqa: BLE001 - an exotic batch: recorded as unknown
            fingerprint = None
        with _lock:
            _state["batches"].append(fingerprint)
        return batch

    iterator.__next__ = __next__


def _fingerprint(batch):
    """Shapes and two float64 sums per CPU tensor of the batch (the second weights elements
    by position, so a reordering shows); None for a tensor not on the CPU."""
    found = []
    _tensors(batch, found)
    out = []
    for t in found:
        if t.device.type != "cpu":
            return None
        flat = t.detach().reshape(-1).double()
        weights = torch.arange(flat.numel(), dtype=torch.float64).remainder_(13).add_(1)
        out.append([list(t.shape), float(flat.sum()), float((flat * weights).sum())])
    return out


def _tensors(value, found):
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            _tensors(value[key], found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _tensors(item, found)


# ----------------------------------------------------------------- determinism
def _neutralise_dropout():
    """Dropout draws from a different generator on each side (XLA ignores torch's seed); at
    p=0 both compute the same thing. The functions nn.Dropout and most models call."""
    import torch.nn.functional as F

    def identity(name):
        original = getattr(F, name)

        def dropout(input, p=0.5, training=True, inplace=False):
            return input

        dropout.__wrapped__ = original
        return dropout

    for name in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                 "feature_alpha_dropout"):
        if hasattr(F, name):
            setattr(F, name, identity(name))
    attention = F.scaled_dot_product_attention

    def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                     *args, **kwargs):
        return attention(query, key, value, attn_mask, 0.0, *args, **kwargs)

    scaled_dot_product_attention.__wrapped__ = attention
    F.scaled_dot_product_attention = scaled_dot_product_attention


# ---------------------------------------------------------------------- the steps
def _parameters(optimizer):
    return [p for group in optimizer.param_groups for p in group["params"]]


def _before_step(optimizer, args, kwargs):
    _state["depth"] += 1
    if _state["depth"] > 1:  # an inner optimizer stepped by a wrapper: the outer one counts
        return
    params = _parameters(optimizer)
    grads = [p.grad for p in params if p.grad is not None]
    _state["grad_norm"] = _norm(grads) if grads else None
    if not _state["steps"]:
        _state["initial_params"] = _norm(params)
        _state["numerics_env"] = {name: os.environ[name] for name in NUMERICS_VARIABLES
                                  if os.environ.get(name, "") not in ("", "0")}
        if "--auto-cast" in os.environ.get("NEURON_CC_FLAGS", ""):  # the compiler casts to bf16
            _state["numerics_env"]["NEURON_CC_FLAGS"] = os.environ["NEURON_CC_FLAGS"]
        bridge = sys.modules.get("_neuron_verify_xla_bridge")
        if bridge is not None:  # kept from the run by --match-numerics: still what it set
            _state["numerics_env"].update(bridge.BLOCKED)
        eps = float(os.environ.get("NEURON_VERIFY_PERTURB", "0") or 0)
        if eps:
            _perturb(params, eps)


def _perturb(params, eps):
    """Multiply every parameter by 1 + eps·u, u uniform in [-1, 1) from a generator of its own
    (the same on every replica, so replicas stay equal; the script's generator is untouched)."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p, cpu in zip(params, _cpu(params)):
            noise = torch.rand(cpu.shape, generator=generator, dtype=torch.float64) * 2 - 1
            moved = (cpu.double() * (1 + eps * noise)).to(cpu.dtype)
            if cpu is p or sys.modules.get("emulator.tensor") is not None:
                cpu.copy_(moved)  # the emulated tensor's payload: written in place
            else:
                p.copy_(moved.to(p.device))


def _after_step(optimizer, args, kwargs):
    _state["depth"] -= 1
    if _state["depth"]:
        return
    step = {"loss": _state["pending_loss"], "grad_norm": _state.pop("grad_norm", None),
            "param_norm": _norm(_parameters(optimizer)), "batches_taken": None}
    _state["pending_loss"] = None
    with _lock:
        step["batches_taken"] = len(_state["batches"])
    _state["steps"].append(step)
    _write()
    limit = int(os.environ.get("NEURON_VERIFY_STEPS", "0") or 0)
    if os.environ.get("NEURON_VERIFY_SIDE") == "original" and limit and len(_state["steps"]) >= limit:
        # a device loader's thread and XLA's runtime would keep the process alive or abort it
        # at exit; everything is written
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _write():
    rank = int(os.environ.get("RANK", "0") or 0)
    path = os.path.join(os.environ["NEURON_VERIFY_RECORD"], f"rank{rank}.json")
    with _lock:
        batches = list(_state["batches"])
    data = {"rank": rank, "world_size": int(os.environ.get("WORLD_SIZE", "1") or 1),
            "side": os.environ.get("NEURON_VERIFY_SIDE"), "steps": _state["steps"],
            "initial_params": _state["initial_params"], "batches": batches,
            "numerics_env": _state["numerics_env"]}
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(tmp, path)
