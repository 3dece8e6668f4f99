"""NMC3xx (`--from cuda`): mixed precision. CUDA's float16 autocast becomes the NeuronCore's
bfloat16 one; loss scaling and float16 elsewhere are reviewed."""

from __future__ import annotations

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Review, Role, Rule, Site,
                                    append_arg, argument, bool_value, code, has_star_args, keyword,
                                    keyword_arg, relaid, string, string_value, with_string)
from neuron_migrate.rules.cuda_placement import CUDA
from neuron_migrate.rules.review_base import ReviewRule

D_HOME = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html"

_CUDA_AMP = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
_CUDA_AMP_ORDER = ("enabled", "dtype", "cache_enabled")  # torch.cuda.amp.autocast's positionals
_TORCH_AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast",
                             "torch.amp.autocast_mode.autocast"})
_FLOAT16 = frozenset({"torch.float16", "torch.half"})
_SCALERS = ("torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler", "torch.amp.GradScaler",
            "torch.amp.grad_scaler", "torch.GradScaler")


class CudaAutocast(Rule):
    id = "NMC301"
    name = "cuda-autocast"
    kind = Kind.FIX
    summary = ("`torch.cuda.amp.autocast()` and `torch.autocast(\"cuda\")` become "
               "`torch.autocast(\"neuron\", dtype=torch.bfloat16)`")
    explanation = """\
What it does: `torch.cuda.amp.autocast(...)` (its positional `enabled`, `dtype`,
`cache_enabled` become keywords) and `torch.autocast("cuda", ...)` / `torch.amp.autocast(
device_type="cuda", ...)` become `torch.autocast("neuron", ...)`. Without a dtype,
`dtype=torch.bfloat16` is written out; an explicit bfloat16 (or another non-float16 dtype) is
kept. An explicit `dtype=torch.float16` is reported for review instead.

Why: TorchNeuron supports mixed precision through the standard autocast API with
`device_type="neuron"` (AWS's porting guide). CUDA's autocast defaults to float16, which needs
loss scaling (GradScaler) to train; bfloat16 is Trainium's native mixed-precision type, with
float32's range, so it trains without scaling.

What differs: the lower-precision type, where the script relied on CUDA's default: operations
autocast runs in float16 on a GPU now run in bfloat16 (8 bits of mantissa instead of 11, the
range of float32). Losses and metrics move slightly; a GradScaler becomes unnecessary (NMC302
reports it). A script that chose float16 on purpose keeps its call and gets a review item."""
    doc_url = D_HOME
    example = Example(
        before="import torch\n\nwith torch.cuda.amp.autocast():\n    loss = model(x)\n",
        after="import torch\n\nwith torch.autocast(\"neuron\", dtype=torch.bfloat16):\n"
              "    loss = model(x)\n",
    )
    source = CUDA
    tokens = (b"cuda", b"autocast")
    watches = ("torch.cuda", "torch.autocast", "torch.amp")
    emits = ("torch.autocast", "torch.bfloat16")

    def on_any_call(self, node: cst.Call, site: Site) -> Outcome | None:
        qualname = site.qualname_of(node.func)
        if qualname not in _CUDA_AMP and qualname not in _TORCH_AUTOCAST:
            return None
        if has_star_args(node.args):
            return Review(f"`{code(node)}`: unpacked arguments; use torch.autocast(\"neuron\", "
                          "dtype=torch.bfloat16)") if qualname in _CUDA_AMP else None
        if qualname in _CUDA_AMP:
            autocast = site.ref("torch.autocast")
            if autocast is None:
                return Review(f"`{code(node)}`: use torch.autocast(\"neuron\", "
                              "dtype=torch.bfloat16)")
            args = [cst.Arg(string("neuron"))] + [_as_keyword(a, i) for i, a in
                                                   enumerate(node.args)]
            new = node.with_changes(func=autocast, args=relaid(node.args, args))
        else:
            device = argument(node.args, 0, "device_type")
            value = string_value(device.value) if device is not None else None
            if device is None or value != "cuda":
                return None  # another device, or one computed at run time (NMC102 follows it)
            args = list(node.args)
            args[args.index(device)] = device.with_changes(
                value=with_string(device.value, "neuron"))  # type: ignore[arg-type]
            new = node.with_changes(args=args)
        dtype = keyword(new.args, "dtype") or \
            (argument(node.args, 1, "dtype") if qualname in _TORCH_AUTOCAST else None)
        if dtype is not None and site.qualname_of(dtype.value) in _FLOAT16:
            return Review(f"`{code(node)}`: float16 runs on Trainium, but bfloat16 is its native "
                          "mixed-precision type and trains without a GradScaler; consider "
                          "dtype=torch.bfloat16", suggestion=code(new))
        note = ""
        enabled = keyword(new.args, "enabled")
        if dtype is None and enabled is not None and bool_value(enabled.value) is False:
            pass  # autocast switched off (around float32 code): no dtype to choose
        elif dtype is None:
            bf16 = site.ref("torch.bfloat16")
            if bf16 is None:
                return Review(f"`{code(node)}`: use torch.autocast(\"neuron\", "
                              "dtype=torch.bfloat16)")
            new = new.with_changes(args=append_arg(new.args, keyword_arg("dtype", bf16)))
            note = ("; CUDA's default float16 becomes bfloat16, Trainium's native "
                    "mixed-precision type (no loss scaling needed)")
        return Replace(new, f"`{code(node)}` → `{code(new)}`{note}")


def _as_keyword(arg: cst.Arg, index: int) -> cst.Arg:
    if arg.keyword is not None or index >= len(_CUDA_AMP_ORDER):
        return arg
    return arg.with_changes(keyword=cst.Name(_CUDA_AMP_ORDER[index]),
                            equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                  whitespace_after=cst.SimpleWhitespace("")))


class CudaGradScaler(ReviewRule):
    id = "NMC302"
    name = "cuda-grad-scaler"
    summary = "CUDA's `GradScaler` is reviewed: bfloat16 needs no loss scaling"
    explanation = """\
What it does: reports `torch.cuda.amp.GradScaler`, `torch.amp.GradScaler` and
`torch.GradScaler`, leaving the code as it is.

Why: loss scaling keeps small float16 gradients from underflowing. With bfloat16 autocast
(what NMC301 writes) gradients have float32's range and need no scaling: remove the scaler,
`scaler.scale(loss).backward()` becoming `loss.backward()`, `scaler.step(optimizer)` becoming
`optimizer.step()` and `scaler.update()` going. A script that keeps float16 needs a scaler
for the neuron device (`torch.amp.GradScaler("neuron")`, whose support AWS's documentation does
not confirm).

What differs: the code is unchanged. On a machine without CUDA a CUDA GradScaler disables
itself with a warning and passes the loss and the step through, so the script still runs."""
    doc_url = D_HOME
    example = Example.unchanged(
        "import torch\n\nscaler = torch.cuda.amp.GradScaler()\n")
    source = CUDA
    tokens = (b"cuda", b"GradScaler")
    watches = ("torch.cuda", "torch.amp", "torch.GradScaler")
    guidance = {prefix: ("bfloat16 needs no loss scaling: remove the scaler (scale(loss)."
                         "backward() → loss.backward(), step(opt) → opt.step(), drop update()); "
                         "for float16 try torch.amp.GradScaler(\"neuron\") (support unconfirmed)")
                for prefix in _SCALERS}


class Float16(Rule):
    id = "NMC303"
    name = "cuda-float16"
    kind = Kind.REVIEW
    summary = "float16 (`torch.float16`, `torch.half`, `.half()`) is reviewed: bfloat16 is Trainium's type"
    explanation = """\
What it does: reports references to `torch.float16` and `torch.half`, calls of `.half()`,
and the float16 switches of training libraries (`fp16=True`, as in Hugging Face's
`TrainingArguments`, and `mixed_precision="fp16"`, as in Accelerate's `Accelerator`), leaving
the code as it is.

Why: float16 was the GPU's mixed-precision type; it runs on Trainium, but bfloat16 is the
NeuronCore's native one, with float32's range, so it trains without loss scaling and does not
overflow where float16 does. Models loaded or cast to float16 for GPU inference usually want
`torch.bfloat16` (or `.bfloat16()`) now.

What differs: the code is unchanged; it keeps running in float16. Changing the type is a
numerical decision, so it is left to you."""
    doc_url = D_HOME
    example = Example.unchanged("import torch\n\nmodel = model.to(dtype=torch.float16)\n")
    source = CUDA
    tokens = (b"float16", b"half", b"fp16")
    names = _FLOAT16
    watches = tuple(_FLOAT16)
    attributes = frozenset({"half", "fp16", "mixed_precision"})

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        return Review(f"`{code(node)}`: float16 runs on Trainium, but bfloat16 is its native "
                      "mixed-precision type; consider torch.bfloat16", suggestion="torch.bfloat16")

    def on_any_call(self, node: cst.Call, site: Site) -> Outcome | None:
        func = node.func
        fp16 = keyword(node.args, "fp16")
        if fp16 is not None and bool_value(fp16.value) is True:
            return Review(f"`fp16=True` in `{code(func)}(...)`: float16 training needs loss "
                          "scaling; bfloat16 is Trainium's native type (Hugging Face: "
                          "bf16=True)", suggestion="bf16=True")
        precision = keyword(node.args, "mixed_precision")
        if precision is not None and string_value(precision.value) == "fp16":
            return Review(f"`mixed_precision={code(precision.value)}` in `{code(func)}(...)`: "
                          "bfloat16 is Trainium's native mixed-precision type",
                          suggestion='mixed_precision="bf16"')
        if not isinstance(func, cst.Attribute) or func.attr.value != "half" or node.args or \
                site.qualname_of(func) is not None:
            return None
        return Review(f"`{code(node)}`: float16 runs on Trainium, but bfloat16 is its native "
                      "mixed-precision type; consider `.bfloat16()`",
                      suggestion=code(node.with_changes(func=func.with_changes(
                          attr=cst.Name("bfloat16")))))


_CUSTOM = {f"torch.cuda.amp.{name}": f"torch.amp.{name}" for name in ("custom_fwd", "custom_bwd")}
_CUSTOM.update({f"torch.cuda.amp.autocast_mode.{name}": f"torch.amp.{name}"
                for name in ("custom_fwd", "custom_bwd")})


class CustomForward(Rule):
    id = "NMC304"
    name = "cuda-custom-fwd"
    kind = Kind.FIX
    summary = ("`@torch.cuda.amp.custom_fwd` / `custom_bwd` become "
               "`@torch.amp.custom_fwd(device_type=\"neuron\")` / `custom_bwd(...)`")
    explanation = """\
What it does: the decorators `torch.cuda.amp.custom_fwd` and `custom_bwd` of custom autograd
functions become `torch.amp.custom_fwd(device_type="neuron", ...)` and
`torch.amp.custom_bwd(device_type="neuron")`; `cast_inputs=` is kept.

Why: they make a custom `torch.autograd.Function` behave under autocast: the forward either
runs with the autocast state it was called with, or (with `cast_inputs`) casts its floating
inputs and runs with autocast off, and the backward runs with the forward's state. PyTorch
moved them to `torch.amp` with a `device_type`; the state they must follow is now the neuron
device's autocast (NMC301).

What differs: nothing: the same function under the neuron device's autocast."""
    doc_url = "https://docs.pytorch.org/docs/stable/amp.html#torch.amp.custom_fwd"
    example = Example(
        before="import torch\n\n\nclass Scale(torch.autograd.Function):\n"
               "    @staticmethod\n    @torch.cuda.amp.custom_fwd\n"
               "    def forward(ctx, x):\n        return x * 2\n",
        after="import torch\n\n\nclass Scale(torch.autograd.Function):\n"
              "    @staticmethod\n    @torch.amp.custom_fwd(device_type=\"neuron\")\n"
              "    def forward(ctx, x):\n        return x * 2\n",
    )
    source = CUDA
    tokens = (b"custom_fwd", b"custom_bwd")
    calls = frozenset(_CUSTOM)
    names = frozenset(_CUSTOM)
    emits = ("torch.amp.custom_fwd", "torch.amp.custom_bwd")

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        if site.role is not Role.DECORATOR:
            return None  # a call's function: on_call decides; a value: reported below
        return self._decorator(cst.Call(func=node), site, f"@{code(node)}")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if any(a.star or a.keyword is None for a in node.args):
            return Review(f"`{code(node)}`: use torch.amp.{(site.qualname or '').rsplit('.', 1)[-1]}"
                          "(device_type=\"neuron\", ...)")
        return self._decorator(node, site, code(node))

    @staticmethod
    def _decorator(node: cst.Call, site: Site, shown: str) -> Outcome:
        qualname = site.qualname or ""
        func = site.ref(_CUSTOM[qualname])
        if func is None:
            return Review(f"`{code(node)}`: use {_CUSTOM[qualname]}(device_type=\"neuron\")")
        args = [keyword_arg("device_type", string("neuron")), *node.args]
        new = node.with_changes(func=func, args=relaid(node.args, args))
        at = "@" if shown.startswith("@") else ""
        return Replace(new, f"`{shown}` → `{at}{code(new)}`: the autocast state it follows is "
                       "the neuron device's")


RULES: tuple[type[Rule], ...] = (CudaAutocast, CudaGradScaler, Float16, CustomForward)
