"""What a helper is: the text a rewrite defines once in the user's file, and what it needs.

Kept apart from the helper tables (`rules/helpers.py` and the families' own tables merged
into it) so that a table module can be imported on its own without a cycle."""

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
