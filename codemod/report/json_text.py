"""Indented JSON text, as `json.dumps(document, indent=2, ensure_ascii=False)` writes it, at a
fraction of its cost.

With `indent`, the standard library gives up its C encoder for a pure-Python one that runs a
generator per value: for the report of a large checkout (thousands of findings, each a few
nested objects) that encoder was half of a re-check whose results came from the cache. Here
strings are still escaped by the C function `json` itself uses, and the nesting is written by
one plain recursive function. The text is the same, character for character; a value this
writer does not know (anything but dict, list, tuple, str, int, float, bool, None) is handed to
`json.dumps`, which then decides, as before.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring  # type: ignore[attr-defined]  # the C escaper

_INDENT = "  "
_INFINITY = float("inf")


class _Unknown(Exception):
    """A value only `json.dumps` knows what to do with (or how to refuse)."""


def indented_json(document: object) -> str:
    """`json.dumps(document, indent=2, ensure_ascii=False)`."""
    parts: list[str] = []
    append, escaped = parts.append, encode_basestring

    def write(value: object, newline: str) -> None:
        """Append `value`'s text; `newline` is a line break and the current indentation."""
        kind = type(value)
        if kind is str:
            append(escaped(value))
        elif kind is dict:
            if not value:
                append("{}")
                return
            inner = newline + _INDENT
            separator = "{" + inner
            for key, item in value.items():  # type: ignore[attr-defined]
                if type(key) is not str:
                    raise _Unknown  # json converts such keys in its own way
                append(separator)
                append(escaped(key))
                append(": ")
                if type(item) is str:  # most values: written here, without a call
                    append(escaped(item))
                else:
                    write(item, inner)
                separator = "," + inner
            append(newline + "}")
        elif kind is list or kind is tuple:
            if not value:
                append("[]")
                return
            inner = newline + _INDENT
            separator = "[" + inner
            for item in value:  # type: ignore[attr-defined]
                append(separator)
                write(item, inner)
                separator = "," + inner
            append(newline + "]")
        elif kind is int:
            append(int.__repr__(value))  # type: ignore[arg-type]
        elif value is None:
            append("null")
        elif value is True:
            append("true")
        elif value is False:
            append("false")
        elif kind is float and value == value and value not in (_INFINITY, -_INFINITY):
            append(float.__repr__(value))  # type: ignore[arg-type]
        else:
            # a subclass (a `str` enum), NaN, an infinity, or a type json refuses
            raise _Unknown

    try:
        write(document, "\n")
    except (_Unknown, RecursionError):
        return json.dumps(document, indent=2, ensure_ascii=False)
    return "".join(parts)
