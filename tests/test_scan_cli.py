"""`neuron-migrate scan`, and the dependency checks inside apply and check."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import cli

XLA_PINS = "torch-neuronx==2.9.0.2.15.32035  # the old stack\nneuronx-cc==2.*\nnki\n"


def test_scan_exit_codes_and_fix(in_tmp: Path) -> None:
    (in_tmp / "requirements.txt").write_text("requests==2.32.0\n")
    assert cli("scan", ".").exit_code == 0
    (in_tmp / "requirements.txt").write_text(XLA_PINS)
    run = cli("scan", ".")
    assert run.exit_code == 1 and "NM801" in run.stdout
    assert (in_tmp / "requirements.txt").read_text() == XLA_PINS  # report only
    fixed = cli("scan", "--fix", ".")
    assert fixed.exit_code == 0
    assert (in_tmp / "requirements.txt").read_text().startswith(
        "torch-neuronx==2.14.*  # the old stack\n")
    assert cli("scan", ".").exit_code == 0


def test_scan_ignores_python_and_reports_lockfiles_without_editing(in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text("import torch_xla\ntorch_xla.sync()\n")
    lock = ('version = 1\n\n[[package]]\nname = "torch-neuronx"\n'
            'version = "2.9.0.2.15.32035"\nsource = { registry = "https://pip.repos.neuron.amazonaws.com" }\n')
    (in_tmp / "uv.lock").write_text(lock)
    run = cli("scan", "--fix", ".")
    assert run.exit_code == 1 and "uv lock" in run.stdout
    assert (in_tmp / "uv.lock").read_text() == lock
    assert (in_tmp / "train.py").read_text() == "import torch_xla\ntorch_xla.sync()\n"


def test_apply_and_check_include_the_dependency_checks(in_tmp: Path) -> None:
    (in_tmp / "requirements.txt").write_text(XLA_PINS)
    (in_tmp / "train.py").write_text("import torch_xla\ntorch_xla.sync()\nx = 1\n")
    check = cli("check", ".", "--format", "json").json()
    assert {"NM801", "NM110"} <= {f["rule_id"] for f in check["findings"]}
    assert cli("apply", ".").exit_code == 0
    assert (in_tmp / "requirements.txt").read_text().startswith("torch-neuronx==2.14.*")
    assert (in_tmp / "train.py").read_text() == "x = 1\n"


def test_scan_of_a_broken_file_is_an_error(in_tmp: Path) -> None:
    (in_tmp / "pyproject.toml").write_text('[project]\ndependencies = ["torch-neuronx"\n')
    run = cli("scan", ".")
    assert run.exit_code == 2 and "pyproject.toml" in run.stderr
