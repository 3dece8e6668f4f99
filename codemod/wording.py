"""How a change's message reads, by what the run did with it.

Rules word every message as an instruction (`remove ...`, `...; drop init_method ...`): that
reads right wherever nothing was written, which is `check`, `--dry-run`, `scan`, a review item
and an unsafe fix left out. Once a file is written, its changes are told as done (`removed
...`). The tense is decided here, in one place, rather than by each of the rules.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the model asks `clipped` of every message it holds
    from neuron_migrate.model import FileResult

_PAST = {"add": "added", "change": "changed", "delete": "deleted", "drop": "dropped",
         "launch": "launched", "move": "moved", "remove": "removed", "rename": "renamed",
         "replace": "replaced", "unwrap": "unwrapped"}

_CLAUSE = re.compile(r"(?:^|(?<=; )|(?<=: ))(" + "|".join(_PAST) + r")(?= )")
"""A verb opening a clause: the message, or what follows `; ` or `: ` (`...; add it`). Advice
a fix gives beside its change starts with another verb (`check`, `update`, `keep`)."""


def as_done(message: str) -> str:
    """The message in the past tense. Code in backticks is left alone (quoted code that
    itself holds a backtick can shift that reckoning; the file is never affected)."""
    parts = message.split("`")
    for index in range(0, len(parts), 2):  # the text outside `code`
        parts[index] = _CLAUSE.sub(lambda match: _PAST[match.group(1)], parts[index])
    return "`".join(parts)


def as_written(result: FileResult) -> FileResult:
    """A file this run wrote: the changes written are told as done."""
    findings = tuple(dataclasses.replace(f, message=as_done(f.message)) if f.applied else f
                     for f in result.findings)
    return dataclasses.replace(result, findings=findings)


QUOTE_LIMIT = 200
"""The most characters of input a message quotes in one code span (a requirement line, a
call): a 100 KB line repeated in full drowns the report and tells nothing more."""
MESSAGE_LIMIT = 1_000
"""The most characters of a message as a whole (a name or a line quoted without backticks)."""


def _quoted(span: str) -> str:
    """One code span as a message shows it: cut to its start past QUOTE_LIMIT."""
    if len(span) <= QUOTE_LIMIT:
        return f"`{span}`"
    return f"`{span[:QUOTE_LIMIT - 20]}…` ({len(span):,} characters)"


def clipped(message: str) -> str:
    """The message with each long quotation cut to its start and an ellipsis, and the whole
    cut at MESSAGE_LIMIT, saying how long the cut text was. The one place messages are kept
    to a size a person can read: every finding, error and note passes here (the model's
    constructors call it). Code spans are the odd pieces between backticks, counted from the
    start, so the prose between two spans is never taken for one."""
    if len(message) <= QUOTE_LIMIT:
        return message
    pieces = message.split("`")
    if len(pieces) % 2:  # balanced backticks: every odd piece is a code span
        message = "".join(_quoted(piece) if index % 2 else piece
                          for index, piece in enumerate(pieces))
    if len(message) <= MESSAGE_LIMIT:
        return message
    return f"{message[:MESSAGE_LIMIT - 40]}… ({len(message):,} characters in all)"
