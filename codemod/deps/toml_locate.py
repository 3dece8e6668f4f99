"""Where each value of a TOML document is written, so a pin can be edited by its span.

tomlkit answers what the document means; it does not say where a value sits, and rewriting
through it re-serialises neighbouring whitespace. This scanner only *locates*: it walks the
text once, recording the span of every value under its key path (arrays by index, arrays of
tables by their count). Callers compare the values it found with tomlkit's and edit only where
they agree, so a shape this scanner misreads costs an edit, never a wrong one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Located:
    start: int
    end: int
    """The value's span, quotes included."""
    key_start: int
    """Where its key (or, for an array element, the element itself) starts."""
    text: str | None = None
    """For a single-line string without escapes: its content."""


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.found: dict[Path, Located] = {}
        self.table_counts: dict[Path, int] = {}

    def run(self) -> dict[Path, Located]:
        table: Path = ()
        while self._skip_blank(newlines=True):
            if self.text[self.pos] == "[":
                table = self._header()
            else:
                self._pair(table)
        return self.found

    def _skip_blank(self, newlines: bool) -> bool:
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            elif char in " \t\r" or (newlines and char == "\n"):
                self.pos += 1
            else:
                return True
        return False

    def _header(self) -> Path:
        double = self.text.startswith("[[", self.pos)
        self.pos += 2 if double else 1
        path = self._key("]")
        self.pos = self.text.index("]]" if double else "]", self.pos) + (2 if double else 1)
        path = self._in_array_tables(path, len(path) - 1 if double else len(path))
        if double:
            count = self.table_counts.get(path, 0)
            self.table_counts[path] = count + 1
            return (*path, count)
        return path

    def _in_array_tables(self, path: Path, longest: int) -> Path:
        """`[package.extra]` after `[[package]]` belongs to the latest package."""
        for length in range(longest, 0, -1):
            prefix = path[:length]
            if prefix in self.table_counts:
                return (*prefix, self.table_counts[prefix] - 1, *path[length:])
        return path

    def _key(self, stop: str) -> Path:
        parts: list[str] = []
        while self._skip_blank(newlines=False) and self.text[self.pos] not in stop:
            char = self.text[self.pos]
            if char in "\"'":
                end = self.text.index(char, self.pos + 1)
                parts.append(self.text[self.pos + 1:end])
                self.pos = end + 1
            elif char == ".":
                self.pos += 1
            else:
                start = self.pos
                while self.pos < len(self.text) and \
                        (self.text[self.pos].isalnum() or self.text[self.pos] in "_-"):
                    self.pos += 1
                if self.pos == start:
                    raise ValueError(f"unexpected {char!r} at {start}")
                parts.append(self.text[start:self.pos])
        return tuple(parts)

    def _pair(self, table: Path) -> None:
        key_start = self.pos
        path = (*table, *self._key("="))
        self.pos += 1
        self._skip_blank(newlines=False)
        self._value(path, key_start)

    def _value(self, path: Path, key_start: int) -> None:
        start = self.pos
        char = self.text[start]
        if self.text.startswith(('"""', "'''"), start):
            self.pos = self.text.index(self.text[start:start + 3], start + 3) + 3
            while self.pos < len(self.text) and self.text[self.pos] == char:
                self.pos += 1
        elif char in "\"'":
            self._string(char)
        elif char == "[":
            self._array(path)
        elif char == "{":
            self._inline_table(path)
        else:
            while self.pos < len(self.text) and self.text[self.pos] not in ",]}#\n":
                self.pos += 1
        inner = self.text[start + 1:self.pos - 1]
        plain = char in "\"'" and not self.text.startswith(char * 3, start) and \
            (char == "'" or "\\" not in inner)
        self.found[path] = Located(start, self.pos, key_start, inner if plain else None)

    def _string(self, quote: str) -> None:
        self.pos += 1
        while self.text[self.pos] != quote:
            self.pos += 2 if quote == '"' and self.text[self.pos] == "\\" else 1
        self.pos += 1

    def _array(self, path: Path) -> None:
        count = iter(range(len(self.text)))
        self._items("]", lambda: self._value((*path, next(count)), self.pos))

    def _inline_table(self, path: Path) -> None:
        self._items("}", lambda: self._pair(path))

    def _items(self, close: str, item: Callable[[], None]) -> None:
        """Comma-separated items up to `close` (newlines and comments allowed in arrays)."""
        self.pos += 1
        while self._skip_blank(newlines=True) and self.text[self.pos] != close:
            if self.text[self.pos] == ",":
                self.pos += 1
            else:
                item()
        self.pos += 1


def locate(text: str) -> dict[Path, Located]:
    """Spans by key path; empty when the text has a shape the scanner does not follow."""
    try:
        return _Scanner(text).run()
    except (ValueError, IndexError):
        return {}
