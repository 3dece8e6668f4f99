"""The rule catalogue: one module per family of XLA-era APIs.

A family is any module of this package that defines `RULES`; the others hold what a family
shares with its neighbours (helper tables, questions about the code around a site). So adding
a rule is adding its class to a family's `RULES`, or a new module with its own, and then
regenerating the start-up index (`python -m neuron_migrate.catalogue --write`): nothing else
lists the families or spells the ids.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from neuron_migrate.ruleapi import Rule
from neuron_migrate.rules.emitted_helpers import HELPERS


def _families() -> tuple[ModuleType, ...]:
    """Every module of the package that defines `RULES`, by name (so the same on every
    machine: the rules are sorted by id in any case)."""
    found = []
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        imported = importlib.import_module(f"{__name__}.{module.name}")
        if hasattr(imported, "RULES"):
            found.append(imported)
    return tuple(found)


FAMILIES = _families()


def all_rules() -> tuple[Rule, ...]:
    """One instance of every rule, ordered by id, each holding the catalogue's helpers."""
    rules = []
    for family in FAMILIES:
        for cls in family.RULES:
            rule = cls()
            rule.helper_table = HELPERS
            rules.append(rule)
    return tuple(sorted(rules, key=lambda r: r.id))
