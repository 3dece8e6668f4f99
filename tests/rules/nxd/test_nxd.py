"""NeuronX Distributed training code, migrated and run: the same losses at every layout.

A parallelisation is proved by parity: the migrated script trains to the same per-step losses
on one process, with its layers split over two tensor-parallel ranks, and with its batch
split over two data-parallel replicas. The script is written in NxD's XLA-era form
(fixtures/smoke/nxd_tp_train.py) and goes through `apply` first, as a user's would.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, cli

SCRIPT = FIXTURES / "smoke" / "nxd_tp_train.py"


def _migrated(tmp_path: Path, source: Path = SCRIPT, name: str = "train.py") -> tuple[Path, dict]:
    target = tmp_path / name
    target.write_bytes(source.read_bytes())
    run = cli("apply", str(target), "--format", "json")
    assert run.exit_code == 0, run.stdout + run.stderr
    return target, run.json()


def test_nxd_training_script_migrates_without_a_trace_of_nxd_or_xla(tmp_path: Path) -> None:
    target, report = _migrated(tmp_path)
    text = target.read_text()
    tree = ast.parse(text)
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(m.startswith(("torch_xla", "neuronx_distributed")) for m in imported), imported
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert not names & {"xm", "parallel_state", "layers", "parallel_cross_entropy"}
    reviews = {f["rule_id"] for f in report["findings"] if f["kind"] == "review"}
    assert reviews <= {"NM932"}, reviews  # only the per-step loss.item(), a speed note
    assert "tensor.parallel.ColwiseParallel()" in text
    assert 'mesh_dim_names=("dp", "tp")' in text


def _smoke(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "neuron_migrate", "smoke", *args],
                          capture_output=True, text=True, env=env, timeout=600, check=False)


@pytest.mark.torch
@pytest.mark.slow
def test_losses_agree_at_tensor_and_data_parallel_layouts(tmp_path: Path) -> None:
    target, _ = _migrated(tmp_path)
    run = _smoke(str(target), "--format", "json", "--layout", "1:--tp 1",
                 "--layout", "2:--tp 2", "--layout", "2:--tp 1", "--layout", "2:--tp 2 --zero1",
                 "--layout", "2:--tp 1 --zero1", "--", "--steps", "4")
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["first_difference"] is None and report["steps_compared"] == 4
    layouts = report["layouts"]
    assert len(layouts) == 5 and all(len(layout["losses"]) == 4 for layout in layouts)
    reference = layouts[0]["losses"]
    for layout in layouts[1:]:
        for ours, theirs in zip(reference, layout["losses"]):
            assert theirs == pytest.approx(ours, rel=1e-3)


@pytest.mark.torch
@pytest.mark.slow
def test_trainer_api_trains_alike_at_tensor_and_data_parallel_layouts(tmp_path: Path) -> None:
    """NxD's trainer API (config, model, optimizer with clipping and activation checkpointing
    from the config) migrates to helpers that train to the same losses at TP 1, TP 2 and
    DP 2, with and without ZeRO-1, and under --check-replicas (the optimizer averages over
    the "dp" dimension). Built on the meta device (the script asserts it) and filled by its
    param_init_fn, it starts from the same model at every layout."""
    source = FIXTURES / "smoke" / "nxd_trainer_train.py"
    target, report = _migrated(tmp_path, source)
    assert {f["rule_id"] for f in report["findings"]} >= {"NM252", "NM241", "NM240"}
    run = _smoke(str(target), "--format", "json", "--check-replicas", "--layout", "1:--tp 1",
                 "--layout", "2:--tp 2", "--layout", "2:--tp 1", "--layout", "2:--tp 1 --zero1",
                 "--layout", "2:--tp 2 --zero1", "--layout", "2:--tp 2 --meta",
                 "--layout", "2:--tp 1 --meta")
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["first_difference"] is None and report["steps_compared"] == 4


@pytest.mark.torch
@pytest.mark.slow
def test_zero1_next_to_tensor_parallelism_shards_trains_alike_and_resumes_anywhere(
        tmp_path: Path) -> None:
    """NxD's ZeRO-1 beside tensor-parallel layers shards its state over the data-parallel
    ranks of a TP 2 x DP 2 layout and trains as one process does; its checkpoint (DCP, each
    rank its share) migrates in the first pass, and the run resumed from it at DP 2 and at
    TP 2 continues with the losses the uninterrupted run had."""
    target, report = _migrated(tmp_path, FIXTURES / "smoke" / "nxd_lm_train.py")
    assert "NM248" in {f["rule_id"] for f in report["findings"] if f["kind"] != "review"}
    assert '"zero_one_enabled": True' in target.read_text()
    again = cli("check", str(target), "--format", "json")
    assert again.json()["summary"]["changed"] == 0, again.stdout
    saved = tmp_path / "saved"
    run = _smoke(str(target), "--format", "json", "--layout", "1:--tp 1 --steps 6",
                 "--layout", f"4:--tp 2 --zero1 --steps 6 --ckpt {saved} --save-at 3",
                 "--layout", "2:--tp 1 --zero1 --steps 6")
    assert run.returncode == 0, run.stdout + run.stderr
    first = json.loads(run.stdout)
    assert first["first_difference"] is None and first["steps_compared"] == 6
    assert len(list((saved / "final" / "optim").glob("*.distcp"))) == 4
    resumed = _smoke(str(target), "--format", "json",
                     "--layout", f"2:--tp 1 --zero1 --steps 3 --resume {saved}",
                     "--layout", f"2:--tp 2 --zero1 --steps 3 --resume {saved}")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    uninterrupted = first["layouts"][0]["losses"][3:]
    for layout in json.loads(resumed.stdout)["layouts"]:
        losses = [loss for loss in layout["losses"] if loss is not None]  # None: DCP's probe
        assert losses == pytest.approx(uninterrupted, rel=1e-4), layout


@pytest.mark.torch
@pytest.mark.slow
def test_sequence_parallel_gradients_agree_at_tp1_and_tp2_with_sgd(tmp_path: Path) -> None:
    """Sequence parallelism's gradient sums, checked with SGD (an error shows in the next
    loss) and a tight tolerance: a fused stride=3 layer gathering the sequence must not sum
    its input gradient twice, and a norm of the script's own marked sequence_parallel_enabled
    keeps NxD's all-reduce of its gradient (not deleted as for a norm under SequenceParallel,
    whose gradient is not summed twice either)."""
    source = FIXTURES / "smoke" / "nxd_sequence_parallel_grads.py"
    target, report = _migrated(tmp_path, source)
    assert "_neuron_allreduce_sequence_parallel_gradients(optimizer)" in target.read_text()
    run = _smoke(str(target), "--format", "json", "--rtol", "1e-6",
                 "--layout", "1:--tp 1", "--layout", "2:--tp 2")
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["first_difference"] is None and report["steps_compared"] == 4
