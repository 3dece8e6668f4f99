"""NM920-NM922: torch.compile with the neuron backend. It compiles static shapes only
(`dynamic=False`), has one mode, and takes few options."""

from __future__ import annotations

import ast
import re

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Site, append_arg, bool_value,
                                    code as cst_code, keyword as cst_keyword, keyword_arg,
                                    string_value)
from neuron_migrate.ruleapi.readiness import (Facts, Limit, ReadinessRule, Where, code,
                                              is_module_compile, keyword, lines_of)
from neuron_migrate.rules.readiness_links import D_CREF

_DEFAULT_NEURON = re.compile(r"set_default_backend\(\s*(?:backend\s*=\s*)?[\"']neuron[\"']")
_KERAS = frozenset({"optimizer", "loss", "metrics"})


def neuron_compile(call: ast.Call, where: Where) -> bool:
    """`torch.compile(...)` or `module.compile(...)` that compiles with the neuron backend:
    `backend="neuron"`, or no backend after `torch.compiler.set_default_backend("neuron")`."""
    if any(k.arg is None for k in call.keywords):
        return False  # **kwargs: the backend cannot be read
    if where.qualname(call.func) != "torch.compile" and not is_module_compile(call, where.facts):
        return False
    backend = keyword(call, "backend")
    if backend is None:
        return where.facts.default_neuron
    return isinstance(backend, ast.Constant) and backend.value == "neuron"


class NeuronCompileRule(ReadinessRule):
    """A rule over the neuron-backend compile calls (`neuron_compile`)."""

    def candidates(self, facts: Facts, data: bytes) -> set[int]:
        return lines_of(facts.calls_named(("compile",)))  # torch.compile(...), x.compile(...)


class CompileStaticShapes(NeuronCompileRule):
    id = "NM920"
    name = "neuron-compile-static"
    kind = Kind.FIX
    limit = Limit.BLOCKS
    needs = (b"compile",)
    also = (b"neuron",)
    summary = "`torch.compile` / `Module.compile` with the neuron backend gets `dynamic=False` where it is unset or true"
    explanation = """\
What it does: in `torch.compile(...)` and `module.compile(...)` calls that compile with the
neuron backend (`backend="neuron"`, or no backend after
`torch.compiler.set_default_backend("neuron")`), adds `dynamic=False` where `dynamic` is not
given, and turns `dynamic=True` (or a computed value) into `dynamic=False`.

Why: TorchNeuron's compiler takes static shapes only; it rejects `dynamic=True`. Left unset
(`dynamic=None`), Dynamo compiles the first shapes statically and, when an input shape
changes, recompiles with dynamic shapes, which the neuron backend cannot take either.

What differs: the results do not. Each new input shape compiles a new graph (until Dynamo's
recompile limit, after which the function runs eagerly), so pad or bucket variable-length
inputs to a few fixed shapes (see NM930-NM936). A call with `**kwargs` is left alone."""
    doc_url = D_CREF
    example = Example(
        before="import torch\n\nmodel = Net().to(\"neuron\")\n"
               "model.compile(backend=\"neuron\")\n"
               "step = torch.compile(predict, backend=\"neuron\", dynamic=True)\n",
        after="import torch\n\nmodel = Net().to(\"neuron\")\n"
              "model.compile(backend=\"neuron\", dynamic=False)\n"
              "step = torch.compile(predict, backend=\"neuron\", dynamic=False)\n",
    )

    def check(self, node: ast.AST, where: Where) -> str | None:
        call: ast.Call = node  # type: ignore[assignment]
        if not neuron_compile(call, where):
            return None
        dynamic = keyword(call, "dynamic")
        if isinstance(dynamic, ast.Constant) and dynamic.value is False:
            return None
        what = "unset" if dynamic is None else f"dynamic={code(dynamic)}"
        return (f"`{code(call)}`: {what} becomes dynamic=False: the neuron backend compiles "
                "static shapes only")

    def may_act(self, node: ast.AST, names: frozenset[str]) -> bool:
        return "compile" in names

    def on_any_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if not self._neuron(node, site):
            return None
        dynamic = cst_keyword(node.args, "dynamic")
        if dynamic is not None and bool_value(dynamic.value) is False:
            return None
        if dynamic is None:
            args = append_arg(list(node.args), keyword_arg("dynamic", cst.Name("False")))
            note = "dynamic=False added"
        else:
            args = [a.with_changes(value=cst.Name("False")) if a is dynamic else a
                    for a in node.args]
            note = f"dynamic={cst_code(dynamic.value)} → dynamic=False"
        new = node.with_changes(args=args)
        return Replace(new, f"`{cst_code(node)}` → `{cst_code(new)}`: {note}; the neuron "
                       "backend compiles static shapes only, one graph per input shape (same "
                       "results; pad or bucket inputs to a few shapes)")

    @staticmethod
    def _neuron(node: cst.Call, site: Site) -> bool:
        if any(a.star for a in node.args):
            return False
        func = node.func
        if site.qualname_of(func) != "torch.compile":
            if not (isinstance(func, cst.Attribute) and func.attr.value == "compile"):
                return False
            if any(a.keyword is None for a in node.args) or \
                    site.qualname_of(func.value) is not None or \
                    any(a.keyword.value in _KERAS for a in node.args if a.keyword):
                return False
        backend = cst_keyword(node.args, "backend")
        if backend is None:
            return _DEFAULT_NEURON.search(site.text) is not None
        return string_value(backend.value) == "neuron"


class CompileMode(NeuronCompileRule):
    id = "NM921"
    name = "neuron-compile-mode"
    kind = Kind.REVIEW
    limit = Limit.SLOWS
    needs = (b"compile",)
    also = (b"neuron",)
    summary = "a `mode=` other than \"default\" in a neuron-backend compile runs as the default mode"
    explanation = """\
What it does: reports `mode=` values other than "default" (such as "reduce-overhead",
"max-autotune") in `torch.compile` / `Module.compile` calls with the neuron backend.

Why: the neuron backend has one compilation mode. Other modes are accepted but run as the
default mode with a warning: "reduce-overhead" (CUDA graphs) and the autotuning modes are
inductor features with no neuron counterpart, so the speed-up they were chosen for does not
happen.

What differs: nothing is rewritten (the warning is harmless); remove the `mode=` argument to
say what actually runs."""
    doc_url = D_CREF
    example = Example.unchanged(
        "import torch\n\nmodel = torch.compile(Net().to(\"neuron\"), backend=\"neuron\", "
        "dynamic=False, mode=\"max-autotune\")\n")

    def check(self, node: ast.AST, where: Where) -> str | None:
        call: ast.Call = node  # type: ignore[assignment]
        mode = keyword(call, "mode")
        if mode is None or not neuron_compile(call, where):
            return None
        if isinstance(mode, ast.Constant) and mode.value in (None, "default"):
            return None
        return (f"`mode={code(mode)}`: the neuron backend has only the default mode; other "
                "modes run as the default with a warning")


class CompileOptions(NeuronCompileRule):
    id = "NM922"
    name = "neuron-compile-options"
    kind = Kind.REVIEW
    limit = Limit.UNCONFIRMED
    needs = (b"compile",)
    also = (b"neuron",)
    summary = "`options=` in a neuron-backend compile: inductor options do not apply; check each against the neuron backend's"
    explanation = """\
What it does: reports the `options=` argument of `torch.compile` / `Module.compile` calls
with the neuron backend.

Why: `options` is passed to the backend. Inductor's options (`triton.cudagraphs`,
`max_autotune`, `epilogue_fusion`, ...) mean nothing to the neuron backend, which accepts
only a few of its own (its reference documents an internal `fallback_execution` key); an
option it does not know is ignored or rejected.

What differs: nothing is rewritten. Check each key against the neuron backend's torch.compile
reference and drop the inductor ones."""
    doc_url = D_CREF
    example = Example.unchanged(
        "import torch\n\nmodel = torch.compile(Net().to(\"neuron\"), backend=\"neuron\", "
        "dynamic=False, options={\"triton.cudagraphs\": True})\n")

    def check(self, node: ast.AST, where: Where) -> str | None:
        call: ast.Call = node  # type: ignore[assignment]
        options = keyword(call, "options")
        if options is None or not neuron_compile(call, where):
            return None
        if isinstance(options, ast.Constant) and options.value is None:
            return None
        return (f"`options={code(options)}`: check each option against the neuron backend's "
                "(inductor options do not apply)")


RULES: tuple[type[ReadinessRule], ...] = (CompileStaticShapes, CompileMode, CompileOptions)
