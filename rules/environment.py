"""NM601-NM602: environment variables set from Python for the XLA runtime."""

from __future__ import annotations

import ast

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Remove, Replace, Review, Role, Rule,
                                    Site, argument, string_value)
from neuron_migrate.ruleapi.deps import (REMOVABLE_PREFIXES, REMOVABLE_VARIABLES, REVIEW_ONLY,
                                         XLA_CC_FLAGS, xla_compiler_flags, xla_variable_advice)
from neuron_migrate.rules.installs import is_script

D_XLA_ENV = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/frameworks/torch/"
             "torch-neuronx/api-reference-guide/training/torch-neuron-envvars.html")
D_BF16 = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/appnotes/"
          "torch-neuronx/migration-from-xla-downcast-bf16.html")

XLA_ONLY = REMOVABLE_VARIABLES
XLA_ONLY_PREFIXES = REMOVABLE_PREFIXES
BF16 = frozenset({"XLA_USE_BF16", "XLA_DOWNCAST_BF16"})
_ENVIRON = "os.environ"


def _removable(key: str | None) -> bool:
    return key is not None and (key in XLA_ONLY or key in BF16
                                or key.startswith(XLA_ONLY_PREFIXES))


def _unlisted(value: str) -> bool:
    """An XLA setting (as the dependency scanner judges it) that no fix here knows: reviewed."""
    return not _removable(value) and value not in REVIEW_ONLY and \
        xla_variable_advice(value) is not None


def _advice(keys: list[str]) -> str:
    if any(k in BF16 for k in keys):
        return ("; without it the model runs in float32 unless you add "
                "torch.autocast(\"neuron\", dtype=torch.bfloat16) or model.to(torch.bfloat16)")
    return ""


class XlaEnvironment(Rule):
    id = "NM601"
    name = "xla-environment"
    kind = Kind.FIX
    summary = "XLA-only environment variables set from Python are removed"
    explanation = """\
What it does: removes `os.environ["PJRT_DEVICE"] = ...`, `os.environ.setdefault(...)`,
`os.putenv(...)` and entries of `os.environ.update({...})` for the knobs only PyTorch/XLA and
the XLA-era Neuron framework read: PJRT_DEVICE, XLA_FLAGS and the other XLA_* switches,
NEURON_PARALLEL_COMPILE_*, NEURON_EXTRACT_GRAPHS_ONLY, NEURON_FUSE_SOFTMAX,
NEURONCORE_NUM_DEVICES, the gradient bucket sizes and similar.

Why: TorchNeuron does not read them; leaving them suggests they still do something.
NEURON_CC_FLAGS (the compiler flags, still forwarded to neuronx-cc, including its
read-modify-write forms), NEURON_RT_* (the runtime), XLA_IR_DEBUG and XLA_HLO_DEBUG (still
used for debug information) are kept. Any other XLA_* variable, and NEURON_COMPILE_CACHE_URL
and NEURON_FRAMEWORK_DEBUG, are reported for review: the same variables the dependency scan
reports in Dockerfiles, shell scripts and CI files (NM812).

What differs: nothing at run time. XLA_USE_BF16 and XLA_DOWNCAST_BF16 are handled by NM602,
because removing them changes precision. Compiler flags that only made sense for the XLA
flow (--model-type, --auto-cast, --cache_dir, --retry_failed_compilation) and reads of these
variables (scripts that detect a neuron_parallel_compile run) are reported for review. A
string that holds a shell script is NM714's, which reports each of its findings, these flags
included."""
    doc_url = D_XLA_ENV
    example = Example(
        before="import os\n\nos.environ[\"PJRT_DEVICE\"] = \"NEURON\"\n"
               "os.environ[\"NEURON_CC_FLAGS\"] = \"--optlevel=2\"\n",
        after="import os\n\nos.environ[\"NEURON_CC_FLAGS\"] = \"--optlevel=2\"\n",
    )
    emitting_bf16 = False
    tokens = (b"XLA", b"NEURON", b"PJRT", b"BUCKET_")

    def interesting_string(self, value: str) -> bool:
        return (_removable(value) and value not in BF16) or value in REVIEW_ONLY or \
            _unlisted(value) or ("--" in value and XLA_CC_FLAGS.search(value) is not None
                                 and not is_script(value))

    def leftover_string(self, value: str) -> str:
        if value in REVIEW_ONLY:
            return f"{value}: {REVIEW_ONLY[value]}"
        if _unlisted(value):
            return (f"{value} is a PyTorch/XLA setting that TorchNeuron does not read; remove "
                    "it once you know what it was for")
        if "--" in value:
            return (f"compiler flags {value!r}: {', '.join(xla_compiler_flags(value))} "
                    "belonged to the XLA flow; check them against the native compiler's "
                    "documentation")
        return (f"{value} is read here, but only the XLA stack sets or uses it (for example to "
                "detect a neuron_parallel_compile run); remove that logic")

    def _wants(self, key: str | None) -> bool:
        return _removable(key) and (key in BF16) == self.emitting_bf16

    def may_act(self, node: ast.AST, names: frozenset[str]) -> bool:
        if isinstance(node, ast.Call):
            return not names.isdisjoint(("setdefault", "putenv", "update"))
        return "environ" in names  # an assignment to `os.environ[...]` (names: its mapping's)

    def on_assign(self, node: cst.Assign | cst.AugAssign, site: Site) -> Outcome | None:
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) \
            else [node.target]
        if len(targets) != 1 or not isinstance(targets[0], cst.Subscript):
            return None
        subscript = targets[0]
        if site.qualname_of(subscript.value) != _ENVIRON or len(subscript.slice) != 1:
            return None
        index = subscript.slice[0].slice
        key = string_value(index.value) if isinstance(index, cst.Index) else None
        if not self._wants(key):
            return None
        return self._remove([key], site)  # type: ignore[list-item]

    def on_any_call(self, node: cst.Call, site: Site) -> Outcome | None:
        func = node.func
        qualname = site.qualname_of(func) or ""
        if qualname in (f"{_ENVIRON}.setdefault", "os.putenv"):
            key = argument(node.args, 0, "key")
            name = string_value(key.value) if key is not None else None
            return self._remove([name], site) if self._wants(name) else None  # type: ignore[list-item]
        if qualname == f"{_ENVIRON}.update" and len(node.args) == 1 and \
                isinstance(node.args[0].value, cst.Dict):
            return self._update(node, node.args[0].value, site)
        return None

    def _remove(self, keys: list[str], site: Site) -> Outcome:
        if site.role is Role.EXPRESSION:
            return Review(f"{', '.join(keys)} is only read by PyTorch/XLA; remove it"
                          + _advice(keys))
        return Remove(f"remove {', '.join(keys)}: only PyTorch/XLA read it" + _advice(keys))

    def _update(self, node: cst.Call, mapping: cst.Dict, site: Site) -> Outcome | None:
        elements = list(mapping.elements)
        drop = [e for e in elements if isinstance(e, cst.DictElement)
                and self._wants(string_value(e.key))]
        if not drop:
            return None
        keys = [string_value(e.key) or "" for e in drop]  # type: ignore[union-attr]
        kept = [e for e in elements if e not in drop]
        if not kept:
            return self._remove(keys, site)
        if kept[-1] is not elements[-1]:
            kept[-1] = kept[-1].with_changes(comma=elements[-1].comma)
        new = node.with_changes(args=[node.args[0].with_changes(
            value=mapping.with_changes(elements=kept))])
        return Replace(new, f"remove {', '.join(keys)} from os.environ.update(): only "
                       "PyTorch/XLA read them" + _advice(keys))


class Bf16Environment(XlaEnvironment):
    id = "NM602"
    name = "xla-bf16-environment"
    kind = Kind.UNSAFE_FIX
    summary = "XLA_USE_BF16 / XLA_DOWNCAST_BF16 are removed (unsafe: precision changes)"
    explanation = """\
What it does: suggests removing `XLA_USE_BF16` and `XLA_DOWNCAST_BF16` settings (applied
only with --unsafe-fixes), in the same forms as NM601.

Why: these made PyTorch/XLA run float32 models in bfloat16 behind the script's back; AWS had
already deprecated them. TorchNeuron ignores them, so after the migration the model runs in
float32: slower, and numerically different from the XLA run.

What to do: keep bfloat16 explicitly, with `torch.autocast("neuron", dtype=torch.bfloat16)`
around the forward pass, or `model.to(torch.bfloat16)` for full bf16 training (AWS's
migration note also sets NEURON_RT_STOCHASTIC_ROUNDING_EN=1 for that case)."""
    doc_url = D_BF16
    example = Example(
        before="import os\n\nos.environ[\"XLA_USE_BF16\"] = \"1\"\n",
        after="import os\n\nos.environ[\"XLA_USE_BF16\"] = \"1\"\n",
    )
    emitting_bf16 = True

    def interesting_string(self, value: str) -> bool:
        return value in BF16


RULES: tuple[type[Rule], ...] = (XlaEnvironment, Bf16Environment)
