"""Launching and the process group: a spawned XLA script runs under torchrun after `apply`,
with the process group its native collectives need, and says how it is now launched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_migrate.smoke.run import SmokeOptions, run_smoke
from neuron_migrate.rules.launch import launch_facts
from tests.conftest import cli

SPAWNED = '''\
import torch
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp


def _mp_fn(index, steps):
    device = xm.xla_device()
    torch.manual_seed(index)  # replicas start apart: only averaging brings them together
    model = torch.nn.Linear(4, 1).to(device)
    xm.broadcast_master_param(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        optimizer.zero_grad()
        data = torch.full((2, 4), float(xm.get_ordinal() + step), device=device)
        model(data).sum().backward()
        xm.optimizer_step(optimizer)
    xm.master_print("done")


if __name__ == "__main__":
    xmp.spawn(_mp_fn, args=(3,), nprocs=NPROCS)
'''


def _migrate(tmp_path: Path, source: str, name: str = "train.py") -> tuple[Path, list[dict]]:
    script = tmp_path / name
    script.write_text(source)
    run = cli("apply", name, "--format", "json")  # the command names the script as the user did
    assert run.exit_code == 0, run.stdout + run.stderr
    return script, run.json()["findings"]


def _finding(findings: list[dict], rule: str) -> dict:
    return next(f for f in findings if f["rule_id"] == rule)


def test_spawn_becomes_a_torchrun_entry_that_creates_the_group_first(in_tmp: Path) -> None:
    script, findings = _migrate(in_tmp, SPAWNED.replace("NPROCS", "8"))
    text = script.read_text()
    assert "torch_xla" not in text
    group = text.index('torch.distributed.init_process_group("neuron")')
    assert group < text.index('_mp_fn(int(os.environ.get("RANK", 0)), 3)')
    spawn = _finding(findings, "NM220")
    assert spawn["kind"] == "fix" and spawn["applied"]
    assert "`torchrun --nproc-per-node=8 train.py`" in spawn["message"]


def test_one_process_needs_neither_torchrun_nor_a_group(in_tmp: Path) -> None:
    script, findings = _migrate(in_tmp, SPAWNED.replace("NPROCS", "1"))
    assert 'init_process_group("neuron")' not in script.read_text()
    message = _finding(findings, "NM220")["message"]
    assert "no torchrun, no process group" in message and "torchrun --nproc" not in message


def test_a_spawn_inside_a_function_is_rewritten_in_place(in_tmp: Path) -> None:
    source = SPAWNED.replace('if __name__ == "__main__":\n    xmp.spawn(_mp_fn, args=(3,), '
                             'nprocs=NPROCS)', 'def main():\n    xmp.spawn(_mp_fn, args=(3,))\n\n\n'
                             'if __name__ == "__main__":\n    main()')
    script, _ = _migrate(in_tmp, source)
    main = script.read_text().split("def main():\n", 1)[1]
    assert main.startswith("    if int(os.environ.get(\"WORLD_SIZE\", 1)) > 1 and not "
                           "torch.distributed.is_initialized():\n"
                           "        torch.distributed.init_process_group(\"neuron\")\n"
                           "    _mp_fn(int(os.environ.get(\"RANK\", 0)), 3)\n")


def test_only_torch_distributed_creates_a_group_of_its_own() -> None:
    source = ("import torch.distributed as dist\nimport torch_xla\n\n\n"
              "def init_process_group():\n    dist.init_process_group('xla')\n\n\n"
              "def main():\n    init_process_group()\n\n\n"
              "torch_xla.launch(main)\n")
    facts = launch_facts(source)
    assert facts.entry_group and not facts.own_group and facts.is_entry("main")
    assert not launch_facts(source.replace("launch(main)", "launch(main, (), 'spawn', True)")
                            ).entry_group  # debug_single_process: one process, no group
    with_options = source.replace("dist.init_process_group('xla')",
                                  "dist.init_process_group('xla', timeout=t)")
    assert launch_facts(with_options).own_group


def test_a_launch_outside_the_entry_is_left_for_review(in_tmp: Path) -> None:
    source = SPAWNED.replace('if __name__ == "__main__":\n    xmp.spawn(_mp_fn, args=(3,), '
                             'nprocs=NPROCS)', 'def trace():\n    xmp.spawn(_mp_fn, args=(3,))\n'
                             '    return results()')
    script, findings = _migrate(in_tmp, source)
    assert "xmp.spawn(_mp_fn, args=(3,))" in script.read_text()
    assert "torch_xla" in script.read_text()
    assert _finding(findings, "NM220")["kind"] == "review"


def test_save_message_names_the_writer(in_tmp: Path) -> None:
    source = ("import torch_xla.core.xla_model as xm\n\n"
              "xm.save(state, path)\nxm.save(state, path, master_only=False)\n"
              "xm.save(state, path, global_master=True)\n")
    _, findings = _migrate(in_tmp, source)
    messages = [f["message"] for f in findings if f["rule_id"] == "NM230"]
    assert "written by the local master of each host" in messages[0]
    assert "written by every process" in messages[1]
    assert "written by global rank 0" in messages[2]


def _smoke(script: Path, steps: int = 3) -> object:
    return run_smoke(SmokeOptions(script=script, nproc=2, steps=steps, check_replicas=True,
                                  timeout=300, python=sys.executable))


@pytest.mark.slow
@pytest.mark.torch
def test_migrated_spawn_script_averages_gradients_under_torchrun(in_tmp: Path) -> None:
    """Replicas that agree are not enough (summed gradients agree too): each step moves the
    weights by the mean of the two replicas' gradients, as xm.optimizer_step did."""
    saving = SPAWNED.replace("NPROCS", "None").replace(
        '    xm.master_print("done")\n',
        '    torch.save([p.detach().cpu() for p in model.parameters()],\n'
        '               f"params{xm.get_ordinal()}.pt")\n')
    script, _ = _migrate(in_tmp, saving)
    result = _smoke(script, steps=4)  # past the script's 3 steps: it runs to its end
    assert result.passed, (result.error, [w.stderr_tail for w in result.workers])
    assert result.optimizer_steps == 3
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    start = torch.nn.Linear(4, 1)  # rank 0's weights, which broadcast_master_param shares
    # d(sum of w.x + b over 2 rows)/dw is 2 * (rank + step) per weight and 2 for the bias:
    # averaged over ranks 0 and 1, 1 + 2 * step and 2; lr 0.1 over steps 0, 1 and 2
    expected = [start.weight.detach() - 0.1 * (1 + 3 + 5), start.bias.detach() - 0.1 * 2 * 3]
    for rank in (0, 1):
        weight, bias = torch.load(in_tmp / f"params{rank}.pt")
        assert torch.allclose(weight, expected[0], atol=1e-5), (rank, weight, expected[0])
        assert torch.allclose(bias, expected[1], atol=1e-5), (rank, bias, expected[1])


@pytest.mark.slow
@pytest.mark.torch
def test_without_the_group_the_helpers_refuse_to_train_alone(in_tmp: Path) -> None:
    script, _ = _migrate(in_tmp, SPAWNED.replace("NPROCS", "2"))
    text = script.read_text()
    start = text.index("    if int(os.environ.get(\"WORLD_SIZE\"")
    end = text.index("    _mp_fn(int(")
    script.write_text(text[:start] + text[end:])  # as if the entry created no group
    result = _smoke(script)
    assert not result.passed
    assert result.error is not None and result.error["type"] == "RuntimeError"
    assert "no torch.distributed process group" in result.error["message"]


def test_a_notebook_launch_is_left_for_review(in_tmp: Path) -> None:
    """A kernel is one process: running the entry in it would train one replica, not N."""
    cell = ["import torch_xla.distributed.xla_multiprocessing as xmp\n", "def f(index):\n",
            "    print(index)\n", "xmp.spawn(f, nprocs=8)\n"]
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                           "outputs": [], "source": cell}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (in_tmp / "train.ipynb").write_text(json.dumps(notebook))
    run = cli("apply", "train.ipynb", "--format", "json")
    spawn = _finding(run.json()["findings"], "NM220")
    assert spawn["kind"] == "review" and "torchrun" in spawn["message"]
    assert "xmp.spawn(f, nprocs=8)" in (in_tmp / "train.ipynb").read_text()


@pytest.mark.slow
@pytest.mark.torch
def test_ranks_under_torchrun_before_any_process_group(in_tmp: Path) -> None:
    """A worker torchrun started knows its rank and the world size from its environment
    before a process group exists, as PJRT's did; the migrated code must not read 0 and 1."""
    (in_tmp / "ranks.py").write_text("import torch_xla.core.xla_model as xm\n\n"
                                     "print(xm.get_ordinal(), xm.xrt_world_size())\n")
    assert cli("apply", "ranks.py").exit_code == 0
    run = subprocess.run([sys.executable, "ranks.py"], capture_output=True, text=True,
                         env={**os.environ, "RANK": "1", "WORLD_SIZE": "2"}, check=True)
    assert run.stdout.split() == ["1", "2"]


def test_a_conditional_xla_group_with_rank_and_world_size_still_gets_the_entry_group() -> None:
    """`init_process_group("xla", world_size=xm.xrt_world_size(), rank=xm.get_ordinal())`
    under a flag is XLA's group, which NM201 guards: the worker entry must still create the
    group, or a run without the flag has none and its first collective raises."""
    from tests.conftest import migrated

    source = (
        "import torch.distributed as dist\n"
        "import torch_xla.core.xla_model as xm\n"
        "import torch_xla.distributed.xla_multiprocessing as xmp\n\n\n"
        "def _mp_fn(index, ddp):\n"
        "    if ddp:\n"
        "        dist.init_process_group('xla', world_size=xm.xrt_world_size(),\n"
        "                                rank=xm.get_ordinal())\n"
        "    xm.rendezvous('ready')\n\n\n"
        "if __name__ == '__main__':\n"
        "    xmp.spawn(_mp_fn, args=(False,), nprocs=2)\n")
    new, _ = migrated(source)
    entry = new[new.index("if __name__"):]
    assert 'init_process_group("neuron")' in entry
    assert "if not dist.is_initialized():" in new[:new.index("if __name__")]
    timeout = source.replace("rank=xm.get_ordinal())", "rank=xm.get_ordinal(), timeout=t)")
    assert 'init_process_group("neuron")' not in migrated(timeout)[0]  # a group of its own
