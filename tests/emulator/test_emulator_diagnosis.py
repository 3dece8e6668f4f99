"""Failures under the emulator, named as migration causes (pure Python, no torch needed)."""

from __future__ import annotations

import pytest

from neuron_migrate.emulator.failure_causes import diagnose, diagnose_text, pick_frame

# (exception type, message as PyTorch 2.13 or the emulator words it, expected cause)
CASES = [
    ("ModuleNotFoundError", "No module named 'torch_xla'", "torch-xla-import"),
    ("ImportError", "cannot import name 'xla_model' from 'torch_xla.core'", "torch-xla-import"),
    ("torch._dynamo.exc.BackendCompilerFailed",
     "backend='openxla' raised:\nImportError: Please follow the instruction in "
     "https://github.com/pytorch/xla#pytorchxla to install torch_xla", "xla-compile-backend"),
    ("torch._dynamo.exc.InvalidBackend", "Invalid backend: 'xla', see "
     "`torch._dynamo.list_backends()` for available backends.", "xla-compile-backend"),
    ("AssertionError", "Unknown backend type xla", "xla-process-group"),
    ("DynamicShapesRejected", "torch.compile(backend='neuron', dynamic=True) is rejected",
     "dynamic-shapes"),
    ("AttributeError", "torch_neuronx.trace is not part of the native TorchNeuron API",
     "xla-era-neuronx-api"),
    ("ValueError", "Default process group has not been initialized, please make sure to call "
     "init_process_group.", "no-process-group"),
    ("RuntimeError", "Expected all tensors to be on the same device, but found at least two "
     "devices, neuron:0 and cpu! (when checking argument for aten.addmm.default)",
     "tensor-on-cpu"),
    ("torch._dynamo.exc.BackendCompilerFailed", "backend='compile_fn' raised:\nRuntimeError: "
     "Expected all tensors to be on the same device, but found at least two devices, neuron:0 "
     "and cpu! (when checking argument for aten.addmm.default) [neuron emulator: a tensor of "
     "shape (4, 512) was left on the CPU]", "emulator-compile-backend"),
    ("ReplicasDiverged", "data-parallel replicas diverged after optimizer step 3",
     "replicas-diverged"),
    ("RuntimeError", "PyTorch is not linked with support for xla devices", "xla-device"),
    ("AssertionError", "Torch not compiled with CUDA enabled", "cuda-leftover"),
    ("RuntimeError", "invalid device ordinal neuron:3 (device_count()=2)", "device-ordinal"),
    ("TypeError", "can't convert neuron:0 device type tensor to numpy.", "numpy-on-device"),
    ("torch._dynamo.exc.Unsupported", "Attempted to inline function marked as skipped\n  "
     "Explanation: Dynamo developers have intentionally marked that the function "
     "`Optimizer.zero_grad` should not be traced.", "compile-traced-training-step"),
    ("torch._dynamo.exc.Unsupported", "Unsupported Tensor.backward() call",
     "compile-traced-training-step"),
    ("torch._dynamo.exc.Unsupported", "Data-dependent branching\n  Explanation: Detected data-"
     "dependent branching (e.g. `if my_tensor.sum() > 0:`).", "compile-data-dependent"),
    ("torch._dynamo.exc.Unsupported", "Call to `torch._dynamo.graph_break()`\n  Explanation: "
     "User-inserted graph break. Message: None", "compile-graph-break"),
    ("torch._dynamo.exc.UserError", "Consider annotating your code using torch._check*(). "
     "Could not guard on data-dependent expression zuf0 > 0.0 (unhinted: zuf0 > 0.0).",
     "compile-data-dependent"),
    ("DataParallelismLost", "data parallelism lost: optimizer step 1 on rank 0 (WORLD_SIZE=2) "
     "ran without a process group", "data-parallel-no-process-group"),
    ("DataParallelismLost", "data parallelism lost: optimizer step 2 on rank 1 (WORLD_SIZE=2) "
     "stepped without averaging its gradients", "data-parallel-no-averaging"),
    ("DataParallelismLost", "data parallelism lost: 2 processes ran with WORLD_SIZE=2 and none "
     "ever created a process group", "data-parallel-never-created"),
    ("RuntimeError", "neuron-migrate helper _neuron_optimizer_step: WORLD_SIZE is 2 but no "
     "process group exists", "helper-no-process-group"),
]


@pytest.mark.parametrize(("kind", "message", "key"), CASES, ids=[c[2] + "-" + c[0] for c in CASES])
def test_known_failures_name_their_cause(kind: str, message: str, key: str) -> None:
    cause = diagnose(kind, message)
    assert cause is not None and cause.key == key
    assert len(cause.text) > 40  # plain words, not a code


def test_unrelated_errors_are_not_guessed() -> None:
    assert diagnose("KeyError", "'learning_rate'") is None
    # an AttributeError about some other module is not an XLA-era torch_neuronx API
    assert diagnose("AttributeError", "module 'numpy' has no attribute 'float'") is None


def test_a_traceback_seen_only_as_text() -> None:
    stderr = (
        "some warning\n"
        "Traceback (most recent call last):\n"
        '  File "/x/train.py", line 4, in <module>\n'
        "    import torch_xla.core.xla_model as xm\n"
        "ModuleNotFoundError: No module named 'torch_xla'\n"
    )
    name, message, cause = diagnose_text(stderr)
    assert (name, message) == ("ModuleNotFoundError", "No module named 'torch_xla'")
    assert cause is not None and cause.key == "torch-xla-import"
    assert diagnose_text("no traceback here") is None


def _frame(file: str, line: int) -> dict:
    return {"file": file, "line": line, "function": "f"}


def test_the_named_frame_is_the_users_not_torchs(tmp_path) -> None:
    script = tmp_path / "train.py"
    helper = tmp_path / "models.py"
    torch_frame = _frame("/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", 1789)
    frames = [_frame(str(script), 40), _frame(str(helper), 12), torch_frame]
    assert pick_frame(frames, str(script))["line"] == 12  # innermost in the project
    elsewhere = [_frame("/opt/lib/mylib.py", 7), torch_frame]
    assert pick_frame(elsewhere, str(script))["file"] == "/opt/lib/mylib.py"
    assert pick_frame([torch_frame], str(script)) == torch_frame
    assert pick_frame([], str(script)) is None


@pytest.mark.torch
def test_parallelism_check_in_a_worker_warns_or_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a process group (the emulator need not be installed for this path)."""
    import torch

    from neuron_migrate.emulator.parallelism import DataParallelismLost, ParallelismCheck

    param = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.SGD([param], lr=0.1)
    lenient = ParallelismCheck(rank=1, world_size=2, strict=False)
    assert lenient(optimizer, 1) is None  # no gradient yet: the step changes nothing
    param.grad = torch.ones(3)
    problem = lenient(optimizer, 2)
    assert problem is not None and problem["key"] == "no-process-group-world"
    assert lenient(optimizer, 3) is not None
    assert lenient.first_problem == problem and lenient.steps_without_averaging == 2
    strict = ParallelismCheck(rank=1, world_size=2, strict=True)
    with pytest.raises(DataParallelismLost, match="step 4 on rank 1 .*without a process group"):
        strict(optimizer, 4)
    assert strict.first_problem is not None  # reported even if the script swallows the error
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert ParallelismCheck.from_environment() is None  # a single process: nothing to check
