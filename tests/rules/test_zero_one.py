"""The ZeRO-1 optimizer NxD's code migrates to, run in two processes over gloo.

It must update the parameters exactly as one optimizer over the averaged gradients would,
keep each parameter's state on one data-parallel rank only (that is what ZeRO-1 is for), and
give a state dict of this rank's share that loads back into the same shard.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
mp = pytest.importorskip("torch.multiprocessing")

pytestmark = pytest.mark.torch

_NAMES = ("_neuron_distributed", "_neuron_average_tensors", "_neuron_average_gradients",
          "_neuron_clip_grad_norm", "_neuron_allreduce_sequence_parallel_gradients",
          "_neuron_zero_one_owners", "_neuron_share_updates", "_NeuronParallelOptimizer")


def _helpers(mesh: Any) -> dict[str, Any]:
    """The helpers as a migrated file defines them, reading `mesh` as the layout's mesh."""
    from neuron_migrate.rules.emitted_helpers import HELPERS

    namespace: dict[str, Any] = {"torch": torch, "os": os,
                                 "_neuron_mesh": lambda required=True: mesh}
    for name in _NAMES:
        exec(compile(HELPERS[name].source, f"<{name}>", "exec"), namespace)  # noqa: S102
    return namespace


def _model() -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Linear(6, 3), torch.nn.Linear(3, 1))


def _losses(model: Any, optimizer: Any, rank: int, world: int, steps: int) -> list[float]:
    """Train on a fixed global batch split over `world` replicas; the mean loss per step."""
    losses = []
    for step in range(steps):
        data = torch.Generator().manual_seed(step)
        x, y = torch.randn(8, 4, generator=data), torch.randn(8, 1, generator=data)
        part = slice(rank * 8 // world, (rank + 1) * 8 // world)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[part]), y[part])
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    return losses


def _config() -> dict[str, Any]:
    return {"optimizer_config": {"zero_one_enabled": True, "grad_clipping": True,
                                 "max_grad_norm": 0.5}}


def _worker(rank: int, port: int, results: Any) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    mesh = init_device_mesh("cpu", (2, 1), mesh_dim_names=("dp", "tp"))
    h = _helpers(mesh)
    model = _model()
    optimizer = h["_NeuronParallelOptimizer"](torch.optim.AdamW(model.parameters(), lr=0.1),
                                              _config())
    losses = _losses(model, optimizer, rank, 2, steps=3)
    saved = optimizer.state_dict()
    fresh = _model()
    again = h["_NeuronParallelOptimizer"](torch.optim.AdamW(fresh.parameters(), lr=0.1),
                                          _config())
    again.load_state_dict(saved)
    results[rank] = {
        "losses": losses,
        "params": [p.detach().clone() for p in model.parameters()],
        "owned": sorted(saved["state"]),
        "groups": [len(g["params"]) for g in saved["param_groups"]],
        "reloaded": sorted(i for i, p in enumerate(fresh.parameters()) if p in again.state),
        "grad_norm": float(optimizer.grad_norm),
    }
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_zero_one_shards_the_state_and_trains_as_one_optimizer() -> None:
    with mp.Manager() as manager:
        shared = manager.dict()
        mp.spawn(_worker, args=(_free_port(), shared), nprocs=2, join=True)
        results = dict(shared)
    # the reference: one process, one optimizer, the whole batch (the mean of the two halves'
    # gradients is the whole batch's gradient), clipped at the same norm
    model = _model()
    plain = torch.optim.AdamW(model.parameters(), lr=0.1)
    for step in range(3):
        data = torch.Generator().manual_seed(step)
        x, y = torch.randn(8, 4, generator=data), torch.randn(8, 1, generator=data)
        plain.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        plain.step()
    for rank in (0, 1):
        for ours, theirs in zip(results[rank]["params"], model.parameters()):
            assert torch.allclose(ours, theirs.detach(), rtol=1e-5, atol=1e-6)
    owned = [set(results[rank]["owned"]) for rank in (0, 1)]
    assert owned[0] and owned[1] and not owned[0] & owned[1]  # each state kept once
    assert owned[0] | owned[1] == set(range(6))
    assert results[0]["groups"] == results[1]["groups"] == [6]  # the groups stay whole
    assert [set(results[rank]["reloaded"]) for rank in (0, 1)] == owned
    assert results[0]["grad_norm"] == pytest.approx(results[1]["grad_norm"])


def test_owners_balance_by_size_and_agree_everywhere() -> None:
    h = _helpers(None)
    params = [torch.nn.Parameter(torch.zeros(n)) for n in (10, 1, 7, 4, 3)]
    frozen = torch.nn.Parameter(torch.zeros(50), requires_grad=False)
    owners = h["_neuron_zero_one_owners"]([*params, frozen], 2)
    assert frozen not in owners  # no state to keep
    loads = [sum(p.numel() for p, r in owners.items() if r == rank) for rank in (0, 1)]
    assert sorted(loads) == [12, 13]
    again = h["_neuron_zero_one_owners"]([*params, frozen], 2)
    assert [owners[p] for p in params] == [again[p] for p in params]


def test_one_process_steps_every_parameter() -> None:
    """Without a process group the optimizer is the plain one with NxD's clipping."""
    h = _helpers(None)
    model = _model()
    optimizer = h["_NeuronParallelOptimizer"](torch.optim.SGD(model.parameters(), lr=1.0),
                                              _config())
    assert optimizer.zero_one_owners is None
    before = [p.detach().clone() for p in model.parameters()]
    _losses(model, optimizer, 0, 1, steps=1)
    assert all(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters()))
