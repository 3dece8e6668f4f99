"""NM501-NM503: graph compilation. XLA compiled everything; native code compiles on request."""

from __future__ import annotations

import libcst as cst

from codemod.model import Kind
from codemod.rule import Example, Outcome, Replace, Review, Rule, Site
from codemod.quote import code
from rules.support import (append_arg, argument, bool_value, keyword, keyword_arg, string,
                           string_value, with_string)

D_CREF = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html"
D_COPT = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/"
          "how-to-optimize-with-torch-compile.html")
_XLA_BACKENDS = frozenset({"openxla", "openxla_eval"})
_CUDA_MODES = frozenset({"reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"})
_TORCH_COMPILE = frozenset({"torch.compile"})
_XLA_COMPILE = frozenset({"torch_xla.compile", "torch_xla.torch_xla.compile"})


class CompileBackend(Rule):
    id = "NM501"
    name = "openxla-backend"
    kind = Kind.FIX
    summary = "`torch.compile(backend=\"openxla\")` becomes `backend=\"neuron\", dynamic=False`"
    explanation = """\
What it does: in `torch.compile`, the dynamo backends "openxla" and "openxla_eval" become
"neuron" and `dynamic=False` is added; CUDA-only `mode=` values ("reduce-overhead",
"max-autotune", "max-autotune-no-cudagraphs") are dropped.

Why: TorchNeuron registers the `neuron` dynamo backend. It compiles static shapes only: it
rejects `dynamic=True`, and each new input shape compiles a new graph, so `dynamic=False` is
stated explicitly. Only the default mode exists; other modes warn and fall back.

What differs: an explicit `dynamic=True` is reported for review instead of rewritten: pad or
bucket variable-length inputs to a few fixed shapes, then set dynamic=False. AWS recommends
`fullgraph=True` as well once the model compiles without graph breaks."""
    doc_url = D_CREF
    example = Example(
        before="import torch\n\ncompiled = torch.compile(model, backend=\"openxla\")\n",
        after="import torch\n\ncompiled = torch.compile(model, backend=\"neuron\", "
              "dynamic=False)\n",
    )
    calls = _TORCH_COMPILE

    def interesting_string(self, value: str) -> bool:
        return value in _XLA_BACKENDS

    def leftover_string(self, value: str) -> str:
        return (f"the dynamo backend {value!r} exists only with torch_xla; use "
                "torch.compile(..., backend=\"neuron\", dynamic=False)")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        backend = keyword(node.args, "backend")
        if backend is None or string_value(backend.value) not in _XLA_BACKENDS:
            return None
        dynamic = keyword(node.args, "dynamic")
        if dynamic is not None and bool_value(dynamic.value) is not False:
            return Review(f"`{code(node)}`: the neuron backend compiles static shapes only; pad "
                          "or bucket variable-length inputs, then use backend=\"neuron\", "
                          "dynamic=False")
        notes: list[str] = []
        args: list[cst.Arg] = []
        for arg in node.args:
            if arg is backend:
                arg = arg.with_changes(value=with_string(arg.value, "neuron"))  # type: ignore[arg-type]
            elif arg.keyword is not None and arg.keyword.value == "mode" and \
                    string_value(arg.value) in _CUDA_MODES:
                notes.append(f"dropped CUDA-only mode {code(arg.value)}")
                continue
            args.append(arg)
        if args and args[-1] is not node.args[-1] and not isinstance(node.args[-1].comma,
                                                                      cst.Comma):
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        if dynamic is None:
            args = append_arg(args, keyword_arg("dynamic", cst.Name("False")))
        new = node.with_changes(args=args)
        note = f"; {'; '.join(notes)}" if notes else ""
        return Replace(new, f"`{code(node)}` → `{code(new)}`{note}")


class XlaCompile(Rule):
    id = "NM502"
    name = "torch-xla-compile"
    kind = Kind.FIX
    summary = "`torch_xla.compile(fn)` becomes `torch.compile(fn, backend=\"neuron\", dynamic=False)`"
    explanation = """\
What it does: replaces `torch_xla.compile(fn, full_graph=..., name=...)` with
`torch.compile(fn, backend="neuron", dynamic=False)`; `full_graph=` becomes `fullgraph=`.
Used as a decorator factory (`@torch_xla.compile(full_graph=True)`) it is rewritten the same way.

Why: torch_xla.compile traced a function into one XLA graph. On TorchNeuron the same job is
torch.compile with the neuron backend, which compiles static shapes.

What differs: `name=` (a label for XLA's debug output) and `num_different_graphs_allowed=`
are dropped; the neuron backend recompiles per input shape instead. A bare `@torch_xla.compile`
decorator is reported for review."""
    doc_url = D_CREF
    example = Example(
        before="import torch_xla\n\nstep = torch_xla.compile(train_step, full_graph=True)\n",
        after="import torch\n\nstep = torch.compile(train_step, backend=\"neuron\", "
              "dynamic=False, fullgraph=True)\n",
    )
    calls = _XLA_COMPILE
    emits = ("torch.compile",)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        compile_ = site.ref("torch.compile")
        if compile_ is None or any(a.star for a in node.args):
            return Review(f"`{code(node)}`: use torch.compile(fn, backend=\"neuron\", "
                          "dynamic=False)")
        fn = argument(node.args, 0, "f")
        args: list[cst.Arg] = [cst.Arg(fn.value)] if fn is not None else []
        args = append_arg(args, keyword_arg("backend", string("neuron")))
        args = append_arg(args, keyword_arg("dynamic", cst.Name("False")))
        full = argument(node.args, 1, "full_graph")
        if full is not None:
            args = append_arg(args, keyword_arg("fullgraph", full.value))
        dropped = [a.keyword.value for a in node.args
                   if a.keyword is not None and a.keyword.value in
                   ("name", "num_different_graphs_allowed")]
        new = cst.Call(compile_, args)
        note = f"; dropped {', '.join(dropped)}" if dropped else ""
        return Replace(new, f"`{code(node)}` → `{code(new)}`{note}")


class CompileModel(Rule):
    id = "NM503"
    name = "compile-model"
    kind = Kind.FIX
    summary = "after the training model is put on the device, `model.compile(backend=\"neuron\", dynamic=False)` is added"
    explanation = """\
What it does: where a model that the file trains (its `.parameters()` go to an optimizer) is
moved to the XLA device (`model.to(device)` or `model = Net().to(device)`), adds
`model.compile(backend="neuron", dynamic=False)` on the next line. Turn it off with
--no-compile.

Why: XLA-era code always ran as compiled graphs; TorchNeuron runs eagerly unless asked to
compile, and eager execution is much slower on Trainium. `nn.Module.compile` compiles the
module in place, so its state_dict keys stay the same and existing checkpoints keep loading
(wrapping with `torch.compile(model)` would prefix every key with `_orig_mod.`).

What differs: the numbers do not. Compilation needs static shapes: each new input shape
compiles a new graph, so pad or bucket variable-length inputs (sequence lengths, a smaller
last batch: use drop_last=True) to a few fixed shapes. The first steps are slow while graphs
compile."""
    doc_url = D_COPT
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\n"
               "model = Net().to(device)\noptimizer = torch.optim.SGD(model.parameters())\n",
        after="import torch\n\ndevice = torch.device(\"neuron\")\nmodel = Net().to(device)\n"
              "model.compile(backend=\"neuron\", dynamic=False)\n"
              "optimizer = torch.optim.SGD(model.parameters())\n",
    )
    emits = ("torch.nn.Module.compile",)

    def on_any_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if not site.options.compile:
            return None
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "to" and node.args):
            return None
        if not self._is_device(node.args[0].value, site):
            return None
        model = self._model(func, site)
        if model is None:
            return None
        text = site.text
        if f"{model}.parameters()" not in text or f"{model}.compile(" in text or \
                f"compile({model}" in text:
            return None
        statement = cst.parse_statement(
            f'{model}.compile(backend="neuron", dynamic=False)\n')
        if not site.insert_after((statement,)):
            return None
        return Replace(node, f"added `{model}.compile(backend=\"neuron\", dynamic=False)` "
                       "after the model is placed on the device (static shapes: pad or bucket "
                       "variable-length inputs)")

    @staticmethod
    def _is_device(value: cst.BaseExpression, site: Site) -> bool:
        if site.device_binding(value):
            return True
        if isinstance(value, cst.Call) and site.qualname_of(value.func) == "torch.device":
            return bool(value.args) and string_value(value.args[0].value) == "neuron"
        return string_value(value) in ("neuron", "xla")

    @staticmethod
    def _model(func: cst.Attribute, site: Site) -> str | None:
        parent = site.parent
        if isinstance(parent, cst.Expr) and isinstance(func.value, cst.Name):
            return func.value.value  # model.to(device)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and \
                isinstance(parent.targets[0].target, cst.Name):
            return parent.targets[0].target.value  # model = Net().to(device)
        return None


RULES: tuple[type[Rule], ...] = (CompileBackend, XlaCompile, CompileModel)
