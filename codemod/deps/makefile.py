"""Makefiles (`Makefile`, `GNUmakefile`, `*.mk`): their recipes are shell, so they are read
by the shell reader (`make install-neuron` running `pip install torch-neuronx` is an install
like any other).

The reader sees a copy of the file of the same length, so every offset (and every edit) is
the file's own: lines that are not recipes are blanked; a recipe line loses its tab and its
`@`, `-` and `+` prefixes (make's, not the shell's); `$$` (make's escape of `$`) becomes ` $`
and `$(NAME)` becomes `${NAME}`, the shell's spelling. The variables the file assigns
(`NAME = value`, `:=`, `?=`, ...) are known to the recipes, and an `export NAME = value`
sets an environment variable for all of them, so it is checked as one (NM812). A backslash
continues a recipe line, as in a script. Not read: `define` blocks (canned recipes), make
functions (`$(shell ...)`, `$(wildcard ...)`), target-specific variables.
"""

from __future__ import annotations

import re

from neuron_migrate.deps import shell
from neuron_migrate.deps.commands import Variable
from neuron_migrate.deps.emit import Emitter
from neuron_migrate.deps.lines import physical_lines
from neuron_migrate.deps.signals import check_variable

ASSIGNMENT = re.compile(r"(?:(export|override)\s+)?([A-Za-z_][\w.-]*)\s*"
                        r"(::?=|:::=|\?=|\+=|!=|=)\s*(.*)")
RULE = re.compile(r"[^\s:=#][^:=#]*?::?(?!=)(.*)")
"""`targets: prerequisites`, optionally `; command` after them."""
CONDITIONAL = re.compile(r"\s*(?:ifeq|ifneq|ifdef|ifndef|else|endif)\b")
MAKE_VARIABLE = re.compile(r"\$\((\w+)\)")
RECIPE_PREFIX = re.compile(r"[ \t@+-]*")


def scan(text: str, emitter: Emitter, path: str = "") -> None:
    view, variables = shell_view(text, emitter)
    shell.read(view, emitter, variables=variables)


def shell_view(text: str, emitter: Emitter | None = None) -> tuple[str, dict[str, Variable]]:
    """The recipes as the shell runs them (the rest blank, offsets kept), and the variables
    the file assigns; exported ones are checked on `emitter`."""
    chars = [c if c in "\r\n" else " " for c in text]
    variables: dict[str, Variable] = {}
    in_recipe = continued = in_define = False
    for line in physical_lines(text):
        body = text[line.start:line.content_end]
        if in_define:
            in_define = body.strip() != "endef"
            continue
        if continued or (in_recipe and body.startswith("\t")):
            _recipe(text, chars, line.start, line.content_end, prefix=not continued)
        elif body.strip().startswith("define ") or body.strip() == "define":
            in_define = True
        elif not body.strip() or body.lstrip().startswith("#") or CONDITIONAL.match(body):
            pass  # neither ends a rule's recipe
        elif (assigned := ASSIGNMENT.fullmatch(body.strip())) is not None:
            in_recipe = False
            _assign(assigned, line.start + len(body) - len(body.lstrip()), variables, emitter)
        elif (rule := RULE.fullmatch(body)) is not None:
            in_recipe = True
            command = rule[1].find(";")
            if command >= 0:  # `target: prerequisites ; command`
                start = line.start + rule.start(1) + command + 1
                _recipe(text, chars, start, line.content_end, prefix=False)
        else:
            in_recipe = False
        continued = (continued or in_recipe) and body.endswith("\\") and \
            (continued or body.startswith("\t") or ";" in body)
    return "".join(chars), variables


def _recipe(text: str, chars: list[str], start: int, end: int, prefix: bool = True) -> None:
    """Copy one recipe line into the view, as the shell gets it."""
    body = text[start:end]
    skip = RECIPE_PREFIX.match(body).end() if prefix else 0  # type: ignore[union-attr]
    shown = body[skip:].replace("$$", " $")
    shown = MAKE_VARIABLE.sub(lambda m: "${" + m[1] + "}", shown)
    chars[start + skip:end] = list(shown)


def _assign(match: re.Match[str], offset: int, variables: dict[str, Variable],
            emitter: Emitter | None) -> None:
    directive, name, operator, value = match[1], match[2], match[3], match[4].strip()
    value = MAKE_VARIABLE.sub(lambda m: variables[m[1]].value if m[1] in variables
                              else m[0], value)
    if operator == "?=" and name in variables or operator == "!=":
        return  # a default already overridden; a shell command's output
    if operator == "+=" and name in variables:
        value = f"{variables[name].value} {value}"
    span = None
    if operator != "+=" and value and not any(c in value for c in "$'\"\\"):
        start = offset + match.start(4)
        span = (start, start + len(value))
    variables[name] = Variable(value, span)
    if directive == "export" and emitter is not None:
        check_variable(name, value, offset + match.start(2), emitter)
