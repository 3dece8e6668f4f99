"""What a report format is, and how a command finds its formats by name.

Every command with `--format` (apply, check, scan, audit, smoke, verify) keeps one `Formats`
map from a format's name to the module attribute holding its renderer. The command line's
choices, its help text and the check of a `--format` value all come from that map, so a new
format is its own file plus one entry. A renderer's module is imported only when its format
is chosen: some pull in libraries a run without them never needs (XML, hashing, LibCST).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:  # the runner and the catalogue are only types here
    from neuron_migrate.registry import Registry
    from neuron_migrate.runner import RunResult

S = TypeVar("S", contravariant=True)
R = TypeVar("R", bound="Renderer")  # type: ignore[type-arg]


class Renderer(Protocol[S]):
    """One report format for one kind of outcome `S` (a run, a smoke run, a verify run).

    `render` returns the whole report as one document, which the command writes to standard
    output or to the `--output` file. A `styled` format (text) is the one a command prints
    itself on standard output, line by line with styles on a terminal; its document is what
    goes to a file."""

    styled: bool

    def render(self, subject: S) -> str: ...


@dataclass(frozen=True)
class Format(Generic[S]):
    """A renderer made of a function: most formats need nothing more."""

    render_with: Callable[[S], str]
    styled: bool = False

    def render(self, subject: S) -> str:
        return self.render_with(subject)


@dataclass(frozen=True)
class RunReport:
    """What a report of `apply`, `check`, `scan` or `audit` is made from."""

    result: RunResult
    registry: Registry
    mode: str
    notes: Sequence[str] = ()
    """What the run says of the hardware it assumed (`neuron_migrate.target`)."""
    show_diff: bool = False
    verbose: bool = False


class RunRenderer(Renderer[RunReport], Protocol):
    """A format of the migration commands. `human`: read by people, so the command shows its
    control characters as escapes (`neuron_migrate.printable`; the other formats escape them
    in their own syntax). `keeps_sources`: it needs each file as it was and as it becomes
    (diffs, fix edits, where findings end), which the run otherwise drops early. `ends`: it
    says where each finding's code ends, which the run then works out where each file is
    migrated (`FileResult.ends`)."""

    human: bool
    keeps_sources: bool
    ends: bool


@dataclass(frozen=True)
class RunFormat(Format[RunReport]):
    human: bool = False
    keeps_sources: bool = False
    ends: bool = False


class UnknownFormat(ValueError):
    """A `--format` value that is not in the command's map; the message lists the choices."""


class Formats(Mapping[str, str], Generic[R]):
    """A command's formats: name -> `"module:attribute"` of its renderer, in the order the
    help lists them."""

    def __init__(self, entries: Mapping[str, str]) -> None:
        self._entries = dict(entries)

    def __getitem__(self, name: str) -> str:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def help(self) -> str:
        return f"Report format: {', '.join(self._entries)}."

    def problem(self, name: str) -> str | None:
        """Why `name` is no format here (the message a usage error shows), or None."""
        if name in self._entries:
            return None
        return f"unknown format {name!r}; choose from {', '.join(self._entries)}"

    def choose(self, name: str) -> R:
        """The renderer of `name`, its module imported now; `UnknownFormat` if there is none."""
        if (problem := self.problem(name)) is not None:
            raise UnknownFormat(problem)
        module, _, attribute = self._entries[name].partition(":")
        return getattr(importlib.import_module(module), attribute)  # type: ignore[no-any-return]

    def extended(self, entries: Mapping[str, str]) -> Formats[R]:
        """These formats with some renderers replaced (or added): `audit` renders json,
        markdown and text with its readiness summary in them."""
        return Formats({**self._entries, **entries})
