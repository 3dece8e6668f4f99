"""The scanner's catalogue (NM8xx, and NM950-NM952 on the Python a project runs on): each
rule documents itself, its example is what the scanner does, and a fixture exercises it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from neuron_migrate.deps import ids, scan_source
from neuron_migrate.model import Kind
from neuron_migrate.registry import Registry
from neuron_migrate.rules import dependencies, readiness_environment
from tests.conftest import FIXTURES

RULES = dependencies.RULES + readiness_environment.RULES
REGISTRY = Registry([rule() for rule in RULES])
EXAMPLE_FILES = {"requirements": "requirements.txt", "dockerfile": "Dockerfile",
                 "shell": "run.sh", "pyproject": "pyproject.toml", "yaml": "deploy.yaml",
                 "uv-lock": "uv.lock"}


def test_ids_are_the_nm8xx_and_nm95x_blocks_and_unique() -> None:
    found = [rule.id for rule in RULES]
    assert len(set(found)) == len(found) == len(ids.KINDS)
    assert set(found) == set(ids.KINDS)
    assert all(re.fullmatch(r"NM8\d\d", r.id) for r in dependencies.RULES)
    assert all(re.fullmatch(r"NM95\d", r.id) for r in readiness_environment.RULES)
    assert len({rule.name for rule in RULES}) == len(RULES)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_documents_itself(rule) -> None:
    assert rule.summary and "\n" not in rule.summary
    assert len(rule.explanation.split()) >= 30
    for section in ("What it does:", "Why:", "What differs:"):
        assert section in rule.explanation
    assert rule.doc_url.startswith("https://")
    assert rule.kind is ids.KINDS[rule.id]
    assert rule.severity in ("error", "warning")
    assert rule.example.language in EXAMPLE_FILES


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_example_is_what_the_scanner_does(rule, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name, text in getattr(rule, "launched", {}).items():  # the scripts it launches
        (tmp_path / name).write_text(text)
    name = EXAMPLE_FILES[rule.example.language]
    result = scan_source(name, rule.example.before.encode(), REGISTRY, fix=True)
    assert result.error is None
    assert (result.new_source or rule.example.before.encode()).decode() == rule.example.after
    assert rule.id in {f.rule_id for f in result.findings}
    if rule.kind is not Kind.FIX:
        assert rule.example.after == rule.example.before


def test_every_rule_is_exercised_by_a_fixture() -> None:
    expected = "".join(p.read_text() for p in (FIXTURES / "deps").glob("*/findings.txt"))
    assert {rule.id for rule in RULES} <= set(re.findall(r"NM8\d\d|NM95\d", expected))
