"""NMC6xx (`--from cuda`): GPU-only libraries and kernels, reviewed with what to use instead."""

from __future__ import annotations

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Review, Rule, Site, code, keyword,
                                    string_value)
from neuron_migrate.rules.cuda_placement import CUDA
from neuron_migrate.rules.review_base import ReviewRule

D_HOME = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html"
D_NKI = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/how-to-work-with-nki.html"
_SDPA = "torch.nn.functional.scaled_dot_product_attention"


class Apex(ReviewRule):
    id = "NMC601"
    name = "apex"
    summary = "NVIDIA Apex (amp, fused optimizers and layers, apex DDP) is reviewed: plain PyTorch replaces it"
    explanation = """\
What it does: reports every use of `apex`, with the plain PyTorch replacement for each part.

Why: Apex is NVIDIA's extension library; its fused kernels are CUDA code and do not run on
Trainium. PyTorch has absorbed what it offered: `apex.amp` is `torch.autocast("neuron",
dtype=torch.bfloat16)`; `FusedAdam`/`FusedLAMB` are `torch.optim.AdamW` (or another
`torch.optim` optimizer); `FusedLayerNorm`/`FusedRMSNorm` are `torch.nn.LayerNorm`/
`torch.nn.RMSNorm`; `apex.parallel.DistributedDataParallel` is
`torch.nn.parallel.DistributedDataParallel` with the "neuron" backend.

What differs: the code is unchanged; the import fails where Apex is not installed, so the
report asks for the replacement by hand (fused optimizers differ slightly in their numerics)."""
    doc_url = D_HOME
    example = Example.unchanged("from apex.optimizers import FusedAdam\n\nopt = FusedAdam(params)\n")
    source = CUDA
    tokens = (b"apex",)
    guidance = {
        "apex": "Apex is CUDA-only: use plain PyTorch (torch.autocast, torch.optim, torch.nn)",
        "apex.amp": "use torch.autocast(\"neuron\", dtype=torch.bfloat16); bfloat16 needs no "
                    "loss scaling",
        "apex.optimizers": "use the torch.optim optimizer of the same name (FusedAdam → "
                           "torch.optim.AdamW with adam_w_mode, else Adam)",
        "apex.normalization": "use torch.nn.LayerNorm / torch.nn.RMSNorm",
        "apex.parallel": "use torch.nn.parallel.DistributedDataParallel with the \"neuron\" "
                         "process-group backend (SyncBatchNorm: torch.nn.SyncBatchNorm)",
    }


class FlashAttention(ReviewRule):
    id = "NMC602"
    name = "flash-attention"
    summary = "`flash_attn` and `xformers` attention kernels are reviewed: use `scaled_dot_product_attention`"
    explanation = """\
What it does: reports every use of `flash_attn` and `xformers`, leaving the code as it is.

Why: FlashAttention and xFormers ship CUDA (and Triton) kernels. PyTorch's
`torch.nn.functional.scaled_dot_product_attention` computes the same attention on any device
and is what the neuron device runs; hot spots can later get an NKI kernel.

What differs: the code is unchanged. When you switch, mind the layouts: flash_attn_func and
xformers' memory_efficient_attention take (batch, seq, heads, dim) where
scaled_dot_product_attention takes (batch, heads, seq, dim); causal masks become
`is_causal=True`, dropout `dropout_p=`, and the softmax scale `scale=`."""
    doc_url = "https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html"
    example = Example.unchanged(
        "from flash_attn import flash_attn_func\n\nout = flash_attn_func(q, k, v, causal=True)\n")
    source = CUDA
    tokens = (b"flash_attn", b"xformers")
    guidance = {
        "flash_attn": f"FlashAttention is CUDA-only: use {_SDPA} (transpose (batch, seq, heads, "
                      "dim) to (batch, heads, seq, dim); causal=True → is_causal=True)",
        "xformers": f"xFormers kernels are CUDA-only: use {_SDPA} (memory_efficient_attention "
                    "takes (batch, seq, heads, dim); SDPA takes (batch, heads, seq, dim))",
    }


class Bitsandbytes(ReviewRule):
    id = "NMC603"
    name = "bitsandbytes"
    summary = "bitsandbytes 8-bit optimizers and quantization are reviewed: they are CUDA-only"
    explanation = """\
What it does: reports every use of `bitsandbytes`, leaving the code as it is.

Why: bitsandbytes' 8-bit optimizers and 4/8-bit quantized layers are CUDA kernels. On
Trainium, train with the full-precision `torch.optim` optimizer (`bnb.optim.AdamW8bit` →
`torch.optim.AdamW`) in bfloat16 autocast, and load models in `torch.bfloat16` rather than
quantized with `load_in_8bit`/`load_in_4bit`/`BitsAndBytesConfig`.

What differs: the code is unchanged. Replacing an 8-bit optimizer raises its state memory
(two float32 moments per parameter); quantized inference has no drop-in equivalent here."""
    doc_url = D_HOME
    example = Example.unchanged(
        "import bitsandbytes as bnb\n\nopt = bnb.optim.AdamW8bit(params, lr=1e-4)\n")
    source = CUDA
    tokens = (b"bitsandbytes",)
    guidance = {"bitsandbytes": "bitsandbytes is CUDA-only: use torch.optim.AdamW and "
                                "bfloat16 weights instead of 8-bit optimizers or quantization",
                "transformers.BitsAndBytesConfig": "bitsandbytes quantization is CUDA-only: "
                                                   "load the model in torch.bfloat16"}


class Triton(ReviewRule):
    id = "NMC604"
    name = "triton-kernel"
    summary = "Triton kernels are reviewed: write them in PyTorch, or as NKI kernels"
    explanation = """\
What it does: reports every use of `triton` (`@triton.jit` kernels, `triton.language`,
launch grids, autotune configs), leaving the code as it is.

Why: Triton compiles to GPU code only. On Trainium a custom kernel is written with NKI (the
Neuron Kernel Interface, `nki.jit`, called from PyTorch through `torch_neuronx`'s NKI
integration); most Triton kernels in training scripts fuse a few elementwise or reduction
operations that plain PyTorch under `torch.compile(backend="neuron")` fuses by itself.

What differs: the code is unchanged; it fails to import where Triton is not installed.
Start with the plain PyTorch version of the kernel (a reference implementation is usually in
the same repository, for testing), and write an NKI kernel only where profiling asks for it."""
    doc_url = D_NKI
    example = Example.unchanged("import triton\n\n\n@triton.jit\ndef add_kernel(x_ptr):\n"
                                "    pass\n")
    source = CUDA
    tokens = (b"triton",)
    guidance = {"triton": "Triton kernels run on GPUs only: use the plain PyTorch operations "
                          "(compiled with backend=\"neuron\"), or write an NKI kernel"}


class CudaExtension(ReviewRule):
    id = "NMC605"
    name = "cuda-extension"
    summary = "`torch.utils.cpp_extension` CUDA sources are reviewed: port the kernels to NKI or PyTorch"
    explanation = """\
What it does: reports `torch.utils.cpp_extension.CUDAExtension`, `load`, `load_inline` and
`BuildExtension`, leaving the code as it is.

Why: a C++/CUDA extension's `.cu` sources compile with nvcc for NVIDIA GPUs only; the neuron
device cannot run them. C++ code for the CPU (`CppExtension`, `load` of `.cpp` files only)
still builds and runs, on the host. The operations the CUDA kernels implement need a plain
PyTorch form (the extension often has one as its fallback or test reference) or an NKI kernel.

What differs: the code is unchanged; building fails where nvcc is missing."""
    doc_url = D_NKI
    example = Example.unchanged(
        "from torch.utils.cpp_extension import load\n\nops = load(\"ops\", [\"ops.cpp\", "
        "\"kernel.cu\"])\n")
    source = CUDA
    tokens = (b"cpp_extension",)
    watches = ("torch.utils.cpp_extension",)
    guidance = {f"torch.utils.cpp_extension.{name}": (
        "CUDA sources build for NVIDIA GPUs only: port the kernels to plain PyTorch or NKI "
        "(C++ CPU sources still build)") for name in ("CUDAExtension", "load", "load_inline",
                                                      "BuildExtension")}


_DEVICE_MAPS = frozenset({"auto", "balanced", "balanced_low_0", "sequential"})


class DeviceMap(Rule):
    id = "NMC606"
    name = "hf-device-map"
    kind = Kind.REVIEW
    summary = "Hugging Face `device_map=\"auto\"`/`\"cuda\"` is reviewed: TorchNeuron's is `device_map=\"neuron\"`"
    explanation = """\
What it does: reports `device_map=` arguments whose value places a model on GPUs ("auto",
"balanced", "sequential", "cuda", "cuda:N", a GPU index or a dict), typically in
`from_pretrained(...)` or `pipeline(...)`, leaving the code as it is.

Why: Accelerate's device maps spread a model over the GPUs CUDA reports. With TorchNeuron the
model goes to the NeuronCore: `device_map="neuron"` (or load on the CPU and `.to("neuron")`);
a model too large for one core is sharded with torch.distributed (FSDP2, tensor parallelism)
rather than by a device map.

What differs: the code is unchanged; on a machine without GPUs "auto" loads the model on the
CPU, which runs, but slowly."""
    doc_url = D_HOME
    example = Example.unchanged(
        "model = AutoModelForCausalLM.from_pretrained(name, device_map=\"auto\")\n")
    source = CUDA
    tokens = (b"device_map",)
    attributes = frozenset({"device_map"})

    def on_any_call(self, node: cst.Call, site: Site) -> Outcome | None:
        arg = keyword(node.args, "device_map")
        if arg is None:
            return None
        value = string_value(arg.value)
        gpu = value in _DEVICE_MAPS or (value or "").startswith("cuda") or \
            isinstance(arg.value, (cst.Integer, cst.Dict))
        if not gpu:
            return None
        return Review(f"`device_map={code(arg.value)}` places the model on GPUs; with TorchNeuron "
                      "use device_map=\"neuron\" (or load it and call .to(\"neuron\"))",
                      suggestion="device_map=\"neuron\"")


RULES: tuple[type[Rule], ...] = (Apex, FlashAttention, Bitsandbytes, Triton, CudaExtension,
                                 DeviceMap)
