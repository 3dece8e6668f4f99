"""NxD-era code whose rewrite depends on what else the file holds: a save of a model that
may be sharded, hand-written collectives over gradients of tensor-parallel layers. Checked
through the engine, as `apply` runs it."""

from __future__ import annotations

from typing import Any

import pytest

from neuron_migrate.model import Kind
from tests.conftest import migrated

HEAD = ("import torch\nimport torch_xla.core.xla_model as xm\n"
        "from neuronx_distributed.parallel_layers import layers, parallel_state\n\n")


_migrate = migrated


def test_xm_save_next_to_a_layout_of_one_without_layers_is_migrated() -> None:
    """The layout alone, at a literal tensor-parallel size of 1, shards nothing: xm.save of
    a plain model's state dict keeps its one-writer meaning and the import goes."""
    new, findings = _migrate(HEAD + "parallel_state.initialize_model_parallel("
                             "tensor_model_parallel_size=1)\n"
                             "model = torch.nn.Linear(4, 4)\nxm.save(model.state_dict(), 'm.pt')\n")
    assert "_neuron_save(model.state_dict(), 'm.pt')" in new and "torch_xla" not in new
    assert not [f for f in findings if f.rule_id == "NM230" and f.kind is Kind.REVIEW]


@pytest.mark.parametrize("sharding", [
    "model = layers.ColumnParallelLinear(4, 4)\n",
    "parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)\n",
    "parallel_state.initialize_model_parallel(2)\n",
])
def test_xm_save_of_a_model_that_may_be_sharded_is_reported(sharding: str) -> None:
    new, findings = _migrate(HEAD + sharding + "xm.save(model.state_dict(), 'm.pt')\n")
    assert "xm.save(model.state_dict(), 'm.pt')" in new
    assert any(f.rule_id == "NM230" and f.kind is Kind.REVIEW for f in findings)


@pytest.mark.parametrize(("body", "reported"), [
    ("model = layers.ColumnParallelLinear(4, 4, gather_output=False)\n"
     "for p in model.parameters():\n"
     "    dist.all_reduce(p.grad, group=parallel_state.get_data_parallel_group())\n", True),
    ("dist.all_reduce(model.weight.grad, group=parallel_state.get_data_parallel_group())\n",
     True),
    ("dist.all_reduce(loss, group=parallel_state.get_data_parallel_group())\n", False),
])
def test_a_collective_over_a_model_tensor_with_an_nxd_group_is_reported(body: str,
                                                                         reported: bool) -> None:
    """The group is rewritten either way; where the tensor may be a migrated layer's DTensor
    (on which torch.distributed collectives raise), the rewrite is reported with the fix."""
    new, findings = _migrate(HEAD + "import torch.distributed as dist\n\n" + body)
    assert 'group=_neuron_mesh().get_group("dp")' in new
    reviews = [f for f in findings if f.rule_id == "NM240" and f.kind is Kind.REVIEW]
    assert bool(reviews) is reported
    assert all(f.applied and "to_local()" in f.message for f in reviews)


def _trainer_helpers(**stubs: Any) -> dict[str, Any]:
    """The trainer API's helpers executed as in a migrated file, with `stubs` in place of
    the helpers they call (no process group in this process)."""
    import torch

    from neuron_migrate.rules.emitted_helpers import HELPERS

    namespace: dict[str, Any] = {"torch": torch}
    for name in ("_neuron_mesh", "_neuron_init_mesh", "_neuron_parallel_config",
                 "_neuron_clip_grad_norm", "_NeuronParallelOptimizer",
                 "_neuron_parallel_optimizer"):
        exec(compile(HELPERS[name].source, f"<{name}>", "exec"), namespace)  # noqa: S102
    namespace.update(stubs)
    return namespace


@pytest.mark.torch
@pytest.mark.parametrize(("kwargs", "clipped_at"), [({}, 1.0), ({"max_norm": 3.0}, 3.0)])
def test_trainer_zero1_clips_where_nxd_did(kwargs: dict[str, float], clipped_at: float) -> None:
    """NxD's initialize_optimizer_from_class never passed the config's max_grad_norm to its
    ZeRO-1 optimizer, which clipped at its own max_norm (1.0 unless given as an optimizer
    argument); without ZeRO-1 the config's max_grad_norm is used."""
    import torch

    helpers = _trainer_helpers(_neuron_distributed=lambda: False)
    config = helpers["_neuron_parallel_config"](optimizer_config={
        "zero_one_enabled": True, "max_grad_norm": 0.5})
    params = [torch.nn.Parameter(torch.ones(2))]
    zero1 = helpers["_neuron_parallel_optimizer"](config, torch.optim.SGD, params, lr=0.1,
                                                  **kwargs)
    assert zero1.nxd_config["optimizer_config"]["max_grad_norm"] == clipped_at
    assert zero1.param_groups[0]["lr"] == 0.1
    params[0].grad = torch.full((2,), 10.0)
    zero1.step()
    assert float(params[0].grad.norm()) == pytest.approx(min(clipped_at, 200 ** 0.5), rel=1e-4)
    plain = helpers["_neuron_parallel_config"](optimizer_config={"max_grad_norm": 0.5})
    optimizer = helpers["_neuron_parallel_optimizer"](plain, torch.optim.SGD, params, lr=0.1)
    params[0].grad = torch.full((2,), 10.0)
    optimizer.step()
    assert float(optimizer.grad_norm) == pytest.approx(200 ** 0.5)
    assert float(params[0].grad.norm()) == pytest.approx(0.5, rel=1e-4)


@pytest.mark.torch
@pytest.mark.parametrize("sequence_parallel", [True, False])
def test_the_trainer_optimizer_sums_marked_gradients_when_the_config_says_sequence_parallel(
        sequence_parallel: bool) -> None:
    """NxDOptimizer.step ran allreduce_sequence_parallel_gradients when the config said
    sequence_parallel (a norm of the model's own marked sequence_parallel_enabled)."""
    import torch

    summed: list[Any] = []
    helpers = _trainer_helpers(
        _neuron_allreduce_sequence_parallel_gradients=summed.append,
        _neuron_distributed=lambda: False)
    config = helpers["_neuron_parallel_config"](sequence_parallel=sequence_parallel)
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = helpers["_neuron_parallel_optimizer"](config, torch.optim.SGD, [param], lr=0.1)
    param.grad = torch.ones(2)
    optimizer.step()
    assert (summed == [optimizer]) is sequence_parallel


@pytest.mark.parametrize(("written", "native"), [
    ("padding_idx=0", "torch.nn.Embedding(100, 16)"),
    ("0", "torch.nn.Embedding(100, 16, None)"),
    ("padding_idx=pad", "torch.nn.Embedding(100, 16, padding_idx=pad or None)"),
    ("padding_idx=3", "torch.nn.Embedding(100, 16, padding_idx=3)"),
])
def test_a_padding_index_of_0_is_ignored_as_nxd_ignored_it(written: str, native: str) -> None:
    """NxD's ParallelEmbedding tested `if padding_idx`: row 0 trained like any other, where
    torch.nn.Embedding(padding_idx=0) would zero it and freeze its gradient."""
    new, _ = _migrate(HEAD + f"emb = layers.ParallelEmbedding(100, 16, {written})\n")
    assert native + ", torch.distributed.tensor.parallel.RowwiseParallel(" in new


@pytest.mark.parametrize(("size", "migrated"), [("1", True), ("tp", False)])
def test_xla_zero1_with_nxd_groups_migrates_as_nxd_zero1_does(size: str, migrated: bool) -> None:
    """torch_xla's ZeroRedundancyOptimizer given NxD's data-parallel groups: all processes
    where the file is proven data parallel only, as for NxD's own ZeRO-1 class; reported
    where tensor parallelism may be on."""
    new, findings = _migrate(
        HEAD + "from torch_xla.distributed.zero_redundancy_optimizer import "
        "ZeroRedundancyOptimizer\n\n"
        f"parallel_state.initialize_model_parallel(tensor_model_parallel_size={size})\n"
        "model = torch.nn.Linear(4, 4).to(xm.xla_device())\n"
        "opt = ZeroRedundancyOptimizer(model.parameters(), torch.optim.AdamW, lr=1e-3, "
        "sharding_groups=parallel_state.get_data_parallel_group(as_list=True))\n")
    zero = [f for f in findings if f.rule_id == "NM706"]
    assert ("_NeuronZeroRedundancyOptimizer(model.parameters(), torch.optim.AdamW, lr=1e-3)"
            in new) is migrated
    assert all(f.kind is Kind.REVIEW for f in zero) is not migrated
