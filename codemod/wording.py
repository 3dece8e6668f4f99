"""How a change's message reads, by what the run did with it.

Rules word every message as an instruction (`remove ...`, `...; drop init_method ...`): that
reads right wherever nothing was written, which is `check`, `--dry-run`, `scan`, a review item
and an unsafe fix left out. Once a file is written, its changes are told as done (`removed
...`). The tense is decided here, in one place, rather than by each of the rules.
"""

from __future__ import annotations

import dataclasses
import re

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
