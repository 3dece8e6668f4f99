"""IPython's own syntax in notebook cells: found, masked for the Python parsers, restored.

IPython turns `!cmd`, `%magic`, `obj?`, `x = !cmd` and cell magics into Python before it runs a
cell; `ast` and LibCST cannot parse them. Each such line becomes a placeholder statement of the
same indentation for the rewrite and is put back byte for byte afterwards (re-indented only when
the rewrite moved its block, as unwrapping `with torch_xla.step():` does).

The placeholder is an `import` statement on purpose: the engine inserts `import torch` and its
helper functions after the leading block of imports, and a `!pip install` cell at the top of a
notebook must stay before them, as it stays before the imports it makes possible.

Detection follows IPython's: an escape counts only at the start of a logical line, not inside
brackets, a string or a backslash continuation, so `(a\\n % b)` and `(a\\n != b)` stay Python.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass

from neuron_migrate.files.diff import split_lines

PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "memit"})
"""Cell magics that run their body as Python in the kernel's namespace: the body is migrated
with the other cells. `%%writefile` bodies are migrated as the file they write; every other
cell magic (`%%bash`, `%%html`, `%%python3`, which runs in another process...) leaves its cell
untouched."""

SHELL_CELL_MAGICS = frozenset({"bash", "sh", "zsh"})
"""Cell magics whose body is shell: handed to the dependency checks as it is."""

PLACEHOLDER = "_neuron_migrate_ipython_"
_PLACEHOLDER_LINE = re.compile(rf"^([ \t]*)import {PLACEHOLDER}(\d+)\b.*$")
_CONTINUATION_LINE = re.compile(rf"^[ \t]*# {PLACEHOLDER}(\d+)_\d+[ \t]*$")
_ESCAPES = ("!", "%", "?", "/", ",", ";")
_ASSIGNMENT = r"[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*=[ \t]*[!%]"
_ASSIGNED = re.compile(rf"^[ \t]*{_ASSIGNMENT}")
_ESCAPE_START = re.compile(rf"^[ \t]*(?:[{re.escape(''.join(_ESCAPES))}]|{_ASSIGNMENT})",
                           re.MULTILINE)
"""Where `_is_escape` holds for a line of the text."""
_AUTOCALL_START = re.compile(r"^[ \t]*[/,;]", re.MULTILINE)
_CELL_MAGIC = re.compile(r"^%%(\S+)[ \t]*(\S*)")
_WRITEFILE = re.compile(r"^%%(?:writefile|file)(?:[ \t]+-a)?[ \t]+"
                        r"(?:\"(?P<double>[^\"]+)\"|'(?P<single>[^']+)'|(?P<plain>\S+))[ \t]*$")
_PYTHON_LINE_MAGIC = re.compile(r"^[ \t]*%(?:time|timeit|prun|debug|memit)\b")
_ROOT = re.compile(r"(?<![\w.])[A-Za-z_]\w*")


@dataclass(frozen=True)
class Escape:
    """One IPython line (with its backslash continuations), as the cell had it."""

    number: int
    """Global placeholder number, unique in the notebook."""
    line: int
    """1-based line of the cell where it starts."""
    lines: tuple[str, ...]
    """The physical lines without their line endings."""
    cell_magic: bool = False

    @property
    def python(self) -> bool:
        """Help lines and line magics that run Python (`%time stmt`): their names matter."""
        first = self.lines[0]
        return not self.cell_magic and (first.rstrip().endswith("?")
                                        or first.lstrip().startswith(("?", "/"))
                                        or _PYTHON_LINE_MAGIC.match(first) is not None)

    @property
    def shell(self) -> bool:
        """`!cmd` and `%magic` lines, which the dependency checks read."""
        return not self.cell_magic and self.lines[0].lstrip()[:1] in ("!", "%")


@dataclass(frozen=True)
class MaskedCell:
    text: str
    """The cell with every IPython line replaced; parses as Python if the rest does."""
    escapes: tuple[Escape, ...]
    python: bool = True
    """False for a cell magic whose body is not Python: the cell is left as it is."""
    shell_lines: tuple[tuple[int, str], ...] = ()
    """(line in cell, text) of the lines the dependency checks should read."""
    written: tuple[str, int] | None = None
    """For a `%%writefile NAME` cell: NAME, and the cell line where the file's text starts."""


_INDENT = re.compile(r"[ \t]+")


def leading_indent(text: str) -> str:
    """The indentation IPython takes off a cell before it runs it (its `leading_indent`
    clean-up, for a cell pasted indented): the first non-blank line's, when every non-blank
    line starts with it (only then is putting it back exact); else ''."""
    lines = split_lines(text)
    first = next((line for line in lines if line.strip()), "")
    match = _INDENT.match(first)
    if match is None:
        return ""
    indent = match.group()
    return indent if all(line.startswith(indent) for line in lines if line.strip()) else ""


def dedented(text: str, indent: str) -> str:
    return "".join(line[len(indent):] if line.startswith(indent) else line
                   for line in split_lines(text))


def indented(text: str, indent: str) -> str:
    return "".join(indent + line if line.strip() else line for line in split_lines(text))


def mask_cell(text: str, numbers: Iterator[int]) -> MaskedCell:
    """Replace the IPython-only lines of one code cell by placeholders."""
    if not _may_hold_ipython(text):
        return MaskedCell(text, ())
    return _masked(text, numbers)


def _masked(text: str, numbers: Iterator[int]) -> MaskedCell:
    lines = split_lines(text)
    bodies = [_body(line) for line in lines]
    first = next((i for i, body in enumerate(bodies) if body.strip()), None)
    escapes: list[Escape] = []
    out = list(lines)
    start = 0
    if first is not None and bodies[first].startswith("%%"):
        match = _CELL_MAGIC.match(bodies[first])
        name = match.group(1) if match else ""
        if name not in PYTHON_CELL_MAGICS:
            shell = name in SHELL_CELL_MAGICS or (name == "script"
                                                  and match is not None
                                                  and match.group(2) in SHELL_CELL_MAGICS)
            body = tuple((i + 1, bodies[i]) for i in range(first + 1, len(lines)))
            target = _WRITEFILE.match(bodies[first].rstrip())
            name = target and (target["double"] or target["single"] or target["plain"])
            return MaskedCell(text, (), python=False, shell_lines=body if shell else (),
                              written=(name, first + 2) if name else None)
        escape = Escape(next(numbers), first + 1, (bodies[first],), cell_magic=True)
        escapes.append(escape)
        _mask(out, lines, bodies, first, first, escape.number)
        start = first + 1
    scanner = _LogicalLines()
    index = start
    while index < len(lines):
        body = bodies[index]
        at_start = scanner.at_start
        if at_start and _is_escape(body):
            end = index
            while end + 1 < len(lines) and bodies[end].endswith("\\"):
                end += 1
            escape = Escape(next(numbers), index + 1, tuple(bodies[index:end + 1]))
            escapes.append(escape)
            _mask(out, lines, bodies, index, end, escape.number)
            index = end + 1
            continue
        code = scanner.feed(body)
        if at_start and scanner.at_start and code.rstrip().endswith("?"):  # `obj?`, `obj??`
            escape = Escape(next(numbers), index + 1, (body,))
            escapes.append(escape)
            _mask(out, lines, bodies, index, index, escape.number)
        index += 1
    shell = tuple((e.line + k, part) for e in escapes if e.shell
                  for k, part in enumerate(e.lines))
    return MaskedCell("".join(out), tuple(escapes), shell_lines=shell)


def _may_hold_ipython(text: str) -> bool:
    """Whether a line of the cell may be IPython's: most cells hold none, and finding them
    takes a Python loop over every character. An IPython line starts (after blanks) with an
    escape character or a name assigned from `!`/`%`, or holds a `?` (`obj?`); a cell magic
    starts with `%`. Lines are split at "\\n" only, as `^` in the patterns splits them."""
    if "?" in text:
        return True
    if "!" in text or "%" in text:
        return _ESCAPE_START.search(text) is not None
    return _AUTOCALL_START.search(text) is not None


def reference_names(masked: MaskedCell, imported: set[str]) -> MaskedCell:
    """Make the placeholder of a help line or `%time` line use the imported names the line
    uses (`import _placeholder; xm`), so the engine keeps the import and reports the line
    instead of removing an import that `xm.mark_step?` still needs."""
    lines = split_lines(masked.text)
    for escape in masked.escapes:
        names = [n for n in dict.fromkeys(_ROOT.findall("\n".join(escape.lines))) if n in imported]
        if escape.python and names:
            index = escape.line - 1
            body = _body(lines[index])
            lines[index] = body + "; " + "; ".join(names) + lines[index][len(body):]
    return dataclasses.replace(masked, text="".join(lines))


def restore_cell(text: str, escapes: tuple[Escape, ...]) -> str | None:
    """Put the IPython lines back; None when a placeholder did not survive exactly once."""
    by_number = {e.number: e for e in escapes}
    seen: list[int] = []
    out: list[str] = []
    for line in split_lines(text):
        body = _body(line)
        placeholder = _PLACEHOLDER_LINE.match(body)
        if placeholder is not None and int(placeholder.group(2)) in by_number:
            escape = by_number[int(placeholder.group(2))]
            seen.append(escape.number)
            out.append(_reindent(escape, placeholder.group(1)) + line[len(body):])
            continue
        continuation = _CONTINUATION_LINE.match(body)
        if continuation is not None and int(continuation.group(1)) in by_number:
            continue  # the whole escape was put back at its placeholder
        out.append(line)
    if sorted(seen) != sorted(by_number):
        return None
    return _cell_magic_first(out, escapes)


def _cell_magic_first(lines: list[str], escapes: tuple[Escape, ...]) -> str:
    """IPython only honours a cell magic on the first line: keep it there even if the rewrite
    put an import before it."""
    magic = next((e.lines[0] for e in escapes if e.cell_magic), None)
    if magic is not None:
        where = next(i for i, line in enumerate(lines) if _body(line) == magic)
        first = next(i for i, line in enumerate(lines) if line.strip())
        if where != first:
            lines.insert(first, lines.pop(where))
            if not lines[first].endswith("\n"):  # it was the cell's last line
                lines[first] += "\n"
                lines[-1] = lines[-1].removesuffix("\n")
    return "".join(lines)


def _reindent(escape: Escape, indent: str) -> str:
    first = escape.lines[0]
    own = first[:len(first) - len(first.lstrip(" \t"))]
    if own != indent:
        first = indent + first.lstrip(" \t")
    return "\n".join((first, *escape.lines[1:]))


def _mask(out: list[str], lines: list[str], bodies: list[str], start: int, end: int,
          number: int) -> None:
    out[start] = _placeholder(bodies[start], number) + lines[start][len(bodies[start]):]
    indent = bodies[start][:len(bodies[start]) - len(bodies[start].lstrip(" \t"))]
    for k in range(start + 1, end + 1):
        out[k] = f"{indent}# {PLACEHOLDER}{number}_{k - start}" + lines[k][len(bodies[k]):]


def _placeholder(body: str, number: int) -> str:
    indent = body[:len(body) - len(body.lstrip(" \t"))]
    return f"{indent}import {PLACEHOLDER}{number}"


def _is_escape(body: str) -> bool:
    stripped = body.lstrip(" \t")
    return stripped.startswith(_ESCAPES) or _ASSIGNED.match(body) is not None


def _body(line: str) -> str:
    return line.rstrip("\r\n")


class _LogicalLines:
    """Just enough of Python's tokenizer to know where logical lines start: brackets,
    strings (triple-quoted ones span lines), comments and backslash continuations."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: str | None = None
        self.continued = False

    @property
    def at_start(self) -> bool:
        return self.depth == 0 and self.quote is None and not self.continued

    def feed(self, body: str) -> str:
        """Advance over one physical line; returns its code outside a trailing comment."""
        self.continued = False
        i, end = 0, len(body)
        while i < end:
            char = body[i]
            if self.quote is not None:
                if char == "\\":
                    i += 2
                elif body.startswith(self.quote, i):
                    i += len(self.quote)
                    self.quote = None
                else:
                    i += 1
                continue
            if char == "#":
                return body[:i]
            if char in "\"'":
                triple = body[i:i + 3]
                self.quote = triple if triple in ('"""', "'''") else char
                i += len(self.quote)
                continue
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            elif char == "\\" and i == end - 1:
                self.continued = True
            i += 1
        if self.quote in ("'", '"') and i == end:  # unterminated one-line string: Python's error
            self.quote = None
        return body
