"""`neuron-migrate scan`, and the dependency checks inside apply and check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_migrate.model import Kind
from neuron_migrate.rules.launch import Spawn
from tests.conftest import cli

XLA_PINS = "torch-neuronx==2.9.0.2.15.32035  # the old stack\nneuronx-cc==2.*\nnki\n"


def test_scan_exit_codes_and_fix(in_tmp: Path) -> None:
    (in_tmp / "requirements.txt").write_text("requests==2.32.0\n")
    assert cli("scan", ".").exit_code == 0
    (in_tmp / "requirements.txt").write_text(XLA_PINS)
    run = cli("scan", ".")
    assert run.exit_code == 1 and "NM801" in run.stdout
    # it says what `scan --fix` would write, as `check` does for `apply`: fixes, not review
    assert "1 would change" in run.stdout and "0 to review" in run.stdout
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


SPAWNING = ("import torch_xla.distributed.xla_multiprocessing as xmp\n\n"
            "def _mp_fn(index):\n    pass\n\n"
            "if __name__ == '__main__':\n    xmp.spawn(_mp_fn{nprocs})\n")


def test_scan_fix_rewrites_launches_in_manifests_and_reports_an_unknown_count(
        in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Spawn, "kind", Kind.FIX)  # the launch line changes with the script
    (in_tmp / "train.py").write_text(SPAWNING.format(nprocs=", nprocs=16"))
    (in_tmp / "pretrain.py").write_text(SPAWNING.format(nprocs=""))
    (in_tmp / "job.yaml").write_text("command:\n  - python3\n  - train.py\n"
                                     "args: [\"--steps\", \"3\"]\n")
    (in_tmp / "Dockerfile").write_text("FROM python:3.11\nCOPY . /src\nWORKDIR /src\n"
                                       "CMD python3 -u pretrain.py\n")
    report = cli("scan", ".", "--format", "json").json()
    launches = {f["path"]: f for f in report["findings"] if f["rule_id"] == "NM816"}
    assert launches["Dockerfile"]["kind"] == "review"
    assert launches["Dockerfile"]["suggestion"] == "torchrun --nproc-per-node=N pretrain.py"
    assert launches["job.yaml"]["kind"] == "fix"
    fixed = cli("scan", "--fix", ".")
    assert fixed.exit_code == 1  # the unknown count still needs a person
    assert (in_tmp / "job.yaml").read_text() == (
        "command:\n  - torchrun\n  - --nproc-per-node=16\n  - train.py\n"
        "args: [\"--steps\", \"3\"]\n")
    assert (in_tmp / "Dockerfile").read_text().endswith("CMD python3 -u pretrain.py\n")


NOTEBOOK_WITH_CODE = json.dumps({
    "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
               "source": ["!pip install torch-neuronx==2.1.2.2.3.0\n",
                          "import torch_xla.core.xla_model as xm\n", "d = xm.xla_device()\n"]}],
    "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
CODE = "import torch_xla.core.xla_model as xm\nd = xm.xla_device()\n"


def test_scan_reads_notebooks_install_lines_only(in_tmp: Path) -> None:
    """`scan` reads a notebook's install lines whether named or found in a folder, and
    reports dependency findings only: never the code rewrites `check` would."""
    (in_tmp / "train.ipynb").write_text(NOTEBOOK_WITH_CODE)
    named, walked = (cli("scan", "--format", "json", path).json() for path in ("train.ipynb", "."))
    for report in (named, walked):
        ids = sorted({f["rule_id"] for f in report["findings"]})
        assert ids and all(i.startswith("NM8") for i in ids), ids
    assert named["findings"] == walked["findings"]
    fixed = cli("scan", "--fix", ".")
    assert (in_tmp / "train.ipynb").read_text() == NOTEBOOK_WITH_CODE, fixed.stdout


def test_scan_reports_no_code_rewrites_in_setup_py_or_named_python(in_tmp: Path) -> None:
    (in_tmp / "setup.py").write_text(CODE + "setup(install_requires=['torch-neuronx==2.1.2'])\n")
    (in_tmp / "train.py").write_text(CODE)
    report = cli("scan", "--format", "json", "setup.py", "train.py").json()
    assert {f["path"] for f in report["findings"]} == {"setup.py"}
    assert all(f["rule_id"].startswith("NM8") for f in report["findings"])
    skipped = cli("scan", "-v", "train.py")
    assert "train.py: not a file `scan` reads" in skipped.stdout + skipped.stderr
    assert cli("scan", "--fix", ".").exit_code in (0, 1)
    assert (in_tmp / "train.py").read_text() == CODE
