"""Findings snapshots: each Python fixture's findings pinned in a file beside it, as ruff pins
its rules' diagnostics with insta.

`fixtures/python/NAME.before.py` has `fixtures/python/NAME.findings.txt` (and, where the
fixture is also run with --unsafe-fixes, `NAME.unsafe.findings.txt`): one line a finding,
`LINE:COLUMN RULE [KIND] MESSAGE` in the report's order, where KIND says whether the fix is
part of the rewrite (`fix`, `unsafe-fix`, or `..., not applied`; `review`), with an indented
`suggested:` line for a suggestion. The fixture tests compare the findings of the run they
already make with the file, so a message, a position or an applicability that changes shows
up as a diff of that file in review.

To write the snapshots after an intended change (or for a new fixture), run the fixture tests
with UPDATE_SNAPSHOTS=1 set and review the diff of the `.findings.txt` files before
committing:

    UPDATE_SNAPSHOTS=1 python -m pytest -q -p no:cacheprovider tests/engine/test_fixtures.py \
        tests/engine/test_unsafe_fixtures.py tests/rules/test_cuda.py tests/engine/test_engine.py \
        tests/gate/test_gate_notes.py
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from neuron_migrate.printable import one_line

UPDATE = "UPDATE_SNAPSHOTS"
"""The environment variable that rewrites the snapshots instead of comparing them."""


def snapshot_of(before: Path, variant: str = "") -> Path:
    """`variant`: the run's name when a fixture has several (`unsafe`)."""
    suffix = f".{variant}.findings.txt" if variant else ".findings.txt"
    return before.with_name(before.name.replace(".before.py", suffix))


def findings_text(command: str, findings: Iterable[Mapping[str, object]]) -> str:
    """The snapshot of the JSON report's findings of one file; `command` is the run that made
    them, as its header says."""
    lines = [f"# findings of `neuron-migrate {command}` ({UPDATE}=1 rewrites this file)"]
    for finding in findings:
        lines.append(f"{finding['line']}:{finding['column']} {finding['rule_id']} "
                     f"[{_applicability(finding)}] {one_line(str(finding['message']))}")
        if finding.get("suggestion"):
            lines.append(f"    suggested: {one_line(str(finding['suggestion']))}")
    return "\n".join(lines) + "\n"


def _applicability(finding: Mapping[str, object]) -> str:
    kind = str(finding["kind"])
    if kind == "review":
        return kind + (", applies" if finding["applies"] else "")
    return kind if finding["applies"] else f"{kind}, not applied"


def assert_matches_snapshot(before: Path, command: str,
                            findings: Iterable[Mapping[str, object]], variant: str = "") -> None:
    """Fails with the difference when the findings are not the pinned ones; with
    UPDATE_SNAPSHOTS=1, (re)writes the snapshot instead."""
    path = snapshot_of(before, variant)
    actual = findings_text(command, findings)
    if os.environ.get(UPDATE) == "1":
        if not path.exists() or path.read_text(encoding="utf-8") != actual:
            path.write_text(actual, encoding="utf-8")
        return
    if not path.exists():
        raise AssertionError(f"no findings snapshot {path.name}: run the test with "
                             f"{UPDATE}=1 to write it, then review it")
    expected = path.read_text(encoding="utf-8")
    if expected != actual:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                            f"{path.name} (pinned)", f"{path.name} (this run)"))
        raise AssertionError(f"findings differ from the snapshot (rewrite it with {UPDATE}=1 "
                             f"if the change is intended):\n{diff}")
