"""Counts shared by every report format."""

from __future__ import annotations

from dataclasses import dataclass

from codemod.model import Kind
from codemod.runner import RunResult


@dataclass(frozen=True)
class Summary:
    files: int
    changed: int
    failed: int
    fixes: int
    unsafe_fixes: int
    reviews: int

    @classmethod
    def of(cls, result: RunResult) -> Summary:
        findings = result.findings
        return cls(
            files=len(result.files),
            changed=len(result.changed),
            failed=sum(1 for r in result.files if r.error) + len(result.errors),
            fixes=sum(1 for f in findings if f.kind is Kind.FIX),
            unsafe_fixes=sum(1 for f in findings if f.kind is Kind.UNSAFE_FIX),
            reviews=sum(1 for f in findings if f.kind is Kind.REVIEW),
        )

    def sentence(self, written: bool) -> str:
        verb = "changed" if written else "would change"
        return (f"{self.files} file{_s(self.files)} scanned, {self.changed} {verb}, "
                f"{self.failed} failed; {self.fixes} fix{'es' if self.fixes != 1 else ''}, "
                f"{self.unsafe_fixes} unsafe fix{'es' if self.unsafe_fixes != 1 else ''}, "
                f"{self.reviews} review item{_s(self.reviews)}")


def _s(count: int) -> str:
    return "" if count == 1 else "s"
