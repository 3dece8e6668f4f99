"""The machine-readable report: one JSON object for the whole run.

Its schema, documented field by field, is `json-report.schema.json` beside this module (and
a test validates real reports against it): change both together, and bump SCHEMA_VERSION
when a field changes meaning or goes.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

from neuron_migrate import __version__
from neuron_migrate.model import FileResult, Finding
from neuron_migrate.printable import json_safe
from neuron_migrate.registry import Registry
from neuron_migrate.report.edits import Edit, FileEdits, Fix
from neuron_migrate.report.json_text import indented_json
from neuron_migrate.report.renderer import RunFormat, RunReport
from neuron_migrate.report.summary import Summary, written

if TYPE_CHECKING:  # the runner is only a type here
    from neuron_migrate.runner import RunResult

SCHEMA_VERSION = 2
"""2: `applied` means written to the file by this run, `applies` says whether the change is
part of the run's rewrite, `errors` holds every error, the files' included, and a file not
migrated (too large, a notebook in another language) is `skipped`, with the reason. Findings
have since gained `end_line`, `end_column` and `fix` (fields added: the version stays)."""


def render_json(result: RunResult, registry: Registry, mode: str) -> str:
    edits = {file.path: FileEdits(file) for file in result.files}
    document = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "neuron-migrate", "version": __version__},
        "mode": mode,
        "summary": Summary.of(result).counts(),
        "files": [_file(f, edits[f.path]) for f in result.files],
        "findings": [item for file in result.files
                     for item in _findings(file, result, registry, edits[file.path])],
        "errors": [*(f.error for f in result.files if f.error), *result.errors],
        "interrupted": signal.Signals(result.interrupted).name if result.interrupted else None,
    }
    return json_safe(indented_json(document))


def _file(file: FileResult, edits: FileEdits) -> dict[str, object]:
    status = "error" if file.error else "skipped" if file.skipped else \
        "changed" if file.changed else "unchanged"
    whole = edits.whole()
    return {"path": file.path, "status": status, "error": file.error, "skipped": file.skipped,
            "fix": None if whole is None else {"edits": [_edit(e) for e in whole[0]],
                                               "diff": whole[1]}}


def _findings(file: FileResult, result: RunResult, registry: Registry,
              edits: FileEdits) -> list[dict[str, object]]:
    return [_finding(finding, registry, written(file, result), edits)
            for finding in file.findings]


def _finding(finding: Finding, registry: Registry, written: bool,
             edits: FileEdits) -> dict[str, object]:
    rule = registry.line(finding.rule_id)
    end_line, end_column = edits.end(finding)
    return {
        "path": finding.path,
        "line": finding.line,
        "column": finding.column,
        "end_line": end_line,
        "end_column": end_column,
        "rule_id": finding.rule_id,
        "rule_name": rule.name if rule else None,
        "kind": str(finding.kind),
        "message": finding.message,
        "applies": finding.applied,
        "applied": finding.applied and written,
        "suggestion": finding.suggestion,
        "doc_url": rule.doc_url if rule else None,
        "cell": finding.cell,
        "cell_id": finding.cell_id,
        "fix": _fix(edits.fix(finding)),
    }


def _fix(fix: Fix | None) -> dict[str, object] | None:
    if fix is None:
        return None
    return {"edits": [_edit(fix.edit)], "diff": fix.hunk}


def _edit(edit: Edit) -> dict[str, object]:
    return {"content": edit.content,
            "location": {"line": edit.start[0], "column": edit.start[1]},
            "end_location": {"line": edit.end[0], "column": edit.end[1]}}


def _render(report: RunReport) -> str:
    return render_json(report.result, report.registry, report.mode)


JSON = RunFormat(_render, keeps_sources=True, ends=True)
