"""A plain `check` works out the findings without generating the new files: it must report
exactly what `apply` would do."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from tests.conftest import PYTHON_FIXTURES, SOURCES, cli, copy_fixture, source_id



@pytest.mark.parametrize("options", [Options(), Options(annotate=True, unsafe_fixes=True,
                                                         compile=False)],
                         ids=["default", "annotate-unsafe-no-compile"])
@pytest.mark.parametrize("source", SOURCES, ids=source_id)
def test_findings_without_generating_match_a_full_migration(source: Path,
                                                            options: Options) -> None:
    data = source.read_bytes()
    registry = Registry(all_rules(), options)
    full = migrate_source(str(source), data, registry)
    report = migrate_source(str(source), data, registry, generate=False)
    assert report.findings == full.findings
    assert report.error == full.error
    assert report.new_source == full.new_source  # a file that changes is generated anyway
    assert report.changed == full.changed


KEPT_IMPORT = (b"import torch_xla.core.xla_model as xm\n\n\n"
               b"def run(device: \"xm.XlaDevice\") -> None:\n    pass\n\n\nxm.mark_step()\n")


def test_an_import_the_name_guard_keeps_is_reported_by_check_as_apply_does() -> None:
    """The rewrite would remove `xm`, which a string annotation still reads; only the name
    guard, run on the generated file, sees that and keeps the import (NM701, not NM001)."""
    registry = Registry(all_rules())
    full = migrate_source("kept.py", KEPT_IMPORT, registry)
    report = migrate_source("kept.py", KEPT_IMPORT, registry, generate=False)
    assert "NM701" in {f.rule_id for f in full.findings}
    assert "NM001" not in {f.rule_id for f in full.findings}
    assert report.findings == full.findings


def test_check_reports_the_kept_import_as_apply_does(in_tmp: Path) -> None:
    (in_tmp / "kept.py").write_bytes(KEPT_IMPORT)
    checked = cli("check", "kept.py", "--format", "json").json()
    applied = cli("apply", "kept.py", "--dry-run", "--format", "json").json()
    assert checked["files"] == applied["files"]
    assert checked["findings"] == applied["findings"]
    assert "NM701" in {f["rule_id"] for f in checked["findings"]}


def test_check_counts_the_files_apply_changes(in_tmp: Path) -> None:
    for before in PYTHON_FIXTURES[:12]:
        copy_fixture(before, in_tmp)
    checked = cli("check", ".", "--format", "json").json()
    applied = cli("apply", ".", "--dry-run", "--format", "json").json()
    assert checked["summary"]["changed"] == applied["summary"]["changed"] > 0
    assert [f["status"] for f in checked["files"]] == [f["status"] for f in applied["files"]]
