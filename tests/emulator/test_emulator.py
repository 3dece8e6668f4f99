"""The emulated neuron device, exercised in a child process.

Installing the emulator renames PrivateUse1 and patches torch.compile/save/load for the whole
process, so it never happens inside pytest: one child runs every probe below (one torch
import, not one per test) and reports each probe's value or error as JSON.

SMOKE_PYTHON=/path/to/python runs the child on another interpreter (another torch minor).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.torch  # runs scripts on the emulated device

PROBES = {
    "device_random_keeps_its_own_stream": """
        torch.manual_seed(0)
        first = torch.randn(3, device="neuron").cpu()
        torch.manual_seed(0)
        torch.randn(5)  # a CPU draw between: the device's stream does not move
        second = torch.randn(3, device="neuron").cpu()
        state = torch.neuron.get_rng_state()
        replayed = [torch.rand(2, device="neuron").cpu() for _ in range(2)]
        torch.neuron.set_rng_state(state)  # as activation checkpointing replays a dropout
        again = torch.rand(2, device="neuron").cpu()
        result = [torch.equal(first, second), state.numel(), torch.equal(replayed[0], again),
                  torch.equal(replayed[0], replayed[1])]
    """,
    "factories": """
        x = torch.randn(2, 3, device="neuron")
        t = torch.tensor([1.0, 2.0], device="neuron")
        back = torch.arange(4.0).to("neuron").cpu()
        result = [type(x).__name__, str(x.device), t.tolist(), type(back).__name__, back.tolist()]
    """,
    "views_alias_their_base": """
        x = torch.zeros(4, device="neuron")
        x.view(2, 2).add_(1)
        result = x.tolist()
    """,
    "cpu_operand_is_rejected": """
        model = torch.nn.Linear(4, 2).to("neuron")
        model(torch.randn(3, 4))
    """,
    "training_loss_falls_and_compile_counts_graphs": """
        torch.manual_seed(0)
        def train(compiled):
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                        torch.nn.Linear(16, 1)).to("neuron")
            step = torch.compile(model, backend="neuron", dynamic=False) if compiled else model
            opt = torch.optim.SGD(model.parameters(), lr=0.05)
            x = torch.randn(32, 8).to("neuron")
            y = x.sum(dim=1, keepdim=True)
            losses = []
            for _ in range(6):
                loss = torch.nn.functional.mse_loss(step(x), y)
                opt.zero_grad(); loss.backward(); opt.step()
                losses.append(loss.item())
            return losses, str(next(model.parameters()).device)
        eager, device = train(False)
        compiled, _ = train(True)
        result = [eager[0], eager[-1], device, compiled == eager,
                  torch.neuron.get_dynamo_metrics()["graphs_compiled"]]
    """,
    "dynamic_true_is_rejected": """
        torch.compile(torch.nn.Linear(2, 2), backend="neuron", dynamic=True)
    """,
    "autocast_lowers_matmuls": """
        model = torch.nn.Linear(4, 4).to("neuron")
        with torch.autocast("neuron", dtype=torch.bfloat16):
            out = model(torch.randn(2, 4, device="neuron"))
            kept = torch.exp(out)
        result = [str(out.dtype), str(kept.dtype)]
    """,
    "device_module": """
        n = torch.neuron
        n.set_device(1)
        inside = n.current_device()
        with n.device(0):
            nested = n.current_device()
        n.synchronize(); torch.accelerator.synchronize()
        after = n.current_device()
        n.set_device(0)
        torch.manual_seed(3); a = torch.randn(3, device="neuron").tolist()
        torch.manual_seed(3); b = torch.randn(3, device="neuron").tolist()
        result = [n.device_count(), inside, nested, after, a == b,
                  torch.accelerator.current_accelerator().type, n.memory_allocated()]
    """,
    "invalid_ordinal": """
        torch.zeros(1, device="neuron:7")
    """,
    "checkpoints_are_tagged_neuron": """
        import io, zipfile
        buf = io.BytesIO()
        torch.save({"w": torch.ones(3, device="neuron")}, buf)
        pickled = b"".join(zipfile.ZipFile(io.BytesIO(buf.getvalue())).read(name)
                           for name in zipfile.ZipFile(io.BytesIO(buf.getvalue())).namelist()
                           if name.endswith("data.pkl"))
        buf.seek(0); on_device = torch.load(buf)["w"]
        buf.seek(0); on_cpu = torch.load.__wrapped__(buf, map_location="cpu")["w"]
        result = [b"neuron:0" in pickled, str(on_device.device), on_device.tolist(),
                  type(on_cpu).__name__, str(on_cpu.device)]
    """,
    "op_inventory": """
        from neuron_migrate.emulator.counters import COUNTERS
        from neuron_migrate.emulator.tensor import payload
        COUNTERS.executed.clear()
        a = torch.ones(2, 2, device="neuron")
        (a @ a).sum()
        before = COUNTERS.ops()
        payload(a).sum()  # the payload is a plain CPU tensor: not an emulated op
        import torch_neuronx
        result = [before, COUNTERS.ops() == before, torch_neuronx.get_executed_ops() == before]
    """,
    "missing_hook_names_itself": """
        from neuron_migrate.emulator.setup import UnsupportedTorch, _require
        try:
            _require("torch.utils", "no_such_hook")
        except UnsupportedTorch as error:
            result = [str(error), _require("torch", "Tensor._make_wrapper_subclass") is not None]
    """,
    "xla_era_neuronx_api": """
        import torch_neuronx
        torch_neuronx.trace
    """,
    "module_compile_of_a_torch_nn_model_compiles_per_shape": """
        from neuron_migrate.emulator.counters import COUNTERS
        model = torch.nn.Linear(4, 2).to("neuron")
        model.compile(backend="neuron", dynamic=False)
        before = COUNTERS.graphs_compiled
        for rows in (3, 3, 5):
            model(torch.randn(rows, 4, device="neuron"))
        stats = [s.as_dict() for s in COUNTERS.compiled.values()
                 if s.function == "Linear.forward"]
        result = [COUNTERS.graphs_compiled - before, stats]
    """,
    "a_compiled_function_inside_a_compiled_function_is_inlined": """
        import torch._dynamo.utils
        from neuron_migrate.emulator.counters import COUNTERS
        @torch.compile(backend="neuron", dynamic=False)
        def inner(x):
            return x + 1
        def outer(x):
            return inner(x) * 2
        compiled = torch.compile(outer, backend="neuron", dynamic=False)
        before = COUNTERS.graphs_compiled
        torch._dynamo.utils.counters["graph_break"].clear()
        out = compiled(torch.ones(2, device="neuron"))
        stats = {s.function: s.graphs for s in COUNTERS.compiled.values()
                 if s.function in ("inner", "outer")}
        result = [out.tolist(), COUNTERS.graphs_compiled - before,
                  sum(torch._dynamo.utils.counters["graph_break"].values()), stats]
    """,
    "torch_compile_of_a_module_is_tracked": """
        from neuron_migrate.emulator.counters import COUNTERS
        class Tower(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 2)
            def forward(self, x):
                return self.fc(x).relu()
        tower = torch.compile(Tower().to("neuron"), backend="neuron", dynamic=False)
        for rows in (2, 3, 2, 3):
            tower(torch.randn(rows, 4, device="neuron"))
        result = [s.as_dict() for s in COUNTERS.compiled.values() if s.function == "Tower.forward"]
    """,
    "float64_on_the_device_is_counted_and_warned_once": """
        import warnings
        from neuron_migrate.emulator.counters import COUNTERS
        before = COUNTERS.float64_tensors
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a = torch.ones(3, device="neuron", dtype=torch.float64)
            b = (a * 2).sum()
            torch.ones(3, device="neuron").sum()  # float32: not counted
            torch.ones(3, dtype=torch.float64).sum()  # on the CPU: not counted
        notes = [str(w.message) for w in caught if "float64" in str(w.message)]
        result = [COUNTERS.float64_tensors - before, len(notes), notes[:1], str(b.dtype)]
    """,
    "sparse_on_the_device_is_refused": """
        torch.eye(3).to_sparse().to("neuron")
    """,
    "sparse_made_on_the_device_is_refused": """
        torch.eye(3, device="neuron").to_sparse_csr()
    """,
    "nested_on_the_device_is_refused": """
        torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], device="neuron")
    """,
    "jagged_nested_moved_to_the_device_is_refused": """
        torch.nested.nested_tensor([torch.ones(2, 4), torch.ones(3, 4)],
                                   layout=torch.jagged).to("neuron")
    """,
    "nested_on_the_cpu_is_fine": """
        t = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
        result = [t.is_nested, str(t.device)]
    """,
    "process_group_backend": """
        import torch.distributed as dist
        dist.init_process_group("neuron", init_method="tcp://127.0.0.1:" + str(PORT),
                                rank=0, world_size=1)
        t = torch.ones(2, device="neuron")
        dist.all_reduce(t)
        result = [dist.get_backend(), str(t.device), t.tolist()]
        dist.destroy_process_group()
    """,
}

RUNNER = """
import json, sys, traceback, warnings
warnings.simplefilter("ignore")
from neuron_migrate import emulator
emulator.install()
import torch
PORT = int(sys.argv[1])
out = {}
for name, code in json.loads(sys.stdin.read()).items():
    scope = {"torch": torch, "PORT": PORT}
    try:
        exec(code, scope)
        out[name] = {"result": scope.get("result")}
    except BaseException as error:
        out[name] = {"error": type(error).__name__, "message": str(error)}
print("PROBES " + json.dumps(out, default=str))
"""


@pytest.fixture(scope="module")
def probes() -> dict[str, dict]:
    from neuron_migrate.smoke.run import free_port

    # the checkout's code: keep a PYTHONPATH that maps it (benchmarks/source_tree.py)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    code = json.dumps({k: textwrap.dedent(v) for k, v in PROBES.items()})
    python = os.environ.get("SMOKE_PYTHON", sys.executable)
    done = subprocess.run([python, "-c", RUNNER, str(free_port())], input=code,
                          capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    line = next((l for l in done.stdout.splitlines() if l.startswith("PROBES ")), None)
    assert line, done.stderr[-3000:]
    return json.loads(line.removeprefix("PROBES "))


def test_device_random_ops_draw_from_a_generator_of_their_own(probes: dict) -> None:
    """Apart from the CPU's, with a CUDA-like 16-byte state (DTensor's RNG tracker reads
    it) that replays exactly once read (activation checkpointing's recomputation)."""
    assert probes["device_random_keeps_its_own_stream"]["result"] == [True, 16, True, False]


def test_factories_and_transfers_give_neuron_tensors(probes: dict) -> None:
    kind, device, values, back_kind, back = probes["factories"]["result"]
    assert (kind, device, values) == ("NeuronTensor", "neuron:0", [1.0, 2.0])
    assert (back_kind, back) == ("Tensor", [0.0, 1.0, 2.0, 3.0])


def test_in_place_through_a_view_changes_the_base(probes: dict) -> None:
    assert probes["views_alias_their_base"]["result"] == [1.0] * 4


def test_a_cpu_operand_raises_pytorchs_device_error(probes: dict) -> None:
    probe = probes["cpu_operand_is_rejected"]
    assert probe["error"] == "RuntimeError"
    assert "Expected all tensors to be on the same device" in probe["message"]
    assert "neuron:0 and cpu" in probe["message"] and "(3, 4) was left on the CPU" in probe["message"]


def test_training_converges_and_compile_matches_eager(probes: dict) -> None:
    first, last, device, same, graphs = probes["training_loss_falls_and_compile_counts_graphs"]["result"]
    assert last < first * 0.75
    assert device == "neuron:0"
    assert same, "compiled losses differ from eager"
    assert graphs == 1


def test_dynamic_true_is_rejected_as_torchneuron_documents(probes: dict) -> None:
    probe = probes["dynamic_true_is_rejected"]
    assert probe["error"] == "DynamicShapesRejected" and "dynamic=False" in probe["message"]


def test_autocast_runs_matmuls_in_bf16_and_exp_in_fp32(probes: dict) -> None:
    assert probes["autocast_lowers_matmuls"]["result"] == ["torch.bfloat16", "torch.float32"]


def test_device_module(probes: dict) -> None:
    count, inside, nested, after, seeded, accelerator, memory = probes["device_module"]["result"]
    assert count == 2 and inside == 1 and nested == 0 and after == 1
    assert seeded and accelerator == "neuron" and memory == 0


def test_invalid_ordinal(probes: dict) -> None:
    assert "invalid device ordinal neuron:7" in probes["invalid_ordinal"]["message"]


def test_checkpoints_carry_neuron_tags_and_load_on_either_side(probes: dict) -> None:
    tagged, device, values, cpu_kind, cpu_device = probes["checkpoints_are_tagged_neuron"]["result"]
    assert tagged and device == "neuron:0" and values == [1.0] * 3
    assert (cpu_kind, cpu_device) == ("Tensor", "cpu")


def test_op_inventory_counts_device_ops_only(probes: dict) -> None:
    ops, unchanged, same_in_stub = probes["op_inventory"]["result"]
    assert "aten::mm" in ops and "aten::sum" in ops
    assert unchanged and same_in_stub


def test_xla_era_torch_neuronx_names_are_refused(probes: dict) -> None:
    probe = probes["xla_era_neuronx_api"]
    assert probe["error"] == "AttributeError"
    assert "torch_neuronx.trace is not part of the native TorchNeuron API" in probe["message"]


def test_neuron_process_group_runs_collectives(probes: dict) -> None:
    assert probes["process_group_backend"]["result"] == ["neuron", "neuron:0", [1.0, 1.0]]


def test_a_missing_private_hook_is_named_at_install(probes: dict) -> None:
    message, found = probes["missing_hook_names_itself"]["result"]
    assert "torch.utils.no_such_hook" in message and "tested on torch 2.13, 2.14" in message
    assert found


def test_module_compile_of_a_bare_torch_nn_model_compiles_a_graph_per_shape(probes: dict) -> None:
    # torch 2.13 alone compiles nothing here (the frame is skipped); 2.14, TorchNeuron's, does
    graphs, stats = probes["module_compile_of_a_torch_nn_model_compiles_per_shape"]["result"]
    assert graphs == 2
    assert stats == [{"function": "Linear.forward", "graphs": 2, "shapes": 2, "recompiles": 1,
                      "calls": 3}]


def test_a_tracked_compiled_function_is_inlined_by_an_outer_compile(probes: dict) -> None:
    out, graphs, breaks, stats = probes[
        "a_compiled_function_inside_a_compiled_function_is_inlined"]["result"]
    assert out == [4.0, 4.0]
    assert (graphs, breaks) == (1, 0)  # one graph: the tracking wrapper broke nothing
    assert stats == {"inner": 0, "outer": 1}


def test_float64_on_the_device_is_counted_and_warned_once(probes: dict) -> None:
    counted, warned, notes, dtype = probes[
        "float64_on_the_device_is_counted_and_warned_once"]["result"]
    assert counted == 3  # the factory, the product, the sum
    assert warned == 1 and "executes as float32 on TorchNeuron" in notes[0]
    assert dtype == "torch.float64"  # counted, not converted: the script's numbers stand


@pytest.mark.parametrize(("probe", "what"), [
    ("sparse_on_the_device_is_refused", "sparse tensors"),
    ("sparse_made_on_the_device_is_refused", "sparse tensors"),
    ("nested_on_the_device_is_refused", "nested tensors"),
    ("jagged_nested_moved_to_the_device_is_refused", "nested tensors"),
])
def test_sparse_and_nested_tensors_are_refused_on_the_device(probes: dict, probe: str,
                                                             what: str) -> None:
    assert probes[probe]["error"] == "UnsupportedOnNeuron"
    message = probes[probe]["message"]
    assert message.startswith(what) and "not supported on the neuron device" in message
    assert "documented limit" in message


def test_nested_tensors_on_the_cpu_are_left_alone(probes: dict) -> None:
    assert probes["nested_on_the_cpu_is_fine"]["result"] == [True, "cpu"]


def test_torch_compile_of_a_module_is_tracked_under_its_class_name(probes: dict) -> None:
    assert probes["torch_compile_of_a_module_is_tracked"]["result"] == [
        {"function": "Tower.forward", "graphs": 2, "shapes": 2, "recompiles": 1, "calls": 4}]
