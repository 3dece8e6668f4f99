"""`--from cuda` in the dependency scanner (issue 19, NMC8xx): each rule documents itself, its
example is what the scanner does when the run migrates from CUDA, and nothing of it fires (or
changes a byte) when it does not."""

from __future__ import annotations

import re

import pytest

from neuron_migrate.deps import ids, scan_source
from neuron_migrate.model import Kind, Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from neuron_migrate.rules.cuda_dependencies import RULES
from tests.conftest import FIXTURES
from tests.test_deps_rules import EXAMPLE_FILES

CUDA = Registry(all_rules(), Options(sources=frozenset({"xla", "cuda"})))
XLA = Registry(all_rules())


def _scan(name: str, text: str, registry: Registry = CUDA, fix: bool = True):
    result = scan_source(name, text.encode(), registry, fix=fix)
    assert result.error is None
    return result


def test_ids_are_their_own_block() -> None:
    found = [rule.id for rule in RULES]
    assert found == sorted(ids.CUDA_KINDS) and len(set(found)) == len(found)
    assert all(re.fullmatch(r"NMC8\d\d", i) for i in found)
    assert not set(ids.CUDA_KINDS) & set(ids.KINDS)
    assert all(rule.source == "cuda" for rule in RULES)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_documents_itself(rule) -> None:
    assert rule.summary and "\n" not in rule.summary
    assert len(rule.explanation.split()) >= 30
    for section in ("What it does:", "Why:", "What differs:"):
        assert section in rule.explanation
    assert "--from cuda" in rule.explanation
    assert rule.doc_url.startswith("https://")
    assert rule.kind is ids.CUDA_KINDS[rule.id]
    assert rule.example.language in EXAMPLE_FILES


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_example_is_what_the_scanner_does(rule) -> None:
    name = EXAMPLE_FILES[rule.example.language]
    result = _scan(name, rule.example.before)
    assert (result.new_source or rule.example.before.encode()).decode() == rule.example.after
    assert rule.id in {f.rule_id for f in result.findings}
    if rule.kind is not Kind.FIX:
        assert rule.example.after == rule.example.before


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_example_is_left_alone_without_from_cuda(rule) -> None:
    name = EXAMPLE_FILES[rule.example.language]
    result = _scan(name, rule.example.before, XLA)
    assert result.new_source is None
    assert not [f for f in result.findings if f.rule_id.startswith("NMC")]


def test_every_rule_is_exercised_by_a_fixture() -> None:
    expected = "".join(p.read_text() for p in (FIXTURES / "deps").glob("*/findings.txt"))
    assert {rule.id for rule in RULES} <= set(re.findall(r"NMC8\d\d", expected))
