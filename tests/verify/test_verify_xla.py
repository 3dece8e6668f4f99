"""verify end to end: originals under torch_xla 2.1 on the CPU (the reference environment),
their migrations under the emulated device. The equal pairs must agree at 1 and 2 processes;
each planted migration fault must be caught at its step, on the right quantity.

The reference environment is found as verify finds it (the cache folder), or by
NEURON_VERIFY_REFERENCE_PYTHON; `.ci/run` makes it. Without it these tests skip, saying so.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

import pytest

from neuron_migrate.verify import reference_env, runs
from neuron_migrate.verify.command import run_verify
from neuron_migrate.verify.compare import AGREE, DIFFER

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "fixtures" / "verify"
STEPS = 3

pytestmark = [pytest.mark.torch, pytest.mark.slow, pytest.mark.xla]


@functools.lru_cache(maxsize=1)
def _reference() -> str | None:
    given = os.environ.get("NEURON_VERIFY_REFERENCE_PYTHON")
    candidate = given or str(reference_env.cache_folder() / "bin" / "python")
    if not os.path.exists(candidate):
        return None
    try:
        reference_env.probe(candidate)
    except reference_env.ReferenceUnavailable:
        return None
    return candidate


@pytest.fixture(scope="module")
def reference() -> str:
    python = _reference()
    if python is None:
        pytest.skip(f"no reference environment (torch_xla 2.1 on Python <= 3.11) in "
                    f"{reference_env.cache_folder()} and NEURON_VERIFY_REFERENCE_PYTHON unset; "
                    f"`.ci/run` makes it, or any `neuron-migrate verify` run does")
    return python


def plan(original: str, migrated: str | Path, nproc: int, *args: str) -> runs.Plan:
    return runs.Plan(PAIRS / original if isinstance(original, str) else original,
                     PAIRS / migrated if isinstance(migrated, str) else migrated, tuple(args),
                     nproc, STEPS, timeout=900)


@pytest.mark.parametrize(("original", "migrated", "nproc"), [
    ("single_device.py", "single_device.migrated.py", 1),
    ("data_parallel.py", "data_parallel.migrated.py", 1),
    ("data_parallel.py", "data_parallel.migrated.py", 2),
    ("launch_device_random.py", "launch_device_random.migrated.py", 2),
])
def test_equal_pairs_agree(reference, original, migrated, nproc):
    outcome = run_verify(plan(original, migrated, nproc), reference)
    verdict = outcome.verdict
    assert verdict.status == AGREE, (verdict.reason, verdict.notes)
    assert len(verdict.rows) == STEPS
    assert all(row.difference["loss"] <= 1e-5 for row in verdict.rows)


@pytest.fixture(scope="module")
def original_two_processes(reference):
    """The original of the planted faults, run once: each fault changes only the migration."""
    run = runs.run_original(plan("data_parallel.py", "data_parallel.migrated.py", 2), reference)
    assert run.error is None, run.error
    return run


SAMPLER = ("    sampler = DistributedSampler(dataset, num_replicas=torch.distributed.get_world_size() "
           "if torch.distributed.is_initialized() else int(os.environ.get(\"WORLD_SIZE\", 1)),\n"
           "                                 rank=_neuron_rank(), shuffle=True, seed=4)")
# each fault: the planted edit of the migration (old, new), then where it must be caught:
# (step, quantity, rank or None for any, words in the likely cause)
FAULTS = {
    "summed": (("        flat.div_(world_size)\n", ""),
               (1, "grad_norm", None, "summed, not averaged")),
    "same_shard": (("rank=_neuron_rank(), shuffle",
                    "rank=int(os.environ.get(\"GROUP_RANK\", 0)), shuffle"),
                   (1, "data", 1, "sampler")),
    "no_num_replicas": ((SAMPLER, "    sampler = DistributedSampler(dataset, num_replicas=1, "
                                  "rank=0, shuffle=True, seed=4)"),
                        (1, "data", 0, "num_replicas")),
    "loss_twice": (("(loss / ACCUMULATION).backward()",
                    "(loss / ACCUMULATION / ACCUMULATION).backward()"),
                   (1, "loss", None, "scaled")),
    "no_zero_grad": (("            _neuron_optimizer_step(optimizer)\n"
                      "            optimizer.zero_grad()\n",
                      "            _neuron_optimizer_step(optimizer)\n"),
                     (2, "grad_norm", None, "zero_grad")),
}


def planted(fault: str, folder: Path) -> Path:
    """A copy of the migrated fixture with one fault planted (the edit must apply once)."""
    (old, new), _ = FAULTS[fault]
    source = (PAIRS / "data_parallel.migrated.py").read_text()
    assert source.count(old) == 1, fault
    path = folder / f"data_parallel.fault_{fault}.py"
    path.write_text(source.replace(old, new))
    return path


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_planted_faults_are_caught_at_their_step(reference, original_two_processes, monkeypatch,
                                                 tmp_path, fault):
    monkeypatch.setattr(runs, "run_original", lambda *args: original_two_processes)
    outcome = run_verify(plan("data_parallel.py", planted(fault, tmp_path), 2), reference)
    step, quantity, rank, words = FAULTS[fault][1]
    verdict = outcome.verdict
    assert verdict.status == DIFFER and outcome.exit_code == 1, verdict.reason
    assert (verdict.parting.step, verdict.parting.quantity) == (step, quantity), verdict.reason
    assert rank is None or verdict.parting.rank == rank
    assert words in verdict.cause


def test_the_shipped_example_verifies_at_two_processes(reference, tmp_path):
    from neuron_migrate.cli import app
    from typer.testing import CliRunner

    original = tmp_path / "original" / "train.py"
    migrated = tmp_path / "migrated" / "train.py"
    for path in (original, migrated):
        path.parent.mkdir()
        shutil.copy(ROOT / "examples" / "xla_mnist" / "train.py", path)
    applied = CliRunner().invoke(app, ["apply", "-q", str(migrated)])
    assert applied.exit_code == 0, applied.output
    outcome = run_verify(plan(original, migrated, 2, "--epochs", "1", "--samples", "512"),
                         reference)
    assert outcome.verdict.status == AGREE, outcome.verdict.reason
