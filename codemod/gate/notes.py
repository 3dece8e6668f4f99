"""Review items that outlive the rewrite that found them.

Most review items are found in XLA-era code that is still there after `apply` (a call no rule
rewrites), so `check` finds them again on the migrated file. Some are found only *because*
the rewrite changes the code: removing `import torch_xla` from `try: ... except ImportError:`
makes its except branch dead (NM715); a rule that rewrites a call and warns about what differs.
On the migrated file nothing XLA-era is left to find them by (the file no longer even passes
the token prefilter), so `check` passed silently while the question was still open.

So `apply` leaves a note where such an item was found, the comment `--annotate` writes:
`# neuron-migrate: NM715 <summary>`, on its own line above the statement. Which items need
one is measured, not guessed per rule: the rewritten file is checked again, and every review
item of the original that the rewritten file no longer reports gets its note (items are
paired by rule and line text first, as a baseline pairs them, then by rule alone, since a
rewritten statement still reports what it reported, from its new lines). `check` reports every such note as a review item
of its rule on the statement below it until someone deletes the note or acknowledges the
statement (`# neuron-migrate: reviewed[NM715]`, `--add-noqa`), which is what makes the item
visible to a CI gate. A note is never put where a comment line cannot go (inside a string or
a backslash continuation), and the new file must still parse, or no note is added.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import re
import tokenize
from collections import Counter
from collections.abc import Callable
from difflib import SequenceMatcher

from neuron_migrate.engine.suppress import read_suppressions, statement_lines
from neuron_migrate.gate.baseline import normalised
from neuron_migrate.gate.lines import lines_of
from neuron_migrate.model import BY_POSITION, FileResult, Finding, Kind
from neuron_migrate.registry import UNUSED_SUPPRESSION, Registry

_NOTE = re.compile(r"#\s*neuron-migrate:\s*(NM[A-Z]?\d+)\b[ \t]*(.*)")
_MARK = b"neuron-migrate: NM"
_BOM = b"\xef\xbb\xbf"


def settle(path: str, data: bytes, result: FileResult, registry: Registry,
           recheck: Callable[[bytes], FileResult], leave: bool = True) -> FileResult:
    """The file's result with its notes reported, and (with `leave`) with notes added to its
    new source for the review items the rewrite would otherwise hide. `recheck` checks a new
    source."""
    if result.error:
        return result
    if _MARK in data:
        result = _report_notes(path, data, result, registry)
    if leave and result.new_source is not None and result.new_source != data:
        result = _leave_notes(data, result, registry, recheck)
    return result


# ------------------------------------------------------------------ reporting notes
@dataclasses.dataclass(frozen=True)
class Note:
    line: int  # the note's own line
    rule_id: str
    text: str
    target: int  # the first line of code below it


def read_notes(text: str) -> list[Note]:
    """The notes of a Python text: comments alone on their line (tokenized, so a note inside
    a string is not one)."""
    notes: list[Note] = []
    waiting: list[tuple[int, str, str]] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                found = _NOTE.match(token.string)
                if found and token.line[:token.start[1]].strip() == "":
                    waiting.append((token.start[0], found.group(1), found.group(2).strip()))
            elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                                    tokenize.DEDENT, tokenize.ENDMARKER) and waiting:
                notes += [Note(line, rule, note, token.start[0]) for line, rule, note in waiting]
                waiting = []
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    return notes + [Note(line, rule, note, line) for line, rule, note in waiting]


def _report_notes(path: str, data: bytes, result: FileResult,
                  registry: Registry) -> FileResult:
    text = _decode(data)
    notes = [n for n in read_notes(text) if registry.options.enabled(n.rule_id)]
    if not notes:
        return result
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return result  # the engine reports it
    owner = statement_lines(tree)
    suppressions = read_suppressions(data)
    if suppressions.whole_file:
        return result
    already = {(f.rule_id, owner.get(f.line, (f.line, f.line))) for f in result.findings}
    found: list[Finding] = []
    for note in notes:
        where = owner.get(note.target, (note.target, note.target))
        if (note.rule_id, where) in already or suppressions.silences(note.rule_id, *where) or \
                suppressions.acknowledges(note.rule_id, *where):
            continue  # reported as it is, or silenced, or acknowledged
        found.append(Finding(path, note.target, _column(text, note.target), note.rule_id,
                             Kind.REVIEW, f"still to review, as the note `apply` left at line "
                                          f"{note.line} says: {note.text}; once reviewed, "
                                          "delete the note or acknowledge the statement with "
                                          f"`# neuron-migrate: reviewed[{note.rule_id}]`"))
    # the engine saw no use for the markers the notes used: they are used
    findings = [f for f in result.findings
                if not (f.rule_id == UNUSED_SUPPRESSION and f.line in suppressions.used)]
    if not found and len(findings) == len(result.findings):
        return result
    return dataclasses.replace(result, findings=tuple(sorted((*findings, *found),
                                                             key=BY_POSITION)))


def _column(text: str, line: int) -> int:
    lines = lines_of(text, python=True)
    if not 0 < line <= len(lines):
        return 1
    return len(lines[line - 1]) - len(lines[line - 1].lstrip()) + 1


# ------------------------------------------------------------------ leaving notes
def _leave_notes(original: bytes, result: FileResult, registry: Registry,
                 recheck: Callable[[bytes], FileResult]) -> FileResult:
    reviews = [f for f in result.findings
               if f.kind is Kind.REVIEW and f.rule_id != UNUSED_SUPPRESSION]
    if not reviews:
        return result
    new = result.new_source
    assert new is not None
    after = recheck(new)
    if after.error:
        return result
    old_lines, new_lines = lines_of(_decode(original), True), lines_of(_decode(new), True)
    still = [f for f in after.findings if f.kind is Kind.REVIEW]
    remaining = Counter((f.rule_id, _line(new_lines, f.line)) for f in still)
    others = Counter(f.rule_id for f in still)  # the rewritten file's items not yet paired
    unpaired: list[Finding] = []
    for finding in sorted(reviews, key=BY_POSITION):  # first the items on unchanged lines
        key = (finding.rule_id, _line(old_lines, finding.line))
        if remaining[key] > 0:
            remaining[key] -= 1
            others[finding.rule_id] -= 1
        else:
            unpaired.append(finding)
    hidden: list[Finding] = []
    for finding in unpaired:  # then those on rewritten lines, by rule
        if others[finding.rule_id] > 0:
            others[finding.rule_id] -= 1
        else:
            hidden.append(finding)
    if not hidden:
        return result
    noted = _with_notes(new, old_lines, new_lines, hidden, registry)
    if noted is None:
        return result
    text, placed = noted
    findings = tuple(dataclasses.replace(f, message=f"{f.message} (a note above line "
                                                    f"{placed[f]} keeps it in `check` until "
                                                    "reviewed)") if f in placed else f
                     for f in result.findings)
    return dataclasses.replace(result, new_source=text, findings=findings)


def _line(lines: list[str], number: int) -> str:
    return normalised(lines[number - 1]) if 0 < number <= len(lines) else ""


def _with_notes(new: bytes, old_lines: list[str], new_lines: list[str],
                hidden: list[Finding], registry: Registry
                ) -> tuple[bytes, dict[Finding, int]] | None:
    """The new source with a note above the line each hidden item maps to, and that line
    (in the original's numbering of the new file) by item; None if no note can go in."""
    encoding = _encoding(new)
    bom = new.startswith(_BOM)
    text = new.removeprefix(_BOM).decode(encoding)
    lines = lines_of(text, python=True)
    free = _comment_lines(text)
    if free is None:
        return None
    moved = _line_map(old_lines, new_lines)
    wanted: dict[int, list[str]] = {}
    placed: dict[Finding, int] = {}
    for finding in hidden:
        target = moved.get(finding.line)
        if target is None or target not in free:
            continue
        rule = registry.by_id.get(finding.rule_id)
        note = f"# neuron-migrate: {finding.rule_id} {rule.summary if rule else ''}".rstrip()
        if note not in wanted.setdefault(target, []):
            wanted[target].append(note)
        placed[finding] = target
    if not wanted:
        return None
    for target in sorted(wanted, reverse=True):
        body = lines[target - 1]
        indent = body[:len(body) - len(body.lstrip())]
        ending = body[len(body.rstrip("\r\n")):] or _newline(text)
        lines[target - 1:target - 1] = [f"{indent}{note}{ending}" for note in wanted[target]]
    out = "".join(lines)
    try:
        ast.parse(out)
    except (SyntaxError, ValueError):
        return None  # never worse than no note
    return (_BOM if bom else b"") + out.encode(encoding), placed


def _line_map(old: list[str], new: list[str]) -> dict[int, int]:
    """Each original line -> the line of the new file it became (or that stands where it
    was, for a line the rewrite replaced or removed)."""
    moved: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        for offset, line in enumerate(range(i1, i2)):
            moved[line + 1] = (j1 + offset if tag == "equal" else j1) + 1
    return moved


def _comment_lines(text: str) -> set[int] | None:
    """The lines above which a comment line may go: the first line of the file, and each
    line after one that ends outside a string and without a backslash."""
    free = {1}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL):
                free.add(token.start[0] + 1)
    except (tokenize.TokenError, SyntaxError):
        return None
    if any(line.startswith("#!") or (line.lstrip().startswith("#") and "coding" in line)
           for line in text.split("\n", 2)[:2]):
        free -= {1, 2}  # a shebang and a coding cookie keep their places
    return free


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _encoding(data: bytes) -> str:
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return "utf-8" if encoding == "utf-8-sig" else encoding


def _decode(data: bytes) -> str:
    return data.removeprefix(_BOM).decode(_encoding(data), errors="replace")
