"""What a dependency file declares, in a form every file kind can produce.

A reader (requirements, pyproject, Dockerfile, ...) finds the requirements and index URLs and,
where it is safe to edit them, attaches the edits that would change them. The checks in
`check.py` then decide without knowing which file kind they are looking at.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet

from neuron_migrate.deps.versions import RELEVANT, is_cuda_relevant, name_of


@dataclass(frozen=True)
class Edit:
    """Replace `text[start:end]` with `new` (an insertion when start == end)."""

    start: int
    end: int
    new: str


Rewrite = Callable[[str], Edit | None]
"""Given a specifier such as "==2.14.*", the edit that makes the entry say it."""
Insert = Callable[[Sequence[str]], Edit | None]
"""Given whole requirements such as ("nki",), the edit that adds them beside the entry."""


@dataclass(frozen=True)
class Entry:
    """One requirement at one place in a file.

    `spec` is None when the constraint is not PEP 440 (a Poetry caret, an unresolved
    variable): the checks can then only ask for review.
    """

    name: str
    spec: SpecifierSet | None
    raw: str
    offset: int
    group: str = ""
    rewrite: Rewrite | None = None
    remove: Edit | None = None
    insert: Insert | None = None
    command: int | None = None
    """For a pip command line: where its arguments start, so that its own index options
    are told from another command's (None: the file's indexes all apply)."""


@dataclass(frozen=True)
class Index:
    """A package index the file configures (`--extra-index-url`, `[[source]]`, ...)."""

    url: str
    offset: int
    group: str = ""
    add_after: Insert | None = None
    """Given index URLs, the edit adding them as further extra indexes beside this one."""
    replace: Rewrite | None = None
    """Given a URL, the edit that writes it in place of this one's (None: not in one piece)."""
    command: int | None = None
    """As `Entry.command`: the pip command whose option this is (None: every command's)."""


@dataclass(frozen=True)
class Verdict:
    """A check's decision (`check.py`, `cuda.py`): a rule, where, what to change to, and the
    edits that make the change when the reader could offer them."""

    rule_id: str
    offset: int
    message: str
    edits: tuple[Edit | None, ...] = ()
    suggestion: str | None = None


@dataclass
class Manifest:
    """Everything one file (or one run of text lines) declares."""

    entries: list[Entry] = field(default_factory=list)
    indexes: list[Index] = field(default_factory=list)
    shared_group: str | None = None
    """A group whose entries every other group also sees (PEP 621 `dependencies`)."""
    lock_command: str | None = None
    """For lockfiles: the command that regenerates the file; nothing in it is edited."""
    not_edited: str | None = None
    """Why a file kind is reported but never edited (setup.py, Pipfile)."""

    def groups(self) -> dict[str, list[Entry]]:
        grouped: dict[str, list[Entry]] = {}
        for entry in self.entries:
            grouped.setdefault(entry.group, []).append(entry)
        return grouped


def is_relevant(text: str) -> bool:
    """Whether a requirement names a package the checks look at (read from the name alone,
    so the thousands of other lines in a generated file are never parsed)."""
    name = name_of(written_head(text)[0])
    return name in RELEVANT or is_cuda_relevant(name)


def parse_requirement(text: str) -> Requirement | None:
    """The requirement, when it names a package the checks look at and parses."""
    if not is_relevant(text):
        return None
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return None
    if any(not spec.version for spec in requirement.specifier):
        return None  # `torch-xla===`: packaging before 26.4 accepts it, pip does not
    return requirement


def entry_from(requirement: Requirement, raw: str, offset: int, group: str = "",
               **edits: object) -> Entry:
    spec = None if requirement.url else requirement.specifier
    return Entry(name_of(requirement.name), spec, raw, offset, group,
                 **edits)  # type: ignore[arg-type]


def written_head(raw: str) -> tuple[str, str]:
    """The name and the `[extras]` exactly as written, so a rewrite keeps the user's spelling.

    Splits on PEP 508's name grammar (letters, digits, `.`, `_`, `-`); the version part is
    never looked at here."""
    stripped = raw.lstrip()
    end = 0
    while end < len(stripped) and (stripped[end].isalnum() or stripped[end] in "._-"):
        end += 1
    rest = stripped[end:].lstrip()
    extras = rest[:rest.index("]") + 1] if rest.startswith("[") and "]" in rest else ""
    return stripped[:end], extras


class Unparsable(ValueError):
    """The file cannot be read as its kind; `line` is 1-based (0 when unknown)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


def line_at(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1
