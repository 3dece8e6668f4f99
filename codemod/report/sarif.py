"""SARIF 2.1.0 for GitHub code scanning: rule metadata in tool.driver.rules, one result per
finding, file errors as tool notifications."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from neuron_migrate import __version__
from neuron_migrate.model import Finding, Kind
from neuron_migrate.printable import json_safe
from neuron_migrate.registry import Registry, RuleLine
from neuron_migrate.report.edits import FileEdits, Fix
from neuron_migrate.report.json_text import indented_json
from neuron_migrate.report.renderer import RunFormat, RunReport
from neuron_migrate.report.summary import written

if TYPE_CHECKING:  # the runner is only a type here
    from neuron_migrate.runner import RunResult

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVELS = {Kind.FIX: "note", Kind.UNSAFE_FIX: "warning", Kind.REVIEW: "warning"}


def render_sarif(result: RunResult, registry: Registry) -> str:
    rules = registry.described()
    index = {rule.id: i for i, (rule, _) in enumerate(rules)}
    artifacts = _Artifacts()
    document = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "neuron-migrate",
                "version": __version__,
                "informationUri": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html",
                "rules": [_rule(rule, explanation) for rule, explanation in rules],
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri() + "/"}},
            "results": [_result(finding, index, written(file, result), edits, artifacts)
                        for file in result.files for edits in (FileEdits(file),)
                        for finding in file.findings],
            "invocations": [{
                "executionSuccessful": not result.failed,
                "toolExecutionNotifications": [
                    {"level": "error", "message": {"text": text}}
                    for text in [*(f.error for f in result.files if f.error), *result.errors]
                ],
            }],
        }],
    }
    return json_safe(indented_json(document))


def _rule(rule: RuleLine, explanation: str) -> dict[str, object]:
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": explanation},
        "helpUri": rule.doc_url,
        "help": {"text": f"{explanation}\n\n{rule.doc_url}"},
        "defaultConfiguration": {"level": _LEVELS[Kind(rule.kind)]},
        "properties": {"kind": rule.kind},
    }


def _result(finding: Finding, index: dict[str, int], written: bool,
            edits: FileEdits, artifacts: _Artifacts) -> dict[str, object]:
    message = finding.message
    if finding.cell is not None:
        message = f"cell {finding.cell}, line {finding.line}: {message}"
    entry: dict[str, object] = {
        "ruleId": finding.rule_id,
        "level": _LEVELS[finding.kind],
        "message": {"text": message},
        "locations": [{"physicalLocation": {
            "artifactLocation": artifacts[finding.path],
            "region": _region(finding, edits),
        }}],
        # as in the JSON report: part of the run's rewrite, and written by this run
        "properties": {"kind": str(finding.kind), "applies": finding.applied,
                       "applied": finding.applied and written},
    }
    if finding.rule_id in index:
        entry["ruleIndex"] = index[finding.rule_id]
    # a fix this run wrote is done: its positions no longer describe the file
    if not written and (fix := edits.fix(finding)) is not None:
        entry["fixes"] = [_fix(finding, fix, artifacts[finding.path])]
    return entry


def _fix(finding: Finding, fix: Fix, artifact: dict[str, str]) -> dict[str, object]:
    """The fix as one replacement in the file (in a notebook, in the .ipynb's own text)."""
    edit = fix.edit
    return {
        "description": {"text": finding.message},
        "artifactChanges": [{
            "artifactLocation": artifact,
            "replacements": [{
                "deletedRegion": {"startLine": edit.start[0], "startColumn": edit.start[1],
                                  "endLine": edit.end[0], "endColumn": edit.end[1]},
                "insertedContent": {"text": edit.content},
            }],
        }],
    }


class _Artifacts(dict[str, dict[str, str]]):
    """Each file's artifact location, worked out once per report (a file has many findings;
    the path's resolution against the working folder is the costly part). The same dict is
    placed in every result of the file: the JSON text is the same."""

    def __missing__(self, path: str) -> dict[str, str]:
        location = self[path] = _artifact(path)
        return location


def _artifact(path: str) -> dict[str, str]:
    """An RFC 3986 URI reference relative to %SRCROOT% (the folder the run started in), as
    code scanning expects; a file outside it keeps an absolute file: URI."""
    relative = os.path.relpath(os.path.abspath(path))
    if relative.split(os.sep, 1)[0] == os.pardir:
        return {"uri": Path(os.path.abspath(path)).as_uri()}
    return {"uri": quote(Path(relative).as_posix(), errors="surrogateescape"),
            "uriBaseId": "%SRCROOT%"}


def _region(finding: Finding, edits: FileEdits) -> dict[str, int]:
    """Where a viewer of the file shows the finding: in a notebook, the line of the `.ipynb`
    that holds the cell's line (the message names the cell and its line)."""
    if finding.cell is not None and finding.file_line is not None:
        return {"startLine": finding.file_line}
    end_line, end_column = edits.end(finding)
    return {"startLine": finding.line, "startColumn": finding.column,
            "endLine": end_line, "endColumn": end_column}


def _render(report: RunReport) -> str:
    return render_sarif(report.result, report.registry)


SARIF = RunFormat(_render, keeps_sources=True, ends=True)
