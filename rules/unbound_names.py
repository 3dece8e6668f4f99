"""NM719: XLA-era names used where nothing binds them: `xm.xla_device()` in a file whose
`import torch_xla.core.xla_model as xm` is gone (removed upstream, or never copied over).

The engine follows names through their imports, so a use without one is invisible to every
other rule; it raises NameError when it runs. This rule reads the stdlib `ast` (a readiness
walk, as the NM9xx checks do) and reports the conventional names of torch_xla's modules that
no statement of the file binds.
"""

from __future__ import annotations

import ast
from typing import ClassVar

from neuron_migrate.ruleapi import Example, Kind
from neuron_migrate.ruleapi.analysis import ast_dotted, every_node, nodes_on_lines
from neuron_migrate.ruleapi.readiness import (Facts, Limit, ReadinessRule, Where,
                                              may_declare_encoding, text_lines)
from neuron_migrate.rules.unsupported import D_HOME

CONVENTIONAL = {
    "xm": "torch_xla.core.xla_model",
    "xmp": "torch_xla.distributed.xla_multiprocessing",
    "xr": "torch_xla.runtime",
    "xs": "torch_xla.distributed.spmd",
    "met": "torch_xla.debug.metrics",
    "xu": "torch_xla.utils.utils",
    "pl": "torch_xla.distributed.parallel_loader",
    "torch_xla": "torch_xla",
}
"""The names PyTorch/XLA's documentation and examples import its modules as."""
_LOADERS = frozenset({"MpDeviceLoader", "ParallelLoader", "PerDeviceLoader"})
"""`pl` is also Lightning's name: only these attributes make it torch_xla's parallel_loader."""
_BINDS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def bound_names(tree: ast.Module, lines: list[int] | None = None) -> frozenset[str] | None:
    """Every name any statement of the file binds, in any scope (an import, an assignment, a
    parameter, a definition, an `except ... as`, a pattern); None when the file can bind names
    it does not spell (a star import of something other than torch_xla, or `globals()`).
    With `lines` (sorted), only the statements spanning one of them are read: the names bound
    on those lines, unless one of them can bind names it does not spell."""
    names: set[str] = set()
    for node in every_node(tree) if lines is None else nodes_on_lines(tree.body, lines):
        kind = type(node)
        if kind is ast.Name:
            if type(node.ctx) is not ast.Load:  # type: ignore[attr-defined]
                names.add(node.id)  # type: ignore[attr-defined]
        elif kind is ast.Import or kind is ast.ImportFrom:
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.name == "*":
                    if not (node.module or "").startswith("torch_xla"):  # type: ignore[attr-defined]
                        return None
                    continue
                names.add(alias.asname or alias.name.split(".", 1)[0])
        elif kind is ast.arg:
            names.add(node.arg)  # type: ignore[attr-defined]
        elif isinstance(node, _BINDS):
            names.add(node.name)
        elif kind is ast.ExceptHandler or kind is ast.MatchAs or kind is ast.MatchStar:
            if node.name:  # type: ignore[attr-defined]
                names.add(node.name)  # type: ignore[attr-defined]
        elif kind is ast.Call and isinstance(node.func, ast.Name) and \
                node.func.id in ("globals", "exec", "__import__"):  # type: ignore[attr-defined]
            return None
    return frozenset(names)


_UNSPELLED = {"import": False, "globals": False, "exec": False, "__import__": False}
"""The words of what may bind names a file does not spell (a star import, `globals()`,
`exec`, `__import__`)."""


def _unbound(facts: Facts, data: bytes | None = None) -> frozenset[str]:
    """The conventional names the file does not bind, worked out once. With the file's bytes,
    only the statements on whose lines a conventional name (or a word of `_UNSPELLED`) is
    written are read: a binding of the name is written on one of those lines."""
    found = facts.memo.get("NM719")
    if found is None:
        lines = None
        if data is not None and data.isascii() and not may_declare_encoding(data):
            words = {**dict.fromkeys(CONVENTIONAL, False), **_UNSPELLED}
            lines = sorted(text_lines(data, words))
        bound = bound_names(facts.tree, lines)
        found = frozenset() if bound is None else frozenset(CONVENTIONAL) - bound
        facts.memo["NM719"] = found
    return found  # type: ignore[return-value]


class UnboundXlaName(ReadinessRule):
    id = "NM719"
    name = "unbound-xla-name"
    kind = Kind.REVIEW
    limit = Limit.BLOCKS
    summary = "an XLA-era name (`xm`, `xmp`, `xr`, `torch_xla`, ...) used where no import binds it"
    explanation = """\
What it does: reports uses of torch_xla's modules by their conventional names, `xm`
(`torch_xla.core.xla_model`), `xmp` (`distributed.xla_multiprocessing`), `xr` (`runtime`), `xs`
(`distributed.spmd`), `met` (`debug.metrics`), `xu` (`utils.utils`), `pl` (`parallel_loader`;
only as `pl.MpDeviceLoader`, `pl.ParallelLoader` or `pl.PerDeviceLoader`, since `pl` is also
Lightning's name) and `torch_xla` itself, in a file where nothing binds that name: no import,
assignment, parameter or definition anywhere in it. A file that may bind names it does not
spell (a star import of another module, `globals()`, `exec`) is not judged.

Why: neuron-migrate follows names through their imports; a use whose import is missing (it
was removed upstream, or the code was copied without it) is invisible to every rule, and
raises NameError when it runs, on TorchNeuron as before.

What to do: put the import back (`import torch_xla.core.xla_model as xm`) and run
neuron-migrate again, which migrates the use with the rest; or replace it by hand with what
`neuron-migrate explain` gives for that API (`xm.xla_device()` is `torch.device("neuron")`)."""
    doc_url = D_HOME
    example = Example.unchanged(
        "import torch\n\n\ndef place(model):\n    return model.to(xm.xla_device())\n")
    nodes: ClassVar[tuple[type[ast.AST], ...]] = (ast.Attribute,)
    needs = (b"xm.", b"xmp.", b"xr.", b"xs.", b"met.", b"xu.", b"pl.", b"torch_xla.")
    tokens = (b"xm.", b"xmp.", b"xr.", b"xu.")
    """What lets a file with no other XLA-era token be parsed (the other names are common
    words: `xs.append`, "met.", "example.")."""

    def candidates(self, facts: Facts, data: bytes) -> set[int] | None:
        unbound = _unbound(facts, data)
        if not unbound:
            return set()  # nothing to report: the rule is left out
        if not data.isascii():
            return None
        return text_lines(data, dict.fromkeys(unbound, False))

    def check(self, node: ast.AST, where: Where) -> str | None:
        if isinstance(where.parent, ast.Attribute):
            return None  # the outermost attribute of a chain speaks for it
        dotted = ast_dotted(node)
        if dotted is None:
            return None
        root, _, rest = dotted.partition(".")
        if root not in _unbound(where.facts) or \
                root == "pl" and rest.split(".", 1)[0] not in _LOADERS:
            return None
        module = CONVENTIONAL[root]
        if root == "torch_xla":
            binding = f"import {dotted.rsplit('.', 1)[0]}"
            meaning = f"it is torch_xla's `{dotted}` once `{binding}` binds `torch_xla`"
        else:
            binding = f"import {module} as {root}"
            meaning = f"it would be `{module}.{rest}` under the usual `{binding}`"
        return (f"`{root}` is not bound in this file (no import or assignment defines it), so "
                f"`{dotted}` raises NameError and neuron-migrate cannot migrate it; {meaning}: "
                "put that import back and run neuron-migrate again, or replace it by hand")


RULES = (UnboundXlaName,)
