"""NM114, NM115, NM212, NM405, NM603: switches and helpers of the XLA runtime that have a plain
native form (eager mode, tensor syncs, the optimizer's gradients, the device seed, the
compilation cache). Each is rewritten rather than reported: a review item keeps
`import torch_xla` alive, and a migrated file that imports torch_xla cannot start where only
TorchNeuron is installed."""

from __future__ import annotations

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Remove, Replace, Review, Role, Rule,
                                    Site, argument, bool_value, call, code, has_star_args, template)
from neuron_migrate.rules.precision import RngState

D_ABOUT = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/about-pytorch-neuron.html"
D_MEM = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/memory-profiling-guide.html"
D_DIST = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html"
D_ENV = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/env-vars.html"

XM = "torch_xla.core.xla_model"
XLAC = "torch_xla._XLAC"
EAGER = ("torch_xla.experimental", "torch_xla.experimental.eager")

_SET_EAGER = frozenset({f"{m}.eager_mode" for m in EAGER} | {f"{XLAC}._set_use_eager_mode"})
_IS_EAGER = frozenset({f"{m}.is_eager_mode" for m in EAGER} | {f"{XLAC}._get_use_eager_mode"})
_EAGER_CONTEXT = frozenset({f"{m}.eager_mode_context" for m in EAGER})
# Calls whose arguments may be dropped with the call: reading values, building paths.
_PURE_CALLS = frozenset({"str", "int", "float", "bool", "len", "list", "tuple", "repr",
                         "os.path.join", "os.getenv", "os.environ.get", "os.getcwd"})


def side_effect_free(node: cst.CSTNode) -> bool:
    """Whether deleting the call that holds this argument loses nothing but the value: names,
    attributes, literals, displays, operators and a few builtins that only read."""
    if isinstance(node, cst.Arg):
        return side_effect_free(node.value)
    if isinstance(node, (cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString,
                         cst.Ellipsis)):
        return True
    if isinstance(node, cst.Attribute):
        return side_effect_free(node.value)
    if isinstance(node, cst.Call):
        return code(node.func) in _PURE_CALLS and all(side_effect_free(a) for a in node.args)
    if isinstance(node, (cst.FormattedString, cst.ConcatenatedString, cst.List, cst.Tuple,
                         cst.Set, cst.Dict, cst.Subscript, cst.BinaryOperation,
                         cst.UnaryOperation, cst.BooleanOperation, cst.Comparison,
                         cst.IfExp, *_PARTS)):
        return all(side_effect_free(child) for child in node.children
                   if isinstance(child, cst.BaseExpression) or _container(child))
    return False


_PARTS = (cst.Element, cst.StarredElement, cst.DictElement, cst.StarredDictElement,
          cst.SubscriptElement, cst.Index, cst.Slice, cst.ComparisonTarget,
          cst.FormattedStringExpression, cst.FormattedStringText)


def _container(node: cst.CSTNode) -> bool:
    return isinstance(node, _PARTS)


def _drop(node: cst.Call, site: Site, why: str) -> Outcome:
    """Delete a call that returned None, keeping a used value as `None`; arguments that might
    do something are left for a person to move."""
    if not all(side_effect_free(a) for a in node.args):
        return Review(f"`{code(node)}`: {why}; delete it, keeping whatever its arguments do")
    if site.role is Role.EXPRESSION:
        return Replace(cst.Name("None"), f"`{code(node)}` → `None`: {why}; the call always "
                       "returned None")
    return Remove(f"delete `{code(node)}`: {why}")


class EagerMode(Rule):
    id = "NM114"
    name = "xla-eager-mode"
    kind = Kind.FIX
    summary = "`eager_mode(...)` switches are deleted and `is_eager_mode()` becomes `True`: native PyTorch is eager"
    explanation = """\
What it does: deletes `torch_xla.experimental.eager_mode(flag)` (and the private
`torch_xla._XLAC._set_use_eager_mode(flag)`) where it is a statement, unwraps
`with torch_xla.experimental.eager_mode_context(flag):` keeping its body, and replaces
`torch_xla.experimental.is_eager_mode()` (and `_XLAC._get_use_eager_mode()`) with `True`.

Why: PyTorch/XLA traced operations lazily into graphs by default; eager mode made it run
each operation as it was issued, compiling only functions passed to `torch_xla.compile`.
TorchNeuron always runs eagerly (operations are dispatched as they are issued), so switching
eager mode on has nothing left to do, and the answer to "is this eager?" is always yes.

What differs: nothing the program computes. `eager_mode(False)` asked for lazy tracing, which
only changed how the same operations were compiled; natively there is no lazy mode, so that
code runs eagerly too, and graph-level speed comes from `torch.compile` (NM503 compiles the
training model). A branch on `is_eager_mode()` now always takes its eager side, the side
written for a runtime like the native one. A switch whose argument might do something
(a call), or an `eager_mode_context` bound with `as`, is reported for review."""
    doc_url = D_ABOUT
    example = Example(
        before="import torch_xla\n\ntorch_xla.experimental.eager_mode(True)\n"
               "compiled = torch_xla.experimental.is_eager_mode()\n",
        after="compiled = True\n",
    )
    calls = _SET_EAGER | _IS_EAGER | _EAGER_CONTEXT

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        qualname = site.qualname or ""
        if qualname in _IS_EAGER:
            if node.args:
                return Review(f"`{code(node)}`: native PyTorch is always eager; use `True`")
            return Replace(cst.Name("True"), f"`{code(node)}` → `True`: native PyTorch always "
                           "runs eagerly")
        flag = argument(node.args, 0, "enable")
        if flag is None or has_star_args(node.args) or len(node.args) > 1:
            return Review(f"`{code(node)}`: native PyTorch is always eager; delete the switch")
        why = _eager_why(bool_value(flag.value))
        if qualname in _EAGER_CONTEXT:
            if site.role is not Role.WITH_ITEM or not side_effect_free(flag):
                return Review(f"`{code(node)}`: native PyTorch is always eager; remove it and "
                              "keep the code it wrapped (an `as` target held the previous mode:"
                              " True)")
            return Remove(f"remove `{code(node)}` from its `with` statement: {why}")
        return _drop(node, site, why)


def _eager_why(flag: bool | None) -> str:
    if flag is True:
        return "native PyTorch always runs eagerly"
    if flag is False:
        return ("native PyTorch has no lazy tracing mode; the same operations run eagerly "
                "(for graph speed, compile the model: model.compile(backend=\"neuron\", "
                "dynamic=False))")
    return "native PyTorch always runs eagerly, whichever mode was asked for"


_SYNC_MULTI = f"{XLAC}._xla_sync_multi"
_UNLAZY = f"{XM}.unlazy"


class SyncTensors(Rule):
    id = "NM115"
    name = "xla-sync-tensors"
    kind = Kind.FIX
    summary = "`xm.unlazy(tensors)` and `torch_xla._XLAC._xla_sync_multi(tensors, ...)` become `torch.neuron.synchronize()` or go"
    explanation = """\
What it does: `xm.unlazy(tensors)` and `torch_xla._XLAC._xla_sync_multi(tensors, devices,
wait=True)` become `torch.neuron.synchronize()`; `_xla_sync_multi(..., wait=False)` is
deleted (a used value becomes `None`, which the call always returned).

Why: both cut the lazily recorded graph at the given tensors and executed it, so that those
tensors had values: a partial `mark_step`, used before saving tensors or moving them to the
CPU, and for timing. Eager TorchNeuron tensors are computed as they are issued; what is left
is waiting for the device, which `torch.neuron.synchronize()` does (for every queued
operation, not only those producing the given tensors). `sync_xla_data` and `devices` have no
native meaning.

What differs: nothing the program computes; with `wait=True` the host may wait a little
longer (for all queued work). A call whose arguments might do something (a call other than
a plain read) or whose `wait` is unpacked is reported for review."""
    doc_url = D_MEM
    example = Example(
        before="import torch_xla\n\n"
               "torch_xla._XLAC._xla_sync_multi(tensors, devices=[], wait=True)\n"
               "state = [t.cpu() for t in tensors]\n",
        after="import torch\n\ntorch.neuron.synchronize()\n"
              "state = [t.cpu() for t in tensors]\n",
    )
    calls = frozenset({_SYNC_MULTI, _UNLAZY})
    emits = ("torch.neuron.synchronize",)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if has_star_args(node.args):
            return Review(f"`{code(node)}`: wait for the device with torch.neuron.synchronize()")
        if site.qualname == _SYNC_MULTI:
            wait = argument(node.args, 2, "wait")
            flag = True if wait is None else bool_value(wait.value)
        else:
            flag = True
        if flag is False:
            return _drop(node, site, "eager tensors already have their values")
        sync = site.ref("torch.neuron.synchronize")
        if sync is None or not all(side_effect_free(a) for a in node.args):
            return Review(f"`{code(node)}`: eager tensors already have their values; wait for "
                          "the device with torch.neuron.synchronize()")
        new = call(sync)
        note = "" if flag else " (`wait` is computed: waiting always gives the same values)"
        return Replace(new, f"`{code(node)}` → `{code(new)}`: eager tensors already have their "
                       f"values; what is left is waiting for the device{note}")


class FetchGradients(Rule):
    id = "NM212"
    name = "xla-fetch-gradients"
    kind = Kind.FIX
    summary = "`xm._fetch_gradients(opt)` becomes the list of the optimizer's gradients"
    explanation = """\
What it does: `xm._fetch_gradients(optimizer)` becomes
`[p.grad.data for group in optimizer.param_groups for p in group["params"] if p.grad is not None]`.

Why: the private helper, which `xm.optimizer_step` used and mixed-precision scripts call to
all-reduce gradients before `scaler.step(optimizer)`, returned exactly that list: the
`.data` of every gradient the optimizer holds, in parameter-group order. It did nothing
XLA-specific, so the comprehension keeps its meaning on any device.

What differs: nothing. The tensors share storage with the gradients, so an in-place
all-reduce or scaling of the list changes the gradients the optimizer steps with, as
before. The optimizer expression is evaluated once, as before."""
    doc_url = D_DIST
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\ngrads = xm._fetch_gradients(optimizer)\n",
        after="grads = [p.grad.data for group in optimizer.param_groups for p in group[\"params\"]"
              " if p.grad is not None]\n",
    )
    calls = frozenset({f"{XM}._fetch_gradients"})

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        optimizer = argument(node.args, 0, "optimizer")
        if optimizer is None or len(node.args) != 1 or has_star_args(node.args):
            return Review(f"`{code(node)}`: list the gradients with [p.grad.data for group in "
                          "optimizer.param_groups for p in group[\"params\"] if p.grad is not "
                          "None]")
        value = optimizer.value
        if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        new = template('[p.grad.data for group in {o}.param_groups for p in group["params"] '
                       'if p.grad is not None]', o=value)
        return Replace(new, f"`{code(node)}` → the list of the optimizer's gradients, as the "
                       "private helper built it")


class ManualSeed(RngState):
    id = "NM405"
    name = "xla-manual-seed"
    kind = Kind.FIX
    summary = "`torch_xla.manual_seed(seed)` becomes `torch.neuron.manual_seed(seed)`"
    explanation = """\
What it does: `torch_xla.manual_seed(seed)` (and `seed, device` forms) becomes
`torch.neuron.manual_seed(seed)`.

Why: torch_xla.manual_seed called `xm.set_rng_state(seed, device)`: it seeded the XLA
device's random generator and nothing else. `torch.neuron.manual_seed` seeds the Neuron
device's generator and nothing else (it is the device module's standard `manual_seed`, which
`torch.manual_seed` calls for the `neuron` device among all others). The CPU generator, which
data shuffling and augmentation use, is left alone, as before; `torch.manual_seed` would
also reseed it and change those streams.

What differs: the device's random stream is not XLA's, so random numbers drawn on the
device differ from the XLA run's for the same seed, as on any other backend. `device=` is
dropped: each process drives one NeuronCore, its current device."""
    example = Example(
        before="import torch_xla\n\ntorch_xla.manual_seed(42)\n",
        after="import torch\n\ntorch.neuron.manual_seed(42)\n",
    )
    calls = frozenset({"torch_xla.manual_seed", "torch_xla.torch_xla.manual_seed"})


class CompilationCache(Rule):
    id = "NM603"
    name = "xla-compilation-cache"
    kind = Kind.FIX
    summary = "`xr.initialize_cache(path)` (XLA's persistent compilation cache) is deleted"
    explanation = """\
What it does: deletes `torch_xla.runtime.initialize_cache(path, readonly=...)` where it is a
statement (a used value becomes `None`, which it always returned).

Why: the call only set XLA_PERSISTENT_CACHE_PATH and XLA_PERSISTENT_CACHE_READ_ONLY, the
on-disk cache of PyTorch/XLA's compiled graphs, which TorchNeuron does not read (NM601
removes the same variables when a script sets them directly). TorchNeuron caches the graphs
it compiles (NEFFs) by itself.

What differs: nothing the program computes; a cache only saves compile time. The first
run on a machine compiles again. To choose where the native cache lives (for example a
per-rank or shared directory like `path`), set the cache variable that the TorchNeuron
environment-variable reference documents; neuron-migrate writes none, as AWS has not
confirmed its name (early builds read TORCH_NEURONX_NEFF_CACHE_DIR). A call whose arguments
might do something is reported for review."""
    doc_url = D_ENV
    example = Example(
        before="import torch_xla.runtime as xr\n\n"
               "xr.initialize_cache(f\"/tmp/xla_cache_{rank}\", readonly=False)\n"
               "train()\n",
        after="train()\n",
    )
    calls = frozenset({"torch_xla.runtime.initialize_cache"})

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if has_star_args(node.args):
            return Review(f"`{code(node)}`: XLA's compilation cache; delete it")
        return _drop(node, site, "it configured PyTorch/XLA's compilation cache, which "
                     "TorchNeuron does not read; the native compiler caches by itself (its "
                     "location is set by the TorchNeuron cache variable, not written for you)")


RULES: tuple[type[Rule], ...] = (EagerMode, SyncTensors, FetchGradients, ManualSeed,
                                 CompilationCache)
