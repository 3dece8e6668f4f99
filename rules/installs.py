"""NM714: installs of the XLA-era stack written in Python code (launchers, setup helpers).

The dependency scanner reads requirements files, Dockerfiles, scripts and notebook `!pip`
lines; a `subprocess.run(["pip", "install", "torch-neuronx==2.1.2.2.3.0"])` or an
`os.system("pip install torch-neuronx")` in a `.py` file is none of those. This rule hands such
strings to the same shell reader, so the verdicts and messages are the scanner's own.
"""

from __future__ import annotations

import functools
import re
import shlex

from neuron_migrate.ruleapi import Example, Rule
from neuron_migrate.ruleapi.deps import Registry, ids, scan_text_lines, xla_compiler_flags
from neuron_migrate.rules.dependencies import D_UPDMAN
from neuron_migrate.rules.review_base import ReviewRule

# what a single string can say on its own: the package and its version, not what sits beside it
_VERDICTS = frozenset({ids.XLA_LINEAGE, ids.UNPINNED, ids.BETA, ids.XLA_RUNTIME_PACKAGE})
_PIP_INSTALL = re.compile(r"\bpip(?:3(?:\.\d+)?)?\s+install\b")
_PINNED = re.compile(r"(?i)\s*torch[-_.]neuronx\s*(?:==|~=|>=|<=|!=|<|>)")  # `torch-neuronx==...`


@functools.cache
def _scanner_rules() -> Registry:
    from neuron_migrate.rules.dependencies import RULES

    return Registry([cls() for cls in RULES])


@functools.lru_cache(maxsize=4096)
def install_advice(value: str) -> str | None:
    """What the dependency scanner says of this string as an install, or None."""
    if _PIP_INSTALL.search(value):
        line, verdicts = value, _VERDICTS
    elif _PINNED.match(value):
        line, verdicts = f"pip install {shlex.quote(value.strip())}", _VERDICTS - {ids.UNPINNED}
    else:
        return None
    # a multi-line string is read as the lines it holds, as a script would be
    lines = list(enumerate(line.splitlines() or [line], start=1))
    messages = [f.message for f in scan_text_lines("code", lines, _scanner_rules())
                if f.rule_id in verdicts]
    return "; ".join(dict.fromkeys(messages)) or None


_SCRIPT_VERDICTS = _VERDICTS | {ids.XLA_ENV_VAR, ids.PARALLEL_COMPILE}
"""What a whole script in a string can say: its installs, its XLA variables, its
pre-compilation run (the instance types in it are NM712's, said of strings on their own)."""
_COMMAND_SEPARATOR = re.compile(r"\n|&&|;")
_CC_FLAGS = re.compile(r"NEURON_CC_FLAGS=(\"[^\"]*\"|'[^']*'|\S*)")


def is_script(value: str) -> bool:
    """Whether a string holds more than one shell command (a `bash -c` script, a heredoc):
    each of its findings is its own, so no single rule speaks for the string."""
    commands = [c for c in _COMMAND_SEPARATOR.split(value) if c.strip()]
    return len(commands) > 1


@functools.lru_cache(maxsize=1024)
def script_findings(value: str) -> tuple[str, ...]:
    """Every finding in a script held in a string, each with its rule and its line there:
    the installs, XLA variables and neuron_parallel_compile runs the dependency scanner
    reports, and the XLA-era compiler flags in NEURON_CC_FLAGS (NM601's)."""
    lines = list(enumerate(value.splitlines(), start=1))
    found = [(f.line, f"[{f.rule_id}] {f.message}")
             for f in scan_text_lines("code", lines, _scanner_rules())
             if f.rule_id in _SCRIPT_VERDICTS]
    for number, line in lines:
        for flags in _CC_FLAGS.finditer(line):
            xla = xla_compiler_flags(flags[1])
            if xla:
                found.append((number, f"[NM601] NEURON_CC_FLAGS {flags[1]}: {', '.join(xla)} "
                                      "belonged to the XLA flow; check them against the native "
                                      "compiler's documentation"))
    return tuple(f"line {number} of the string: {message}"
                 for number, message in sorted(dict.fromkeys(found), key=lambda f: f[0]))


_LISTED = 10
"""Findings a script string's message spells out; a longer script's are counted."""


def script_advice(value: str) -> str:
    found = script_findings(value)
    more = f"; and {len(found) - _LISTED} more" if len(found) > _LISTED else ""
    return (f"a shell script in a string, with {len(found)} finding{'s' * (len(found) != 1)} "
            "(none rewritten: a script is edited by hand, each line as its finding says): "
            + "; ".join(found[:_LISTED]) + more)


class XlaStackInstallInCode(Rule):
    id = "NM714"
    name = "xla-stack-install-in-code"
    kind = ReviewRule.kind
    summary = "pip installs of the XLA-era stack written in Python strings"
    explanation = """\
What it does: reports string literals that install or pin the XLA-era stack: a `pip install`
command line (`os.system("pip install torch-neuronx torch-xla")`), or a torch-neuronx pin in
a `pip` argument list (`["pip", "install", "torch-neuronx==2.1.2.2.3.0"]`). The verdicts and
advice are the dependency scanner's: XLA-lineage (NM801), unpinned (NM802) or beta (NM803)
torch-neuronx, and torch-xla or libneuronxla installed beside it (NM806). In setup.py, whose
strings the scanner reads itself, the scanner's finding stands alone.

A string that holds a shell script (several commands: lines, `&&` or `;`, as a `bash -c`
launcher passes) is reported once with every finding in it, each named by its rule and its
line in the string: the installs above, XLA variables (NM812, `XLA_USE_BF16` included), a
`neuron_parallel_compile` run (NM813) and XLA-era flags in `NEURON_CC_FLAGS` (NM601). Nothing
in such a string is rewritten: one rule cannot speak for the whole script, and removing a line
of it (an `export`) is safe only when read as shell, which a Python string is not.

Why: a launcher or setup helper that installs the XLA library at run time undoes the
migration of the requirements files.

What to do: install `torch-neuronx==2.14.*` with `neuronx-cc==2.*` and `nki` (the PyTorch CPU
wheel index beside the Neuron one), or install from the project's requirements file."""
    doc_url = D_UPDMAN
    example = Example.unchanged("import subprocess\n\nsubprocess.run([\"pip\", \"install\", "
                                "\"torch-neuronx==2.1.2.2.3.0\"], check=True)\n")
    tokens = (b"neuronx",)

    def interesting_string(self, value: str) -> bool:
        if is_script(value) and script_findings(value):
            return True
        return "neuronx" in value and install_advice(value) is not None

    def leftover_string(self, value: str) -> str:
        if is_script(value) and script_findings(value):
            return script_advice(value)
        return install_advice(value) or value


RULES: tuple[type[Rule], ...] = (XlaStackInstallInCode,)
