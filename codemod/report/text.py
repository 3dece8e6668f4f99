"""The terminal report: per file, the diff and one explanation per change.

On a terminal each change is explained under its hunk. Piped, the diff of each file stays in
one piece (explanations follow it), so `apply --dry-run > change.patch` is a patch git applies.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from neuron_migrate.files.diff import file_diff
from neuron_migrate.model import FileResult, Finding
from neuron_migrate.printable import one_line
from neuron_migrate.registry import Registry
from neuron_migrate.report.renderer import RunFormat, RunReport
from neuron_migrate.report.summary import Summary, label, where

if TYPE_CHECKING:  # the runner is only a type here
    from neuron_migrate.runner import RunResult


def render_text(result: RunResult, registry: Registry, show_diff: bool,
                verbose: bool = False, interleave: bool = False) -> Iterator[tuple[str, str]]:
    """Lines of the report, each with a style ("diff", "plain", "dim", "heading", "error")."""
    for file in result.files:
        if file.error:
            yield f"error: {file.error}", "error"
        if file.skipped:
            yield f"skipped: {file.skipped}", "plain"
        if not file.findings:
            if verbose and not file.error:
                yield f"{one_line(file.path)}: nothing to migrate", "dim"
            continue
        remaining = list(file.findings)
        if show_diff and file.changed and interleave:
            yield f"{one_line(file.path)}: {_count(file)}", "heading"
            for hunk, first, last in hunks(diff_of(file)):
                yield hunk, "diff"
                inside = [f for f in remaining if f.cell is None and first <= f.line <= last]
                for finding in inside:
                    yield from _explain(finding, registry)
                remaining = [f for f in remaining if f not in inside]
        else:
            if show_diff and file.changed:
                yield diff_of(file), "diff"
            yield f"{one_line(file.path)}: {_count(file)}", "heading"
        for finding in remaining:
            yield from _explain(finding, registry)
        yield "", "plain"
    for error in result.errors:
        yield f"error: {error}", "error"
    if verbose:
        for skipped in result.skipped:
            yield f"skipped: {skipped}", "dim"


def diff_of(file: FileResult) -> str:
    assert file.original is not None and file.new_source is not None
    diff = file_diff(file.path, file.original, file.new_source, file.encoding)
    return diff[:-1] if diff.endswith("\n") else diff


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? ", re.MULTILINE)


def hunks(diff: str) -> Iterator[tuple[str, int, int]]:
    """(text, first original line, last original line) of each hunk; the file header goes
    with the first."""
    starts = [m.start() for m in _HUNK.finditer(diff)]
    for index, start in enumerate(starts):
        text = diff[0 if index == 0 else start:starts[index + 1] if index + 1 < len(starts)
                    else len(diff)]
        match = _HUNK.match(diff, start)
        assert match is not None
        first = int(match.group(1))
        length = int(match.group(2) or 1)
        yield text.rstrip("\n"), first, first + max(length, 1) - 1


def summary_rows(result: RunResult) -> tuple[list[tuple[str, str, str, str]], str]:
    """The closing summary: one row per rule (fixes, unsafe fixes, review items) and a line
    with the file counts."""
    summary = Summary.of(result)
    rows = [(rule_id, str(f), str(u), str(r)) for rule_id, f, u, r in summary.by_rule]
    return rows, summary.sentence(result.written)


def _count(file: FileResult) -> str:
    applied = sum(1 for f in file.findings if f.applied)
    pending = len(file.findings) - applied
    return f"{applied} change{'s' if applied != 1 else ''}, {pending} to review"


def _explain(finding: Finding, registry: Registry) -> Iterator[tuple[str, str]]:
    yield (f"  {where(finding)}  {finding.rule_id} [{label(finding)}]  {finding.message}",
           "plain")
    if finding.suggestion:
        suggestion = finding.suggestion.replace("\n", "\n      ")
        yield f"      suggested: {suggestion}", "plain"
    rule = registry.line(finding.rule_id)
    if rule is not None:
        yield f"      docs: {rule.doc_url}", "dim"


def plain_lines(report: RunReport) -> list[str]:
    """The report's lines without styles: what the terminal shows before the summary."""
    return [text for text, _ in render_text(report.result, report.registry, report.show_diff,
                                            report.verbose)]


def render_plain(report: RunReport) -> str:
    """The text report as a file holds it: every file's lines, then the summary as lines
    (the terminal shows a table) and the notes on the hardware."""
    rows, sentence = summary_rows(report.result)
    lines = [*plain_lines(report),
             *(f"{rule}: {f} fixes, {u} unsafe fixes, {r} review items" for rule, f, u, r in rows)]
    return "\n".join([*lines, sentence, *report.notes]) + "\n"


TEXT = RunFormat(render_plain, styled=True, human=True)
