"""Unified diffs that `git apply` accepts, whatever the line endings.

Lines are split on "\\n" only, as git does (str.splitlines also splits on form feeds and other
separators, which would produce hunks git rejects); a last line without a newline gets git's
"\\ No newline at end of file" marker.
"""

from __future__ import annotations

import difflib
import re

_LINES = re.compile(r"[^\n]*\n|[^\n]+\Z")
NO_NEWLINE = "\\ No newline at end of file\n"


def split_lines(text: str) -> list[str]:
    return _LINES.findall(text)


def unified_diff(path: str, old: str, new: str, context: int = 3) -> str:
    out: list[str] = []
    name = path.replace("\\", "/").lstrip("/")
    for line in difflib.unified_diff(split_lines(old), split_lines(new), f"a/{name}",
                                     f"b/{name}", n=context):
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n" + NO_NEWLINE)
    return "".join(out)
