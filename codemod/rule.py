"""What a rule is, and what it may ask of the engine.

Rules never parse, walk or print. The engine calls a rule's hooks on LibCST nodes inside the
statements the analysis flagged, hands it a `Site` that answers questions about names, and turns
the `Outcome` it returns into an edit and a finding.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar, Protocol

import libcst as cst

from codemod.analyse import Use
from codemod.model import Kind


class Role(enum.Enum):
    """Where an expression sits, which decides what removing it means."""

    STATEMENT = "statement"  # the whole of an expression statement
    WITH_ITEM = "with-item"  # a `with` item without `as`
    EXPRESSION = "expression"


@dataclass(frozen=True)
class Replace:
    """Replace the matched node. `kind` overrides the rule's kind for this site."""

    node: cst.CSTNode
    message: str
    kind: Kind | None = None


@dataclass(frozen=True)
class Remove:
    """Delete the statement (or `with` item) the matched call makes up."""

    message: str


@dataclass(frozen=True)
class Review:
    """Leave the code as it is; tell the user what to do instead."""

    message: str
    suggestion: str | None = None


Outcome = Replace | Remove | Review


class Site(Protocol):
    """What the engine knows about the place a hook is called for."""

    role: Role
    qualname: str | None

    def qualname_of(self, expr: cst.BaseExpression) -> str | None:
        """The qualified name a dotted expression refers to here, or None."""

    def ref(self, qualname: str) -> cst.BaseExpression | None:
        """An expression naming `qualname` here (adding `import torch` if needed), or None."""

    def string_uses(self) -> list[Use] | None:
        """For an assignment of a string literal: every load of that name, or None."""


@dataclass(frozen=True)
class Example:
    """A rule's before/after example; `language` names the file kind it is written in
    ("python", "requirements", "dockerfile", ...), so tests know how to check it."""

    before: str
    after: str
    language: str = "python"


class Rule:
    """One kind of XLA-era construct: its documentation and its rewrite.

    Subclasses set the class attributes and override the hooks they need. `calls` lists the
    qualified names whose calls `on_call` receives; `emits` lists the torch APIs replacements
    use, checked against the installed PyTorch by the test suite.
    """

    id: ClassVar[str]
    name: ClassVar[str]
    kind: ClassVar[Kind]
    summary: ClassVar[str]
    explanation: ClassVar[str]
    doc_url: ClassVar[str]
    example: ClassVar[Example]
    calls: ClassVar[frozenset[str]] = frozenset()
    emits: ClassVar[tuple[str, ...]] = ()
    tokens: ClassVar[tuple[bytes, ...]] = ()
    imports: ClassVar[frozenset[str]] = frozenset()
    """Modules imported only for a side effect that no longer exists; always removed."""

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        return None

    def on_any_call(self, node: cst.Call, site: Site) -> Outcome | None:
        return None

    def on_comparison(self, node: cst.Comparison, site: Site) -> Outcome | None:
        return None

    def on_assign(self, node: cst.Assign, site: Site) -> Outcome | None:
        return None

    def on_param(self, node: cst.Param, site: Site) -> Outcome | None:
        return None

    def interesting_string(self, value: str) -> bool:
        """Whether a string literal with this value makes its statement worth a look."""
        return False

    def leftover_string(self, value: str) -> str:
        """The review message for an interesting string no hook rewrote."""
        return f"the string {value!r} is left as it is: {self.summary}"


def overrides(rule: Rule, hook: str) -> bool:
    return getattr(type(rule), hook) is not getattr(Rule, hook)
