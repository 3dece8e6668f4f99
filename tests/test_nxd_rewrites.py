"""NxD-era code whose rewrite depends on what else the file holds: a save of a model that
may be sharded, hand-written collectives over gradients of tensor-parallel layers. Checked
through the engine, as `apply` runs it."""

from __future__ import annotations

from typing import Any

import pytest

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import Kind
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules

REGISTRY = Registry(all_rules())
HEAD = ("import torch\nimport torch_xla.core.xla_model as xm\n"
        "from neuronx_distributed.parallel_layers import layers, parallel_state\n\n")


def _migrate(source: str) -> tuple[str, list[Any]]:
    result = migrate_source("train.py", source.encode(), REGISTRY)
    assert result.error is None
    return (result.new_source or source.encode()).decode(), list(result.findings)


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
