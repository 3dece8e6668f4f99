"""What a whole run found: every file's result, and the exit status they make.

Kept apart from the run itself so that the reports, the gate and the baseline can read a
result without importing the machinery that produced it (worker processes, signal handling)."""

from __future__ import annotations

from dataclasses import dataclass

from neuron_migrate.model import FileResult, Finding, Kind


@dataclass(frozen=True)
class RunResult:
    files: tuple[FileResult, ...]
    errors: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    written: bool = False
    strict: bool = False  # after writing, what could not be fixed still fails (scan --fix)
    interrupted: int = 0  # the signal (Ctrl-C, SIGTERM) that stopped the run: `files` are
    # those done (and written) before it

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(f for r in self.files for f in r.findings)

    @property
    def failed(self) -> bool:
        return bool(self.errors) or any(r.error for r in self.files)

    @property
    def changed(self) -> tuple[FileResult, ...]:
        return tuple(r for r in self.files if r.changed)

    @property
    def needs_attention(self) -> bool:
        """Something would change, or something needs a person to look at it."""
        return bool(self.changed) or any(
            f.kind is Kind.REVIEW or not f.applied for f in self.findings)

    def exit_code(self) -> int:
        if self.interrupted:
            return 128 + self.interrupted  # as a shell reports a signal: 130 for Ctrl-C
        if self.failed:
            return 2
        if self.written and not self.strict:
            return 0
        if self.written:
            return 1 if any(not f.applied for f in self.findings) else 0
        return 1 if self.needs_attention else 0
