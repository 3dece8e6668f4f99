"""A module that only uses NeuronX Distributed APIs no rule rewrites: every use to review."""
import torch
from neuronx_distributed.modules.qkv_linear import GQAQKVColumnParallelLinear
from neuronx_distributed.pipeline import NxDPPModel

TABLE = [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]]


def build(width: int) -> torch.nn.Module:
    qkv = GQAQKVColumnParallelLinear(width, [width, width // 4], gather_output=False)
    block = NxDPPModel(qkv, num_microbatches=2)
    return block


class Head(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = GQAQKVColumnParallelLinear(8, [8, 2])
        self.stage = NxDPPModel(self.proj)
