"""A review rule is knowledge without a rewrite: which names it covers and what to do."""

from __future__ import annotations

from typing import ClassVar

from neuron_migrate.ruleapi import Kind, Rule


class ReviewRule(Rule):
    """Reports every remaining reference under `guidance`'s prefixes, with the advice for the
    most specific prefix. Subclasses set `guidance` (prefix -> what to do instead)."""

    kind = Kind.REVIEW
    guidance: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.prefixes = tuple(cls.guidance)

    def leftover_reference(self, qualname: str) -> str:
        matches = [p for p in self.guidance if qualname == p or qualname.startswith(p + ".")]
        advice = self.guidance[max(matches, key=len)] if matches else self.summary
        return f"`{qualname}`: {advice}"
