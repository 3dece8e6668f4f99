"""What one file's rewrite shares between its units and stages: the file the rules may learn
about or add to, what the rewrite of each statement produced for the rebuild, and the findings
whose position is known only once the new module exists."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import libcst as cst

from neuron_migrate.model import Kind, Options
from neuron_migrate.engine.suppress import Suppressions


@dataclass
class FileContext:
    """What the rules may learn about, or add to, the whole file."""

    path: str
    text: str
    options: Options
    suppressions: Suppressions = field(default_factory=Suppressions)
    needs: set[str] = field(default_factory=set)
    named: set[str] = field(default_factory=set)
    """Of `needs`, the modules the rules' own replacements name (not only helpers)."""
    helpers: list[str] = field(default_factory=list)

    @functools.cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines()


@dataclass(frozen=True)
class Pending:
    """A finding whose position is not known yet: `anchor` is located after the rewrite."""

    rule_id: str
    kind: Kind
    message: str
    anchor: cst.CSTNode | None
    signature: tuple[str, str | None] | None
    rank: int
    applied: bool = False
    suggestion: str | None = None


@dataclass(frozen=True)
class UnitResult:
    """What the rewrite of one statement produced, for the rebuild to put in its place."""

    node: cst.CSTNode | None  # None: the statement was removed
    unwrap: bool = False
    statements: tuple[cst.BaseStatement, ...] | None = None  # replaces the whole line
    after: tuple[cst.BaseStatement, ...] = ()  # inserted after the line
    comments: tuple[cst.Comment, ...] = ()  # from replaced code, to go above the line


@dataclass(frozen=True)
class Residual:
    """An XLA-era name the rewritten code still references (a finding placed with its
    statement)."""

    rule_id: str
    message: str
    signature: tuple[str, str | None] | None
    rank: int
