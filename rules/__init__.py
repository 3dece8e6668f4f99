"""The rule catalogue: one module per family of XLA-era APIs."""

from __future__ import annotations

from codemod.rule import Rule
from rules import device, process_group, review, step

FAMILIES = (review, device, step, process_group)


def all_rules() -> tuple[Rule, ...]:
    """One instance of every rule, ordered by id."""
    rules = [cls() for family in FAMILIES for cls in family.RULES]
    return tuple(sorted(rules, key=lambda r: r.id))
