"""A `FileResult` to a JSON document and back, field by field, so that a result read from
the cache is the very value that was computed (reports cannot tell a hit from a miss)."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

from neuron_migrate.model import FileResult, Finding, Kind

_BYTES = frozenset({"original", "new_source"})
_PAIRS = frozenset({"instances"})
_STRINGS = frozenset({"helpers"})


def encode(result: FileResult) -> dict[str, Any]:
    """Only the fields that differ from their defaults, to keep entries small."""
    document: dict[str, Any] = {}
    for field in dataclasses.fields(FileResult):
        value = getattr(result, field.name)
        if value == field.default:
            continue
        if field.name == "findings":
            value = [_finding(f, result.path) for f in value]
        elif field.name in _BYTES:
            value = base64.b64encode(value).decode("ascii")
        elif field.name in _PAIRS:
            value = [list(pair) for pair in value]
        elif field.name in _STRINGS:
            value = list(value)
        document[field.name] = value
    return document


def decode(document: dict[str, Any]) -> FileResult:
    """Raises (KeyError, TypeError, ValueError) on a document this module did not write."""
    fields = {}
    for name, value in document.items():
        if name == "findings":
            path = document["path"]
            value = tuple(Finding(path if f[0] is None else f[0], f[1], f[2], f[3], Kind(f[4]),
                                  *f[5:]) for f in value)
        elif name in _BYTES:
            value = base64.b64decode(value.encode("ascii"), validate=True)
        elif name in _PAIRS:
            value = tuple((int(line), str(text)) for line, text in value)
        elif name in _STRINGS:
            value = tuple(value)
        fields[name] = value
    result = FileResult(**fields)
    if not isinstance(result.path, str):
        raise TypeError("path")
    return result


def _finding(finding: Finding, path: str) -> list[Any]:
    """Its fields in order (a row, not a mapping: a large repository's entries hold thousands
    of findings, read on every run), the file's own path as null, trailing defaults left out."""
    row = [getattr(finding, field.name) for field in _FINDING_FIELDS]
    row[0] = None if finding.path == path else finding.path
    row[4] = finding.kind.value
    while len(row) > _REQUIRED and row[-1] == _FINDING_FIELDS[len(row) - 1].default:
        row.pop()
    return row


_FINDING_FIELDS = dataclasses.fields(Finding)
_REQUIRED = 6
"""path, line, column, rule_id, kind, message: the fields without a default."""
