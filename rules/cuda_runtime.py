"""NMC2xx (`--from cuda`): synchronisation, RNG and memory move to `torch.neuron`; CUDA's
streams, events, graphs, NVTX ranges and cuDNN switches are removed or reviewed."""

from __future__ import annotations

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Remove, Replace, Review, Role, Rule,
                                    Site, code)
from neuron_migrate.rules.cuda_placement import CUDA, CUDA_TOKENS, neuron_counterpart
from neuron_migrate.rules.review_base import ReviewRule
from neuron_migrate.rules.runtime import side_effect_free

D_MEM = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/memory-profiling-guide.html"
D_HOME = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html"
D_ABOUT = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/about-pytorch-neuron.html"
PT_PROFILER = "https://docs.pytorch.org/docs/stable/profiler.html"

_RNG = ("manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
        "set_rng_state", "get_rng_state_all", "set_rng_state_all")
_MEMORY = ("empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "memory_stats", "memory_summary", "reset_peak_memory_stats",
           "reset_accumulated_memory_stats")


class CudaSynchronize(Rule):
    id = "NMC201"
    name = "cuda-synchronize"
    kind = Kind.FIX
    summary = "`torch.cuda.synchronize()` becomes `torch.neuron.synchronize()`"
    explanation = """\
What it does: `torch.cuda.synchronize(...)` becomes `torch.neuron.synchronize(...)`, with the
same argument.

Why: TorchNeuron queues device work asynchronously, as CUDA does, and `torch.neuron.synchronize()`
waits for it; AWS's memory-profiling guide uses it to time and measure steady state. Timing
code written as `synchronize(); t0 = time.time(); ...; synchronize()` keeps measuring what
it measured.

What differs: nothing the program computes."""
    doc_url = D_MEM
    example = Example(
        before="import torch\n\ntorch.cuda.synchronize()\n",
        after="import torch\n\ntorch.neuron.synchronize()\n",
    )
    source = CUDA
    tokens = CUDA_TOKENS
    calls = frozenset({"torch.cuda.synchronize"})
    watches = ("torch.cuda",)
    emits = ("torch.neuron.synchronize",)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        return neuron_counterpart(node, site)


class CudaRng(Rule):
    id = "NMC202"
    name = "cuda-rng"
    kind = Kind.FIX
    summary = "`torch.cuda.manual_seed(_all)`, `seed`, `initial_seed` and the RNG state functions become `torch.neuron`'s"
    explanation = """\
What it does: `torch.cuda.manual_seed`, `manual_seed_all`, `seed`, `seed_all`,
`initial_seed`, `get_rng_state(_all)` and `set_rng_state(_all)` become the functions of the
same name in `torch.neuron`, with the same arguments.

Why: random numbers drawn on a device come from that device's generator. TorchNeuron's device
module has the standard RNG entry points (the ones `torch.manual_seed` itself calls for every
device), so seeding the NeuronCore's generator is what seeding the GPU's was.

What differs: the sequences: the same seed gives other numbers on another device's generator,
so results seeded on a GPU are not reproduced bit for bit. A CUDA generator state saved in an
old checkpoint is not a NeuronCore's: `set_rng_state` with such a state needs a look (the
message says so); states saved after the migration round-trip as before."""
    doc_url = D_HOME
    example = Example(
        before="import torch\n\ntorch.cuda.manual_seed_all(seed)\n",
        after="import torch\n\ntorch.neuron.manual_seed_all(seed)\n",
    )
    source = CUDA
    tokens = CUDA_TOKENS
    calls = frozenset(f"torch.cuda.{name}" for name in _RNG)
    emits = tuple(f"torch.neuron.{name}" for name in _RNG)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        note = ""
        if (site.qualname or "").startswith("torch.cuda.set_rng_state"):
            note = (" (a CUDA generator state from an older checkpoint does not fit the "
                    "NeuronCore's generator; states saved after the migration do)")
        return neuron_counterpart(node, site, note)


class CudaMemory(Rule):
    id = "NMC203"
    name = "cuda-memory"
    kind = Kind.FIX
    summary = "`torch.cuda.empty_cache()` and the memory statistics become `torch.neuron`'s"
    explanation = """\
What it does: `torch.cuda.empty_cache`, `memory_allocated`, `max_memory_allocated`,
`memory_reserved`, `max_memory_reserved`, `memory_stats`, `memory_summary`,
`reset_peak_memory_stats` and `reset_accumulated_memory_stats` become the functions of the
same name in `torch.neuron`.

Why: TorchNeuron's device module reports its caching allocator the way `torch.cuda` does
(AWS's memory-profiling guide reads these statistics), so logging and peak-memory code keeps
working and reports the NeuronCore's memory.

What differs: the numbers describe another allocator on another device: thresholds tuned on a
GPU's memory (a batch size chosen from `max_memory_allocated`) need a fresh look."""
    doc_url = D_MEM
    example = Example(
        before="import torch\n\npeak = torch.cuda.max_memory_allocated() / 2**30\n"
               "torch.cuda.empty_cache()\n",
        after="import torch\n\npeak = torch.neuron.max_memory_allocated() / 2**30\n"
              "torch.neuron.empty_cache()\n",
    )
    source = CUDA
    tokens = CUDA_TOKENS
    calls = frozenset(f"torch.cuda.{name}" for name in _MEMORY)
    emits = tuple(f"torch.neuron.{name}" for name in _MEMORY)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        return neuron_counterpart(node, site)


class CudaStreams(ReviewRule):
    id = "NMC204"
    name = "cuda-streams-events"
    summary = "CUDA streams and events are reviewed: overlap and timing work differently on Trainium"
    explanation = """\
What it does: reports `torch.cuda.Stream`, `Event`, `stream`, `current_stream`,
`default_stream` and `set_stream`, leaving the code as it is.

Why: streams order and overlap GPU kernels; events time them or make one stream wait for
another. TorchNeuron queues work asynchronously and fuses queued operations itself (Adaptive
Eager Execution), and overlaps collectives with compute in its own way, so code built around
CUDA streams rarely carries over as it is. For timing, wrap the region in
`torch.neuron.synchronize()` and a host clock (`time.perf_counter()`); for overlap, drop the
stream and let the runtime schedule.

What differs: the code is unchanged; on a machine without CUDA these calls fail, so the
report asks for a decision."""
    doc_url = D_ABOUT
    example = Example.unchanged(
        "import torch\n\nstart = torch.cuda.Event(enable_timing=True)\n")
    source = CUDA
    tokens = CUDA_TOKENS
    watches = ("torch.cuda",)
    guidance = {f"torch.cuda.{name}": (
        "CUDA streams and events have no direct counterpart here: time with "
        "torch.neuron.synchronize() and time.perf_counter(), and let the runtime schedule "
        "overlap") for name in ("Stream", "Event", "stream", "current_stream",
                                "default_stream", "set_stream", "StreamContext",
                                "ExternalStream")}


class CudaGraphs(ReviewRule):
    id = "NMC205"
    name = "cuda-graphs"
    summary = "CUDA graphs (`torch.cuda.graph`, `CUDAGraph`, `make_graphed_callables`) have no Neuron equivalent"
    explanation = """\
What it does: reports `torch.cuda.graph`, `torch.cuda.CUDAGraph`, `torch.cuda.graphs`,
`make_graphed_callables` and `graph_pool_handle`, leaving the code as it is.

Why: CUDA graphs record a sequence of kernels once and replay it to save launch overhead.
TorchNeuron has no equivalent (AWS's FAQ), and it needs none: graph-level speed comes from
`torch.compile(model, backend="neuron", dynamic=False)`, which compiles the model into a
Neuron graph. Remove the capture and replay code and run the step directly, or compile it.

What differs: the code is unchanged; it fails on a machine without CUDA, so the report asks
for the rewrite by hand."""
    doc_url = D_HOME
    example = Example.unchanged("import torch\n\ng = torch.cuda.CUDAGraph()\n")
    source = CUDA
    tokens = CUDA_TOKENS
    watches = ("torch.cuda",)
    guidance = {f"torch.cuda.{name}": (
        "CUDA graphs have no Neuron equivalent: run the step directly, or compile the model "
        "with torch.compile(model, backend=\"neuron\", dynamic=False)")
        for name in ("graph", "graphs", "CUDAGraph", "make_graphed_callables",
                     "graph_pool_handle")}


_NVTX = "torch.cuda.nvtx"


class Nvtx(Rule):
    id = "NMC206"
    name = "nvtx-range"
    kind = Kind.FIX
    summary = "NVTX annotations (`torch.cuda.nvtx.range_push/range_pop/mark`, `with nvtx.range(...)`) are removed"
    explanation = """\
What it does: deletes `torch.cuda.nvtx.range_push(...)`, `range_pop()` and `mark(...)`
statements, and unwraps `with torch.cuda.nvtx.range(...):`, keeping its body.

Why: NVTX ranges only label time spans for NVIDIA's profilers (Nsight); they compute nothing.
On Trainium, profile with `torch.profiler` (and label regions with
`torch.profiler.record_function("name")`), which the Neuron profiler reads.

What differs: nothing the program computes; the labels disappear from profiles. A call whose
value is used, or whose arguments might do something, is reported for review."""
    doc_url = PT_PROFILER
    example = Example(
        before="import torch\n\ntorch.cuda.nvtx.range_push(\"forward\")\nloss = model(x)\n"
               "torch.cuda.nvtx.range_pop()\n",
        after="import torch\n\nloss = model(x)\n",
    )
    source = CUDA
    tokens = CUDA_TOKENS
    calls = frozenset(f"{_NVTX}.{name}" for name in ("range_push", "range_pop", "mark", "range",
                                                     "range_start", "range_end"))

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        why = "NVTX labels exist only for NVIDIA's profilers; use torch.profiler.record_function"
        if not all(side_effect_free(a) for a in node.args) or site.role is Role.EXPRESSION:
            return Review(f"`{code(node)}`: {why}; delete it")
        if site.qualname == f"{_NVTX}.range" and site.role is not Role.WITH_ITEM:
            return Review(f"`{code(node)}`: {why}; delete it")
        return Remove(f"deleted `{code(node)}`: {why}")


_REMOVED_FLAGS = {
    "torch.backends.cudnn.benchmark": "cuDNN's autotuner",
    "torch.backends.cudnn.enabled": "whether cuDNN kernels are used",
    "torch.backends.cudnn.allow_tf32": "TF32 in cuDNN convolutions",
    "torch.backends.cuda.matmul.allow_tf32": "TF32 in cuBLAS matrix products",
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
        "reduced-precision reductions in cuBLAS",
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction":
        "reduced-precision reductions in cuBLAS",
}
_DETERMINISTIC = "torch.backends.cudnn.deterministic"


class CudnnFlags(Rule):
    id = "NMC207"
    name = "cudnn-flags"
    kind = Kind.FIX
    summary = "`torch.backends.cudnn.benchmark` and the TF32 switches are removed; `cudnn.deterministic` is reviewed"
    explanation = """\
What it does: deletes assignments to `torch.backends.cudnn.benchmark`, `.enabled`,
`.allow_tf32` and `torch.backends.cuda.matmul.allow_tf32` (and the cuBLAS reduced-precision
switches); reports `torch.backends.cudnn.deterministic = ...`.

Why: these switches choose among NVIDIA's cuDNN and cuBLAS kernels, which the `neuron` device
never runs: left in place they do nothing, and they suggest a tuning that no longer exists.
`cudnn.deterministic` expresses a wish for reproducible results, which has to be restated:
`torch.use_deterministic_algorithms(True)` asks for it on every device (on Trainium it also
turns off the fusion of queued operations, which costs speed).

What differs: nothing on the neuron device. Code that still runs part of the work on a GPU
loses these settings there."""
    doc_url = D_ABOUT
    example = Example(
        before="import torch\n\ntorch.backends.cudnn.benchmark = True\n",
        after="import torch\n",
    )
    source = CUDA
    tokens = (b"cudnn", b"cuda")
    watches = ("torch.backends.cudnn", "torch.backends.cuda")
    prefixes = (_DETERMINISTIC,)

    def on_assign(self, node: cst.Assign | cst.AugAssign, site: Site) -> Outcome | None:
        if not isinstance(node, cst.Assign) or len(node.targets) != 1:
            return None
        qualname = site.qualname_of(node.targets[0].target)
        if qualname == _DETERMINISTIC:
            return Review(f"`{code(node).strip()}`: cuDNN is not used on Trainium; for "
                          "reproducible results use torch.use_deterministic_algorithms(True) "
                          "(it also turns off the fusion of queued operations)")
        what = _REMOVED_FLAGS.get(qualname or "")
        if what is None or site.role is not Role.STATEMENT or not side_effect_free(node.value):
            return None
        return Remove(f"deleted `{code(node).strip()}`: it sets {what}, which the neuron "
                      "device never uses")

    def leftover_reference(self, qualname: str) -> str:
        return (f"`{qualname}`: cuDNN is not used on Trainium; for reproducible results use "
                "torch.use_deterministic_algorithms(True)")


_ACTIVITY = frozenset(f"{module}.ProfilerActivity.CUDA" for module in (
    "torch.profiler", "torch.autograd", "torch.autograd.profiler", "torch._C._profiler"))
D_PROF = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-explorer/how-to-profile-pytorch.html"


class ProfilerActivity(Rule):
    id = "NMC208"
    name = "profiler-cuda-activity"
    kind = Kind.FIX
    summary = "`ProfilerActivity.CUDA` becomes `ProfilerActivity.PrivateUse1`, the neuron device's activity"
    explanation = """\
What it does: in `torch.profiler.profile(activities=[...])` and anywhere else,
`ProfilerActivity.CUDA` becomes `ProfilerActivity.PrivateUse1`.

Why: the profiler records device activity per backend; the `neuron` device is PyTorch's
PrivateUse1 backend, and AWS's profiling guide asks for
`activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]` (extended with a
NeuronConfig for Neuron Explorer). Asking for CUDA activity on Trainium records nothing.

What differs: the trace holds NeuronCore activity instead of CUDA kernels. Tables sorted by
"cuda_time_total" need another key (for example "cpu_time_total")."""
    doc_url = D_PROF
    example = Example(
        before="from torch.profiler import ProfilerActivity, profile\n\n"
               "prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])\n",
        after="from torch.profiler import ProfilerActivity, profile\n\n"
              "prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])\n",
    )
    source = CUDA
    tokens = (b"ProfilerActivity",)
    names = _ACTIVITY
    watches = tuple(sorted(_ACTIVITY))
    emits = ("torch.profiler.ProfilerActivity.PrivateUse1",)

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        if not isinstance(node, cst.Attribute):
            return Review(f"`{code(node)}`: use ProfilerActivity.PrivateUse1, the neuron "
                          "device's activity")
        new = node.with_changes(attr=cst.Name("PrivateUse1"))
        return Replace(new, f"`{code(node)}` → `{code(new)}`: the neuron device is PyTorch's "
                       "PrivateUse1 backend")


class CudaOther(ReviewRule):
    id = "NMC299"
    name = "cuda-unmapped"
    summary = "other `torch.cuda` and `torch.backends.cuda(nn)` APIs have no automatic rewrite"
    explanation = """\
What it does: reports every `torch.cuda.*` and `torch.backends.cudnn.*` reference that no other
rule rewrites (compute capability, `torch.cuda.amp.custom_fwd`, NCCL internals, memory
fractions, IPC, ...), leaving the code as it is.

Why: most of `torch.cuda` has a `torch.neuron` counterpart that the NMC1xx/NMC2xx rules use;
what is left either has none or asks a question about NVIDIA hardware (`get_device_capability`,
`is_bf16_supported` on a given GPU generation) whose answer decides code paths. A person has to
decide what the neuron path should be; `torch.accelerator` offers device-agnostic forms of
several of these.

What differs: the code is unchanged; on a machine without CUDA most of these calls fail, which
`neuron-migrate smoke` shows."""
    doc_url = D_HOME
    example = Example.unchanged(
        "import torch\n\nmajor, minor = torch.cuda.get_device_capability()\n")
    source = CUDA
    tokens = (b"cudnn", b"cuda")
    watches = ("torch.cuda", "torch.backends.cudnn", "torch.backends.cuda")
    guidance = {
        "torch.cuda": "no automatic rewrite: use its torch.neuron or torch.accelerator "
                      "counterpart, or drop the GPU-specific code",
        "torch.backends.cudnn": "cuDNN is not used on Trainium; drop the code that depends "
                                "on it",
        "torch.backends.cuda": "CUDA backend settings do not apply on Trainium; drop them",
        **{f"torch.cuda.{kind}Tensor": (
            "a legacy typed CUDA tensor: create it with torch.tensor(...) or torch.empty(...), "
            "giving dtype= and device=\"neuron\"")
           for kind in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char",
                        "Byte", "Bool")},
    }


RULES: tuple[type[Rule], ...] = (CudaSynchronize, CudaRng, CudaMemory, CudaStreams, CudaGraphs,
                                 Nvtx, CudnnFlags, ProfilerActivity, CudaOther)
