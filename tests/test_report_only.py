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
    if not options.annotate:  # notes are only known from the generated file
        assert report.new_source is None
    assert report.changed == full.changed


def test_check_counts_the_files_apply_changes(in_tmp: Path) -> None:
    for before in PYTHON_FIXTURES[:12]:
        copy_fixture(before, in_tmp)
    checked = cli("check", ".", "--format", "json").json()
    applied = cli("apply", ".", "--dry-run", "--format", "json").json()
    assert checked["summary"]["changed"] == applied["summary"]["changed"] > 0
    assert [f["status"] for f in checked["files"]] == [f["status"] for f in applied["files"]]
