"""`audit` answers "will this run on TorchNeuron?" for a whole project: XLA-era code and pins
are counted as work `apply` must do first (NM960), the files that settle the project's Python
are read (NM950-NM952), and float64 and host reads are found in evaluation loops over a
compiled model and on tensors made on the device (NM901, NM932)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from neuron_migrate.analysis.readiness_audit import audit_file, audited
from neuron_migrate.model import Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from neuron_migrate.runner import migrate_bytes
from tests.conftest import FIXTURES, cli

PROJECT = FIXTURES / "audit" / "project"
REGISTRY = Registry(all_rules())
_EXPECT = re.compile(r"#\s*expect:\s*(NM9\d\d)")


def _audit(name: str, registry: Registry = REGISTRY):
    path = PROJECT / name
    return audit_file(str(path), path.read_bytes(), registry, migrate_bytes)


def test_xla_era_code_is_work_for_apply_not_nothing() -> None:
    result = _audit("train_xla.py")
    (finding,) = result.findings
    assert finding.rule_id == "NM960" and finding.line == 4  # the torch_xla import
    migration = migrate_bytes("train_xla.py", (PROJECT / "train_xla.py").read_bytes(),
                              REGISTRY, generate=False)
    pending = [f for f in migration.findings if not f.rule_id.startswith("NM9")]
    assert f"{len(pending)} migration findings" in finding.message
    assert "neuron-migrate apply" in finding.message and "NM110" in finding.message


def test_an_xla_era_pin_is_work_for_apply_too() -> None:
    (finding,) = _audit("requirements.txt").findings
    assert finding.rule_id == "NM960" and "NM801" in finding.message


@pytest.mark.parametrize(("name", "rule", "line"), [("Dockerfile", "NM950", 1),
                                                    ("pyproject.toml", "NM951", 4)])
def test_the_environment_the_project_settles_on_is_audited(name: str, rule: str,
                                                           line: int) -> None:
    assert [(f.rule_id, f.line) for f in _audit(name).findings] == [(rule, line)]


def test_evaluation_over_a_compiled_model_reports_float64_and_host_reads() -> None:
    text = (PROJECT / "evaluate.py").read_text()
    expected = {(n, m[1]) for n, line in enumerate(text.splitlines(), start=1)
                if (m := _EXPECT.search(line))}
    assert {(f.line, f.rule_id) for f in _audit("evaluate.py").findings} == expected


def test_a_host_read_under_an_if_in_an_evaluation_loop_is_not_per_step() -> None:
    lines = {f.line for f in _audit("evaluate.py").findings}
    assert 20 not in lines  # `print(scores.sum().item())` under `if`


def test_a_loop_over_an_uncompiled_model_without_backward_is_not_a_step() -> None:
    source = (b"import torch\n\nmodel = Net().to('neuron')\nfor batch in loader:\n"
              b"    total += model(batch).sum().item()\n")
    assert audit_file("m.py", source, REGISTRY, migrate_bytes).findings == ()


def test_native_code_runs_no_migration() -> None:
    source = b"import torch\n\nx = torch.ones(3, device='neuron')\nprint(x.sum())\n"
    assert audit_file("n.py", source, REGISTRY, migrate_bytes).findings == ()


def test_nm960_follows_select_and_ignore() -> None:
    ignoring = Registry(all_rules(), Options(ignore=frozenset({"NM960"})))
    assert _audit("train_xla.py", ignoring).findings == ()


def test_check_never_reports_nm960() -> None:
    result = migrate_bytes("train_xla.py", (PROJECT / "train_xla.py").read_bytes(), REGISTRY)
    assert "NM960" not in {f.rule_id for f in result.findings}


@pytest.mark.parametrize(("name", "read"), [("Dockerfile", True), ("pyproject.toml", True),
                                            ("requirements.txt", True), ("train.py", True),
                                            ("nb.ipynb", True), ("Makefile", True),
                                            ("README.md", False), ("data.csv", False)])
def test_audit_reads_code_and_the_files_that_settle_the_environment(name: str,
                                                                    read: bool) -> None:
    assert audited(Path(name)) is read


def test_audit_of_the_project_blocks_and_says_why(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(PROJECT, tmp_path / "project")
    monkeypatch.chdir(tmp_path)
    done = cli("audit", "project")
    assert done.exit_code == 1
    assert "nothing found" not in done.stdout
    for said in ("NM960 xla-era-not-migrated: 2", "NM950", "NM951", "NM901", "NM932",
                 "5 files read"):
        assert said in done.stdout
