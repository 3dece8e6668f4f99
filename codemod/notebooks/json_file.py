"""Reading a notebook's cells and writing back only the `source` values that changed.

Re-serialising the whole notebook, even with the detected indentation and `ensure_ascii`, can
reformat what was not ours to touch (number spellings, escapes other writers chose, duplicate
keys, a hand-edited layout). So the notebook text is kept and only the span of each changed
cell's `source` value is replaced, written in that value's own layout (list or string, item
indentation, separators); lines of a cell that did not change keep their original JSON
spelling. Everything else stays byte for byte, so the git diff shows changed source lines only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Any

from neuron_migrate.files.diff import split_lines

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\r\n]*")
_NON_ASCII_ESCAPE = re.compile(r"\\u(?!00[0-7])[0-9a-fA-F]{4}")


class NotebookError(Exception):
    """The file is not a notebook we can read; the message names the file."""


@dataclass(frozen=True)
class Cell:
    index: int
    """Position in the notebook's `cells` list (markdown and raw cells count)."""
    cell_type: str
    cell_id: str | None
    text: str
    """The source joined into one string."""
    as_list: bool
    """Whether `source` was a list of lines (Jupyter's form) rather than one string."""
    python: bool = True
    """False for a code cell another language's kernel runs (VS Code's cell languageId)."""


@dataclass(frozen=True)
class Notebook:
    path: str
    text: str
    bom: bool
    cells: tuple[Cell, ...]
    language: str | None
    """The kernel's language, when the metadata names one."""


def read_notebook(path: str, data: bytes) -> Notebook:
    """Parse and check the notebook; raises `NotebookError` with a message for the report."""
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        text = data[3 if bom else 0:].decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotebookError(f"{path}: not a notebook (not UTF-8 text at byte {error.start}); "
                            "file skipped") from error
    try:
        root = json.loads(text)
    except json.JSONDecodeError as error:
        raise NotebookError(f"{path}:{error.lineno}: not a valid notebook (invalid JSON: "
                            f"{error.msg} at line {error.lineno} column {error.colno}); "
                            "file skipped") from error
    cells = tuple(_cell(path, i, c) for i, c in enumerate(_cells(path, root)))
    for cell in cells:
        if cell.cell_type == "code":
            _check_unicode(path, cell)
    return Notebook(path, text, bom, cells, _language(root))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_unicode(path: str, cell: Cell) -> None:
    """JSON can spell a lone surrogate (`"\\ud800"`), which is no character: such a cell
    cannot be compiled, and its text cannot be written back as UTF-8."""
    found = _SURROGATE.search(cell.text)
    if found is not None:
        line = cell.text.count("\n", 0, found.start()) + 1
        raise NotebookError(f"{path}: cell {cell.index}, line {line}: a lone surrogate "
                            f"(\\u{ord(found.group()):04x}) in the JSON, not a character; "
                            "file skipped")


def write_sources(notebook: Notebook, new_texts: dict[int, str]) -> bytes:
    """The notebook with the given cells' sources replaced and nothing else changed.

    The sources are located only here: a notebook with nothing to change is never scanned."""
    text = notebook.text
    spans = _source_spans(text)
    if len(spans) != len(notebook.cells):
        raise NotebookError(f"{notebook.path}: cannot locate the cells' sources; "
                            "notebook not written (please report this)")
    ascii_only = _ensure_ascii(text)
    pieces: list[str] = []
    position = 0
    for cell in notebook.cells:
        if cell.index not in new_texts:
            continue
        span = spans[cell.index]
        if span is None:
            raise NotebookError(f"{notebook.path}: cell {cell.index} has no source to write; "
                                "notebook not written (please report this)")
        start, end = span
        pieces += [text[position:start],
                   _encode(text, cell, span, new_texts[cell.index], ascii_only)]
        position = end
    pieces.append(text[position:])
    return (b"\xef\xbb\xbf" if notebook.bom else b"") + "".join(pieces).encode("utf-8")


def _cells(path: str, root: Any) -> list[Any]:
    if not isinstance(root, dict):
        raise NotebookError(f"{path}: not a notebook (the JSON is not an object); file skipped")
    version = root.get("nbformat")
    if isinstance(version, int) and version < 4:
        raise NotebookError(f"{path}: nbformat {version} notebooks are not supported; convert "
                            "it with `jupyter nbconvert --to notebook`; file skipped")
    cells = root.get("cells")
    if not isinstance(cells, list):
        raise NotebookError(f'{path}: not an nbformat 4 notebook (no "cells" list); '
                            "file skipped")
    return cells


def _cell(path: str, index: int, raw: Any) -> Cell:
    if not isinstance(raw, dict):
        raise NotebookError(f"{path}: cell {index} is not a JSON object; file skipped")
    source = raw.get("source", "")
    as_list = isinstance(source, list)
    if not (isinstance(source, str) or as_list and all(isinstance(s, str) for s in source)):
        raise NotebookError(f"{path}: cell {index}: source is not text; file skipped")
    cell_id = raw.get("id")
    metadata = raw.get("metadata")
    vscode = metadata.get("vscode") if isinstance(metadata, dict) else None
    language = vscode.get("languageId") if isinstance(vscode, dict) else None
    return Cell(index, str(raw.get("cell_type")), cell_id if isinstance(cell_id, str) else None,
                "".join(source) if as_list else source, as_list,
                python=language in (None, "python"))


def _language(root: dict[str, Any]) -> str | None:
    metadata = root.get("metadata")
    if not isinstance(metadata, dict):
        return None
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        section = metadata.get(key)
        if isinstance(section, dict) and isinstance(section.get(field), str):
            return section[field]
    return None


# ------------------------------------------------------------------ locating the sources
def file_lines(text: str, cells: Container[int]) -> dict[int, list[int]]:
    """For each of these cells with a source, the 1-based line of the notebook file where
    each of its source lines is written: one list element a line in Jupyter's form; a single
    string holds them all on the line where it starts. (Only the cells asked about: walking a
    source list costs a decode of each of its lines.)"""
    lines: dict[int, list[int]] = {}
    line, counted = 1, 0  # the sources come in file order: count each newline once
    for index, span in enumerate(_source_spans(text)):
        if span is None or index not in cells:
            continue
        starts = [start for start, _ in _elements(text, span[0])] \
            if text[span[0]] == "[" else [span[0]]
        numbers = []
        for start in starts:
            if start < counted:
                line, counted = 1, 0
            line += text.count("\n", counted, start)
            counted = start
            numbers.append(line)
        lines[index] = numbers
    return lines


def _source_spans(text: str) -> list[tuple[int, int] | None]:
    """For each cell, the span of its `source` value (None when it has none). The text is
    valid JSON already; where a key repeats, the last one wins, as in `json.loads`.

    The cells list is walked into, not skipped: skipping a value decodes it, and the cells'
    outputs are most of a notebook's bytes, so each value is decoded once."""
    spans: list[tuple[int, int] | None] = []

    def member(key: str, value: int) -> int:
        if key != "cells":
            return _skip(text, value)
        spans.clear()
        return _walk_array(text, value, cell) if text[value] == "[" else _skip(text, value)

    def cell(start: int) -> int:
        spans.append(None)
        return _walk_object(text, start, cell_member) if text[start] == "{" \
            else _skip(text, start)

    def cell_member(key: str, value: int) -> int:
        end = _skip(text, value)
        if key == "source":
            spans[-1] = (value, end)
        return end

    _walk_object(text, _skip_space(text, 0), member)
    return spans


def _elements(text: str, start: int) -> list[tuple[int, int]]:
    """(start, end) of each element of the list at `start`."""
    elements: list[tuple[int, int]] = []

    def element(i: int) -> int:
        elements.append((i, _skip(text, i)))
        return elements[-1][1]

    _walk_array(text, start, element)
    return elements


def _walk_object(text: str, start: int, member: Callable[[str, int], int]) -> int:
    """Hand each member of the object at `start` to `member(key, value start)`, which reads
    the value and returns where it ends; the end of the object."""
    i = _skip_space(text, start + 1)
    while text[i] != "}":
        key, key_end = _DECODER.raw_decode(text, i)
        value = _skip_space(text, _skip_space(text, key_end) + 1)  # past the colon
        i = _skip_space(text, member(key, value))
        if text[i] == ",":
            i = _skip_space(text, i + 1)
    return i + 1


def _walk_array(text: str, start: int, element: Callable[[int], int]) -> int:
    """As `_walk_object`, for the elements of the list at `start`."""
    i = _skip_space(text, start + 1)
    while text[i] != "]":
        i = _skip_space(text, element(i))
        if text[i] == ",":
            i = _skip_space(text, i + 1)
    return i + 1


def _skip(text: str, i: int) -> int:
    """The end of the JSON value starting at `i` (json's C scanner: outputs can be large)."""
    return _DECODER.raw_decode(text, i)[1]


def _skip_space(text: str, i: int) -> int:
    return _SPACE.match(text, i).end()  # type: ignore[union-attr]


# ------------------------------------------------------------------ writing a source
def _ensure_ascii(text: str) -> bool:
    """Whether the notebook's writer escaped non-ASCII characters (Python's json default)
    rather than writing them as they are (Jupyter's choice)."""
    return text.isascii() and _NON_ASCII_ESCAPE.search(text) is not None


def _encode(text: str, cell: Cell, span: tuple[int, int], new: str, ascii_only: bool) -> str:
    start, end = span
    if not cell.as_list:
        return json.dumps(new, ensure_ascii=ascii_only)
    lines = split_lines(new)
    if not lines:
        return "[]"
    items = _elements(text, start)
    spelled = {json.loads(text[s:e]): text[s:e] for s, e in items}
    encoded = [spelled.get(line) or json.dumps(line, ensure_ascii=ascii_only) for line in lines]
    opening, separator, closing = _list_layout(text, start, end, items)
    return "[" + opening + separator.join(encoded) + closing + "]"


def _list_layout(text: str, start: int, end: int,
                 items: list[tuple[int, int]]) -> tuple[str, str, str]:
    """The whitespace after `[`, between items and before `]`, as the original list has it."""
    if items:
        opening = text[start + 1:items[0][0]]
        closing = text[items[-1][1]:end - 1]
        separator = text[items[0][1]:items[1][0]] if len(items) > 1 else \
            ("," + opening if opening else ", ")
        return opening, separator, closing
    # an empty list: indent one level deeper than the line holding "source"
    line_start = text.rfind("\n", 0, start) + 1
    if line_start == 0:
        return "", ", ", ""
    indent = text[line_start:len(text) - len(text[line_start:].lstrip(" \t"))]
    unit = re.match(r"\{\r?\n([ \t]+)", text)
    newline = "\r\n" if text[line_start - 2:line_start] == "\r\n" else "\n"
    inner = indent + (unit.group(1) if unit else " ")
    return newline + inner, "," + newline + inner, newline + indent
