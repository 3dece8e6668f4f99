"""What a helper is: plain-PyTorch code a rewrite defines once in the user's file, and what
that code needs.

The rule catalogue owns the helper tables (`rules/emitted_helpers.py` and the families' own
tables merged into it) and hands them to the engine through the registry; this module is the
shape both sides agree on, so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Helper:
    source: str
    requires: tuple[str, ...] = ()
    imports: tuple[str, ...] = ("torch",)
    """Modules the helper's body reads at module level (dotted names are imported whole)."""


def helper(source: str, requires: tuple[str, ...] = (),
           imports: tuple[str, ...] = ("torch",)) -> Helper:
    return Helper(source.strip("\n") + "\n", requires, imports)
