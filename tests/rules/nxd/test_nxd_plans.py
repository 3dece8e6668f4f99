"""Property: any valid stack of NxD tensor-parallel layers migrates to parallel styles whose
forward pass, loss and first optimizer step at tensor parallel 2 equal those at 1.

Hypothesis draws stacks of ColumnParallelLinear / RowParallelLinear / ParallelEmbedding with
the arguments that decide the plan (gather_output, input_is_parallel, sequence parallelism,
embedding sharding, fused strided outputs), sequence-parallel LayerNorms and NxD's region mappings, chained so that
each step receives the layout NxD's contract requires. (NxD's `copy_to_...` and
`gather_from_sequence_parallel_region(to_model_parallel=True)` sum gradients that the next
layer computes in parts; used before replicated computation they over-count in NxD itself,
so the stacks use them only where NxD's own layers do, which the fixtures cover.) The first optimizer step checks the
backward collectives too: a gradient reduced twice, or not at all, moves the next forward.
The stacks are written as an NxD-era script, migrated with `apply`, and run under `smoke` at
one and two processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from tests.conftest import cli

pytestmark = [pytest.mark.torch, pytest.mark.slow]

SEQ, BATCH, VOCAB = 4, 2, 16

# state before → (a layer built in __init__, or a mapping applied in forward, the state after);
# a layer's {i} and {o} are its widths in and out; "{same}" layers keep the width
_MOVES = {
    "replicated": [
        ("ColumnParallelLinear({i}, {o}, gather_output=False)", "last"),
        ("ColumnParallelLinear({i}, 3 * {o}, stride=3, gather_output=False)", "last"),
        ("ColumnParallelLinear({i}, {o})", "replicated"),
        ("ColumnParallelLinear({i}, {o}, bias=False, gather_output=True)", "replicated"),
        ("RowParallelLinear({i}, {o})", "replicated"),
        ("RowParallelLinear({i}, {o}, input_is_parallel=False, bias=False)", "replicated"),
        ("mappings.scatter_to_tensor_model_parallel_region(x)", "last"),
        ("mappings.scatter_to_sequence_parallel_region(x)", "sequence"),
    ],
    "last": [
        ("RowParallelLinear({i}, {o}, input_is_parallel=True)", "replicated"),
        ("RowParallelLinear({i}, {o}, input_is_parallel=True, sequence_parallel_enabled=True)",
         "sequence"),
        ("mappings.gather_from_tensor_model_parallel_region(x)", "replicated"),
        ("mappings.reduce_from_tensor_model_parallel_region(x.sum(-1, keepdim=True)) + x[..., :1]"
         " * 0", "partial-sum"),
        ("mappings.reduce_scatter_to_sequence_parallel_region(x.sum(-1, keepdim=True))",
         "sequence-sum"),
    ],
    "sequence": [
        ("ColumnParallelLinear({i}, {o}, gather_output=False, sequence_parallel_enabled=True)",
         "last"),
        ("LayerNorm({same}, sequence_parallel_enabled=True)", "sequence"),
        ("mappings.gather_from_sequence_parallel_region(x, to_model_parallel=False)",
         "replicated"),
    ],
}
_EMBEDDINGS = ["ParallelEmbedding({v}, {o})",
               "ParallelEmbedding({v}, {o}, shard_across_embedding=True)"]


@st.composite
def stacks(draw: st.DrawFn) -> list[str]:
    """The steps of one stack (layers to build, or mappings applied in forward), ending with
    a replicated output."""
    width = draw(st.sampled_from([4, 8]))
    steps = [draw(st.sampled_from(_EMBEDDINGS)).format(v=VOCAB, o=width)]
    state = "replicated"
    while len(steps) < draw(st.integers(2, 6)) or state != "replicated":
        moves = [m for m in _MOVES[state] if width % 2 == 0 or "RowParallel" not in m[0]]
        text, state = draw(st.sampled_from(moves))  # NxD splits a row layer's input evenly
        if state.endswith("-sum"):  # a local sum reduced over the ranks: a width of 1
            state, out = state.removesuffix("-sum").replace("partial", "replicated"), 1
        elif "{o}" in text:
            out = draw(st.sampled_from([4, 8, 12]))
        else:
            out = width
        steps.append(text.format(i=width, o=out, same=width))
        width = out
    return steps


_FOLD = ".unflatten(-1, (3, -1)).sum(-2)"
"""After a fused (strided) layer: its three parts summed, which each rank can do on its own
slices; NxD code reshapes such outputs the same way (`view(..., 3, heads, dim)`)."""


def _script(all_stacks: list[list[str]]) -> str:
    classes = []
    for index, steps in enumerate(all_stacks):
        built = [f"        self.l{n} = layers.{text}" if not text.startswith("LayerNorm") else
                 f"        self.l{n} = layer_norm.{text}"
                 for n, text in enumerate(steps) if not text.startswith("mappings.")]
        applied = [f"        x = {text}" if text.startswith("mappings.") else
                   f"        x = torch.tanh(self.l{n}(x){_FOLD if 'stride=3' in text else ''})"
                   for n, text in enumerate(steps)]
        classes.append(f'''
class Stack{index}(torch.nn.Module):
    def __init__(self):
        super().__init__()
{chr(10).join(built)}

    def forward(self, x):
{chr(10).join(applied)}
        return x
''')
    names = ", ".join(f"Stack{i}" for i in range(len(all_stacks)))
    return f'''import json
import sys

import torch
import torch_xla.core.xla_model as xm
from neuronx_distributed.parallel_layers import layer_norm, layers, mappings, parallel_state
from neuronx_distributed.parallel_layers.random import model_parallel_xla_manual_seed
{"".join(classes)}

def main():
    torch.distributed.init_process_group("xla")
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=int(sys.argv[1]))
    model_parallel_xla_manual_seed(0)
    device = xm.xla_device()
    ids = torch.arange({SEQ * BATCH}).remainder({VOCAB}).view({SEQ}, {BATCH}).to(device)
    results = []
    for cls in ({names},):
        model = cls().to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        before = model(ids)
        loss = before.square().mean()
        loss.backward()
        optimizer.step()
        after = model(ids)
        results.append([float(before.double().sum()), float(before.abs().double().sum()),
                        float(loss), float(after.double().sum())])
    if torch.distributed.get_rank() == 0:
        with open(sys.argv[2], "w") as out:
            json.dump(results, out)


if __name__ == "__main__":
    main()
'''


def _run(script: Path, nproc: int, out: Path) -> list[list[float]]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-m", "neuron_migrate", "smoke", "--nproc", str(nproc),
                          str(script), "--", str(nproc), str(out)],
                         capture_output=True, text=True, env=env, timeout=600, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(out.read_text())


_EVERY_KIND = [  # drawn stacks vary; these make sure each kind of step runs in every run
    ["ParallelEmbedding(16, 8)", "ColumnParallelLinear(8, 3 * 4, stride=3, gather_output=False)",
     "RowParallelLinear(4, 8, input_is_parallel=True, sequence_parallel_enabled=True)",
     "LayerNorm(8, sequence_parallel_enabled=True)",
     "ColumnParallelLinear(8, 8, gather_output=False, sequence_parallel_enabled=True)",
     "mappings.gather_from_tensor_model_parallel_region(x)"],
    ["ParallelEmbedding(16, 4, shard_across_embedding=True)",
     "mappings.scatter_to_sequence_parallel_region(x)",
     "mappings.gather_from_sequence_parallel_region(x, to_model_parallel=False)",
     "mappings.scatter_to_tensor_model_parallel_region(x)",
     "mappings.reduce_scatter_to_sequence_parallel_region(x.sum(-1, keepdim=True))",
     "ColumnParallelLinear(1, 4, gather_output=False, sequence_parallel_enabled=True)",
     "RowParallelLinear(4, 4, input_is_parallel=True)"],
    ["ParallelEmbedding(16, 8)", "ColumnParallelLinear(8, 4, bias=False, gather_output=True)",
     "RowParallelLinear(4, 8, input_is_parallel=False, bias=False)",
     "ColumnParallelLinear(8, 4, gather_output=False)",
     "mappings.reduce_from_tensor_model_parallel_region(x.sum(-1, keepdim=True)) + x[..., :1]"
     " * 0"],
]


@example(all_stacks=_EVERY_KIND)
@settings(max_examples=3, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(stacks(), min_size=3, max_size=3))
def test_tensor_parallel_2_computes_what_1_computes(tmp_path: Path,
                                                    all_stacks: list[list[str]]) -> None:
    script = tmp_path / "stacks.py"
    script.write_text(_script(all_stacks))
    run = cli("apply", str(script), "--format", "json")
    assert run.exit_code == 0, run.stdout
    migrated = script.read_text()
    assert "neuronx_distributed" not in migrated and "torch_xla" not in migrated, migrated
    one = _run(script, 1, tmp_path / "one.json")
    two = _run(script, 2, tmp_path / "two.json")
    for stack, ours, theirs in zip(all_stacks, one, two):
        assert theirs == pytest.approx(ours, rel=1e-4, abs=1e-5), stack
