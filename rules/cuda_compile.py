"""NMC5xx (`--from cuda`): torch.compile. Inductor, CUDA's default backend, becomes the
neuron backend; its CUDA-only modes and options go or are reviewed."""

from __future__ import annotations

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Review, Role, Rule, Site,
                                    append_arg, bool_value, code, keyword, keyword_arg, relaid,
                                    string, string_value, with_string)
from neuron_migrate.rules.cuda_placement import CUDA

D_CREF = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html"
_COMPILE = "torch.compile"
_CUDA_MODES = frozenset({"reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"})
_INDUCTOR = "inductor"


class InductorBackend(Rule):
    id = "NMC501"
    name = "inductor-backend"
    kind = Kind.FIX
    summary = ("`torch.compile(model)` with the default (inductor) backend becomes "
               "`torch.compile(model, backend=\"neuron\", dynamic=False)`")
    explanation = """\
What it does: in `torch.compile(...)` (a call, or a bare `@torch.compile` decorator) without a
backend, or with `backend="inductor"`, the backend becomes "neuron" and `dynamic=False` is
added (an explicit `dynamic=` is set to False); the CUDA-only modes "reduce-overhead",
"max-autotune" and "max-autotune-no-cudagraphs" are dropped. Inductor `options=` are reported
for review.

Why: torch.compile's default backend, Inductor, generates Triton kernels for GPUs (and C++
for CPUs); on Trainium the `neuron` dynamo backend compiles the graph for the NeuronCore. It
compiles static shapes only and rejects `dynamic=True`; only the default mode exists, and AWS
asks to remove CUDA-specific modes.

What differs: the results do not. Each new input shape compiles a new graph: pad or bucket
variable-length inputs to a few shapes. CUDA graphs ("reduce-overhead") and autotuning are
gone; AWS recommends `fullgraph=True` once the model compiles without graph breaks."""
    doc_url = D_CREF
    example = Example(
        before="import torch\n\nmodel = torch.compile(model, mode=\"max-autotune\")\n",
        after="import torch\n\nmodel = torch.compile(model, backend=\"neuron\", dynamic=False)\n",
    )
    source = CUDA
    tokens = (b"compile",)
    names = frozenset({_COMPILE})
    watches = (_COMPILE,)
    emits = ("torch.compile",)

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        if site.role is not Role.DECORATOR:
            return None  # `torch.compile(...)`: the call is rewritten (on_any_call)
        new = cst.Call(func=node, args=append_arg(
            [keyword_arg("backend", string("neuron"))], keyword_arg("dynamic", cst.Name("False"))))
        return Replace(new, f"`@{code(node)}` → `@{code(new)}`: the neuron backend compiles "
                       "static shapes")

    def on_any_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if site.qualname_of(node.func) != _COMPILE or any(a.star for a in node.args):
            return None
        backend = keyword(node.args, "backend")
        if backend is not None and string_value(backend.value) != _INDUCTOR:
            return None  # another backend: chosen on purpose (NM501 handles openxla)
        options = keyword(node.args, "options")
        if options is not None:
            return Review(f"`{code(node)}`: Inductor `options=` do not apply to the neuron "
                          "backend; drop them and compile with backend=\"neuron\", "
                          "dynamic=False")
        notes: list[str] = []
        args: list[cst.Arg] = []
        for arg in node.args:
            name = arg.keyword.value if arg.keyword is not None else None
            if arg is backend:
                arg = arg.with_changes(value=with_string(arg.value, "neuron"))  # type: ignore[arg-type]
            elif name == "dynamic" and bool_value(arg.value) is not False:
                notes.append(f"dynamic={code(arg.value)} → dynamic=False: the neuron backend "
                             "compiles static shapes only")
                arg = arg.with_changes(value=cst.Name("False"))
            elif name == "mode" and string_value(arg.value) in _CUDA_MODES:
                notes.append(f"dropped the CUDA-only mode {code(arg.value)}")
                continue
            elif name == "mode" and string_value(arg.value) != "default":
                return Review(f"`{code(node)}`: only the default mode exists on the neuron "
                              "backend; drop `mode=`")
            args.append(arg)
        if backend is None:
            args.append(keyword_arg("backend", string("neuron")))
        if keyword(node.args, "dynamic") is None:
            args.append(keyword_arg("dynamic", cst.Name("False")))
        new = node.with_changes(args=relaid(node.args, args))
        note = f"; {'; '.join(notes)}" if notes else ""
        return Replace(new, f"`{code(node)}` → `{code(new)}`: Inductor targets GPUs; the "
                       f"neuron backend compiles static shapes{note}")


RULES: tuple[type[Rule], ...] = (InductorBackend,)
