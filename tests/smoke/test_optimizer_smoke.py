"""End to end: a script whose DDP wrapper is optional, migrated with --unsafe-fixes, keeps the
gradient averaging on the path without DDP, so the replicas stay in step on the emulated
device; a bare `optimizer.step()` there would let them drift apart."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, cli

pytestmark = pytest.mark.torch  # runs scripts on the emulated device

BEFORE = FIXTURES / "python" / "NM210_optional_ddp_script.before.py"


def _smoke(script: str) -> str:
    run = cli("smoke", script, "--nproc", "2", "--check-replicas", "--", "--steps", "3")
    return run.stdout + run.stderr


@pytest.mark.slow
def test_the_path_without_ddp_keeps_its_averaging_under_unsafe_fixes(in_tmp: Path) -> None:
    shutil.copyfile(BEFORE, in_tmp / "train.py")
    assert cli("apply", "--unsafe-fixes", "train.py").exit_code == 0
    migrated = (in_tmp / "train.py").read_text()
    assert "torch_xla" not in migrated and "_neuron_optimizer_step(optimizer)" in migrated
    (in_tmp / "bare.py").write_text(migrated.replace(
        "            _neuron_optimizer_step(optimizer)", "            optimizer.step()"))
    assert "PASSED" in _smoke("train.py")
    failed = _smoke("bare.py")  # the old output: smoke sees the step without averaging
    assert "FAILED" in failed and "DataParallelismLost" in failed
