"""What a failure under the emulator most likely means for the migration, in plain words.

Pure Python (no torch import): the smoke runner also uses it on errors it only has as text.
Each cause is recognised from the exception's type name and message as PyTorch 2.13/2.14 and
the emulator word them; the first match wins, so the specific ones come first.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Cause:
    key: str  # stable, for --format json and tests
    text: str  # what the user should read


@dataclass(frozen=True)
class _Pattern:
    cause: Cause
    types: tuple[str, ...]  # exception class names; empty means any
    message: re.Pattern[str]


def _p(key: str, text: str, types: tuple[str, ...], message: str) -> _Pattern:
    return _Pattern(Cause(key, text), types, re.compile(message, re.IGNORECASE | re.DOTALL))


_PATTERNS = (
    _p("smoke-report-unreadable",
       "the worker's smoke report, the file the emulator writes at exit, was overwritten or "
       "cut short, so what the worker did is not known: the run cannot be judged. Check "
       "whether the script writes to paths it takes from the environment (NEURON_EMU_REPORT), "
       "and that the temporary folder's disk is not full.",
       ("SmokeReportUnreadable",), r"smoke report"),
    _p("replicas-start-apart",
       "the data-parallel replicas start from different parameters: each rank built its model "
       "from its own random seed (torch's default CPU seed differs per process) and nothing "
       "broadcast rank 0's. The original behaves the same, unless it broadcast them "
       "(xm.broadcast_master_param) or set one seed on every rank: it is not the migration's "
       "doing. Set the same seed (torch.manual_seed) on every rank before building the model, "
       "or wrap it in DistributedDataParallel, which broadcasts rank 0's parameters.",
       ("ReplicasStartApart",), r"start from different parameters"),
    _p("replicas-diverged",
       "the data-parallel replicas, equal before the step, diverged: gradients are not "
       "averaged across ranks (or only some are), or the ranks' optimizers differ. "
       "xm.optimizer_step all-reduced every gradient; a bare optimizer.step() does not. Wrap "
       "the model in DistributedDataParallel (or all-reduce the gradients before stepping).",
       ("ReplicasDiverged",), r"replicas diverged"),
    _p("data-parallel-no-process-group",
       "data parallelism was lost: with WORLD_SIZE > 1 the script stepped its optimizer without "
       "a process group, so each process trained alone. Under PJRT, xm.optimizer_step, "
       "xm.all_reduce and xm.rendezvous needed no init_process_group; native collectives do: "
       "call torch.distributed.init_process_group(\"neuron\") at the start of each worker.",
       ("DataParallelismLost",), r"without a process group"),
    _p("data-parallel-never-created",
       "data parallelism was lost: with WORLD_SIZE > 1 no worker created a process group, so "
       "each ran the whole script alone. xmp.spawn and PJRT set the group up; under torchrun "
       "call torch.distributed.init_process_group(\"neuron\") at the start of each worker "
       "(a single-process script runs without --nproc).",
       ("DataParallelismLost",), r"none ever created a process group"),
    _p("data-parallel-no-averaging",
       "data parallelism was lost: a rank stepped its optimizer with no gradient all-reduce "
       "since its previous step, so each process trained alone on its own data. "
       "xm.optimizer_step averaged the gradients; a bare optimizer.step() does not. Wrap the "
       "model in DistributedDataParallel (or all-reduce each gradient before stepping).",
       ("DataParallelismLost",), r"without averaging"),
    _p("helper-no-process-group",
       "a helper neuron-migrate wrote into the script found WORLD_SIZE > 1 and no process "
       "group: it refuses to skip the collective silently. Create the group at the start of "
       "each worker: torch.distributed.init_process_group(\"neuron\") (xmp.spawn and PJRT "
       "used to set it up).",
       (), r"^neuron-migrate helper.*process group"),
    _p("compile-traced-training-step",
       "torch.compile traced a whole training step (optimizer.zero_grad/step or "
       "loss.backward), which Dynamo refuses under fullgraph=True. torch_xla.compile cut the "
       "lazy graph around such a function; with eager TorchNeuron call the function itself "
       "and compile only the model's forward (model.compile(backend=\"neuron\", "
       "dynamic=False)).",
       ("Unsupported",), r"Optimizer\.\w+|Tensor\.backward|[/\\]torch[/\\]optim[/\\]"),
    _p("compile-data-dependent",
       "torch.compile(fullgraph=True) met a value that depends on the data (.item(), a tensor "
       "in an `if`): it cannot be one static graph. Move that code out of the compiled "
       "function, or drop fullgraph=True to let it run eagerly around the break.",
       ("UserError", "Unsupported"), r"data-dependent"),
    _p("compile-graph-break",
       "torch.compile(fullgraph=True) met code it cannot capture in one graph (a graph "
       "break, named above): move that code out of the compiled function, or drop "
       "fullgraph=True to let it run eagerly around the break.",
       ("Unsupported",), r""),
    _p("torch-xla-import",
       "a leftover torch_xla import: native TorchNeuron does not use torch_xla. Remove it and "
       "use the neuron device API instead (neuron-migrate apply rewrites the APIs it knows).",
       ("ModuleNotFoundError", "ImportError"), r"torch_xla"),
    _p("missing-module",
       "a module the script imports is not installed in the interpreter smoke runs it with "
       "(--python; by default neuron-migrate's own): the original needs it too, so this is "
       "the environment, not the migration. Install it there, or point --python at the "
       "interpreter that has the script's dependencies.",
       ("ModuleNotFoundError",),
       r"No module named '(?!torch_xla|torch_neuronx|neuronx|libneuronxla|torch\.neuron)"),
    _p("xla-compile-backend",
       'torch.compile still names an XLA backend ("openxla" or "xla"); use backend="neuron" '
       "with dynamic=False.",
       (), r"backend='(open)?xla'|Invalid backend: '(open)?xla'|torch_xla.*openxla"),
    _p("xla-process-group",
       'the process group still uses the "xla" backend (and xla:// init); use '
       'torch.distributed.init_process_group("neuron") under torchrun.',
       (), r"Unknown backend type (xla|openxla)|Invalid backend: \"?xla|xla://"),
    _p("dynamic-shapes",
       "torch.compile(..., dynamic=True) or a symbolic shape: the neuron backend compiles "
       "static shapes only. Use dynamic=False; a new input shape recompiles.",
       ("DynamicShapesRejected",), r"dynamic=True|static shapes"),
    _p("too-many-recompiles",
       "a compiled function recompiled more often than --max-recompiles allows: TorchNeuron "
       "compiles static shapes only, so every new input shape compiles another graph (minutes "
       "each on Trainium). Pad or bucket the inputs to a few fixed shapes (pad sequences to "
       "fixed lengths, DataLoader(drop_last=True) for the last, smaller batch).",
       ("TooManyRecompiles",), r"recompiled"),
    _p("unsupported-on-neuron",
       "a sparse or nested tensor reached the neuron device: TorchNeuron does not support "
       "torch.sparse or torch.nested. Keep such tensors on the CPU, or use dense, padded "
       "tensors (with a mask) on the device.",
       ("UnsupportedOnNeuron",), r"not supported on the neuron device"),
    _p("xla-era-neuronx-api",
       "an XLA-era torch_neuronx API (such as torch_neuronx.trace or xla_impl) that native "
       "TorchNeuron does not have; use eager mode or torch.compile(backend=\"neuron\").",
       ("AttributeError",), r"torch_neuronx\.\w+ is not part of the native TorchNeuron API"),
    _p("no-process-group",
       "no process group: call torch.distributed.init_process_group(\"neuron\") before DDP "
       "or any collective (xmp.spawn and the xla:// init method used to set this up).",
       (), r"Default process group has not been initialized"),
    # Dynamo traced the same code first, so a CPU tensor in the user's code would have failed
    # there (InternalTorchDynamoError/TorchRuntimeError); inside the backend it is ours.
    _p("emulator-compile-backend",
       "the emulated neuron torch.compile backend failed on a graph Dynamo had already "
       "captured from the script: most likely a limit of the emulator, not a fault of the "
       "migration. Please report it to neuron-migrate with the traceback; the run stopped "
       "before the rest of the script was checked.",
       ("BackendCompilerFailed",), r"\[neuron emulator:"),
    _p("tensor-on-cpu",
       "a tensor was left on the CPU: move it to the neuron device with .to(device). "
       "XLA-era loaders (MpDeviceLoader) used to place batches; a plain DataLoader does not.",
       (), r"Expected all tensors to be on the same device.*\bcpu\b"),
    _p("xla-device",
       'code still targets the "xla" device (xm.xla_device() or "xla" strings); use '
       'torch.device("neuron").',
       (), r"support for xla devices|from the 'XLA' backend|device type.*\bxla\b"),
    _p("cuda-leftover",
       "a leftover CUDA call (torch.cuda.*, a \"cuda\" device or the NCCL backend); use "
       "torch.neuron.* and the \"neuron\" device and backend (`neuron-migrate apply --from "
       "cuda` rewrites them).",
       (), r"not compiled with CUDA|no NVIDIA driver|has no attribute '_cuda_|"
           r"doesn't have NCCL built in|Invalid backend: 'nccl'"),
    _p("device-ordinal",
       "a device ordinal beyond the NeuronCores of this worker: use LOCAL_RANK for "
       "torch.neuron.set_device, not RANK.",
       (), r"invalid device ordinal"),
    _p("numpy-on-device",
       "a device tensor was converted to NumPy: call .cpu() first (on XLA this went through "
       "an implicit transfer).",
       ("TypeError",), r"can't convert neuron.* to numpy"),
)


def diagnose(type_name: str, message: str) -> Cause | None:
    """The likely migration cause of an exception, or None when nothing is recognised."""
    short = type_name.rsplit(".", 1)[-1]
    for pattern in _PATTERNS:
        if pattern.types and short not in pattern.types:
            continue
        if pattern.message.search(message):
            return pattern.cause
    return None


def diagnose_text(text: str) -> tuple[str, str, Cause | None] | None:
    """For an error only seen as text (a worker's stderr): the last ``Type: message`` line
    of the last traceback, with its cause."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent")]
    if not starts:
        return None
    for line in lines[starts[-1] + 1:]:
        match = re.match(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Failed|Backend|Diverged|"
                         r"Rejected|Recompiles|OnNeuron|Interrupt|Warning)): ?(.*)$", line)
        if match:
            name, message = match.groups()
            return name, message, diagnose(name, message)
    return None


_LIBRARY_MARKERS = ("site-packages", "dist-packages", os.sep + "emulator" + os.sep)


def pick_frame(frames: list[dict[str, Any]], script: str) -> dict[str, Any] | None:
    """The traceback frame worth naming: the innermost one beside the user's script, else the
    innermost outside installed packages, the standard library and the emulator, else the
    innermost of all."""
    if not frames:
        return None
    if script:
        project = str(Path(script).resolve().parent) + os.sep
        for frame in reversed(frames):
            if str(Path(frame["file"]).resolve()).startswith(project):
                return frame
    stdlib = os.path.dirname(os.__file__) + os.sep
    for frame in reversed(frames):
        name = frame["file"]
        if not (name.startswith(("<", stdlib)) or any(m in name for m in _LIBRARY_MARKERS)):
            return frame
    return frames[-1]
