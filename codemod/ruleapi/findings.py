"""The ids of the findings the engine makes itself (unused imports and suppressions, the
helpers module, names it cannot map, a torch_xla module named in a string, audit's XLA-era
files): the rules documenting them take their ids from here, so each is spelt once."""

from __future__ import annotations

from neuron_migrate.registry import (AMBIGUOUS, HELPERS_MODULE, STAR_IMPORT, UNMAPPED,
                                     UNUSED_IMPORT, UNUSED_SUPPRESSION, XLA_BY_NAME, XLA_ERA)

__all__ = ["AMBIGUOUS", "HELPERS_MODULE", "STAR_IMPORT", "UNMAPPED", "UNUSED_IMPORT",
           "UNUSED_SUPPRESSION", "XLA_BY_NAME", "XLA_ERA"]
