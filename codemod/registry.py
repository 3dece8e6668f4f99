"""The set of rules in force for a run, indexed the way the rewriter asks for them."""

from __future__ import annotations

from collections.abc import Iterable

from codemod.model import Options
from codemod.rule import Rule, overrides

BASE_TOKENS = (b"xla", b"pjrt")
"""A file containing none of these (or of the rules' own tokens) is never parsed."""

UNUSED_IMPORT = "NM001"
UNMAPPED = "NM701"
AMBIGUOUS = "NM702"
STAR_IMPORT = "NM703"
"""Findings the engine itself makes; their documentation lives in `rules/` like any other."""


class Registry:
    def __init__(self, rules: Iterable[Rule], options: Options | None = None) -> None:
        self.options = options or Options()
        self.all_rules = tuple(rules)
        self.rules = tuple(r for r in self.all_rules if self.options.enabled(r.id))
        self.by_id = {r.id: r for r in self.all_rules}
        self.by_call: dict[str, Rule] = {}
        for rule in self.all_rules:
            for qualname in rule.calls:
                self.by_call[qualname] = rule
        self.any_call = self._with_hook("on_any_call")
        self.comparison = self._with_hook("on_comparison")
        self.assign = self._with_hook("on_assign")
        self.param = self._with_hook("on_param")
        self._string_rules = self._with_hook("interesting_string")
        self.star_names = frozenset(self.by_call)
        self.by_import: dict[str, Rule] = {}
        for rule in self.all_rules:
            for module in rule.imports:
                self.by_import[module] = rule
        tokens = set(BASE_TOKENS)
        for rule in self.all_rules:
            tokens.update(rule.tokens)
        self.tokens = tuple(sorted(tokens))

    def _with_hook(self, hook: str) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if overrides(r, hook))

    def enabled(self, rule: Rule) -> bool:
        return rule in self.rules

    def call_rule(self, qualnames: Iterable[str]) -> Rule | None:
        """The rule that owns every one of these qualified names, if one rule owns them all."""
        owners = {id(self.by_call.get(q)): self.by_call.get(q) for q in qualnames}
        if len(owners) != 1:
            return None
        return next(iter(owners.values()))

    def string_rule(self, value: str) -> Rule | None:
        for rule in self._string_rules:
            if rule.interesting_string(value):
                return rule
        return None

    def interesting_string(self, value: str) -> bool:
        return self.string_rule(value) is not None

    def prefilter(self, data: bytes) -> bool:
        return any(token in data for token in self.tokens)
