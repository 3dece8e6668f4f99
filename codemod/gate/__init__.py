"""What makes `check` a CI gate a team can turn green and keep green without turning rules
off: acknowledgement markers in files other than Python (`lines`), `--add-noqa` (`add_noqa`),
a baseline of accepted findings (`baseline`), and how they change a run's outcome (`outcome`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Gate:
    """The gate's options of one `check` or `scan`."""

    baseline: Path | None = None  # --baseline: fail only on findings not in it
    write_baseline: Path | None = None  # --write-baseline: record the findings, exit 0
    add_noqa: bool = False  # --add-noqa: acknowledge every review item in place, exit 0
    exit_zero: bool = False  # --exit-zero: findings never fail the run (errors still do)

    @property
    def rewrites_outcome(self) -> bool:
        return bool(self.baseline or self.write_baseline or self.add_noqa)
