"""The ids of the findings the engine makes itself (unused imports and suppressions, the
helpers module, names it cannot map): `rules/review.py` documents them like any rule."""

from __future__ import annotations

from neuron_migrate.registry import (AMBIGUOUS, HELPERS_MODULE, STAR_IMPORT, UNMAPPED,
                                     UNUSED_IMPORT, UNUSED_SUPPRESSION, XLA_BY_NAME)

__all__ = ["AMBIGUOUS", "HELPERS_MODULE", "STAR_IMPORT", "UNMAPPED", "UNUSED_IMPORT",
           "UNUSED_SUPPRESSION", "XLA_BY_NAME"]
