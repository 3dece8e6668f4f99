"""Running the rules' `on_entry` hooks at the script's entry (`neuron_migrate.analysis.script_entry`)."""

from __future__ import annotations

import libcst as cst

from neuron_migrate.model import Kind
from neuron_migrate.syntax.quote import code
from neuron_migrate.rule import Insert, Review, Role, Rule
from neuron_migrate.engine.site import UnitSite
from neuron_migrate.engine.suppress import span
from neuron_migrate.engine.transform import Pending, UnitRewriter


def entry_hooks(rewriter: UnitRewriter, rules: tuple[Rule, ...], node: cst.CSTNode,
                hook: str = "on_entry") -> tuple[tuple[cst.BaseStatement, ...], list[Pending]]:
    """The statements the rules insert before the entry statement `node` (or, with `hook`
    "on_before", before any statement), and their findings. What a hook adds to the file
    (an import) is rolled back unless it applies."""
    inserted: list[cst.BaseStatement] = []
    findings: list[Pending] = []
    silenced = rewriter.context.suppressions.silences
    for rule in rules:
        saved = rewriter._save()
        outcome = getattr(rule, hook)(UnitSite(rewriter, Role.STATEMENT, None, node))
        if outcome is None:
            continue
        kind = Kind.REVIEW if isinstance(outcome, Review) else outcome.kind or rule.kind
        if silenced(rule.id, *span(rewriter.ast_unit)):
            rewriter._restore(saved)
        elif isinstance(outcome, Review):
            rewriter._restore(saved)
            findings.append(rewriter.pending(rule, kind, outcome.message, None, False,
                                             outcome.suggestion))
        elif kind is Kind.UNSAFE_FIX and not rewriter.options.unsafe_fixes:
            rewriter._restore(saved)
            suggestion = "\n".join(code(s).rstrip("\n") for s in outcome.statements)
            findings.append(rewriter.pending(rule, kind, outcome.message, None, False,
                                             suggestion))
        else:
            assert isinstance(outcome, Insert)
            inserted.extend(outcome.statements)
            findings.append(rewriter.pending(rule, kind, outcome.message, None, True))
    return tuple(inserted), findings
