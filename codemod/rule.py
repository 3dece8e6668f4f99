"""What a rule is, and what it may ask of the engine.

Rules never read files, parse a whole file or print. The engine calls a rule's hooks on LibCST
nodes inside the statements the analysis flagged, hands it a `Site` that answers questions about
names and holds the file's stdlib `ast` (which a rule may question, mostly through
`ruleapi.analysis`), and turns the `Outcome` it returns into an edit and a finding. Rules
import all this through `neuron_migrate.ruleapi`.
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, Protocol

import libcst as cst

from neuron_migrate.helper_code import Helper
from neuron_migrate.model import Kind, Options

if TYPE_CHECKING:  # the analysis builds on rules (readiness rules); a Site only hands a Flow out
    from neuron_migrate.analysis.flow import Flow


class Role(enum.Enum):
    """Where an expression sits, which decides what removing it means."""

    STATEMENT = "statement"  # the whole of an expression statement
    WITH_ITEM = "with-item"  # a `with` item without `as`
    DECORATOR = "decorator"  # the whole expression of a `@decorator` line
    EXPRESSION = "expression"


@dataclass(frozen=True)
class Replace:
    """Replace the matched node. `kind` overrides the rule's kind for this site."""

    node: cst.CSTNode
    message: str
    kind: Kind | None = None


@dataclass(frozen=True)
class Remove:
    """Delete the statement (or `with` item, or decorator) the matched node makes up."""

    message: str


@dataclass(frozen=True)
class ReplaceStatement:
    """Replace the whole statement the matched call makes up with these statements (for
    example a guarded `if rank == 0: print(...)`). Only valid where the call is a statement."""

    statements: tuple[cst.BaseStatement, ...]
    message: str
    kind: Kind | None = None


@dataclass(frozen=True)
class Review:
    """Leave the code as it is; tell the user what to do instead."""

    message: str
    suggestion: str | None = None


Outcome = Replace | ReplaceStatement | Remove | Review
"""What a rule does at one site. Its message words the change as an instruction ("remove
`import x`: why", "`old` → `new`; drop init_method ..."), true of a run that writes nothing; a
file apply writes has it told as done by `neuron_migrate.wording`, which puts the verbs that open a
clause (add, change, delete, drop, ...) in the past tense. Advice beside a change opens with
another verb ("check ...", "update ...")."""


@dataclass(frozen=True)
class Insert:
    """Insert statements before the statement an `on_entry` hook was called for."""

    statements: tuple[cst.BaseStatement, ...]
    message: str
    kind: Kind | None = None


class Site(Protocol):
    """What the engine knows about the place a hook is called for."""

    role: Role
    qualname: str | None

    def qualname_of(self, expr: cst.BaseExpression) -> str | None:
        """The qualified name a dotted expression refers to here, or None."""

    def ref(self, qualname: str) -> cst.BaseExpression | None:
        """An expression naming `qualname` here (adding `import torch` if needed), or None."""

    def string_flow(self) -> Flow | None:
        """For a string literal a rule follows (see `Rule.flow_string`): everything its value
        meets in the file (`neuron_migrate.analysis.flow`), or None."""

    def helper(self, name: str) -> cst.Name:
        """A call target for one of the catalogue's plain-PyTorch helpers (`Rule.helper_table`),
        which the engine then defines once in the file."""

    def insert_after(self, statements: tuple[cst.BaseStatement, ...]) -> bool:
        """Insert statements after the current statement; False where that is impossible."""

    def module_mentions(self, qualnames: frozenset[str]) -> bool:
        """Whether the file imports or spells out any of these names anywhere."""

    @property
    def path(self) -> str:
        """The file being migrated, as the user named it."""

    @property
    def text(self) -> str:
        """The whole original source of the file."""

    @property
    def parent(self) -> cst.CSTNode | None:
        """The node the matched node sits in."""

    @property
    def argument_of(self) -> tuple[cst.Call, cst.Arg] | None:
        """When the matched node is an argument of a call: that call and the argument."""

    def device_binding(self, expr: cst.BaseExpression) -> bool:
        """Whether `expr` is a name assigned an XLA device ("xla" or `xm.xla_device()`)."""

    def rewrites(self, qualname: str) -> bool:
        """Whether some rule in force rewrites calls of this qualified name."""

    def silenced(self, rule_id: str, statement: ast.stmt) -> bool:
        """Whether a `# neuron-migrate: ignore` comment silences the rule on this statement."""

    def parenthesized(self, node: cst.BaseExpression, comparison: bool = False
                      ) -> cst.BaseExpression:
        """`node`, in parentheses unless where it goes needs none."""

    @property
    def options(self) -> Options:
        """The run's options."""

    @property
    def statement(self) -> ast.stmt:
        """The stdlib-ast statement the matched node sits in (for questions about the code
        around it: which assignments reach it, what a called function does)."""

    @property
    def module_tree(self) -> ast.Module:
        """The stdlib-ast tree of the whole file, as the analysis parsed it."""

    @property
    def in_function(self) -> bool:
        """Whether the matched node runs when a function is called (its body, or a class or
        lambda inside one) rather than when the module is imported or run."""

    def module_calls(self) -> Sequence[tuple[ast.Call, int]]:
        """Every call in `module_tree`, with the index in its body of the top-level statement
        that holds it, in no particular order (the analysis collected them on its walk)."""

    def catching(self, exceptions: frozenset[str]) -> ast.ExceptHandler | None:
        """The `except` branch that catches one of `exceptions` (by class name; also
        `Exception`, `BaseException` and a bare `except:`) raised by the matched node: of a
        `try` whose body holds it, in the same function."""


@dataclass(frozen=True)
class Example:
    """A rule's before/after example; `language` names the file kind it is written in
    ("python", "requirements", "dockerfile", ...), so tests know how to check it."""

    before: str
    after: str
    language: str = "python"

    @classmethod
    def unchanged(cls, source: str, language: str = "python") -> "Example":
        """The example of a rule that reports and never rewrites."""
        return cls(source, source, language)


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
    names: ClassVar[frozenset[str]] = frozenset()
    """Qualified names whose plain references (not calls) `on_reference` receives."""
    prefixes: ClassVar[tuple[str, ...]] = ()
    """Qualified-name prefixes this (review) rule reports when a reference remains."""
    emits: ClassVar[tuple[str, ...]] = ()
    tokens: ClassVar[tuple[bytes, ...]] = ()
    imports: ClassVar[frozenset[str]] = frozenset()
    """Modules imported only for a side effect that no longer exists; always removed."""
    source: ClassVar[str] = "xla"
    """The stack the rule migrates from; rules of a source the run was not asked for are not
    loaded into its registry (`Options.sources`)."""
    watches: ClassVar[tuple[str, ...]] = ()
    """Qualified-name prefixes under `torch` (which the analysis does not follow by itself)
    whose references make a statement worth a look."""
    attributes: ClassVar[frozenset[str]] = frozenset()
    """Attribute names (`x.cuda`, `t.is_cuda`) whose use on any object makes a statement worth
    a look; `on_attribute` receives those that resolve to no import."""
    helper_table: Mapping[str, Helper] = MappingProxyType({})
    """The plain-PyTorch helpers, by name, that `Site.helper` may write for this rule. The
    catalogue hands every rule its whole table (`rules.all_rules`); the registry gathers the
    tables for the engine, which so never imports the catalogue."""

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        return None

    def on_any_call(self, node: cst.Call, site: Site) -> Outcome | None:
        return None

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        return None

    def on_assign(self, node: cst.Assign, site: Site) -> Outcome | None:
        return None

    def on_attribute(self, node: cst.Attribute, site: Site) -> Outcome | None:
        return None

    def on_string(self, node: cst.SimpleString | cst.FormattedString, site: Site
                  ) -> Outcome | None:
        return None

    def may_act(self, node: ast.AST, names: frozenset[str]) -> bool:
        """Whether `on_any_call`, `on_assign`, `on_string` or `on_attribute` could act on this
        `ast` node (a call, an assignment statement, a string or f-string, an attribute).
        `names`: what the called name (for an assignment, a subscripted target's mapping)
        could be known by: its last part, and the last part of what it was imported as.

        The engine reports a statement that only names APIs no rule rewrites from the `ast`,
        without LibCST (`neuron_migrate.engine.review_only`), only when every such hook says
        no; so the answer is yes unless the rule overrides it with a test as wide as its
        hook's."""
        return True

    def on_entry(self, site: Site) -> Insert | Review | None:
        """Called once for a file with something to migrate that is a script: at the
        statement of its `if __name__ == "__main__":` block that starts its work
        (`neuron_migrate.analysis.script_entry`), for set-up every worker needs first."""
        return None

    def edits(self, tree: ast.Module, calls: Sequence[tuple[ast.Call, int]]
              ) -> tuple[ast.stmt, ...]:
        """Statements that name no XLA API but that this rule rewrites too, by a plan over the
        whole file (the forward a DistributedDataParallel wrapper now runs, the loop it goes
        before): the engine rewrites them as it does the statements the analysis flags. `calls`:
        every call of the file, as `Site.module_calls` gives them."""
        return ()

    def on_before(self, site: Site) -> Insert | None:
        """Called for each statement some rule's `edits` named: statements to insert before
        it (a wrapper built before the loop that trains through it)."""
        return None

    def interesting_string(self, value: str) -> bool:
        """Whether a string literal with this value makes its statement worth a look."""
        return False

    def flow_string(self, node: ast.expr) -> bool:
        """Whether this string constant or f-string is a value whose flow `site.string_flow`
        follows (see `neuron_migrate.analysis.flow`)."""
        return False

    def leftover_reference(self, qualname: str) -> str:
        """The review message for a remaining reference under one of `prefixes`."""
        return f"`{qualname}`: {self.summary}"

    def leftover_string(self, value: str) -> str:
        """The review message for an interesting string no hook rewrote."""
        return f"the string {value!r} is left as it is: {self.summary}"


def overrides(rule: Rule, hook: str) -> bool:
    return getattr(type(rule), hook) is not getattr(Rule, hook)
