"""The helper functions rewrites write into users' files: run them in one process and check
they do what the XLA calls did (test_helpers_two_process.py runs the collective ones in a real
two-process group)."""

from __future__ import annotations

import importlib
import os
import re
import tempfile
from collections import namedtuple
from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="runs emitted code: needs the `test` extra")
pytestmark = pytest.mark.torch
import torch.distributed as dist

from neuron_migrate.rules.emitted_helpers import HELPERS


def _namespace() -> dict:
    namespace: dict = {"torch": torch, "os": os}
    for helper in HELPERS.values():
        for module in helper.imports:  # the migrated file imports them (`torch.distributed.optim`)
            importlib.import_module(module)
        exec(compile(helper.source, "<helper>", "exec"), namespace)  # noqa: S102
    return namespace


H = _namespace()


def test_every_helper_is_defined_and_declares_what_it_needs() -> None:
    """`requires` is closed: the engine defines exactly the helpers listed, not what those
    need in turn."""
    for name, helper in HELPERS.items():
        assert name in H
        for required in helper.requires:
            assert required in HELPERS
            assert set(HELPERS[required].requires) <= set(helper.requires), (name, required)
        for other in HELPERS:
            if other != name and re.search(rf"\b{other}\b", helper.source):
                assert other in helper.requires, (name, other)


_COLLECTIVES = re.compile(r"torch\.distributed\.(all_reduce|all_gather|all_gather_object|"
                          r"reduce_scatter|broadcast|barrier)\(")


def test_helpers_with_collectives_ask_whether_a_process_group_exists() -> None:
    """A helper that skips its collective without a group must check WORLD_SIZE first, or
    each replica would train alone without a word."""
    for name, helper in HELPERS.items():
        if _COLLECTIVES.search(helper.source):
            assert "_neuron_distributed" in helper.requires, name
            assert "is_initialized()" not in helper.source, name


_NXD_CONFIG = {"tensor_parallel_size": 1, "optimizer_config": {
    "zero_one_enabled": False, "grad_clipping": True, "max_grad_norm": 1.0}}
"""What NxD's neuronx_distributed_config gives the optimizer helpers (one process)."""


def _collective_calls() -> dict[str, Callable[[], object]]:
    """Each collective helper called as a script calls it, then checked against what the XLA
    call gave in a single process: nothing to reduce, so values and gradients come back
    unchanged, and a step moves each weight by its own gradient (clipped where NxD clipped).
    With WORLD_SIZE > 1 and no group, each raises before any check."""
    t = torch.tensor([1.0, 2.0])
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    model(torch.ones(1, 2)).sum().backward()  # gradients: weight [[1, 1]], bias [1]
    before = [p.detach().clone() for p in model.parameters()]
    grads = [p.grad.clone() for p in model.parameters()]
    folder = Path(tempfile.mkdtemp())

    def grads_unchanged() -> None:
        assert [p.grad.tolist() for p in model.parameters()] == [[[1.0, 1.0]], [1.0]]
        weights_moved_by(0.0)

    def weights_moved_by(scale: float) -> None:
        # absolute tolerance: clipping divides by the norm plus 1e-6, and float32 steps of 0.58
        # leave errors near 1e-7, which a relative test fails for a weight that lands near 0
        for param, start, grad in zip(model.parameters(), before, grads):
            assert torch.allclose(param.detach(), start - scale * grad, atol=1e-5), (param, start)

    def same(value: object) -> None:
        assert isinstance(value, torch.Tensor) and value is not t and torch.equal(value, t)
        assert torch.equal(t, torch.tensor([1.0, 2.0]))

    def clipped_step(optimizer_: object) -> None:
        optimizer_.step()  # type: ignore[attr-defined]
        assert float(optimizer_.grad_norm) == pytest.approx(3 ** 0.5)  # type: ignore[attr-defined]
        weights_moved_by(1 / 3 ** 0.5)  # clipped to norm 1.0

    def saved() -> None:
        H["_neuron_save"]({"w": t}, folder / "w.pt", master_only=False)
        assert torch.equal(torch.load(folder / "w.pt")["w"], t)

    def checkpoint() -> None:
        H["_neuron_save_checkpoint"](str(folder), "t", model)
        assert (folder / "t" / "done").exists() and (folder / "t" / "model").is_dir()

    def own_group() -> None:
        _own_group(H["_neuron_process_group"], check=lambda: dist.get_world_size() == 1)

    def sharded() -> None:
        from torch.distributed.fsdp import FSDPModule

        _own_group(H["_neuron_fully_shard"], torch.nn.Linear(2, 1),
                   check=lambda module: isinstance(module, FSDPModule))

    def zero_one() -> None:
        _own_group(lambda: clipped_step(H["_NeuronZeroRedundancyOptimizer"](
            model.parameters(), torch.optim.SGD, lr=1.0)))

    calls: dict[str, Callable[[], object]] = {
        "_neuron_reduce_gradients": lambda: (H["_neuron_reduce_gradients"](optimizer),
                                             grads_unchanged()),
        "_neuron_optimizer_step": lambda: (H["_neuron_optimizer_step"](optimizer),
                                           weights_moved_by(1.0)),
        "_neuron_all_reduce": lambda: same(H["_neuron_all_reduce"](dist.ReduceOp.SUM, t)),
        "_neuron_all_gather": lambda: same(H["_neuron_all_gather"](t)),
        "_neuron_reduce_scatter": lambda: same(H["_neuron_reduce_scatter"](
            dist.ReduceOp.SUM, t, 1.0, 0, 1)),
        "_neuron_gather_objects": lambda: _equal(H["_neuron_gather_objects"](b"x"), [b"x"]),
        "_neuron_mesh_reduce": lambda: _equal(H["_neuron_mesh_reduce"](
            t, lambda values: [v.tolist() for v in values]), [[1.0, 2.0]]),
        "_neuron_save": saved,
        "_neuron_save_checkpoint": checkpoint,
        "_neuron_broadcast_master_param": lambda: (H["_neuron_broadcast_master_param"](model),
                                                   grads_unchanged()),
        "_neuron_average_in_group": lambda: (H["_neuron_average_in_group"](
            optimizer, None, step=True), weights_moved_by(1.0)),
        "_NeuronParallelOptimizer": lambda: clipped_step(
            H["_NeuronParallelOptimizer"](optimizer, _NXD_CONFIG)),
        "_neuron_parallel_optimizer": lambda: clipped_step(H["_neuron_parallel_optimizer"](
            _NXD_CONFIG, torch.optim.SGD, model.parameters(), lr=1.0)),
        "_neuron_average_gradients": lambda: (H["_neuron_average_gradients"](
            model.parameters()), grads_unchanged()),
        "_neuron_allreduce_sequence_parallel_gradients": lambda: (H[
            "_neuron_allreduce_sequence_parallel_gradients"](optimizer), grads_unchanged()),
        "_neuron_average_tensors": lambda: (H["_neuron_average_tensors"](
            [p.grad for p in model.parameters()]), grads_unchanged()),
        "_neuron_process_group": own_group,
        "_neuron_fully_shard": sharded,
        "_NeuronZeroRedundancyOptimizer": zero_one,
        "_neuron_share_updates": lambda: (H["_neuron_share_updates"](
            {p: 0 for p in model.parameters()}, None), grads_unchanged()),
    }
    return {name: call for name, call in calls.items() if name in HELPERS}


def _equal(value: object, expected: object) -> None:
    assert value == expected, (value, expected)


def _own_group(helper: Callable[..., object], *args: object,
               check: Callable[..., bool] | None = None) -> None:
    """Run a helper that makes a one-process group where there is none, check what it did
    while the group exists, then end the group."""
    try:
        value = helper(*args)
        if check is not None:
            assert check(value) if args else check(), helper
        assert dist.is_initialized() and dist.get_world_size() == 1
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_every_collective_helper_is_exercised() -> None:
    with_group = {name for name, helper in HELPERS.items()
                  if "_neuron_distributed" in helper.requires}
    assert with_group == set(_collective_calls())


@pytest.mark.parametrize("name", sorted(_collective_calls()))
def test_helpers_raise_when_several_processes_have_no_group(name: str, monkeypatch) -> None:
    assert not dist.is_initialized()
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match="WORLD_SIZE is 2 but no torch.distributed process "
                                           "group exists.*init_process_group"):
        _collective_calls()[name]()


@pytest.mark.parametrize("name", sorted(_collective_calls()))
def test_helpers_run_alone_in_a_single_process_job(name: str, monkeypatch) -> None:
    """torchrun --nproc-per-node=1: no group, and each helper gives XLA's one-process result
    (the checks are in `_collective_calls`)."""
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert not dist.is_initialized()
    _collective_calls()[name]()
    assert not dist.is_initialized()


def test_to_device_walks_nested_batches() -> None:
    Pair = namedtuple("Pair", "x y")
    batch = {"a": [torch.ones(1), (torch.zeros(2), "label")], "p": Pair(torch.ones(1), 3)}
    moved = H["_neuron_to_device"](batch, torch.device("meta"))
    assert moved["a"][0].device.type == "meta" and moved["a"][1][0].device.type == "meta"
    assert moved["a"][1][1] == "label" and isinstance(moved["p"], Pair) and moved["p"].y == 3


def test_device_loader_is_reiterable_and_sized() -> None:
    data = [torch.full((2,), float(i)) for i in range(3)]
    loader = H["_NeuronDeviceLoader"](data, torch.device("meta"))
    assert len(loader) == 3
    for _ in range(2):  # one pass per epoch, like MpDeviceLoader
        assert [b.device.type for b in loader] == ["meta"] * 3


def test_single_process_behaviour_matches_xla() -> None:
    assert not dist.is_initialized()
    t = torch.tensor([2.0, 4.0])
    reduced = H["_neuron_all_reduce"](dist.ReduceOp.SUM, t, scale=0.5)
    assert torch.equal(reduced, torch.tensor([1.0, 2.0])) and torch.equal(t, torch.tensor([2.0, 4.0]))
    assert torch.equal(H["_neuron_all_gather"](t, dim=0), t)
    assert torch.equal(H["_neuron_reduce_scatter"](dist.ReduceOp.SUM, t, 0.5, 0, 1), t * 0.5)
    assert H["_neuron_gather_objects"](b"x") == [b"x"]
    assert H["_neuron_mesh_reduce"](torch.tensor(3.0), max) == torch.tensor(3.0)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    model(torch.ones(1, 2)).sum().backward()
    before = model.weight.detach().clone()
    H["_neuron_optimizer_step"](optimizer)
    assert torch.equal(model.weight.detach(), before - 1.0)
    H["_neuron_broadcast_master_param"](model)


def test_save_writes_cpu_tensors_from_the_local_master(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LOCAL_RANK", "1")
    H["_neuron_save"]({"w": torch.ones(1)}, tmp_path / "other.pt")
    assert not (tmp_path / "other.pt").exists()
    H["_neuron_save"]({"w": torch.ones(1)}, tmp_path / "all.pt", master_only=False)
    assert (tmp_path / "all.pt").exists()
    monkeypatch.setenv("LOCAL_RANK", "0")
    H["_neuron_save"]({"w": torch.ones(1)}, tmp_path / "local.pt")
    assert torch.load(tmp_path / "local.pt")["w"].device.type == "cpu"
