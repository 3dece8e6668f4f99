"""NM246-NM249: NxD's checkpoints become torch.distributed.checkpoint.

The rewrites are checked through the engine; the helpers they write are run in this process
(one process, no group: DCP then reads and writes alone); and fixtures/smoke/
nxd_checkpoint_train.py, migrated with the CLI, saves at tensor-parallel size 2 on the
emulated device and loads at 1, at 2 and at 2 x 2 processes, with the model's loss on a
fixed batch, and the steps after the save, unchanged.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from neuron_migrate.model import Kind
from neuron_migrate.rules.emitted_checkpoint import CONVERT
from neuron_migrate.rules.emitted_helpers import HELPERS
from tests.conftest import FIXTURES, ROOT, cli, migrated

TRAIN = FIXTURES / "smoke" / "nxd_checkpoint_train.py"


_migrate = migrated


# ------------------------------------------------------------------------------ rewrites
def test_a_positional_argument_after_a_dropped_one_is_passed_by_keyword() -> None:
    new, findings = _migrate("import neuronx_distributed as nxd\n\n"
                             "nxd.load_checkpoint(d, 't', model, opt, None, 8, False)\n")
    assert "_neuron_load_checkpoint(d, 't', model, opt, None, strict=False)" in new
    finding = next(f for f in findings if f.rule_id == "NM249")
    assert "`num_workers=8`" in finding.message and finding.applied


@pytest.mark.parametrize(("call", "rewritten"), [
    ("nxd.save_checkpoint(d, 't', model, opt, zero1_optimizer=True)",
     "_neuron_save_checkpoint(d, 't', model, opt)"),
    ("nxd.load_checkpoint(d, use_zero1_dcp=flag)", "_neuron_load_checkpoint(d)"),
])
def test_zero1_flags_go_since_the_migrated_optimizer_saves_its_own_share(call: str,
                                                                          rewritten: str) -> None:
    """NxD's ZeRO-1 flags told its checkpoint code the optimizer was sharded; the migrated
    NxD ZeRO-1 optimizer's state dict is each rank's share, which DCP handles, so they go
    with a note (an XLA ZeRO-1 optimizer is refused by the helper at run time)."""
    new, findings = _migrate("import neuronx_distributed as nxd\n\n" + call + "\n")
    assert rewritten in new
    finding = next(f for f in findings if f.rule_id in ("NM248", "NM249"))
    assert finding.applied and "this rank's share" in finding.message


@pytest.mark.parametrize(("call", "why"), [
    ("checkpointing.save(state, d, master_dp_only=False)", "per rank"),
    ("checkpointing.load(d, model, unknown=1)", "not an argument"),
    ("nxd.save_checkpoint(*args)", "unpacked"),
])
def test_an_argument_without_a_native_meaning_is_reported_and_the_call_kept(call: str,
                                                                            why: str) -> None:
    source = ("import neuronx_distributed as nxd\n"
              "from neuronx_distributed.parallel_layers import checkpointing\n\n" + call + "\n")
    new, findings = _migrate(source)
    assert call in new
    reported = [f for f in findings if f.rule_id.startswith("NM24") and not f.applied]
    assert len(reported) == 1 and reported[0].kind is Kind.REVIEW and why in reported[0].message


def test_a_file_with_a_zero1_optimizer_has_its_checkpoints_reported() -> None:
    new, findings = _migrate("import neuronx_distributed as nxd\n"
                             "from neuronx_distributed.optimizer import NeuronZero1Optimizer\n\n"
                             "nxd.save_checkpoint(d, 't', model, optimizer)\n")
    assert "nxd.save_checkpoint(d, 't', model, optimizer)" in new
    assert any(f.rule_id == "NM248" and "ZeRO-1" in f.message for f in findings)


def test_zero1_made_whole_by_the_migration_saves_with_dcp_in_one_pass() -> None:
    """NxD's ZeRO-1 becomes an optimizer whose sharded state DCP writes rank by rank, so its
    checkpoint migrates in the same pass; one NM706 cannot migrate stays reported.
    Either way a second pass agrees with the first."""
    zero = ("import neuronx_distributed as nxd\nimport torch\n"
            "from neuronx_distributed.optimizer import NeuronZero1Optimizer\n\n"
            "opt = NeuronZero1Optimizer(model.parameters(), {cls}, lr=0.1)\n"
            "nxd.save_checkpoint(d, 't', model, opt)\n")
    new, findings = _migrate(zero.format(cls="torch.optim.AdamW"))
    assert "_neuron_save_checkpoint(d, 't', model, opt)" in new
    assert "_NeuronParallelOptimizer(torch.optim.AdamW(" in new
    assert _migrate(new)[0] == new
    kept, findings = _migrate(zero.format(cls="*classes"))
    assert "nxd.save_checkpoint(d, 't', model, opt)" in kept
    assert any(f.rule_id == "NM248" and "ZeRO-1" in f.message for f in findings)
    assert _migrate(kept)[0] == kept


def test_every_load_is_reported_with_the_conversion_and_still_rewritten() -> None:
    new, findings = _migrate("import neuronx_distributed as nxd\n"
                             "from neuronx_distributed.parallel_layers import load\n\n"
                             "a = nxd.load_checkpoint(d)\nb = load(p, model)\n"
                             "c = nxd.trainer.checkpoint.load_checkpoint(d, 'x')\n")
    loads = [f for f in findings if f.rule_id in ("NM247", "NM249")]
    assert len(loads) == 3
    assert all(f.applied and f.kind is Kind.REVIEW and CONVERT in f.message for f in loads)
    assert new.count("_neuron_load_checkpoint(d") == 2 and "_neuron_dcp_load(p, model)" in new


# ------------------------------------------------------------------------------- helpers
torch_only = pytest.mark.torch


def _helpers() -> dict[str, Any]:
    """Every checkpoint helper's text executed in one namespace, as in a migrated file."""
    import torch

    namespace: dict[str, Any] = {"torch": torch, "os": os}
    names = [n for n in HELPERS if "checkpoint" in n or "dcp" in n or n == "_neuron_bfloat16"]
    for name in names:
        for needed in (*HELPERS[name].requires, name):
            exec(compile(HELPERS[needed].source, f"<{needed}>", "exec"), namespace)  # noqa: S102
    return namespace


@pytest.fixture
def alone(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The helpers, in a process that is a job of one (no group: DCP reads and writes alone)."""
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    return _helpers()


def _model(seed: int) -> Any:
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def _same(a: Any, b: Any) -> bool:
    import torch

    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(),
                                                  b.state_dict().values()))


@torch_only
def test_checkpointing_save_and_load_return_the_rest_and_load_the_model(
        alone: dict[str, Any], tmp_path: Path) -> None:
    import torch

    saved, fresh = _model(0), _model(1)
    step = torch.tensor(7)
    alone["_neuron_dcp_save"]({"model": saved.state_dict(), "step": step, "tag": "x",
                               "lrs": [0.1, {"warm": 3}]}, str(tmp_path / "c"))
    rest = alone["_neuron_dcp_load"](str(tmp_path / "c"), fresh)
    assert _same(saved, fresh)
    assert set(rest) == {"step", "tag", "lrs"} and int(rest["step"]) == 7
    assert rest["tag"] == "x" and rest["lrs"] == [0.1, {"warm": 3}]
    whole = alone["_neuron_dcp_load"](str(tmp_path / "c"))
    assert torch.equal(whole["model"]["2.bias"], saved.state_dict()["2.bias"])
    assert alone["_neuron_dcp_load"](str(tmp_path / "c"), _model(2), model_key="model") == rest


@torch_only
def test_an_optimizer_state_saved_in_the_dict_resumes_where_it_stopped(
        alone: dict[str, Any], tmp_path: Path) -> None:
    """checkpointing.save({"model": ..., "optimizer": opt.state_dict()}) then
    opt.load_state_dict(rest["optimizer"]): DCP wrote the parameter ids as strings, which
    load_state_dict would attach to nothing (Adam restarting without a word); they come back
    as ints and the resumed optimizer steps as the uninterrupted one does."""
    import torch

    def step(model: Any, optimizer: Any) -> None:
        model(torch.ones(2, 4)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()

    model = _model(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    step(model, optimizer)
    alone["_neuron_dcp_save"]({"model": model.state_dict(), "optimizer": optimizer.state_dict()},
                              str(tmp_path / "c"))
    resumed = _model(1)
    fresh = torch.optim.Adam(resumed.parameters(), lr=0.1)
    rest = alone["_neuron_dcp_load"](str(tmp_path / "c"), resumed)
    assert sorted(rest["optimizer"]["state"]) == [0, 1, 2, 3]
    fresh.load_state_dict(rest["optimizer"])
    assert all(p in fresh.state for p in resumed.parameters())
    step(model, optimizer)
    step(resumed, fresh)
    assert _same(model, resumed)
    whole = alone["_neuron_dcp_load"](str(tmp_path / "c"))
    assert sorted(whole["optimizer"]["state"]) == [0, 1, 2, 3]


@torch_only
def test_down_cast_bf16_writes_bfloat16_and_loads_it_rounded(alone: dict[str, Any],
                                                             tmp_path: Path) -> None:
    import torch
    import torch.distributed.checkpoint as dcp

    saved, fresh = _model(0), _model(1)
    alone["_neuron_dcp_save"]({"model": saved.state_dict()}, str(tmp_path), down_cast_bf16=True)
    metadata = dcp.FileSystemReader(str(tmp_path)).read_metadata()
    assert metadata.state_dict_metadata["model.0.weight"].properties.dtype == torch.bfloat16
    alone["_neuron_dcp_load"](str(tmp_path), fresh)
    assert fresh[0].weight.dtype == torch.float32
    assert torch.equal(fresh[0].weight, saved[0].weight.to(torch.bfloat16).float())


@torch_only
def test_a_full_state_dict_file_loads_with_sharded_false(alone: dict[str, Any],
                                                         tmp_path: Path) -> None:
    import torch

    saved, fresh = _model(0), _model(1)
    torch.save(saved.state_dict(), tmp_path / "full.pt")
    assert alone["_neuron_dcp_load"](str(tmp_path / "full.pt"), model=fresh, model_key=None,
                                     sharded=False) is None
    assert _same(saved, fresh)


def _train(model: Any, optimizer: Any, scheduler: Any, steps: int) -> float:
    import torch

    for _ in range(steps):
        loss = model(torch.ones(3, 4)).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
    return float(loss.detach())


def _run(seed: int) -> tuple[Any, Any, Any]:
    import torch

    model = _model(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    return model, optimizer, torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)


@torch_only
def test_save_and_load_checkpoint_resume_the_run(alone: dict[str, Any], tmp_path: Path) -> None:
    folder = str(tmp_path)
    model, optimizer, scheduler = _run(0)
    _train(model, optimizer, scheduler, 2)
    alone["_neuron_save_checkpoint"](folder, "step_2", model, optimizer, scheduler,
                                     {"step": 2})
    assert alone["_neuron_has_checkpoint"](folder)
    expected = _train(model, optimizer, scheduler, 2)
    resumed, resumed_optimizer, resumed_scheduler = _run(1)
    content = alone["_neuron_load_checkpoint"](folder, model=resumed,
                                               optimizer=resumed_optimizer,
                                               scheduler=resumed_scheduler)
    assert content == {"step": 2} and resumed_scheduler.last_epoch == 2
    assert _train(resumed, resumed_optimizer, resumed_scheduler, 2) == expected


@torch_only
def test_the_trainer_api_model_saves_and_loads_with_nxd_names(alone: dict[str, Any],
                                                             tmp_path: Path) -> None:
    """initialize_parallel_model's wrapper keeps NxD's parameter names (no `module.`
    prefix) for the script, and the checkpoint helpers give torch.distributed.checkpoint
    the model itself, so a save_checkpoint/load_checkpoint of model and optimizer resumes."""
    exec(compile(HELPERS["_NeuronParallelModel"].source, "<wrapper>", "exec"), alone)  # noqa: S102
    wrap = alone["_NeuronParallelModel"]
    folder = str(tmp_path)
    model, optimizer, scheduler = _run(0)
    model = wrap(model)
    assert set(model.state_dict()) == set(model.module.state_dict())
    _train(model, optimizer, scheduler, 2)
    alone["_neuron_save_checkpoint"](folder, "t", model, optimizer, scheduler)
    expected = _train(model, optimizer, scheduler, 2)
    resumed, resumed_optimizer, resumed_scheduler = _run(1)
    resumed = wrap(resumed)
    alone["_neuron_load_checkpoint"](folder, "t", resumed, resumed_optimizer, resumed_scheduler)
    assert _train(resumed, resumed_optimizer, resumed_scheduler, 2) == expected
    alone["_neuron_dcp_load"](folder + "/t/model", wrap(_model(2)), model_key=None)


@torch_only
def test_the_newest_complete_tags_are_kept(alone: dict[str, Any], tmp_path: Path) -> None:
    folder = str(tmp_path)
    assert not alone["_neuron_has_checkpoint"](folder)
    model = _model(0)
    for step in range(3):
        alone["_neuron_save_checkpoint"](folder, f"step_{step}", model, user_content=step,
                                         num_kept_ckpts=2)
        os.utime(tmp_path / f"step_{step}" / "done", (step + 1, step + 1))  # coarse clocks
    (tmp_path / "unfinished").mkdir()  # no `done`: never chosen
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_1", "step_2", "unfinished"]
    assert alone["_neuron_load_checkpoint"](folder, model=_model(1)) == 2
    from torch.distributed.optim import ZeroRedundancyOptimizer

    xla_zero1 = ZeroRedundancyOptimizer.__new__(ZeroRedundancyOptimizer)  # what XLA's became
    with pytest.raises(ValueError, match="ZeRO-1"):
        alone["_neuron_save_checkpoint"](folder, "z", model, xla_zero1)
    with pytest.raises(ValueError, match="ZeRO-1"):
        alone["_neuron_load_checkpoint"](folder, model=model, optimizer=xla_zero1)


@torch_only
@pytest.mark.parametrize("layout", ["tp_rank_00_pp_rank_00/checkpoint.pt",
                                    "step_9/model/dp_rank_00_tp_rank_00_pp_rank_00.pt"])
def test_a_checkpoint_of_the_xla_stack_stops_the_load_with_what_to_run(
        alone: dict[str, Any], tmp_path: Path, layout: str) -> None:
    old = tmp_path / layout
    old.parent.mkdir(parents=True)
    old.write_bytes(b"")
    (tmp_path / "step_9" / "done").parent.mkdir(exist_ok=True)
    (tmp_path / "step_9" / "done").write_text("1")
    load = (lambda: alone["_neuron_dcp_load"](str(tmp_path), _model(0))) \
        if layout.startswith("tp_rank") else \
        (lambda: alone["_neuron_load_checkpoint"](str(tmp_path), model=_model(0)))
    with pytest.raises(RuntimeError) as raised:
        load()
    assert "one file per tensor-parallel rank" in str(raised.value)
    assert CONVERT in str(raised.value)


@torch_only
def test_the_reported_conversion_makes_a_full_state_dict_loadable(alone: dict[str, Any],
                                                                  tmp_path: Path) -> None:
    """What the load sites tell users to run: a full state dict (what NxD's converter
    writes) through format_utils.torch_save_to_dcp into the tag's model folder."""
    import torch
    from torch.distributed.checkpoint.format_utils import torch_save_to_dcp

    saved, fresh = _model(0), _model(1)
    torch.save(saved.state_dict(), tmp_path / "checkpoint.pt")
    torch_save_to_dcp(str(tmp_path / "checkpoint.pt"), str(tmp_path / "ckpt" / "old" / "model"))
    (tmp_path / "ckpt" / "old" / "done").write_text("1")
    assert alone["_neuron_load_checkpoint"](str(tmp_path / "ckpt"), model=fresh) is None
    assert _same(saved, fresh)


# ---------------------------------------------------------- on the emulated neuron device
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(script: Path, nproc: int, *args: str) -> str:
    """The migrated script under torchrun on the emulated device; rank 0's output."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "emulator" / "bootstrap"),
           "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
         f"--master-port={_free_port()}", str(script), *args],
        cwd=script.parent, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout


def _values(output: str, what: str) -> list[float]:
    return [float(v) for v in re.findall(rf"^{what} (\S+)", output, re.MULTILINE)]


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("nxd_checkpoint")
    script = folder / TRAIN.name
    script.write_bytes(TRAIN.read_bytes())
    assert cli("apply", str(script)).exit_code == 0
    text = script.read_text()
    assert "neuronx_distributed" not in text and "torch_xla" not in text
    assert "_neuron_save_checkpoint(" in text and "_neuron_dcp_load(" in text
    return script


@pytest.fixture(scope="module")
def saved_at_tp2(migrated: Path) -> tuple[Path, str]:
    folder = migrated.parent / "ckpt"
    output = _torchrun(migrated, 2, "--tp", "2", "--steps", "3", "--save", str(folder),
                       "--then", "2")
    assert (folder / "step_3" / "done").exists() and (folder / "weights" / ".metadata").exists()
    return folder, output


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.parametrize(("nproc", "tp"), [(1, 1), (2, 2), (4, 2)])
def test_a_checkpoint_saved_at_tp2_reproduces_the_loss_at_another_layout(
        migrated: Path, saved_at_tp2: tuple[Path, str], nproc: int, tp: int) -> None:
    folder, saved = saved_at_tp2
    before = _values(saved, "probe saved")
    assert len(before) == 1
    output = _torchrun(migrated, nproc, "--tp", str(tp), "--steps", "2", "--load", str(folder))
    assert _values(output, "probe loaded") == pytest.approx(before, rel=1e-5)
    assert _values(output, "probe weights") == pytest.approx(before, rel=1e-5)
    assert re.search(r"^probe weights \S+ step 3$", output, re.MULTILINE)
    if nproc == tp:  # one data-parallel replica: each printed loss is the whole batch's
        after_save = _values(saved, r"step [34] loss")
        assert len(after_save) == 2
        assert _values(output, r"step [34] loss") == pytest.approx(after_save, rel=1e-5)


@torch_only
def test_the_reported_conversion_works_for_checkpointing_load_too(alone: dict[str, Any],
                                                                  tmp_path: Path) -> None:
    import torch
    from torch.distributed.checkpoint.format_utils import torch_save_to_dcp

    saved, fresh = _model(0), _model(1)
    torch.save({"model": saved.state_dict(), "step": 3}, tmp_path / "full.pt")
    torch_save_to_dcp(str(tmp_path / "full.pt"), str(tmp_path / "dcp"))
    assert alone["_neuron_dcp_load"](str(tmp_path / "dcp"), fresh) == {"step": 3}
    assert _same(saved, fresh)
