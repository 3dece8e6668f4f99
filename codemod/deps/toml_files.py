"""Reading TOML dependency files: parse with tomlkit, locate with `toml_locate`, and turn PEP
508 string arrays into entries whose edits are spans inside the original text."""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import tomlkit

from neuron_migrate.deps.entries import (
    Edit, Manifest, Unparsable, entry_from, parse_requirement, written_head,
)
from neuron_migrate.deps.lines import newline_of
from neuron_migrate.deps.toml_errors import unclosed
from neuron_migrate.deps.toml_locate import Located, Path, locate

tomllib: ModuleType | None
try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None


def parse_toml(text: str) -> dict[str, Any]:
    """The document's meaning: the standard library's parser where there is one (it is many
    times faster than tomlkit), tomlkit for Python 3.10 and for the line of an error."""
    if tomllib is not None:
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            pass  # ask tomlkit where the problem is
    try:
        return tomlkit.parse(text).unwrap()
    except Exception as error:  # ParseError, and a few other kinds on odd input
        problem = unclosed(text)
        if problem is not None:
            raise Unparsable(problem[0], f"not valid TOML ({problem[1]})") from None
        message = str(error).replace("Unexpected character: '\\x00'", "unexpected end of file")
        raise Unparsable(getattr(error, "line", 0), f"not valid TOML ({message})") from None


def lookup(document: dict[str, Any], path: Path) -> Any:
    node: Any = document
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node


class TomlFile:
    """One TOML text with its meaning and the spans of its values."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.document = parse_toml(text)
        self.spans = locate(text)
        self.newline = newline_of(text)

    def offset_of(self, path: Path) -> int:
        """Where a value (or the nearest enclosing one the scanner found) is written."""
        for length in range(len(path), 0, -1):
            located = self.spans.get(path[:length])
            if located is not None:
                return located.key_start
        return 0

    def requirement_array(self, path: Path, manifest: Manifest, group: str) -> None:
        values = lookup(self.document, path)
        if not isinstance(values, list):
            return
        for index, value in enumerate(values):
            requirement = parse_requirement(value) if isinstance(value, str) else None
            if requirement is None:
                continue
            located = self.spans.get((*path, index))
            editable = located is not None and located.text == value
            offset = located.start + 1 if located is not None else self.offset_of(path)
            manifest.entries.append(entry_from(requirement, value, offset, group,
                                               **(self._edits(located, value) if editable else {})))

    def _edits(self, located: Located, value: str) -> dict[str, object]:
        name, extras = written_head(value)
        head = value.split(";")[0].rstrip()
        quote = self.text[located.start]
        marker = value.split(";", 1)[1].strip() if ";" in value else ""

        def rewrite(spec: str) -> Edit:
            return Edit(located.start + 1, located.start + 1 + len(head), f"{name}{extras}{spec}")

        def insert(requirements: Sequence[str]) -> Edit:
            items = [f"{quote}{r}{' ; ' + marker if marker else ''}{quote}" for r in requirements]
            return self._insert_items(located, items)

        return {"rewrite": rewrite, "insert": insert, "remove": self._remove(located)}

    def _line(self, located: Located) -> tuple[int, int, str]:
        start = self.text.rfind("\n", 0, located.start) + 1
        end = self.text.find("\n", located.end)
        end = len(self.text) if end < 0 else end
        return start, end, self.text[start:end].rstrip("\r")

    def _own_line(self, located: Located) -> bool:
        start, _, line = self._line(located)
        rest = line[located.end - start:].lstrip()
        return not line[:located.start - start].strip() and (not rest or rest[0] in ",#")

    def _insert_items(self, located: Located, items: list[str]) -> Edit:
        start, _, line = self._line(located)
        after = line[located.end - start:].lstrip()
        if not self._own_line(located):
            return Edit(located.end, located.end, "".join(f", {i}" for i in items))
        indent = line[:len(line) - len(line.lstrip())]
        if after.startswith(","):
            content_end = start + len(line)
            return Edit(content_end, content_end,
                        "".join(f"{self.newline}{indent}{i}," for i in items))
        return Edit(start, start, "".join(f"{indent}{i},{self.newline}" for i in items))

    def _remove(self, located: Located) -> Edit:
        start, end, line = self._line(located)
        if self._own_line(located):
            return Edit(start, min(end + 1, len(self.text)), "")
        rest = self.text[located.end:end]
        comma = rest.find(",")
        if comma >= 0 and not rest[:comma].strip():
            tail = len(rest[comma + 1:]) - len(rest[comma + 1:].lstrip(" \t"))
            return Edit(located.start, located.end + comma + 1 + tail, "")
        before = self.text[start:located.start].rstrip(" \t")
        if before.endswith(","):
            return Edit(start + len(before) - 1, located.end, "")
        return Edit(located.start, located.end, "")
