"""The machine-readable report: one JSON object for the whole run.

Schema (version 1):
  {"schema_version": 1, "tool": {"name", "version"}, "mode": "apply"|"dry-run"|"check",
   "summary": {"files", "changed", "failed", "fixes", "unsafe_fixes", "reviews"},
   "files": [{"path", "status": "changed"|"unchanged"|"error", "error"}],
   "findings": [{"path", "line", "column", "rule_id", "rule_name", "kind", "message",
                 "applied", "suggestion", "doc_url", "cell", "cell_id"}],
  ("cell" is the 0-based code-cell index in a notebook, and "line" the line within it.)
   "errors": [str]}
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from neuron_migrate import __version__
from neuron_migrate.model import FileResult
from neuron_migrate.registry import Registry
from neuron_migrate.report.summary import Summary

if TYPE_CHECKING:  # the runner is only a type here
    from neuron_migrate.runner import RunResult

SCHEMA_VERSION = 1


def render_json(result: RunResult, registry: Registry, mode: str) -> str:
    document = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "neuron-migrate", "version": __version__},
        "mode": mode,
        "summary": Summary.of(result).counts(),
        "files": [_file(f) for f in result.files],
        "findings": [_finding(f, registry) for f in result.findings],
        "errors": list(result.errors),
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def _file(file: FileResult) -> dict[str, object]:
    status = "error" if file.error else "changed" if file.changed else "unchanged"
    return {"path": file.path, "status": status, "error": file.error}


def _finding(finding, registry: Registry) -> dict[str, object]:  # type: ignore[no-untyped-def]
    rule = registry.by_id.get(finding.rule_id)
    return {
        "path": finding.path,
        "line": finding.line,
        "column": finding.column,
        "rule_id": finding.rule_id,
        "rule_name": rule.name if rule else None,
        "kind": str(finding.kind),
        "message": finding.message,
        "applied": finding.applied,
        "suggestion": finding.suggestion,
        "doc_url": rule.doc_url if rule else None,
        "cell": finding.cell,
        "cell_id": finding.cell_id,
    }
