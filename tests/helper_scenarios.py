"""The work each rank of tests/rules/test_helpers_two_process.py does with the emitted helpers.
Kept apart from the tests so that the spawned processes import torch and nothing else."""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
import types
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

Scenario = Callable[[dict, int, Path], object]
SCENARIOS: dict[str, Scenario] = {}


def scenario(*helpers: str) -> Callable[[Scenario], Scenario]:
    """A piece of work each rank does with the helpers named; its result is JSON."""
    def register(function: Scenario) -> Scenario:
        for name in helpers:
            SCENARIOS.setdefault(name, function)
        SCENARIOS[function.__name__] = function
        return function
    return register


def _linear(rank: int, weight: float = 1.0) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """One weight, gradient `rank` (input `rank`, loss the output): the mean over ranks 0 and
    1 is 0.5, their sum 1."""
    model = torch.nn.Linear(1, 1, bias=False)
    torch.nn.init.constant_(model.weight, weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    model(torch.tensor([[float(rank)]])).sum().backward()
    return model, optimizer


@scenario("_neuron_all_reduce")
def all_reduce(h: dict, rank: int, folder: Path) -> object:
    value = torch.tensor([float(rank + 1)])
    reduced = h["_neuron_all_reduce"](dist.ReduceOp.SUM, value, scale=0.5)
    pair = [torch.tensor([1.0]), torch.tensor([float(rank)])]
    h["_neuron_all_reduce"](dist.ReduceOp.MAX, pair)  # a list is reduced in place
    return [reduced.tolist(), value.tolist(), [t.item() for t in pair]]


@scenario("_neuron_all_gather")
def all_gather(h: dict, rank: int, folder: Path) -> object:
    return h["_neuron_all_gather"](torch.tensor([[float(rank)]]), dim=1).tolist()


@scenario("_neuron_reduce_scatter")
def reduce_scatter(h: dict, rank: int, folder: Path) -> object:
    pairs = torch.tensor([1.0, 2.0]) * (rank + 1)  # summed: [3, 6], one half to each rank
    return [h["_neuron_reduce_scatter"](dist.ReduceOp.SUM, pairs, 0.5, 0, 2).tolist(),
            h["_neuron_reduce_scatter"](dist.ReduceOp.SUM, pairs, 1.0, 0, 2,
                                        group=dist.new_group([0, 1])).tolist()]


@scenario("_neuron_gather_objects")
def gather_objects(h: dict, rank: int, folder: Path) -> object:
    return h["_neuron_gather_objects"](f"rank{rank}")


@scenario("_neuron_mesh_reduce")
def mesh_reduce(h: dict, rank: int, folder: Path) -> object:
    return h["_neuron_mesh_reduce"](torch.tensor([float(rank + 1)]),
                                    lambda values: [v.tolist() for v in values])


@scenario("_neuron_optimizer_step")
def optimizer_step(h: dict, rank: int, folder: Path) -> object:
    model, optimizer = _linear(rank)
    h["_neuron_optimizer_step"](optimizer)
    return model.weight.item()


@scenario("_neuron_reduce_gradients")
def reduce_gradients(h: dict, rank: int, folder: Path) -> object:
    model, optimizer = _linear(rank)
    h["_neuron_reduce_gradients"](optimizer)
    return [model.weight.grad.item(), model.weight.item()]


@scenario("_neuron_average_gradients")
def average_gradients(h: dict, rank: int, folder: Path) -> object:
    model, _ = _linear(rank)
    h["_neuron_average_gradients"](model.parameters())
    return model.weight.grad.item()


@scenario("_neuron_average_in_group")
def average_in_group(h: dict, rank: int, folder: Path) -> object:
    model, optimizer = _linear(rank)
    h["_neuron_average_in_group"](optimizer, dist.new_group([0, 1]), step=True)
    return model.weight.item()


@scenario("_neuron_average_tensors")
def average_tensors(h: dict, rank: int, folder: Path) -> object:
    """Two dtypes, each one flat all_reduce with the default buckets; one per tensor when the
    bucket is smaller than any tensor."""
    def tensors() -> list[torch.Tensor]:
        return [torch.full((3,), 2.0 * rank, dtype=torch.float64), torch.full((2,), 4.0 * rank),
                torch.full((2, 2), 6.0 * rank)]

    calls = []
    real = torch.distributed.all_reduce
    torch.distributed.all_reduce = lambda *a, **k: (calls.append(1), real(*a, **k))[1]
    try:
        grads = tensors()
        h["_neuron_average_tensors"](grads)
        bucketed = len(calls)
        calls.clear()
        h["_neuron_average_tensors"](tensors(), bucket_bytes=1)
    finally:
        torch.distributed.all_reduce = real
    return [sorted({float(v) for g in grads for v in g.flatten()}), bucketed, len(calls)]


@scenario("_neuron_broadcast_master_param")
def broadcast_master_param(h: dict, rank: int, folder: Path) -> object:
    model = torch.nn.BatchNorm1d(1)
    torch.nn.init.constant_(model.weight, float(rank + 1))
    model.running_mean.fill_(float(rank + 10))  # buffers too
    h["_neuron_broadcast_master_param"](model)
    return [model.weight.item(), model.running_mean.item()]


@scenario("_neuron_save")
def save(h: dict, rank: int, folder: Path) -> object:
    os.environ["LOCAL_RANK"] = str(rank)  # one host: local rank 0 writes
    h["_neuron_save"]({"rank": torch.tensor(rank)}, folder / "local.pt")
    h["_neuron_save"]({"rank": torch.tensor(rank)}, folder / "global.pt", global_master=True)
    h["_neuron_save"]({"rank": torch.tensor(rank)}, folder / f"own{rank}.pt", master_only=False)
    # every rank waited for the writes: both files are there and whole on both ranks
    return [torch.load(folder / name)["rank"].item()
            for name in ("local.pt", "global.pt", "own0.pt", "own1.pt")]


@scenario("_neuron_save_checkpoint")
def save_checkpoint(h: dict, rank: int, folder: Path) -> object:
    model = torch.nn.Linear(2, 1)
    torch.nn.init.constant_(model.weight, 3.0)
    h["_neuron_save_checkpoint"](str(folder / "ckpt"), "step1", model, num_kept_ckpts=1)
    h["_neuron_save_checkpoint"](str(folder / "ckpt"), "step2", model, num_kept_ckpts=1)
    return sorted(p.name for p in (folder / "ckpt").iterdir())


@scenario("_NeuronZeroRedundancyOptimizer", "_neuron_process_group")
def zero_redundancy(h: dict, rank: int, folder: Path) -> object:
    model, _ = _linear(rank)
    h["_neuron_process_group"]()  # a group exists: nothing made
    optimizer = h["_NeuronZeroRedundancyOptimizer"](model.parameters(), torch.optim.SGD,
                                                     grad_clipping=False, lr=1.0)
    optimizer.step()
    return [dist.get_world_size(), model.weight.item()]


@scenario("_neuron_fully_shard")
def fully_shard(h: dict, rank: int, folder: Path) -> object:
    module = h["_neuron_fully_shard"](torch.nn.Linear(4, 2, bias=False))
    weight = module.weight
    return [type(weight).__name__, list(weight.to_local().shape), list(weight.shape)]


def _layout(data_parallel: int, tensor_parallel: int) -> None:
    """What `_neuron_init_mesh` registers, on the CPU (it asks for the neuron device)."""
    from torch.distributed.device_mesh import init_device_mesh

    layout = sys.modules.setdefault("_neuron_parallel_layout",
                                    types.ModuleType("_neuron_parallel_layout"))
    layout.mesh = init_device_mesh("cpu", (data_parallel, tensor_parallel),
                                   mesh_dim_names=("dp", "tp"))


_NXD_CONFIG = {"tensor_parallel_size": 1, "optimizer_config": {
    "zero_one_enabled": False, "grad_clipping": True, "max_grad_norm": 100.0}}


@scenario("_NeuronParallelOptimizer", "_neuron_parallel_optimizer")
def parallel_optimizer(h: dict, rank: int, folder: Path) -> object:
    _layout(2, 1)
    model, optimizer = _linear(rank)
    wrapped = h["_NeuronParallelOptimizer"](optimizer, _NXD_CONFIG)
    wrapped.step()
    made, _ = _linear(rank)
    built = h["_neuron_parallel_optimizer"](_NXD_CONFIG, torch.optim.SGD, made.parameters(),
                                            lr=1.0)
    for param, grad in zip(made.parameters(), [torch.tensor([[float(rank)]])]):
        param.grad = grad
    built.step()
    return [model.weight.item(), float(wrapped.grad_norm), made.weight.item()]


@scenario("_neuron_allreduce_sequence_parallel_gradients")
def sequence_parallel(h: dict, rank: int, folder: Path) -> object:
    _layout(1, 2)
    marked, plain = torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))
    marked.sequence_parallel_enabled = True
    marked.grad, plain.grad = torch.tensor([float(rank + 1)]), torch.tensor([float(rank + 1)])
    optimizer = torch.optim.SGD([marked, plain], lr=1.0)
    h["_neuron_allreduce_sequence_parallel_gradients"](optimizer)
    return [marked.grad.item(), plain.grad.item()]


@scenario("_neuron_share_updates")
def share_updates(h: dict, rank: int, folder: Path) -> object:
    first, second = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(1))
    with torch.no_grad():
        first.fill_(float(rank + 1))
        second.fill_(float(rank + 1))
    h["_neuron_share_updates"]({first: 0, second: 1}, dist.group.WORLD)
    return [first.tolist(), second.tolist()]  # each owner's values everywhere


def _namespace(helpers: list[tuple[str, tuple[str, ...]]]) -> dict:
    namespace: dict = {"torch": torch, "os": os}
    for source, imports in helpers:
        for module in imports:  # the migrated file imports them (`torch.distributed.optim`)
            importlib.import_module(module)
        exec(compile(source, "<helper>", "exec"), namespace)  # noqa: S102
    return namespace


def worker(rank: int, folder: str, helpers: list[tuple[str, tuple[str, ...]]]) -> None:
    """One rank: every scenario in turn, its result or its traceback to rank<N>.json."""
    os.environ.update(WORLD_SIZE="2", RANK=str(rank))
    store = dist.FileStore(os.path.join(folder, "store"), 2)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
    h = _namespace(helpers)
    results = {}
    for name, run in {f.__name__: f for f in SCENARIOS.values()}.items():
        work = Path(folder) / name
        if rank == 0:
            work.mkdir()
        dist.barrier()
        try:
            results[name] = run(h, rank, work)
        except Exception:  # noqa: BLE001 - the test of that helper shows it
            results[name] = {"error": traceback.format_exc()}
        dist.barrier()
    Path(folder, f"rank{rank}.json").write_text(json.dumps(results))
    dist.destroy_process_group()


