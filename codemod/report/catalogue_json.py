"""`rules --format json` and `explain RULE --format json`: the catalogue for tools (a
documentation site, a bot that links each finding to its rule), with the fields `rules` and
`explain` print."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from neuron_migrate.rule import Rule


def rules_json(rules: Iterable[Rule]) -> str:
    """Every rule: id, name, kind, summary, the stack it migrates from and its doc link."""
    return json.dumps([_brief(rule) for rule in rules], indent=2, ensure_ascii=False)


def rule_json(rule: Rule) -> str:
    """One rule in full, its before/after example included."""
    return json.dumps({**_brief(rule), "explanation": rule.explanation,
                       "example": {"before": rule.example.before,
                                   "after": rule.example.after,
                                   "language": rule.example.language}},
                      indent=2, ensure_ascii=False)


def _brief(rule: Rule) -> dict[str, str]:
    return {"id": rule.id, "name": rule.name, "kind": str(rule.kind), "summary": rule.summary,
            "source": rule.source, "doc_url": rule.doc_url}
