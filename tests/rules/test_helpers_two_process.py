"""The collective helpers rewrites write into users' files, run once in a real two-process gloo
group (a few seconds for the whole module) and checked number by number against what the XLA
calls gave: averaged over the replicas, never summed; rank 0's parameters everywhere after a
broadcast; one writer per host."""

from __future__ import annotations

import json
import re

import pytest

torch = pytest.importorskip("torch", reason="runs emitted code: needs the `test` extra")
pytestmark = pytest.mark.torch

import torch.multiprocessing as mp  # noqa: E402

from neuron_migrate.rules.emitted_helpers import HELPERS  # noqa: E402
from tests.helper_scenarios import SCENARIOS, worker  # noqa: E402


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    folder = tmp_path_factory.mktemp("two_ranks")
    helpers = [(helper.source, helper.imports) for helper in HELPERS.values()]
    mp.spawn(worker, args=(str(folder), helpers), nprocs=2, join=True)
    return [json.loads((folder / f"rank{rank}.json").read_text()) for rank in (0, 1)]


def _both(ranks: list[dict], name: str) -> list[object]:
    values = [results[name] for results in ranks]
    for value in values:
        assert not (isinstance(value, dict) and "error" in value), value["error"]
    return values


_COLLECTIVE = re.compile(r"torch\.distributed\.(all_reduce|all_gather|all_gather_object|"
                         r"reduce_scatter|broadcast|barrier)\(")


def test_every_helper_that_calls_a_collective_runs_in_the_group() -> None:
    """A helper whose source (or that of a helper it requires) calls a collective has a
    scenario here: the one-process tests cannot tell averaging from summing."""
    for name, helper in HELPERS.items():
        texts = [helper.source, *(HELPERS[r].source for r in helper.requires)]
        if any(_COLLECTIVE.search(text) for text in texts) and "_neuron_distributed" in \
                helper.requires:
            assert name in SCENARIOS, name


def test_all_reduce_scales_into_a_new_tensor_and_reduces_a_list_in_place(ranks) -> None:
    assert _both(ranks, "all_reduce") == [[[1.5], [1.0], [1.0, 1.0]], [[1.5], [2.0], [1.0, 1.0]]]


def test_all_gather_concatenates_in_rank_order_along_dim(ranks) -> None:
    assert _both(ranks, "all_gather") == [[[0.0, 1.0]]] * 2


def test_reduce_scatter_keeps_each_ranks_scaled_shard(ranks) -> None:
    assert _both(ranks, "reduce_scatter") == [[[1.5], [3.0]], [[3.0], [6.0]]]


def test_gather_objects_and_mesh_reduce_see_every_rank_in_order(ranks) -> None:
    assert _both(ranks, "gather_objects") == [["rank0", "rank1"]] * 2
    assert _both(ranks, "mesh_reduce") == [[[1.0], [2.0]]] * 2


def test_optimizer_step_averages_then_steps(ranks) -> None:
    assert _both(ranks, "optimizer_step") == [pytest.approx(0.5)] * 2  # summed: 0.0


def test_reduce_gradients_averages_without_stepping(ranks) -> None:
    assert _both(ranks, "reduce_gradients") == [[0.5, 1.0]] * 2


def test_average_gradients_and_average_in_group_average(ranks) -> None:
    assert _both(ranks, "average_gradients") == [0.5] * 2
    assert _both(ranks, "average_in_group") == [0.5] * 2


def test_average_tensors_averages_in_one_all_reduce_per_dtype_bucket(ranks) -> None:
    # means of 0 and 2, 4, 6; two dtypes: two all_reduces; buckets of 1 byte: one per tensor
    assert _both(ranks, "average_tensors") == [[[1.0, 2.0, 3.0], 2, 3]] * 2


def test_broadcast_master_param_gives_every_rank_rank_0s_parameters_and_buffers(ranks) -> None:
    assert _both(ranks, "broadcast_master_param") == [[1.0, 10.0]] * 2


def test_save_writes_from_the_local_or_global_master_and_waits_for_it(ranks) -> None:
    assert _both(ranks, "save") == [[0, 0, 0, 1]] * 2


def test_save_checkpoint_writes_once_and_keeps_the_newest_tags(ranks) -> None:
    assert _both(ranks, "save_checkpoint") == [["step2"]] * 2


def test_zero_redundancy_optimizer_averages_before_its_sharded_step(ranks) -> None:
    assert _both(ranks, "zero_redundancy") == [[2, 0.5]] * 2


def test_fully_shard_shards_the_parameters_over_both_ranks(ranks) -> None:
    assert _both(ranks, "fully_shard") == [["DTensor", [1, 4], [2, 4]]] * 2


def test_parallel_optimizer_averages_over_data_parallel_ranks_and_clips(ranks) -> None:
    # weight 1 - mean(0, 1); the norm is that of the averaged gradient
    assert _both(ranks, "parallel_optimizer") == [[0.5, pytest.approx(0.5), 0.5]] * 2


def test_sequence_parallel_gradients_are_summed_only_where_marked(ranks) -> None:
    assert _both(ranks, "sequence_parallel") == [[3.0, 1.0], [3.0, 2.0]]


def test_share_updates_gives_every_rank_each_owners_values(ranks) -> None:
    if "_neuron_share_updates" not in HELPERS:
        pytest.skip("no ZeRO-1 sharing helper in this catalogue")
    assert _both(ranks, "share_updates") == [[[1.0, 1.0], [2.0]]] * 2
