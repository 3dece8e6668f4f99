"""Counts shared by every report format."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from neuron_migrate.model import FileResult, Finding, Kind

if TYPE_CHECKING:  # the runner is only a type here
    from neuron_migrate.runner import RunResult


@dataclass(frozen=True)
class Summary:
    files: int
    changed: int
    failed: int
    fixes: int
    unsafe_fixes: int
    reviews: int
    by_rule: tuple[tuple[str, int, int, int], ...] = field(default=(), compare=False)
    """(rule id, fixes, unsafe fixes, review items), by rule id."""

    @classmethod
    def of(cls, result: RunResult) -> Summary:
        findings = result.findings
        counts: dict[str, Counter[Kind]] = {}
        for finding in findings:
            counts.setdefault(finding.rule_id, Counter())[finding.kind] += 1
        by_rule = tuple((rule_id, c[Kind.FIX], c[Kind.UNSAFE_FIX], c[Kind.REVIEW])
                        for rule_id, c in sorted(counts.items()))
        return cls(
            files=len(result.files),
            # a write that was refused changed nothing on disk
            changed=sum(1 for r in result.changed if not (result.written and r.error)),
            failed=sum(1 for r in result.files if r.error) + len(result.errors),
            fixes=sum(1 for f in findings if f.kind is Kind.FIX),
            unsafe_fixes=sum(1 for f in findings if f.kind is Kind.UNSAFE_FIX),
            reviews=sum(1 for f in findings if f.kind is Kind.REVIEW),
            by_rule=by_rule,
        )

    def counts(self) -> dict[str, int]:
        return {"files": self.files, "changed": self.changed, "failed": self.failed,
                "fixes": self.fixes, "unsafe_fixes": self.unsafe_fixes, "reviews": self.reviews}

    def sentence(self, written: bool) -> str:
        verb = "changed" if written else "would change"
        return (f"{self.files} file{_s(self.files)} scanned, {self.changed} {verb}, "
                f"{self.failed} failed; {self.fixes} fix{'es' if self.fixes != 1 else ''}, "
                f"{self.unsafe_fixes} unsafe fix{'es' if self.unsafe_fixes != 1 else ''}, "
                f"{self.reviews} review item{_s(self.reviews)}")


def written(file: FileResult, result: RunResult) -> bool:
    """Whether this run wrote the file: a writing mode, a change, and no error (a refused or
    failed write leaves the file as it was)."""
    return result.written and file.changed and not file.error


def label(finding: Finding) -> str:
    """How a finding's kind reads in a report."""
    if finding.kind is Kind.UNSAFE_FIX and not finding.applied:
        return "unsafe-fix, not applied"
    return str(finding.kind)


def line_in_file(finding: Finding) -> int:
    """The line of the file itself a viewer of the file shows: in a notebook, the `.ipynb`'s
    line that holds the cell's line (`line` counts inside the cell)."""
    if finding.cell is not None and finding.file_line is not None:
        return finding.file_line
    return finding.line


def where(finding: Finding) -> str:
    """`line 3:5`, or `cell 2, line 3:5` in a notebook."""
    cell = f"cell {finding.cell}, " if finding.cell is not None else ""
    return f"{cell}line {finding.line}:{finding.column}"


def _s(count: int) -> str:
    return "" if count == 1 else "s"
