"""What is wrong with a TOML text that does not parse, said of the line where the problem
starts. Both parsers report where they gave up: for an array or a multi-line string left open,
that is the end of the file (tomlkit even names a `'\\x00'` the file does not contain) or a
later table header, far from the bracket or quotes the user has to close."""

from __future__ import annotations

_CLOSING = {"[": "]", "{": "}"}
_NAMES = {"[": "array", "{": "inline table"}


def unclosed(text: str) -> tuple[int, str] | None:
    """The first bracket or multi-line string never closed: its line and what to say."""
    stack: list[tuple[str, int]] = []
    line, i, n = 1, 0, len(text)
    at_line_start = True
    while i < n:
        char = text[i]
        if char == "\n":
            line, i, at_line_start = line + 1, i + 1, True
            continue
        if char in " \t\r":
            i += 1
            continue
        if char == "#":
            i = _end_of_line(text, i)
        elif text.startswith(('"""', "'''"), i):
            end = text.find(text[i:i + 3], i + 3)
            if end < 0:
                return line, "a multi-line string opened on this line is never closed"
            line += text.count("\n", i, end)
            i = end + 3
        elif char in "\"'":
            i = _end_of_string(text, i)
        elif char == "[" and not stack and at_line_start:
            i = _end_of_line(text, i)  # a table header
        elif char in _CLOSING:
            stack.append((char, line))
            i += 1
        elif char in "]}":
            if stack and _CLOSING[stack[-1][0]] == char:
                stack.pop()
            i += 1
        else:
            i += 1
        at_line_start = False
    if stack:
        opening, where = stack[0]
        return where, (f"an {_NAMES[opening]} opened on this line is never closed with "
                       f"`{_CLOSING[opening]}`")
    return None


def _end_of_line(text: str, i: int) -> int:
    end = text.find("\n", i)
    return len(text) if end < 0 else end


def _end_of_string(text: str, i: int) -> int:
    """Past a one-line string; an unterminated one ends at its line's end (both parsers name
    that one well)."""
    quote, i = text[i], i + 1
    while i < len(text) and text[i] not in (quote, "\n"):
        i += 2 if quote == '"' and text[i] == "\\" else 1
    return i + 1 if i < len(text) and text[i] == quote else i
