"""A module that only uses NeuronX Distributed: nothing to rewrite, every use to review."""
import torch
from neuronx_distributed import parallel_state
from neuronx_distributed.parallel_layers import layers

TABLE = [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]]


def build(width: int) -> torch.nn.Module:
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=2)
    block = layers.ColumnParallelLinear(width, width, gather_output=False)
    return block


class Head(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = layers.RowParallelLinear(8, 8)
        self.rank = parallel_state.get_tensor_model_parallel_rank()
