"""Reporting review-only statements from the `ast` must give exactly what LibCST's leftover
scan gives, only cheaper (`neuron_migrate.engine.review_only`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import neuron_migrate.engine.migrate as migrate
from neuron_migrate.analysis.analyse import analyse
from neuron_migrate.engine import review_only
from neuron_migrate.model import Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from tests.conftest import SOURCES, source_id

DATA = Path(__file__).resolve().parents[1] / "data" / "review_only"
EDGES, ONLY_NXD, XLA_REFS = DATA / "edges.py", DATA / "only_nxd.py", DATA / "xla_refs.py"
OPTIONS = {
    "default": Options(),
    "cuda": Options(sources=frozenset({"xla", "cuda"})),
    "select-NM710": Options(select=frozenset({"NM710"})),
    "ignore-NM709": Options(ignore=frozenset({"NM709"}), unsafe_fixes=True),
    "annotate": Options(annotate=True),
    "trn1": Options(target="trn1"),
}


def _both(path: Path, options: Options, monkeypatch: pytest.MonkeyPatch):
    data = path.read_bytes()
    registry = Registry(all_rules(), options)
    fast = migrate.migrate_source(str(path), data, registry)
    with monkeypatch.context() as patch:
        patch.setattr(review_only, "demote", lambda *args: [])
        slow = migrate.migrate_source(str(path), data, registry)
    return fast, slow


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
@pytest.mark.parametrize("source", [EDGES, ONLY_NXD, XLA_REFS, *SOURCES], ids=source_id)
def test_reporting_from_the_ast_changes_no_result(source: Path, options: Options,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = _both(source, options, monkeypatch)
    assert fast == slow


def _demoted(path: Path, options: Options = Options()) -> list[int]:
    registry = Registry(all_rules(), options)
    analysis = analyse(ast.parse(path.read_bytes()), registry.interesting_string,
                       registry.star_names, registry.watched_roots, registry.device_calls,
                       bool(registry.entry))
    return [unit.lineno for unit, _ in review_only.demote(analysis, registry, options)]


def test_only_the_statements_nothing_could_act_on_are_demoted() -> None:
    """Otherwise the comparison above compares LibCST with itself; the lines are those of
    edges.py where no hook, owner rule or LibCST reading quirk applies."""
    text = EDGES.read_text().splitlines()
    demoted = {text[line - 1].strip().split(" = ")[0].split("(")[0]
               for line in _demoted(EDGES)}
    assert {"groups", "rank", "layer", "other", "model_output",
            "table[parallel_state.get_data_parallel_rank", "squares", "scaled", "shadowed",
            "defaulted", "pairs"} <= demoted
    for name in ("named", "device_string", "device_prefix", "joined", "escaped",
                 'env["XLA_FLAGS"]', "os.environ[key_name]", "env[key_name]", "compiled",
                 "moved", "placed", "keyword_named", "attribute_named", "chained"):
        assert name not in demoted, name  # a token, a hook, a binding or a quirk
    # block headers: what LibCST reads of them is their header
    assert {"def decorated", "while parallel_state.get_data_parallel_rank",
            "for index, item in enumerate", "with layers.scope", "class Wide"} <= demoted
    assert not {"def parallel_state_user", "class Meta"} & demoted  # names LibCST resolves


def test_torch_xla_names_no_rule_handles_are_reported_and_their_imports_kept() -> None:
    text = XLA_REFS.read_text().splitlines()
    demoted = {text[line - 1].strip().split(" = ")[0].split("(")[0]
               for line in _demoted(XLA_REFS)}
    # a module used as a value, an unmapped name, an experimental API, metrics queries
    assert {"kept", "unmapped", "count", "def helper", "if met.counter_value",
            "return [met.metric_data"} <= demoted
    assert not {"report", "internal", "device"} & demoted  # a rule handles these calls
    result = migrate.migrate_source(str(XLA_REFS), XLA_REFS.read_bytes(),
                                    Registry(all_rules(), Options()))
    removed = [f.message for f in result.findings if f.rule_id == "NM001"]
    assert removed == ["remove `from torch_xla.core.xla_model import xla_device`: nothing "
                       "uses it after the migration"]  # xm, met, xr and pjrt stay


def test_a_file_with_only_review_items_is_never_parsed_by_libcst(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(source: bytes) -> None:
        raise AssertionError("LibCST parse")

    data = ONLY_NXD.read_bytes()
    registry = Registry(all_rules(), Options())
    monkeypatch.setattr(migrate, "parse_module", refuse)
    result = migrate.migrate_source(str(ONLY_NXD), data, registry)
    assert result.error is None
    assert [(f.line, f.rule_id) for f in result.findings] == [
        (10, "NM710"), (11, "NM710"), (18, "NM710"), (19, "NM710")]


def test_annotate_keeps_every_statement_on_the_libcst_path() -> None:
    assert _demoted(ONLY_NXD)
    assert not _demoted(ONLY_NXD, Options(annotate=True))
