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
            value = [_finding(f) for f in value]
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
            value = tuple(Finding(**{**f, "kind": Kind(f["kind"])}) for f in value)
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


def _finding(finding: Finding) -> dict[str, Any]:
    document = {}
    for field in dataclasses.fields(Finding):
        value = getattr(finding, field.name)
        if field.name in ("path", "line", "column", "rule_id", "kind", "message") or \
                value != field.default:
            document[field.name] = value.value if isinstance(value, Kind) else value
    return document
