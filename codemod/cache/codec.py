"""A `FileResult` to a JSON document and back, field by field, so that a result read from
the cache is the very value that was computed (reports cannot tell a hit from a miss)."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from neuron_migrate.model import FileResult, Finding, Kind

_BYTES = frozenset({"original", "new_source"})
_PAIRS = frozenset({"instances"})
_STRINGS = frozenset({"helpers"})
_POSITIONS = frozenset({"ends", "changes"})


def _position(row: list[Any]) -> tuple[int, int, int, int]:
    if type(row) is not list or len(row) != 4 or any(type(n) is not int for n in row):
        raise ValueError("not a position")
    return tuple(row)  # type: ignore[return-value]


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
            import base64  # only results kept with their sources (a diff) hold bytes

            value = base64.b64encode(value).decode("ascii")
        elif field.name in _PAIRS or field.name in _POSITIONS:
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
            value = tuple(_finding_of(row, document["path"]) for row in value)
        elif name in _BYTES:
            import base64

            value = base64.b64decode(value.encode("ascii"), validate=True)
        elif name in _PAIRS:
            value = tuple((int(line), str(text)) for line, text in value)
        elif name in _STRINGS:
            value = tuple(value)
        elif name in _POSITIONS:
            value = tuple(_position(row) for row in value)
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


def _finding_of(row: list[Any], path: str) -> Finding:
    """The finding of a row `_finding` wrote. Built without `Finding.__init__`: its message
    was clipped before it was kept, and a large repository's warm run reads thousands."""
    if type(row) is not list or not _REQUIRED <= len(row) <= len(_NAMES):
        raise ValueError("not a finding")
    values = dict(_DEFAULTS)
    values.update(zip(_NAMES, row))
    if values["path"] is None:
        values["path"] = path
    values["kind"] = _KINDS[values["kind"]]  # KeyError for a kind this version lacks
    values["message"] = sys.intern(str(values["message"]))
    finding = object.__new__(Finding)
    finding.__dict__.update(values)
    return finding


_FINDING_FIELDS = dataclasses.fields(Finding)
_NAMES = tuple(field.name for field in _FINDING_FIELDS)
_DEFAULTS = {field.name: field.default for field in _FINDING_FIELDS}
_KINDS = {kind.value: kind for kind in Kind}
"""A kind by its value: what `Kind(value)` answers, without the enum's call machinery."""
_REQUIRED = 6
"""path, line, column, rule_id, kind, message: the fields without a default."""
