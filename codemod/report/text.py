"""The terminal report: per file, the diff, then one explanation per change."""

from __future__ import annotations

from collections.abc import Iterator

from codemod.diff import unified_diff
from codemod.model import FileResult, Finding, Kind
from codemod.registry import Registry
from codemod.report.summary import Summary
from codemod.runner import RunResult


def render_text(result: RunResult, registry: Registry, show_diff: bool) -> Iterator[tuple[str, str]]:
    """Lines of the report, each with a style name ("diff", "plain", "error") for colouring."""
    for file in result.files:
        if file.error:
            yield f"error: {file.error}", "error"
        if not file.findings:
            continue
        if show_diff and file.changed:
            yield _diff(file), "diff"
        yield f"{file.path}: {_count(file)}", "heading"
        for finding in file.findings:
            yield from _explain(finding, registry)
        yield "", "plain"
    for error in result.errors:
        yield f"error: {error}", "error"
    yield Summary.of(result).sentence(result.written), "heading"
    if result.findings:
        yield "Run `neuron-migrate explain NMxxx` for the full explanation of a rule.", "plain"


def _diff(file: FileResult) -> str:
    assert file.original is not None and file.new_source is not None
    old = file.original.decode(file.encoding)
    new = file.new_source.decode(file.encoding)
    diff = unified_diff(file.path, old, new)
    return diff[:-1] if diff.endswith("\n") else diff


def _count(file: FileResult) -> str:
    applied = sum(1 for f in file.findings if f.applied)
    pending = len(file.findings) - applied
    return f"{applied} change{'s' if applied != 1 else ''}, {pending} to review"


def _explain(finding: Finding, registry: Registry) -> Iterator[tuple[str, str]]:
    label = str(finding.kind)
    if finding.kind is Kind.UNSAFE_FIX and not finding.applied:
        label = "unsafe-fix, not applied"
    yield f"  line {finding.line}:{finding.column}  {finding.rule_id} [{label}]  {finding.message}", "plain"
    if finding.suggestion:
        suggestion = finding.suggestion.replace("\n", "\n      ")
        yield f"      suggested: {suggestion}", "plain"
    rule = registry.by_id.get(finding.rule_id)
    if rule is not None:
        yield f"      docs: {rule.doc_url}", "dim"
