"""NM501-NM503: graph compilation. XLA compiled everything; native code compiles on request."""

from __future__ import annotations

import ast

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Remove, Replace, Review, Role, Rule,
                                    Site, append_arg, argument, bool_value, code, keyword,
                                    keyword_arg, string, string_value, with_string)
from neuron_migrate.ruleapi.analysis import called_functions, decorated as _decorated, trains
from neuron_migrate.rules.trained_model import trained_where_placed

D_CREF = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html"
D_COPT = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/"
          "how-to-optimize-with-torch-compile.html")
_XLA_BACKENDS = frozenset({"openxla", "openxla_eval"})
_CUDA_MODES = frozenset({"reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"})
_TORCH_COMPILE = frozenset({"torch.compile"})
_XLA_COMPILE = frozenset({"torch_xla.compile", "torch_xla.torch_xla.compile"})
_DROPPED = ("name", "num_different_graphs_allowed", "max_different_graphs",
            "custom_compile_options")
_TRAINING = ("runs a training step (backward or an optimizer step), which torch.compile "
             "cannot trace (Dynamo raises Unsupported on `Optimizer.zero_grad` and "
             "`Tensor.backward()`); eager execution runs it as it is: for speed, compile the "
             "model instead (`model.compile(backend=\"neuron\", dynamic=False)`, which NM503 "
             "adds where the model is put on the device)")


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

What differs: the results do not. An explicit `dynamic=True` (or a computed `dynamic=`) becomes
`dynamic=False` too: the neuron backend rejects dynamic shapes, and static compilation gives
the same numbers, compiling one graph per input shape (after Dynamo's recompile limit the
function runs eagerly). Pad or bucket variable-length inputs to a few fixed shapes. AWS
recommends `fullgraph=True` as well once the model compiles without graph breaks."""
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
        notes: list[str] = []
        args: list[cst.Arg] = []
        for arg in node.args:
            if arg is backend:
                arg = arg.with_changes(value=with_string(arg.value, "neuron"))  # type: ignore[arg-type]
            elif arg is dynamic and bool_value(arg.value) is not False:
                notes.append(f"dynamic={code(arg.value)} → dynamic=False: the neuron backend "
                             "compiles static shapes only; each new input shape compiles a new "
                             "graph (same results; pad or bucket inputs to a few shapes)")
                arg = arg.with_changes(value=cst.Name("False"))
            elif arg.keyword is not None and arg.keyword.value == "mode" and \
                    string_value(arg.value) in _CUDA_MODES:
                notes.append(f"drop CUDA-only mode {code(arg.value)}")
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
    summary = ("`torch_xla.compile(fn)` becomes `fn` for a training step, `torch.compile(fn, "
               "backend=\"neuron\", dynamic=False)` for a forward")
    explanation = """\
What it does: `torch_xla.compile(fn)` cut PyTorch/XLA's lazy graph around a function so that
everything it did (forward, backward, optimizer step) ran as one XLA graph. TorchNeuron runs
eagerly, so the faithful rewrite is the function itself:
- `fn` does training work (its body, or a function or method of this file it calls, runs
  `backward()`, `zero_grad()`, an optimizer or scheduler `step()`, `torch.autograd.grad`,
  `xm.optimizer_step`, gradient clipping): `torch_xla.compile(fn)` becomes `fn`, and a
  `@torch_xla.compile(...)` decorator on it is removed;
- `fn`'s body is in this file and only computes (a forward pass): it becomes
  `torch.compile(fn, backend="neuron", dynamic=False)`, with `full_graph=` as `fullgraph=`;
- `fn`'s body is not in this file (a parameter, an import, a module object): `fn` itself,
  since calling it uncompiled is always correct and compiling it may fail;
- `with torch_xla.compile():` keeps its body and loses the `with`.

Why: torch.compile traces Python with Dynamo, which refuses training steps: under
`fullgraph=True` it raises `Unsupported` on `Optimizer.zero_grad`, `Tensor.backward()` and
`optimizer.step()`, and without it the step is cut into many small graphs. Training speed on
Trainium comes from compiling the model (`model.compile(backend="neuron", dynamic=False)`,
added by NM503 where the model is put on the device); backward then runs compiled too.

What differs: nothing in the results. The body is judged by what it visibly calls: a function
that reaches a training step only through code from another module is compiled, and with
`fullgraph=True` Dynamo stops at its first call with `Unsupported` (call the function itself
there). `name=` (a label for XLA's debug output), `max_different_graphs=` and
`custom_compile_options=` have no native counterpart and are dropped; the neuron backend
recompiles per input shape instead. A `torch_xla.compile()` used in
any other way is reported for review."""
    doc_url = D_CREF
    example = Example(
        before="import torch_xla\n\n\ndef train_step(batch):\n    optimizer.zero_grad()\n"
               "    model(batch).sum().backward()\n    optimizer.step()\n\n\n"
               "def predict(batch):\n    return model(batch).argmax(-1)\n\n\n"
               "step = torch_xla.compile(train_step, full_graph=True)\n"
               "infer = torch_xla.compile(predict, full_graph=True)\n",
        after="import torch\n\n\ndef train_step(batch):\n    optimizer.zero_grad()\n"
              "    model(batch).sum().backward()\n    optimizer.step()\n\n\n"
              "def predict(batch):\n    return model(batch).argmax(-1)\n\n\n"
              "step = train_step\n"
              "infer = torch.compile(predict, backend=\"neuron\", dynamic=False, fullgraph=True)\n",
    )
    calls = _XLA_COMPILE
    names = _XLA_COMPILE
    emits = ("torch.compile",)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if any(a.star for a in node.args):
            return Review(f"`{code(node)}`: call the function itself; compile only a pure "
                          "forward with torch.compile(fn, backend=\"neuron\", dynamic=False)")
        fn = argument(node.args, 0, "f")
        if fn is not None:
            return self._wrapped(node, fn.value, site)
        if site.role is Role.WITH_ITEM:
            return Remove(f"remove `{code(node)}` from its `with` statement: eager execution "
                          "has no lazy graph to cut around the block")
        decorated = _decorated(site)
        if decorated is None:
            return Review(f"`{code(node)}`: call the function itself; compile only a pure "
                          "forward with torch.compile(fn, backend=\"neuron\", dynamic=False)")
        if trains([decorated], site.module_tree, site.statement):
            return Remove(f"remove `@{code(node)}`: `{decorated.name}` {_TRAINING}")
        return self._compiled(node, None, site)

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        decorated = _decorated(site)
        if decorated is None or site.parent.decorator is not node:  # type: ignore[union-attr]
            return None  # a call's function: on_call decides
        if trains([decorated], site.module_tree, site.statement):
            return Remove(f"remove `@{code(node)}`: `{decorated.name}` {_TRAINING}")
        outcome = self._compiled(cst.Call(node), None, site)
        if isinstance(outcome, Replace):
            outcome = Replace(outcome.node, f"`@{code(node)}` → `@{code(outcome.node)}`: "
                              "it only computes (no backward or optimizer step), so Dynamo "
                              "can compile it")
        return outcome

    def _wrapped(self, node: cst.Call, fn: cst.BaseExpression, site: Site) -> Outcome:
        functions = called_functions(fn, site)
        name = code(fn)
        if functions is None:
            return Replace(fn, f"`{code(node)}` → `{name}`: the body of `{name}` is not in this "
                           "file, so it is called as it is (eager execution gives the same "
                           "results); if it only runs a forward pass, "
                           f"`torch.compile({name}, backend=\"neuron\", dynamic=False)` is "
                           "faster, but a function that calls backward() or steps an optimizer "
                           "cannot be compiled")
        if trains(functions, site.module_tree, site.statement):
            return Replace(fn, f"`{code(node)}` → `{name}`: `{name}` {_TRAINING}")
        return self._compiled(node, fn, site)

    def _compiled(self, node: cst.Call, fn: cst.BaseExpression | None, site: Site) -> Outcome:
        compile_ = site.ref("torch.compile")
        if compile_ is None:
            return Review(f"`{code(node)}`: `torch` means something else here; use "
                          "torch.compile(fn, backend=\"neuron\", dynamic=False)")
        args: list[cst.Arg] = [cst.Arg(fn)] if fn is not None else []
        args = append_arg(args, keyword_arg("backend", string("neuron")))
        args = append_arg(args, keyword_arg("dynamic", cst.Name("False")))
        full = argument(node.args, 1, "full_graph")
        if full is not None:
            args = append_arg(args, keyword_arg("fullgraph", full.value))
        dropped = [a.keyword.value for a in node.args
                   if a.keyword is not None and a.keyword.value in _DROPPED]
        new = cst.Call(compile_, args)
        note = f"; drop {', '.join(dropped)}" if dropped else ""
        return Replace(new, f"`{code(node)}` → `{code(new)}`: it only computes (no backward or "
                       f"optimizer step), so Dynamo can compile it{note}")


class CompileModel(Rule):
    id = "NM503"
    name = "compile-model"
    kind = Kind.FIX
    summary = "after the training model is put on the device, `model.compile(backend=\"neuron\", dynamic=False)` is added"
    explanation = """\
What it does: where a model is moved to the XLA device (`model.to(device)`,
`model = Net().to(device)` or `self.model = Net().to(device)`, the device from
`xm.xla_device()` directly or through a function of the file that returns it) by code that
trains it, adds `model.compile(backend="neuron", dynamic=False)` on the next line. The code
trains the model when it hands the model's `.parameters()` over (to an optimizer) and runs a
training step (backward, an optimizer step), itself or through functions of the file it
calls, or when it passes the model to a function or class of the file that does; for
`self.model`, when the class does. A model placed for inference (traced, evaluated) is left
alone, even where another function of the file trains a model of the same name. Turn it off
with --no-compile.

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

    def may_act(self, node: ast.AST, names: frozenset[str]) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "to" and bool(node.args)

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
        if f"{model}.compile(" in text or f"compile({model}" in text or \
                not trained_where_placed(model, site.module_tree, site.statement):
            return None
        statement = cst.parse_statement(
            f'{model}.compile(backend="neuron", dynamic=False)\n')
        if not site.insert_after((statement,)):
            return None
        return Replace(node, f"add `{model}.compile(backend=\"neuron\", dynamic=False)` "
                       "after the model is placed on the device (static shapes: pad or bucket "
                       "variable-length inputs)")

    @staticmethod
    def _is_device(value: cst.BaseExpression, site: Site) -> bool:
        if site.device_binding(value):
            return True
        if isinstance(value, cst.Call) and site.qualname_of(value.func) == "torch.device":
            return bool(value.args) and string_value(value.args[0].value) == "neuron"
        placed = string_value(value)
        if placed == "neuron" and "cuda" in site.options.sources:
            return False  # maybe a CUDA placement NMC101/NMC102 renamed: CUDA code ran eagerly
        return placed in ("neuron", "xla")

    @staticmethod
    def _model(func: cst.Attribute, site: Site) -> str | None:
        parent = site.parent
        if isinstance(parent, cst.Expr) and isinstance(func.value, cst.Name):
            return func.value.value  # model.to(device)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
            if isinstance(target, cst.Name):
                return target.value  # model = Net().to(device)
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and \
                    target.value.value == "self":
                return f"self.{target.attr.value}"  # self.model = Net().to(device)
        return None


RULES: tuple[type[Rule], ...] = (CompileBackend, XlaCompile, CompileModel)
