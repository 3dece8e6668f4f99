"""GitLab's code quality report (`artifacts:reports:codequality`): a JSON array of issues,
each with a description, a check name, a fingerprint, a severity and where it is, shown in
the merge request's widget and diff.

The fingerprint names an issue across pipelines, so GitLab can tell new issues from fixed
ones: it hashes the rule, the path, the cell in a notebook and the message (never the line,
which moves as code is added above), with a count for repeats of the same message in a file.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from pathlib import PurePath
from typing import TYPE_CHECKING

from neuron_migrate.model import Finding, Kind
from neuron_migrate.printable import json_safe
from neuron_migrate.report.json_text import indented_json
from neuron_migrate.report.renderer import RunFormat, RunReport
from neuron_migrate.report.summary import line_in_file

if TYPE_CHECKING:  # the runner is only a type here
    from neuron_migrate.registry import Registry
    from neuron_migrate.runner import RunResult

_SEVERITY = {Kind.FIX: "minor", Kind.UNSAFE_FIX: "major", Kind.REVIEW: "major"}
"""GitLab's scale is info, minor, major, critical, blocker: a safe fix is minor, what a
person must look at major, a file the run could not read critical."""


def render_gitlab(result: RunResult, registry: Registry | None = None) -> str:
    seen: Counter[tuple[str, ...]] = Counter()
    issues = []
    for finding in result.findings:
        key = (finding.rule_id, finding.path, finding.cell_id or str(finding.cell),
               finding.message)
        issues.append(_issue(finding, _fingerprint(*key, str(seen[key]))))
        seen[key] += 1
    for file in result.files:
        if file.error:
            issues.append({
                "description": file.error,
                "check_name": "neuron-migrate/error",
                "fingerprint": _fingerprint("error", file.path, file.error),
                "severity": "critical",
                "location": {"path": _path(file.path), "lines": {"begin": _error_line(file.error)}},
            })
    return json_safe(indented_json(issues))


def _issue(finding: Finding, fingerprint: str) -> dict[str, object]:
    cell = f"cell {finding.cell}, line {finding.line}: " if finding.cell is not None else ""
    return {
        "description": f"{finding.rule_id} {cell}{finding.message}",
        "check_name": finding.rule_id,
        "fingerprint": fingerprint,
        "severity": _SEVERITY[finding.kind],
        "location": {"path": _path(finding.path), "lines": {"begin": line_in_file(finding)}},
    }


def _fingerprint(*parts: str) -> str:
    text = "\0".join(parts).encode("utf-8", "surrogateescape")
    return hashlib.sha256(text).hexdigest()


def _path(path: str) -> str:
    """Relative to the folder the run started in (the repository's root in a CI job), with
    forward slashes, as GitLab matches it against the merge request's files."""
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute)
    chosen = absolute if relative.split(os.sep, 1)[0] == os.pardir else relative
    return PurePath(chosen).as_posix()


def _error_line(message: str) -> int:
    """The line an error names (`path:12: cannot parse ...`), else 1."""
    head = message.split(": ", 1)[0]
    line = head.rsplit(":", 1)[-1] if ":" in head else ""
    return int(line) if line.isdigit() and int(line) > 0 else 1


def _render(report: RunReport) -> str:
    return render_gitlab(report.result, report.registry)


GITLAB = RunFormat(_render)
