"""Text from a repository, made safe to show to a person.

File names, quoted code, requirement lines and a script's output all come from the repository
being migrated, and a hostile one can put terminal control sequences in them: clear the
screen, set the window title, plant a hyperlink, hide a line behind a carriage return, or
reorder code with bidirectional overrides (the "Trojan Source" characters). Every
human-readable output (the text report and its diffs, concise, markdown, warnings and errors,
`audit` and `smoke` text) passes through `printable` once, where it is written; such
characters then show as escapes (`\\x1b`, `\\r`, `\\u202e`), as git shows them in a quoted file
name. JSON formats (JSON, SARIF, GitLab) escape in their own syntax (`json_safe` adds DEL, C1
and bidi characters to what JSON escapes) and read back exact; GitHub annotations, whose
syntax has no escape for them and whose log renders ANSI sequences, go through `printable`
too.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
                     "\udc80-\udc9f]|\r(?!\n)")
"""C0 and C1 controls but the tab and the line end (a CRLF line's carriage return, harmless
before its line feed, stays, so that a CRLF file's diff still applies), DEL, the bidi embedding,
override and isolate characters, and an undecodable byte of a file name (carried as a
surrogate) that a terminal would read as a C1 control."""
_LINE_BREAKS = re.compile("[\n\r]")
_NAMED = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f",
          "\r": "\\r"}


def printable(text: str) -> str:
    """`text` with every character a terminal would act on shown as its escape."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(lambda match: escape(match.group()), text)


def one_line(text: str) -> str:
    """A name or a message that must stay on its line (a heading, a list item): its line
    breaks shown as escapes too."""
    return printable(_LINE_BREAKS.sub(lambda match: escape(match.group()), text))


def escape(character: str) -> str:
    """One character as Python spells it in a string; an undecodable byte of a file name
    as the byte."""
    if character in _NAMED:
        return _NAMED[character]
    code = ord(character)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""What JSON may carry raw but a terminal would act on (C0 controls JSON escapes itself)."""


def json_safe(document: str) -> str:
    """A JSON text (written with `ensure_ascii=False`) with DEL, the C1 controls and the bidi
    overrides written as `\\uXXXX` escapes: a parser reads the same strings, and a report
    printed to a terminal cannot drive it (a UTF-8 terminal acts on U+009B as on ESC [)."""
    if _JSON_UNSAFE.search(document) is None:
        return document
    return _JSON_UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", document)
