"""The rule catalogue: one module per family of XLA-era APIs."""

from __future__ import annotations

from neuron_migrate.ruleapi import Rule
from neuron_migrate.rules import (collectives, compile, cuda_compile, cuda_dependencies,
                                  cuda_distributed, cuda_libraries, cuda_placement,
                                  cuda_precision, cuda_runtime, data, dependencies, device,
                                  device_queries, entry_group, environment, frameworks,
                                  generated_code, installs,
                                  launch, memory, nxd_checkpoints, nxd_layers, nxd_layout,
                                  nxd_loss, nxd_regions, nxd_trainer, optimizer, precision,
                                  process_group, ranks, readiness_compile, readiness_dtypes,
                                  readiness_environment, readiness_features,
                                  readiness_migration, readiness_shapes, review, runtime,
                                  saving, sharding, step, unbound_names,
                                  unsupported, utilities)

FAMILIES = (review, device, device_queries, step, memory, process_group, ranks, collectives,
            optimizer, nxd_layout, nxd_layers, nxd_loss, nxd_regions, nxd_trainer,
            nxd_checkpoints, launch, entry_group, saving, data, utilities, precision, runtime,
            compile, environment, unsupported, sharding, frameworks, generated_code, installs,
            dependencies, unbound_names,
            readiness_dtypes, readiness_features, readiness_compile, readiness_shapes,
            readiness_environment, readiness_migration, cuda_placement, cuda_runtime,
            cuda_precision,
            cuda_distributed, cuda_compile, cuda_libraries, cuda_dependencies)


def all_rules() -> tuple[Rule, ...]:
    """One instance of every rule, ordered by id."""
    rules = [cls() for family in FAMILIES for cls in family.RULES]
    return tuple(sorted(rules, key=lambda r: r.id))
