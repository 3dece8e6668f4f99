"""Parse less: code no rule will touch is hidden from LibCST.

LibCST's parse and code generation cost grows with the file, and much of an XLA-era file is
code that no rule touches. Before the LibCST parse, each run of sibling statements that are
neither flagged nor on the path to a flagged one, and that have their lines to themselves,
becomes one placeholder line at their indentation, whose name says how many statements it
stands for (`__nm_kept_4_12__`: the fifth placeholder, twelve statements; `__nm_kept_4__`:
one); so does the header of
a compound statement on that path, decorators and continuation lines included
(`def train(model, loader, ...):` becomes `def __nm_kept_3__():`). After code generation the
placeholders are swapped back for the original bytes. At the top of a module, the first
statement and the imports are never hidden, since added imports go into their section of the
import block and added helpers after its end.

Anything unexpected (a placeholder re-indented, duplicated or lost, as when a `with` block is
unwrapped) makes `restore` return None, and the caller parses the whole file instead.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst


_LINES = re.compile(rb"[^\n]*\n|[^\n]+\Z")
_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_NAME = "__nm_kept_"
_MARK = _NAME.encode()
_HEADERS: dict[type, tuple[bytes, ...]] = {  # keyword(s) the line starts with, placeholder
    ast.FunctionDef: (b"def", b"def %s():"),
    ast.AsyncFunctionDef: (b"async", b"async def %s():"),
    ast.ClassDef: (b"class", b"class %s:"),
    ast.For: (b"for", b"for %s in ():"),
    ast.AsyncFor: (b"async", b"async for %s in ():"),
    ast.While: (b"while", b"while %s:"),
    ast.With: (b"with", b"with %s:"),
    ast.AsyncWith: (b"async", b"async with %s:"),
    ast.If: (b"if", b"if %s:"),
}
_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For,
             ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match,
             *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


@dataclass(frozen=True)
class Masked:
    data: bytes
    regions: dict[bytes, bytes]  # placeholder line -> the original lines it stands for

    def restore(self, new: bytes) -> bytes | None:
        """`new` with the original lines back; None unless every placeholder line appears
        exactly once, unchanged."""
        pending = dict(self.regions)
        out: list[bytes] = []
        for line in _LINES.findall(new):
            if _MARK in line:
                original = pending.pop(line, None)
                if original is None:
                    return None
                out.append(original)
            else:
                out.append(line)
        return b"".join(out) if not pending else None


def is_placeholder(node: cst.CSTNode) -> bool:
    """The LibCST statement a placeholder parses to, paired with the `ast` statement it hides."""
    return _placeholder_name(node) is not None


def _placeholder_name(node: cst.CSTNode) -> str | None:
    """`__nm_kept_...`, the name a placeholder line holds."""
    if type(node) is not cst.Expr:
        return None
    name = node.value  # type: ignore[attr-defined]
    return name.value if type(name) is cst.Name and name.value.startswith(_NAME) else None


def hidden_units(statement: cst.CSTNode) -> int:
    """How many `ast` statements a LibCST statement line hides: 0 unless it is a placeholder."""
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return 0
    name = _placeholder_name(statement.body[0])
    if name is None:
        return 0
    number, _, count = name[len(_NAME):-2].partition("_")
    return int(count or 1)


def mask(data: bytes, tree: ast.Module, on_path: set[int],
         flagged: set[int]) -> Masked | None:
    """`data` with untouched code hidden; None when nothing is worth hiding or the file is one
    whose `ast` columns do not map onto its bytes (other encodings, lone CRs, a BOM)."""
    if _MARK in data or data.startswith(b"\xef\xbb\xbf") or \
            data.count(b"\r") != data.count(b"\r\n") or _foreign_encoding(data):
        return None
    lines = _LINES.findall(data)
    spans = list(_spans(tree.body, on_path, flagged, lines, top=True))
    out: list[bytes] = []
    regions: dict[bytes, bytes] = {}
    position = 0
    for number, (start, end, form, count) in enumerate(sorted(spans)):  # try: handlers last
        first_line, last_line = lines[start], lines[end - 1]
        indent = first_line[:len(first_line) - len(first_line.lstrip(b" \t\f"))]
        ending = last_line[len(last_line.rstrip(b"\r\n")):]
        name = b"%s%d_%d__" % (_MARK, number, count) if count > 1 else b"%s%d__" % (_MARK, number)
        placeholder = indent + form % name + ending
        original = b"".join(lines[start:end])
        if len(original) <= len(placeholder):
            continue  # `x = 1` costs less to parse than its placeholder
        out.extend(lines[position:start])
        out.append(placeholder)
        regions[placeholder] = original
        position = end
    if not regions:
        return None
    out.extend(lines[position:])
    return Masked(b"".join(out), regions)


Span = tuple[int, int, bytes, int]  # first line (0-based), end line, placeholder form, statements


def _spans(body: list[ast.stmt], on_path: set[int], flagged: set[int], lines: list[bytes],
           top: bool) -> Iterator[Span]:
    """The lines to hide: runs of untouched statements, and headers on the path."""
    run: list[ast.stmt] = []
    form = b"%s"
    for index, stmt in enumerate(body):
        kind = _hideable(stmt, index, top) if id(stmt) not in on_path else None
        if kind is not None and _owns_lines(stmt, lines, _first(stmt),
                                            stmt.end_lineno or stmt.lineno):
            if kind != form:
                yield from _run(run, form)
                run, form = [], kind
            run.append(stmt)
            continue
        yield from _run(run, form)
        run = []
        if id(stmt) in on_path:
            if id(stmt) not in flagged and type(stmt) in _HEADERS:
                header = _header_span(stmt, lines)
                if header is not None:
                    yield header
            for block in _blocks(stmt):
                yield from _spans(block, on_path, flagged, lines, top=False)
    yield from _run(run, form)


def _run(run: list[ast.stmt], form: bytes) -> Iterator[Span]:
    if run:
        yield _first(run[0]) - 1, run[-1].end_lineno or run[-1].lineno, form, len(run)


def _hideable(stmt: ast.stmt, index: int, top: bool) -> bytes | None:
    """The placeholder form for a statement off the path, if it can be hidden. At the top of
    a module the first statement (maybe the docstring) and the imports stay visible: added
    imports go into their isort section among them, and added helpers after the last."""
    if not top:
        return b"%s"
    if index == 0 or isinstance(stmt, (ast.Import, ast.ImportFrom)) or _imports_only(stmt):
        return None
    return b"%s"


def _imports_only(stmt: ast.stmt) -> bool:
    """A `try:` or `if` block of imports (and fallbacks such as `x = None`), part of the
    module's import block."""
    if not isinstance(stmt, (ast.Try, ast.If)):
        return False
    inner = [s for node in ast.walk(stmt) if node is not stmt and isinstance(node, ast.stmt)
             for s in (node,)]
    return any(isinstance(s, (ast.Import, ast.ImportFrom)) for s in inner) and all(
        isinstance(s, (ast.Import, ast.ImportFrom, ast.Pass, ast.Assign)) for s in inner)


def _first(stmt: ast.stmt) -> int:
    return min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])


def _header_span(stmt: ast.stmt, lines: list[bytes]) -> Span | None:
    """The placeholder for a compound statement's header (its decorators and continuation
    lines included) when the header has its lines to itself and its last line ends with its
    colon, with no comment to tell a colon in a comment from the header's own."""
    body = getattr(stmt, "body")
    first = _first(stmt)
    if first < stmt.lineno and not lines[first - 1].lstrip(b" \t\f").startswith(b"@"):
        return None
    head = lines[stmt.lineno - 1]
    keyword, form = _HEADERS[type(stmt)]
    text = head.lstrip(b" \t\f")
    if isinstance(stmt, ast.If) and text.startswith(b"elif"):
        keyword, form = b"elif", b"el" + form
    if not text.startswith(keyword) or text[len(keyword):len(keyword) + 1] not in b" \t(":
        return None
    # every part of the header ends by `_header_end`; after the last one come only closing
    # brackets and the colon, so the first line from there on that ends with a colon ends it
    for number in range(_header_end(stmt), body[0].lineno):
        line = lines[number - 1].rstrip()
        if b"#" in line:
            return None
        if line.endswith(b":"):
            return first - 1, number, form, 1
    return None


def _header_end(stmt: ast.stmt) -> int:
    """The last line any part of the header reaches; the statement's own line when it has
    no parts."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        arguments = stmt.args
        parts: list[ast.AST | None] = [
            *arguments.posonlyargs, *arguments.args, *arguments.defaults, arguments.vararg,
            *arguments.kwonlyargs, *arguments.kw_defaults, arguments.kwarg, stmt.returns,
            *getattr(stmt, "type_params", ())]
    elif isinstance(stmt, ast.ClassDef):
        parts = [*stmt.bases, *stmt.keywords, *getattr(stmt, "type_params", ())]
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        parts = [stmt.target, stmt.iter]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        parts = [part for item in stmt.items for part in (item.context_expr, item.optional_vars)]
    else:
        parts = [getattr(stmt, "test", None)]
    return max((getattr(part, "end_lineno", None) or stmt.lineno for part in parts
                if part is not None), default=stmt.lineno)


def _blocks(stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        block = getattr(stmt, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    for part in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
        yield part.body


def _owns_lines(stmt: ast.stmt, lines: list[bytes], first: int, last: int) -> bool:
    """Nothing but indentation before the statement, nothing but a comment after it."""
    if last > len(lines):
        return False
    head = lines[first - 1]
    if head.lstrip(b" \t\f").startswith(b"elif"):
        return False  # the rest of an if/elif chain, not a statement of its own
    if first == stmt.lineno:
        if head[:stmt.col_offset].strip(b" \t\f") or stmt.col_offset > len(head):
            return False
    elif not head.lstrip(b" \t\f").startswith(b"@"):
        return False
    tail = lines[last - 1][stmt.end_col_offset or 0:].strip()
    return not tail or tail.startswith(b"#")


def _foreign_encoding(data: bytes) -> bool:
    for line in _LINES.findall(data[:1024])[:2]:
        found = _CODING.match(line)
        if found:
            return found.group(1).lower().replace(b"_", b"-") not in (b"utf-8", b"utf8")
    return False
