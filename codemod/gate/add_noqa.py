"""`check --add-noqa`: acknowledge every current review item where it is reported.

It writes `# neuron-migrate: reviewed[NMxxx]`, not `# noqa: NMxxx`: a noqa silences the rule
on that statement for good, fixes included (as ruff's does), while `reviewed` only
acknowledges what needs a person, so a fix the rule learns later, or an XLA call added to
the line, still shows. Only review items (and unsafe fixes not applied) are acknowledged;
what `apply` would write is not, and NM002 (a marker that silences nothing) asks for the
marker to go, not for another.

Where the marker goes:
- Python (and a notebook's Python cells): on the statement that holds the finding, at the end
  of its last line (the header of a compound statement), merged into a `reviewed` marker
  already there, after any other comment. A line that ends inside a string, or with a
  backslash, takes no comment: the marker goes on the statement's last line that can, or the
  finding is skipped with a message. Nothing but comments is ever changed.
- Requirements, shell, YAML, TOML: at the end of the line (the last line of a command
  continued with backslashes); never inside a multi-line string.
- Dockerfiles: after a shell-form RUN; above any other instruction, on a line of its own (a
  comment after FROM or ENV would be read as part of it).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from neuron_migrate.engine.suppress import acknowledgeable
from neuron_migrate.files.fileio import WriteError, read_bytes, write_atomic
from neuron_migrate.gate.lines import lines_of
from neuron_migrate.model import FileResult, Finding
from neuron_migrate.registry import UNUSED_SUPPRESSION

_REVIEWED = re.compile(r"(#\s*neuron-migrate:\s*reviewed)\b(\[[^\]]*\])?")
_ENDING = re.compile(r"(\r\n|\n|\r)?$")


@dataclass
class Added:
    markers: int = 0
    files: int = 0
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def add_noqa(files: Iterable[FileResult]) -> Added:
    """Write the markers into each file with review items; what was done."""
    added = Added()
    for file in files:
        wanted = [f for f in file.findings
                  if acknowledgeable(f) and f.rule_id != UNUSED_SUPPRESSION]
        if not wanted or file.error:
            continue
        path = Path(file.path)
        try:
            data = read_bytes(path)
            if file.original is not None and data != file.original:
                added.skipped.append(f"{path}: changed while it was checked; not marked")
                continue
            new, count = mark_file(file.path, data, wanted, added.skipped)
            if count:
                if note := write_atomic(path, new, data):
                    added.skipped.append(note)
                added.markers += count
                added.files += 1
        except WriteError as error:
            added.errors.append(str(error))
    return added


def mark_file(path: str, data: bytes, findings: list[Finding],
              skipped: list[str]) -> tuple[bytes, int]:
    """The file with the markers added, and how many were added."""
    bom = data.startswith(b"\xef\xbb\xbf")
    text = data[3 if bom else 0:].decode("utf-8", "surrogateescape")
    if path.endswith(".ipynb"):
        new, count = _mark_notebook(path, data, findings, skipped)
        return new, count
    where = _python if _is_python(path) else _dockerfile if _is_dockerfile(path) else \
        _yaml if path.endswith((".yml", ".yaml")) else _toml if path.endswith(".toml") else \
        _plain
    new, count = _mark_text(path, text, findings, where, skipped, python=where is _python)
    if count and where is _python and not _parses(new):
        skipped.append(f"{path}: not marked: the markers would not leave it valid Python "
                       "(please report this)")
        return data, 0
    return (b"\xef\xbb\xbf" if bom else b"") + new.encode("utf-8", "surrogateescape"), count


def _parses(text: str) -> bool:
    import ast

    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _is_python(path: str) -> bool:
    return path.endswith((".py", ".pyi"))


def _is_dockerfile(path: str) -> bool:
    from neuron_migrate.deps import kind_of

    return kind_of(Path(path)) == "dockerfile"


Placement = tuple[int, bool] | str
"""(line, above): where the marker goes (on its own line above `line` when `above`), or
why it cannot go anywhere."""


def _mark_text(path: str, text: str, findings: list[Finding], where, skipped: list[str],
               label: str = "", python: bool = False) -> tuple[str, int]:
    lines = lines_of(text, python)
    placer = where(text, lines)
    wanted: dict[tuple[int, bool], set[str]] = defaultdict(set)
    for finding in findings:
        place = placer(finding.line)
        if isinstance(place, str):
            skipped.append(f"{path}{label}:{finding.line}: {finding.rule_id} not marked: {place}")
        else:
            wanted[place].add(finding.rule_id)
    count = 0
    for (line, above), codes in sorted(wanted.items(), reverse=True):
        if above:
            body = lines[line - 1]
            indent = body[:len(body) - len(body.lstrip())]
            ending = _ENDING.search(body).group(1) or "\n"  # type: ignore[union-attr]
            lines.insert(line - 1, f"{indent}# neuron-migrate: reviewed[{_codes(codes)}]"
                                   f"{ending}")
            count += len(codes)
        else:
            lines[line - 1], added = _with_marker(lines[line - 1], codes)
            count += added
    return "".join(lines), count


def _codes(codes: Iterable[str]) -> str:
    return ", ".join(sorted(codes))


def _with_marker(line: str, codes: set[str]) -> tuple[str, int]:
    """The line with `codes` in its `reviewed` marker (added at its end if it has none)."""
    ending = _ENDING.search(line).group(1) or ""  # type: ignore[union-attr]
    body = line[:len(line) - len(ending)]
    found = _REVIEWED.search(body)
    if found is not None:
        if found.group(2) is None:
            return line, 0  # acknowledges every rule already
        have = {c.strip().upper() for c in found.group(2)[1:-1].split(",") if c.strip()}
        if codes <= have:
            return line, 0
        merged = f"{found.group(1)}[{_codes(have | codes)}]"
        return body[:found.start()] + merged + body[found.end():] + ending, len(codes - have)
    return f"{body.rstrip()}  # neuron-migrate: reviewed[{_codes(codes)}]{ending}", len(codes)


# ------------------------------------------------------------------ where, by kind of file
def _python(text: str, lines: list[str]):
    """A finding's statement, and the last line of it that can end with a comment."""
    import ast

    from neuron_migrate.engine.suppress import statement_lines

    try:
        owner = statement_lines(ast.parse(text))
        logical_ends, comment_ok = _line_ends(text)
    except (SyntaxError, ValueError, tokenize.TokenError):
        return lambda line: "the file does not parse"

    def place(line: int) -> Placement:
        first, last = owner.get(line, (line, line))
        for candidates in (logical_ends, comment_ok):
            for number in range(last, first - 1, -1):
                if number in candidates:
                    return number, False
        return "no line of its statement can end with a comment (a multi-line string)"
    return place


def _line_ends(text: str) -> tuple[set[int], set[int]]:
    """Lines ending a statement (NEWLINE), and lines that can take a comment at all (those
    ending outside a string and without a backslash: NEWLINE or NL)."""
    logical: set[int] = set()
    any_end: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.NEWLINE:
            logical.add(token.start[0])
        if token.type in (tokenize.NEWLINE, tokenize.NL):
            any_end.add(token.start[0])
    return logical, any_end


def _continued(lines: list[str], line: int) -> int:
    """The last line of the backslash-continued command `line` is in."""
    while line <= len(lines) and lines[line - 1].rstrip().endswith("\\"):
        line += 1
    return min(line, len(lines))


def _plain(text: str, lines: list[str]):
    def place(line: int) -> Placement:
        if not 0 < line <= len(lines):
            return "no such line"
        return _continued(lines, line), False
    return place


def _toml(text: str, lines: list[str]):
    inside = _inside_multiline_strings(lines)

    def place(line: int) -> Placement:
        end = _continued(lines, line) if 0 < line <= len(lines) else line
        if not 0 < end <= len(lines):
            return "no such line"
        if end in inside:
            return "the line ends inside a multi-line string"
        return end, False
    return place


def _inside_multiline_strings(lines: list[str]) -> set[int]:
    """TOML lines whose end is inside a `\"\"\"` or `'''` string."""
    inside: set[int] = set()
    open_quote: str | None = None
    for number, line in enumerate(lines, start=1):
        rest = line
        while rest:
            if open_quote is None:
                found = re.search(r"\"\"\"|'''|#", rest)
                if found is None or found.group() == "#":
                    break
                open_quote, rest = found.group(), rest[found.end():]
            else:
                index = rest.find(open_quote)
                if index < 0:
                    break
                open_quote, rest = None, rest[index + 3:]
        if open_quote is not None:
            inside.add(number)
    return inside


def _yaml(text: str, lines: list[str]):
    """End of line, unless the line ends inside a multi-line scalar other than a literal
    block (`|`): a literal block is a script or a file's lines, where `#` starts a comment
    too; a folded or quoted one would take the marker into its value."""
    import yaml

    inside: set[int] = set()
    try:
        for token in yaml.scan(text):
            if isinstance(token, yaml.ScalarToken) and token.style != "|":
                start, end = token.start_mark.line + 1, token.end_mark.line + 1
                inside.update(range(start, end))  # every line but the last
                if token.style == ">":
                    inside.add(end)
    except yaml.YAMLError:
        return lambda line: "the file is not valid YAML"
    plain = _plain(text, lines)

    def place(line: int) -> Placement:
        found = plain(line)
        if not isinstance(found, str) and found[0] in inside:
            return "the line ends inside a multi-line YAML string"
        return found
    return place


_INSTRUCTION = re.compile(r"\s*([A-Za-z]+)\s*(.?)")


def _dockerfile(text: str, lines: list[str]):
    """After a shell-form RUN (its last line); anything else gets a comment line above."""
    starts: dict[int, int] = {}
    number = 1
    while number <= len(lines):
        end = _continued(lines, number)
        for member in range(number, end + 1):
            starts[member] = number
        number = end + 1

    def place(line: int) -> Placement:
        if line not in starts:
            return "no such line"
        first = starts[line]
        found = _INSTRUCTION.match(lines[first - 1])
        heredoc = "<<" in lines[first - 1]
        if found and found.group(1).upper() == "RUN" and found.group(2) != "[" and not heredoc:
            return _continued(lines, first), False
        return first, True
    return place


def _mark_notebook(path: str, data: bytes, findings: list[Finding],
                   skipped: list[str]) -> tuple[bytes, int]:
    """Each code cell's markers, Python's way, or end of line for a shell magic line."""
    from neuron_migrate.notebooks.json_file import NotebookError, read_notebook, write_sources

    try:
        notebook = read_notebook(path, data)
    except NotebookError as error:
        skipped.append(str(error))
        return data, 0
    by_cell: dict[int, list[Finding]] = defaultdict(list)
    for finding in findings:
        if finding.cell is None:
            skipped.append(f"{path}:{finding.line}: {finding.rule_id} not marked: not in a cell")
        else:
            by_cell[finding.cell].append(finding)
    texts: dict[int, str] = {}
    count = 0
    for index, cell_findings in sorted(by_cell.items()):
        cell = notebook.cells[index]
        new, added = _mark_text(path, cell.text, cell_findings, _cell_placer, skipped,
                                label=f" cell {index}", python=True)
        if added:
            texts[index], count = new, count + added
    if not texts:
        return data, 0
    try:
        return write_sources(notebook, texts), count
    except NotebookError as error:
        skipped.append(str(error))
        return data, 0


def _cell_placer(text: str, lines: list[str]):
    """A notebook cell: shell and magic lines (`!pip`, `%pip`, `%%bash` cells) end of
    line; the rest as Python, with the magic lines read as comments."""
    if text.lstrip().startswith("%%"):
        return _plain(text, lines)
    magic = {n for n, line in enumerate(lines, start=1) if line.lstrip().startswith(("!", "%"))}
    masked = "".join("#" + line[1:] if n in magic and line[:1] in "!%" else
                     (re.sub(r"^(\s*)[!%]", r"\1#", line) if n in magic else line)
                     for n, line in enumerate(lines, start=1))
    python = _python(masked, lines)
    plain = _plain(text, lines)
    return lambda line: plain(line) if line in magic else python(line)
