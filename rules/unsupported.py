"""NM705-NM715: XLA-era APIs with no mechanical native replacement, each with what to do."""

from __future__ import annotations

import re

from neuron_migrate.ruleapi import Example, Rule
from neuron_migrate.ruleapi.deps import DLC, XLA_VENV, xla_image_message, xla_venv_message
from neuron_migrate.ruleapi.findings import XLA_BY_NAME
from neuron_migrate.rules.dependencies import D_UPDDLC
from neuron_migrate.rules.review_base import ReviewRule

D_HOME = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html"
D_DIST = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html"
D_BP = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/"
        "best-practices-pytorch-neuron.html")
D_PROF = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-explorer/"
          "how-to-profile-pytorch.html")
D_TRACE = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/frameworks/torch/"
           "torch-neuronx/api-reference-guide/inference/api-torch-neuronx-trace.html")
D_NXDT = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/announcements/"
          "neuron2.x/announce-eos-nxdt-nxd-core-training.html")
D_MEM = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/memory-profiling-guide.html"
D_RN = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/components/torchneuron.html"
XM = "torch_xla.core.xla_model"
XR = "torch_xla.runtime"


def _example(line: str, imports: str) -> Example:
    source = f"{imports}\n\n{line}\n"
    return Example(before=source, after=source)


class XlaSpmd(ReviewRule):
    id = "NM705"
    name = "xla-spmd"
    summary = "SPMD sharding (xs.Mesh, mark_sharding, use_spmd) becomes DeviceMesh and DTensor by hand"
    explanation = """\
What it does: reports `torch_xla.distributed.spmd` (`Mesh`, `mark_sharding`, SPMD FSDP) and
`xr.use_spmd()`.

Why: TorchNeuron's tensor and sequence parallelism is PyTorch's DTensor: a DeviceMesh over
the neuron devices plus `distribute_tensor` / `parallelize_module` plans. XLA's annotation
style (sharding specs on tensors, compiled by the XLA partitioner) does not carry over.

What to do: build a `torch.distributed.device_mesh.init_device_mesh("neuron", shape)` and
express each `mark_sharding` as a DTensor placement (Shard(dim) / Replicate())."""
    doc_url = D_DIST
    example = _example("xs.mark_sharding(weight, mesh, (0, None))",
                       "import torch_xla.distributed.spmd as xs")
    guidance = {
        "torch_xla.distributed.spmd": "express the sharding with a DeviceMesh and DTensor "
                                      "placements (distribute_tensor / parallelize_module)",
        "torch_xla.experimental.xla_sharding": "express the sharding with DeviceMesh and DTensor",
        f"{XR}.use_spmd": "there is no SPMD mode to switch on; use DTensor on a DeviceMesh",
    }


class MetricsAndProfiler(ReviewRule):
    id = "NM707"
    name = "xla-metrics-profiler"
    summary = "torch_xla metric queries and the XLA profiler have native counterparts to choose"
    explanation = """\
What it does: reports what remains of `torch_xla.debug.metrics` once NM305 has rewritten the
reports and clears: the queries (`counter_value`, `counter_names`, `metric_data`,
`metric_names`, `executed_fallback_ops`); and what remains of `torch_xla.debug.profiler` once
NM306 has rewritten the annotations and dropped the server and its capture: for example
`start_trace(log_dir)` / `stop_trace()`.

Why: the metrics counted XLA compilations and transfers, which native execution does not
have, so a query's answer has no native meaning; such calls usually assert on XLA behaviour
(tests, benchmarks). Profiling uses PyTorch's profiler with Neuron's extension instead of
XLA's server.

What to do: delete checks of XLA counters and metrics, or use `torch_neuronx.get_fallback_ops()`
to see which ops ran on the CPU; profile with `torch.profiler.profile(activities=[
ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])` as the Neuron Explorer guide shows."""
    doc_url = D_PROF
    example = _example("assert met.counter_value(\"CachedCompile\") == 1",
                       "import torch_xla.debug.metrics as met")
    guidance = {
        "torch_xla.debug.metrics": "XLA compilation metrics do not exist natively; delete it, "
                                   "or inspect CPU fallbacks with torch_neuronx.get_fallback_ops()",
        **{f"torch_xla.debug.metrics.{query}": (
            "XLA counters and metrics (compilations, executions, transfers) do not exist "
            "natively, so there is no value to check; delete the check, or measure with "
            "torch.profiler") for query in ("counter_value", "counter_names", "metric_data",
                                            "metric_names")},
        "torch_xla.debug.metrics.executed_fallback_ops": (
            "the ops that fell back to the CPU: torch_neuronx.get_fallback_ops() is the closest "
            "native counterpart (in torch-neuronx's sources, not yet in AWS's documentation)"),
        "torch_xla.debug.profiler": "profile with torch.profiler (ProfilerActivity.PrivateUse1) "
                                    "and Neuron Explorer",
    }


class XlacInternals(ReviewRule):
    id = "NM708"
    name = "xla-internals"
    summary = "private torch_xla internals (`torch_xla._XLAC`, `torch_xla.experimental`) have no native equivalent"
    explanation = """\
What it does: reports calls into `torch_xla._XLAC` (the C++ extension) and
`torch_xla.experimental` (custom kernels, scan, stablehlo export, ...).

Why: these reach into the XLA runtime itself; nothing with the same contract exists, and
neuron-migrate will not guess.

What to do: find out what the call achieved (often a sync, a graph hint or a debugging aid)
and drop it or use the native facility: torch.neuron.synchronize(), torch.compile, NKI
kernels through `torch_neuronx.nki_op`."""
    doc_url = D_HOME
    example = _example("print(torch_xla._XLAC._get_xla_tensors_text(tensors))", "import torch_xla")
    guidance = {"torch_xla._XLAC": "a private XLA runtime call with no native equivalent; "
                                   "find what it achieved and drop or replace it",
                "torch_xla.experimental": "an experimental XLA feature with no native "
                                          "equivalent; drop it or use the native facility"}


class NeuronxXlaApis(ReviewRule):
    id = "NM709"
    name = "torch-neuronx-xla-api"
    summary = "XLA-era torch_neuronx APIs (trace, DataParallel, async_load, ...) need a native design"
    explanation = """\
What it does: reports the inference and tooling APIs of the XLA-based torch-neuronx library:
`torch_neuronx.trace`, `DataParallel`, `async_load`, `lazy_load`, `analyze`,
`replace_weights`, `dynamic_batch`, `testing.assert_close`, `nki_jit`, `xla_impl.*`,
`experimental.*` and `utils.get_platform_target`.

Why: the package name stayed the same across the two products, but these functions belong to
the XLA one. TorchNeuron has no `trace`; a traced TorchScript artifact cannot be reused.

What to do: compile with `torch.compile(model, backend="neuron", dynamic=False,
fullgraph=True)` (it compiles per input signature and caches the result); for LLM serving use
vLLM Neuron; compare tensors with `torch.testing.assert_close`; write NKI kernels with
`@nki.jit` and register them with `torch_neuronx.nki_op`. Inference on Inf2 or Trn1 has no
native path: stay on the XLA library there."""
    doc_url = D_TRACE
    tokens = (b"neuron",)
    example = _example("traced = torch_neuronx.trace(model, example)", "import torch_neuronx")
    guidance = {
        "torch_neuronx.trace": "no native trace: use torch.compile(model, backend=\"neuron\", "
                               "dynamic=False, fullgraph=True); saved traced models cannot be "
                               "reused",
        "torch_neuronx.DataParallel": "run one process per NeuronCore with torchrun (and DDP for "
                                      "training) instead",
        "torch_neuronx.async_load": "no native equivalent; load the model normally",
        "torch_neuronx.lazy_load": "no native equivalent; load the model normally",
        "torch_neuronx.analyze": "no native equivalent; compile and check "
                                 "torch_neuronx.get_fallback_ops()",
        "torch_neuronx.replace_weights": "no native equivalent; load a state_dict instead",
        "torch_neuronx.dynamic_batch": "compile per batch size, or pad batches to fixed sizes",
        "torch_neuronx.testing": "use torch.testing.assert_close",
        "torch_neuronx.nki_jit": "not in TorchNeuron: write the kernel with @nki.jit and "
                                 "register it with torch_neuronx.nki_op",
        "torch_neuronx.xla_impl": "an XLA-era internal: no native equivalent",
        "torch_neuronx.experimental": "an XLA-era experimental API: no native equivalent",
        "torch_neuronx.utils.get_platform_target": "TorchNeuron runs on Trn2/Trn3 only; check "
                                                    "the instance type another way if needed",
    }


class NeuronxDistributed(ReviewRule):
    id = "NM710"
    name = "neuronx-distributed"
    summary = "NeuronX Distributed and transformers-neuronx are XLA-based: move to native parallelism"
    explanation = """\
What it does: reports imports and uses of `neuronx_distributed` (NxD Core, NxD Training, NxD
Inference), `transformers_neuronx` and `optimum.neuron`.

Why: NxD is built on PyTorch/XLA and does not run on TorchNeuron; its training APIs reached
end of support, and transformers-neuronx ended earlier. optimum-neuron's native support is not
confirmed.

What to do: use PyTorch's own parallelism (DDP, FSDP2, DTensor tensor and sequence
parallelism, pipelining) or TorchTitan Neuron for large-scale pre-training, and vLLM Neuron
for LLM serving."""
    doc_url = D_NXDT
    tokens = (b"neuron",)
    example = _example("model = parallel_state.initialize_model_parallel(8)",
                       "from neuronx_distributed import parallel_state")
    guidance = {
        "neuronx_distributed": "NxD is XLA-based and does not run on TorchNeuron; use "
                               "DDP/FSDP2/DTensor or TorchTitan Neuron (training), vLLM Neuron "
                               "(serving)",
        "neuronx_distributed.modules.qkv_linear": (
            "a fused GQA q/k/v layer: build q, k and v as three torch.nn.Linear layers under "
            "ColwiseParallel (the kv heads must divide by the tensor-parallel size; NxD "
            "replicated them when they did not, kv_size_multiplier, which no parallel style "
            "does: repeat the kv weights by hand)"),
        "neuronx_distributed.modules.moe": (
            "NxD's mixture of experts: write the experts as torch.nn modules and shard them "
            "over an expert-parallel mesh dimension (DTensor placements, or all_to_all "
            "dispatch with torch.distributed); TorchTitan has a native MoE to start from"),
        "neuronx_distributed.pipeline": (
            "pipeline parallelism: split the model into stages with "
            "torch.distributed.pipelining (PipelineStage and a schedule such as Schedule1F1B) "
            "on a 'pp' mesh dimension"),
        "neuronx_distributed.lightning": (
            "NxD's Lightning integration is XLA-based: use Lightning's own strategies "
            "(FSDPStrategy, DDPStrategy, or ModelParallelStrategy for DTensor plans)"),
        "neuronx_distributed.utils.adamw_fp32_optim_params": (
            "AdamW over float32 master copies of bfloat16 parameters: keep the parameters in "
            "float32 and train under torch.autocast('neuron', dtype=torch.bfloat16), or use "
            "FSDP2's MixedPrecisionPolicy; plain torch.optim.AdamW otherwise"),
        "neuronx_distributed.scripts.checkpoint_converter": (
            "run NxD's converter once on the XLA stack to a full state dict, then "
            "torch.distributed.checkpoint.format_utils.torch_save_to_dcp"),
        "transformers_neuronx": "end of support; serve LLMs with vLLM Neuron",
        "optimum.neuron": "native support unconfirmed; check optimum-neuron's release notes",
    }


class DeviceQueries(ReviewRule):
    id = "NM711"
    name = "xla-device-query"
    summary = "XLA device-kind, device-count and memory queries need native equivalents by hand"
    explanation = """\
What it does: reports `xm.xla_device_kind()`, the device counts (`xr.global_device_count()`,
`xr.addressable_device_count()`, `xr.local_device_count()`, `torch_xla.device_count()`),
`xm.get_memory_info()`, `xm.unlazy()` and `xm.optimization_barrier_()`.

Why: each has a native counterpart whose meaning differs: device-kind checks compared
against "NEURON" / "TPU" / "GPU" strings, while the native device type is "neuron"; counts
depend on whether you mean processes or cores.

What to do: `torch.device(dev).type == "neuron"` for kind checks (NM104 rewrites
`xm.xla_device_hw(dev)` and `xr.device_type()` themselves); `dist.get_world_size()`
for the number of workers or `torch.neuron.device_count()` for the cores this process sees;
`torch.neuron.memory_allocated()` / `memory_stats()` after `torch.neuron.synchronize()`;
drop `unlazy` and `optimization_barrier_`."""
    doc_url = D_MEM
    example = _example("if xr.local_device_count() > 1:\n    pass", "import torch_xla.runtime as xr")
    guidance = {
        f"{XM}.xla_device_kind": "no documented native equivalent (core generation); drop it",
        f"{XR}.global_device_count": "one device per process: use dist.get_world_size()",
        f"{XR}.addressable_device_count": "use torch.neuron.device_count() (cores this process "
                                          "sees)",
        f"{XR}.local_device_count": "use torch.neuron.device_count() or LOCAL_WORLD_SIZE",
        "torch_xla.device_count": "use dist.get_world_size() or torch.neuron.device_count()",
        f"{XM}.get_memory_info": "use torch.neuron.memory_allocated() / memory_stats() after "
                                 "torch.neuron.synchronize()",
        f"{XM}.unlazy": "eager tensors are already materialised: drop it (or "
                        "torch.neuron.synchronize() to wait)",
        f"{XM}.optimization_barrier_": "an XLA compiler hint with no native equivalent: drop it",
        f"{XR}.using_pjrt": "always a single native runtime: drop the check",
    }


_OLD_INSTANCE = re.compile(r"(?:ml\.)?(?:inf2|trn1n?)(?:\.\d*x?large)?")  # ml.: SageMaker's


class OldInstanceTarget(Rule):
    id = "NM712"
    name = "trn1-inf2-target"
    kind = ReviewRule.kind
    summary = "Trn1 and Inf2 targets: TorchNeuron supports Trn2 and Trn3 only"
    explanation = """\
What it does: reports string literals naming Trn1 or Inf2 instances or platform targets
("trn1", "trn1.32xlarge", "inf2.xlarge", SageMaker's "ml.trn1.32xlarge", ...).

Why: TorchNeuron, the native backend, supports Trn2 and Trn3 only. Workloads that must stay
on Trn1 or Inf2 keep the XLA-based torch-neuronx 2.9 (in maintenance) and should not be
migrated.

What to do: move the workload to Trn2/Trn3 instances (and update the target), or do not
migrate this code."""
    doc_url = D_RN
    example = Example.unchanged("INSTANCE = \"trn1.32xlarge\"\n")
    tokens = (b"trn1", b"inf2")

    def interesting_string(self, value: str) -> bool:
        return _OLD_INSTANCE.fullmatch(value) is not None

    def leftover_string(self, value: str) -> str:
        return (f"{value!r} targets Trn1/Inf2; TorchNeuron supports Trn2 and Trn3 only: move "
                "to Trn2/Trn3, or keep this workload on the XLA stack")


class XlaEraContainer(Rule):
    id = "NM713"
    name = "xla-era-container"
    kind = ReviewRule.kind
    summary = "XLA-era Neuron container images and DLAMI virtualenvs named in Python code"
    explanation = """\
What it does: reports string literals naming a Neuron deep-learning container whose tag
carries PyTorch 2.9 or lower or a Neuron SDK before 2.33 (a SageMaker estimator's `image_uri`,
a launcher's `docker run` line), and DLAMI virtualenvs such as
`/opt/aws_neuronx_venv_pytorch_2_9`: what NM811 reports in Dockerfiles and YAML.

Why: those images and virtualenvs ship the XLA library, so migrated code would run on the
stack it was migrated from. The tag of AWS's TorchNeuron training container is not yet
confirmed, so no tag is written for you.

What to do: use a Neuron 2.33+ image with torch-neuronx 2.14, or install the native set; on a
DLAMI, activate `/opt/aws_neuronx_venv_torch_neuronx_2_14_0`."""
    doc_url = D_UPDDLC
    example = Example.unchanged("IMAGE = \"public.ecr.aws/neuron/pytorch-training-neuronx:"
                                "2.1.2-neuronx-py310-sdk2.20.2-ubuntu20.04\"\n")
    tokens = (b"neuronx",)

    def interesting_string(self, value: str) -> bool:
        return _container_message(value) is not None

    def leftover_string(self, value: str) -> str:
        return _container_message(value) or value


def _container_message(value: str) -> str | None:
    """What NM811 says of the XLA-era image or DLAMI virtualenv this string names, if any."""
    if "neuronx" not in value:
        return None
    image = DLC.search(value)
    message = xla_image_message(image.group()) if image else None
    venv = XLA_VENV.search(value) if message is None else None
    return xla_venv_message(venv.group()) if venv else message


_XLA_MODULE = re.compile(r"torch_xla(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


class XlaModuleByName(Rule):
    id = XLA_BY_NAME
    name = "xla-module-by-name"
    kind = ReviewRule.kind
    summary = ("a string naming a torch_xla module, or a `try` importing one, that looks for "
               "the XLA stack TorchNeuron does not install")
    explanation = """\
What it does: reports string literals that are exactly the name of a torch_xla module
(`"torch_xla"`, `"torch_xla.core.xla_model"`), as written in `"torch_xla" in sys.modules`,
`importlib.util.find_spec("torch_xla")`, `importlib.import_module("torch_xla.runtime")`,
`mock.patch("torch_xla.runtime.world_size")` or `logging.getLogger("torch_xla")`.

Why: these look for the XLA stack by its module name. torch_xla is not installed with
TorchNeuron, so after the migration the check answers "no XLA" (or the import raises), and
whatever it guarded takes its other branch: often the CPU path, or no distributed set-up.
The migration removes the `import torch_xla` lines themselves, so nothing else says so.

It also reports a `try: import torch_xla... except ImportError:` (or `with
contextlib.suppress(ImportError):`) that detected the stack by importing it, once the
migration removes the import: the other way round, the body now always runs and the `except`
branch never does, on every machine (`HAVE_XLA = True` even on a CPU or GPU host). Not
reported: a guard that goes whole, because its branch only set the imported names to
constants (`except ImportError: xm = None`) or only stopped the program (`raise`,
`sys.exit`; a missing torch_xla was an error, which it no longer is), and a `try` that keeps
one of its torch_xla imports (it still fails without torch_xla).

What to do: decide what the check was for. To ask whether the Neuron device is there, use
`torch.neuron.is_available()` (or `torch.accelerator.is_available()`); if the branch only
served the XLA stack, remove it."""
    doc_url = "https://pytorch.org/docs/stable/accelerator.html"  # torch.accelerator.is_available()
    example = Example.unchanged("import sys\n\nON_XLA = \"torch_xla\" in sys.modules\n")

    def interesting_string(self, value: str) -> bool:
        return _XLA_MODULE.fullmatch(value) is not None

    def import_probe(self, line: int, handler_line: int | None) -> str:
        """The message for a `try` (`handler_line`: its `except ImportError` branch) or a
        `with suppress(ImportError)` (None) whose torch_xla import the migration removes."""
        if handler_line is None:
            what = (f"the `with` on line {line} suppressed the ImportError of a missing "
                    "torch_xla, skipping the rest of its body; without that import the body "
                    "always runs")
        else:
            what = (f"the `try` on line {line} detected PyTorch/XLA by importing it; without "
                    "that import its body always runs and its `except` branch (line "
                    f"{handler_line}) never does for want of torch_xla")
        return (f"{what}, so what it decides now takes the TorchNeuron path on every machine; "
                "if it must still work without Neuron (CPU, GPU), ask for the device instead: "
                "torch.neuron.is_available()")

    def leftover_string(self, value: str) -> str:
        return (f"{value!r} names a torch_xla module, which TorchNeuron does not install: a "
                "check for it (sys.modules, find_spec) finds nothing, so what it guards takes "
                "its other branch, and an import, patch or logger of that name has nothing to "
                "act on; ask for the device with torch.neuron.is_available(), or remove what "
                "only served XLA")


RULES: tuple[type[Rule], ...] = (XlaSpmd, MetricsAndProfiler,
                                 XlacInternals, NeuronxXlaApis, NeuronxDistributed,
                                 DeviceQueries, OldInstanceTarget, XlaEraContainer,
                                 XlaModuleByName)
