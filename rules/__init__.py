"""The rule catalogue: one module per family of XLA-era APIs."""

from __future__ import annotations

from neuron_migrate.rule import Rule
from neuron_migrate.rules import (collectives, compile, cuda_dependencies, data, dependencies,
                                  device, device_queries, environment, installs, launch, memory,
                                  optimizer, precision, process_group, ranks, review, runtime,
                                  saving, step, unsupported, utilities)

FAMILIES = (review, device, device_queries, step, memory, process_group, ranks, collectives,
            optimizer, launch, saving, data, utilities, precision, runtime, compile, environment,
            unsupported, installs, dependencies, cuda_dependencies)


def all_rules() -> tuple[Rule, ...]:
    """One instance of every rule, ordered by id."""
    rules = [cls() for family in FAMILIES for cls in family.RULES]
    return tuple(sorted(rules, key=lambda r: r.id))
