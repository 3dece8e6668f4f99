"""Statements that name only review-only APIs, in the shapes that make the `ast` and
LibCST read a statement differently."""
import os
from os import environ as env

import torch
import torch_xla.core.xla_model as xm
import torch_neuronx
from neuronx_distributed import parallel_state
from neuronx_distributed.modules import qkv_linear as layers  # APIs no rule rewrites
from neuronx_distributed.modules.qkv_linear import GQAQKVColumnParallelLinear as Row

GROUPS = [[0, 1, 2, 3], [4, 5, 6, 7]] * 4
groups = parallel_state.get_tensor_model_parallel_group(GROUPS, [[0, 1], [2, 3]])
rank = parallel_state.get_data_parallel_rank()
layer = Row(4, 4, bias=False)  # neuron-migrate: ignore[NM710]
other = layers.ColumnParallelLinear(4, 4)  # a trailing comment
model_output = torch_neuronx.trace(layer, torch.ones(1), compiler_args="--optlevel 2")
named = torch_neuronx.trace(layer, torch.ones(1), compiler_workdir="neuron_cache")
device_string = parallel_state.initialize_model_parallel(1), "xla"
device_prefix = f"xla:{parallel_state.get_data_parallel_rank()}"
joined = "xl" "a", parallel_state.get_data_parallel_rank()
escaped = "x\x6ca", parallel_state.get_data_parallel_rank()
env["XLA_FLAGS"] = parallel_state.get_data_parallel_rank()
os.environ["NEURON_RT_VISIBLE_CORES"] = str(parallel_state.get_data_parallel_rank())
key_name = "RANK"
os.environ[key_name] = str(parallel_state.get_data_parallel_rank())
env[key_name] = str(parallel_state.get_data_parallel_rank())
table = {}
table[parallel_state.get_data_parallel_rank()] = layers.ParallelEmbedding(4, 4)
os.environ.setdefault("PJRT_DEVICE", str(parallel_state.get_data_parallel_rank()))
compiled = torch.compile(layers.ColumnParallelLinear(4, 4))
moved = layers.ColumnParallelLinear(4, 4).to(xm.xla_device())
placed = layers.ColumnParallelLinear(4, 4).to("cpu")
squares = [parallel_state.get_data_parallel_rank() ** 2 for _ in range(2)]
scaled = lambda x: x * parallel_state.get_data_parallel_rank()
shadowed = [parallel_state for parallel_state in parallel_state.groups()], layers.Size
defaulted = lambda layers=layers.Size: layers(parallel_state.get_data_parallel_rank())
pairs = {rank: layers.ColumnParallelLinear(rank, 4) for (rank, *_) in groups}
if (n := parallel_state.get_data_parallel_rank()) > 0:
    pass
keyword_named = dict(parallel_state=parallel_state.get_data_parallel_rank())
attribute_named = torch.nn.Module().parallel_state, layers.ColumnParallelLinear(4, 4)
chained = torch.nn.Module().layers.parallel_state, Row
print(f"rank {parallel_state.get_data_parallel_rank()} of {parallel_state}")
assert parallel_state.model_parallel_is_initialized(), "neuron groups missing"
del groups


def step(batch, size=parallel_state.get_data_parallel_size()):
    loss = layers.ColumnParallelLinear(4, 4)(batch).sum()
    xm.mark_step()
    return loss, parallel_state.get_data_parallel_rank()


class Block(layers.ColumnParallelLinear):
    width: int = parallel_state.get_data_parallel_size()

    def forward(self, x):
        if parallel_state.get_data_parallel_rank() == 0:
            return x
        raise ValueError(parallel_state.get_data_parallel_rank())


if __name__ == "__main__":
    step(torch.ones(2))


@parallel_state.cached  # a decorator
def decorated(size: layers.Size = parallel_state.get_data_parallel_size()) -> layers.Out:
    while parallel_state.get_data_parallel_rank() < size:
        for index, item in enumerate(layers.ranks(parallel_state.get_data_parallel_size())):
            with layers.scope(index, item):
                size -= 1
    return size


def parallel_state_user(parallel_state: int, *layers: int) -> int:
    return parallel_state


class Wide(layers.Base, metaclass=layers.Meta):
    pass


class Meta(torch.nn.Module, parallel_state=parallel_state.get_data_parallel_rank()):
    pass
