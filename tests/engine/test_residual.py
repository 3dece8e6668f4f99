"""The residual scan skips what the rewriter found clean; that must never change a result."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

import neuron_migrate.engine.residual as residual
import neuron_migrate.engine.rewrite as rewrite
from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import FileResult, Options
from neuron_migrate.registry import UNMAPPED, Registry
from neuron_migrate.rules import all_rules
from tests.conftest import SOURCES, source_id



class _Counting(residual.ResidualScanner):
    """Counts the clean subtrees the scan skips (so the comparison is not of a path with
    itself); with `everything`, skips nothing."""

    skipped = 0
    everything = False

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        if _Counting.everything:
            self.clean = set()

    def on_visit(self, node) -> bool:  # type: ignore[no-untyped-def]
        if id(node) in self.clean:
            _Counting.skipped += 1
        return super().on_visit(node)


def _both(monkeypatch: pytest.MonkeyPatch, path: Path, data: bytes,
          registry: Registry) -> tuple[FileResult, FileResult]:
    monkeypatch.setattr(rewrite, "ResidualScanner", _Counting)
    monkeypatch.setattr(_Counting, "everything", False)
    fast = migrate_source(str(path), data, registry)
    monkeypatch.setattr(_Counting, "everything", True)
    full = migrate_source(str(path), data, registry)
    return fast, full


@pytest.mark.parametrize("options", [Options(), Options(annotate=True, unsafe_fixes=True)],
                         ids=["default", "annotate-unsafe"])
@pytest.mark.parametrize("source", SOURCES, ids=source_id)
def test_skipping_clean_subtrees_changes_no_result(source: Path, options: Options,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fast, full = _both(monkeypatch, source, source.read_bytes(), Registry(all_rules(), options))
    assert fast == full


def test_the_scan_does_skip_on_the_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Counting, "skipped", 0)
    registry = Registry(all_rules())
    for source in SOURCES:
        _both(monkeypatch, source, source.read_bytes(), registry)
    assert _Counting.skipped > 100


@pytest.mark.slow
def test_real_modules_with_leftovers_everywhere(monkeypatch: pytest.MonkeyPatch,
                                                stdlib_as_xla: None) -> None:
    """No rule rewrites the stand-ins for torch_xla, so standard-library modules leave
    references of every kind behind (the scan runs again in full for those)."""
    registry = Registry(all_rules())
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for name in ("shutil", "tempfile", "subprocess", "argparse"):
        path = stdlib / f"{name}.py"
        fast, full = _both(monkeypatch, path, path.read_bytes(), registry)
        assert fast == full and fast.error is None
        assert any(f.rule_id == UNMAPPED for f in fast.findings)


def test_a_left_over_string_after_a_clean_f_string_is_placed_right() -> None:
    """Both f-strings have the same signature; the clean one is skipped, yet the finding must
    count it to point at the second."""
    source = (b"import torch_xla.core.xla_model as xm\n\n"
              b"log(f'step {i}', xm.get_ordinal(), f'xla:{n}')\n")
    result = migrate_source("t.py", source, Registry(all_rules()))
    columns = {f.column for f in result.findings if f.line == 3 and f.rule_id != "NM203"}
    assert columns == {source.splitlines()[2].index(b"f'xla") + 1}, result.findings
