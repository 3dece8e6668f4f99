"""NM718: XLA training code held in a string, which a program writes out or runs (a
`train.py` template, a `python -c` probe): reported, never rewritten."""

from __future__ import annotations

import ast
import re
import textwrap
import warnings

from neuron_migrate.ruleapi import Example, Kind, Rule
from neuron_migrate.rules.unsupported import D_HOME

# The conventional names of torch_xla's modules, by which code in a string calls them
# without the string's own import (a template filled in around other code).
_ALIASES = ("xm", "xmp", "xr", "xs", "met", "xu", "pl", "torch_xla")
_LOADERS = frozenset({"MpDeviceLoader", "ParallelLoader", "PerDeviceLoader"})
"""The only attributes that make `pl` torch_xla's parallel_loader rather than Lightning."""
_IMPORT = re.compile(r"^[ \t]*(?:import|from)[ \t]+(torch_xla(?:\.\w+)*)", re.MULTILINE)
_USE = re.compile(r"(?<![\w.])(" + "|".join(_ALIASES) + r")((?:\.\w+)+)[ \t]*\(")
_QUICK = tuple(f"{alias}." for alias in _ALIASES)
_SHOWN = 6


def xla_apis(value: str) -> list[str]:
    """The torch_xla modules a string of Python code imports and the XLA calls it makes, in
    order of appearance, once each: empty when the string is not such code (prose that names
    an API, a module name alone)."""
    if not any(quick in value for quick in _QUICK):
        return []
    imports = _IMPORT.findall(value)
    calls = [alias + rest for alias, rest in _USE.findall(value)
             if alias != "pl" or rest.split(".")[1] in _LOADERS]
    if not imports and not calls:
        return []
    if not _parses(value) and not (imports and "\n" in value.strip()):
        return []  # a sentence naming `xm.mark_step()`, or an import in an error message
    found = [f"import {module}" for module in imports] + [f"{name}()" for name in calls]
    return list(dict.fromkeys(found))


def _parses(value: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(textwrap.dedent(value).strip())
    except (SyntaxError, ValueError):
        return False
    return True


class XlaCodeInString(Rule):
    id = "NM718"
    name = "xla-code-in-string"
    kind = Kind.REVIEW
    summary = "XLA training code written in a string (a generated script, a `python -c` probe)"
    explanation = """\
What it does: reports a string literal that holds Python code using PyTorch/XLA: an
`import torch_xla...` line, or calls through its usual names (`xm.mark_step()`,
`xmp.spawn(...)`, `xr.world_size()`, `pl.MpDeviceLoader(...)`, `torch_xla.sync()`). Such
strings are how programs write training scripts out (`open("train.py", "w").write(...)`, a
`textwrap.dedent` template) or run one (`python -c "..."`). One finding per string, at its
first line, naming the XLA APIs it uses. Prose that only names an API (a log message) is not
reported: the string must read as code.

Why: neuron-migrate rewrites the program, not the programs it writes: code in a string is
data until it is written out and run, and then it fails under TorchNeuron, which does not
install torch_xla. Rewriting inside the string is not safe: the template may be filled in,
concatenated or indented by the program around it.

What to do: migrate the generated code by hand (what `neuron-migrate explain` says for each
API named), or move the template into a file of its own (a `.py` file the program copies or
reads) so that neuron-migrate migrates it with the rest of the project."""
    doc_url = D_HOME
    example = Example.unchanged(
        "SCRIPT = \"\"\"\\\nimport torch_xla.core.xla_model as xm\n\n"
        "device = xm.xla_device()\nxm.mark_step()\n\"\"\"\n\n"
        "with open(\"train.py\", \"w\") as out:\n    out.write(SCRIPT)\n")

    def interesting_string(self, value: str) -> bool:
        return bool(xla_apis(value))

    def leftover_string(self, value: str) -> str:
        apis = xla_apis(value)
        named = ", ".join(f"`{api}`" for api in apis[:_SHOWN])
        more = f" and {len(apis) - _SHOWN} more" if len(apis) > _SHOWN else ""
        return (f"this string holds Python code that uses PyTorch/XLA ({named}{more}), which "
                "TorchNeuron does not install; neuron-migrate does not rewrite code inside "
                "strings: migrate it by hand, or move it to a .py file of its own so that it "
                "is migrated with the project")


RULES: tuple[type[Rule], ...] = (XlaCodeInString,)
