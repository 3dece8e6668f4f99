"""NMC8xx (`--from cuda`): the CUDA stack in dependency files and containers.

These rules document the decisions `codemod/deps/cuda.py` makes when a run migrates from CUDA
(`--from cuda`, or `from = ["xla", "cuda"]`); without it none of them fires, since many
repositories keep a CUDA setup beside the Neuron one on purpose. Each example is checked by
the test suite against the scanner's real output.
"""

from __future__ import annotations

from typing import ClassVar

from neuron_migrate.ruleapi import Example, Rule
from neuron_migrate.ruleapi.deps import ids
from neuron_migrate.rules.dependencies import D_UPDDLC, D_UPDMAN, DependencyRule

_DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en"
D_HOME = f"{_DOCS}/latest/torch/index.html"
D_PLUGINS = f"{_DOCS}/latest/deploy/infrastructure/plugins.html"
D_DIST = f"{_DOCS}/latest/torch/guides/torch-distributed.html"

CUDA_INDEX = "--extra-index-url https://download.pytorch.org/whl/cu121\n"
CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu\n"
NEURON_INDEX = "--extra-index-url https://pip.repos.neuron.amazonaws.com\n"


class CudaDependencyRule(DependencyRule):
    source: ClassVar[str] = ids.CUDA


class CudaTorch(CudaDependencyRule):
    id = ids.CUDA_TORCH
    name = "cuda-torch-build"
    kind = ids.CUDA_KINDS[id]
    summary = "a CUDA build of torch (`torch==X+cuNNN`) becomes the TorchNeuron set"
    explanation = """\
What it does: rewrites a `torch` pin carrying a CUDA local label (`torch==2.3.1+cu121`), or any
torch pin in a file that installs from the PyTorch CUDA wheel index, to `torch==2.14.0`, and
adds `torch-neuronx==2.14.*`, `neuronx-cc==2.*` and `nki` after it where they are missing.
Where neither the Neuron pip index nor a CUDA index to move (NMC802) is configured for it (in
the file, or for a pip command line in that command's own options), the change is reported
instead, since the Neuron packages would not resolve. torchvision and
torchaudio pinned to a CUDA build are reported: their releases for torch 2.14.0 are yours to
pick (or leave them unpinned). conda's CUDA packaging (`pytorch-cuda=12.1`, `cudatoolkit`) in
environment files, scripts and Dockerfiles is reported too.

Why: TorchNeuron is PyTorch 2.14.0 (the CPU build) with the torch-neuronx backend, its compiler
and the NKI package; AWS installs it with `torch-neuronx==2.14.* neuronx-cc==2.* nki` from the
Neuron pip index beside the PyTorch CPU wheel index. A CUDA build of torch cannot load the
backend built for 2.14.0.

What differs: a PyTorch upgrade for most projects (run your tests); the CPU build carries no
CUDA libraries, so the install is much smaller. Only with `--from cuda`."""
    doc_url = D_UPDMAN
    example = Example(before=f"{CUDA_INDEX}torch==2.3.1+cu121\n",
                      after=f"{CPU_INDEX}{NEURON_INDEX}torch==2.14.0\ntorch-neuronx==2.14.*\n"
                            "neuronx-cc==2.*\nnki\n",
                      language="requirements")


class CudaIndex(CudaDependencyRule):
    id = ids.CUDA_INDEX
    name = "cuda-wheel-index"
    kind = ids.CUDA_KINDS[id]
    summary = "the PyTorch CUDA wheel index becomes the CPU wheel index beside the Neuron index"
    explanation = """\
What it does: replaces `https://download.pytorch.org/whl/cuNNN` (also the nightly and test
variants) in `--index-url`/`--extra-index-url` options of requirements files, conda pip lists,
pip command lines and Dockerfile RUN lines with `https://download.pytorch.org/whl/cpu`, keeping
the option as written, and adds `--extra-index-url https://pip.repos.neuron.amazonaws.com`
after the first one (of each pip command) when no Neuron index is configured. A URL held in a
variable or split over lines is reported, as is a CUDA wheel URL outside an index option (a
`-f .../cu118/torch_nightly.html` find-links page, a wheel's own URL, a CI variable).

Why: TorchNeuron's torch 2.14.0 comes from the PyTorch CPU wheel index, and torch-neuronx,
neuronx-cc and nki from the Neuron pip index; AWS's install configures both.

What differs: pip finds no CUDA wheels any more; packages that only the CUDA index served
(a `+cuNNN` torchvision, NMC801) must be pinned again. Only with `--from cuda`."""
    doc_url = D_UPDMAN
    example = Example(before="pip install torch --index-url https://download.pytorch.org/whl/cu118\n",
                      after="pip install torch==2.14.0 \"torch-neuronx==2.14.*\" "
                            "\"neuronx-cc==2.*\" nki --index-url "
                            "https://download.pytorch.org/whl/cpu --extra-index-url "
                            "https://pip.repos.neuron.amazonaws.com\n",
                      language="shell")


class NvidiaPackage(CudaDependencyRule):
    id = ids.NVIDIA_PACKAGE
    name = "nvidia-package"
    kind = ids.CUDA_KINDS[id]
    summary = ("`nvidia-*` CUDA libraries are removed; other NVIDIA and GPU-only packages are "
               "reviewed")
    explanation = """\
What it does: removes the CUDA libraries that CUDA builds of torch install and projects often
pin themselves (`nvidia-cudnn-cu12`, `nvidia-nccl-cu12`, `nvidia-cublas-cu12`,
`nvidia-cuda-runtime-cu12`, ...); reports every other `nvidia-*` package (DALI, NVML's
`nvidia-ml-py`, ...) and the GPU-only packages (`flash-attn`, `xformers`, `bitsandbytes`,
`apex`, `triton`, `cupy-cuda12x`, `pynvml`) with what to use instead.

Why: nothing on Trainium loads the CUDA libraries: the Neuron runtime, compiler and
collectives replace them. The other NVIDIA packages are used by your code (a DALI data loader,
GPU monitoring through NVML), so their uses must change before they can go; Neuron devices
are watched with `neuron-monitor`, `neuron-top` and `neuron-ls`.

What differs: a smaller environment; code importing a reviewed package fails until its use is
replaced. Only with `--from cuda`."""
    doc_url = D_UPDMAN
    example = Example(before="torch==2.14.0\nnvidia-cudnn-cu12==9.1.0.70\n",
                      after="torch==2.14.0\n", language="requirements")


class CudaImage(CudaDependencyRule):
    id = ids.CUDA_IMAGE
    name = "cuda-base-image"
    kind = ids.CUDA_KINDS[id]
    summary = "CUDA and NGC base images move to a Neuron deep learning container"
    explanation = """\
What it does: reports `FROM` lines and YAML `image:` keys (Kubernetes, compose, CI) naming
`nvidia/cuda`, an NGC image (`nvcr.io/nvidia/pytorch`, `nvcr.io/nvidia/...`) or a CUDA
`pytorch/pytorch` tag, suggesting the Neuron deep learning container family.

Why: those images carry the CUDA toolkit and a CUDA build of PyTorch, and none of the Neuron
runtime, driver libraries or packages. From Neuron 2.33 the Neuron containers
(public.ecr.aws/neuron/) are Ubuntu 26.04 with Python 3.14; AWS lists a PyTorch training
container with TorchNeuron, but its repository and tag are not yet confirmed, so no image is
written for you.

What differs: a new OS and Python in the image; the alternative is Ubuntu 24.04/26.04 with
the TorchNeuron pip install (NMC801). Only with `--from cuda`."""
    doc_url = D_UPDDLC
    example = Example(before="FROM nvcr.io/nvidia/pytorch:24.05-py3\n",
                      after="FROM nvcr.io/nvidia/pytorch:24.05-py3\n", language="dockerfile")


class CudaVisibleDevices(CudaDependencyRule):
    id = ids.CUDA_VISIBLE
    name = "cuda-visible-devices-env"
    kind = ids.CUDA_KINDS[id]
    severity = "warning"
    summary = "`CUDA_VISIBLE_DEVICES` is reviewed: the runtime reads `NEURON_RT_VISIBLE_CORES`"
    explanation = """\
What it does: reports `CUDA_VISIBLE_DEVICES` and `NVIDIA_VISIBLE_DEVICES` set by `ENV`,
`export`, a command prefix, `%env`, or a YAML `env` map or `- name:/value:` list, suggesting
`NEURON_RT_VISIBLE_CORES`.

Why: the Neuron runtime ignores both; it restricts a process to the NeuronCores named by
`NEURON_RT_VISIBLE_CORES` (a core, a list or a range such as `0-1`). The numbers do not carry
over: a core is not a GPU, and one Trainium device holds several cores. Under torchrun the
`neuron` process group sets it to the local rank itself when it is unset, so most launch
scripts need no setting at all.

What differs: set it only to confine a process to chosen cores; count cores, not GPUs. Only
with `--from cuda`."""
    doc_url = D_DIST
    example = Example(before="export CUDA_VISIBLE_DEVICES=0,1\n",
                      after="export CUDA_VISIBLE_DEVICES=0,1\n", language="shell")


class GpuRequest(CudaDependencyRule):
    id = ids.GPU_REQUEST
    name = "gpu-resource-request"
    kind = ids.CUDA_KINDS[id]
    summary = ("`nvidia.com/gpu`, compose NVIDIA devices and `--gpus` are reviewed: Neuron "
               "requests replace them")
    explanation = """\
What it does: reports Kubernetes `nvidia.com/gpu` resource requests and limits (and
`nvidia.com/gpu.*` node labels, `runtimeClassName: nvidia`), Docker Compose `runtime: nvidia`
and `driver: nvidia` device reservations, `docker run --gpus` and `--runtime=nvidia`, and
SLURM's `--gres=gpu` and `--gpus-per-node`, suggesting `aws.amazon.com/neuroncore` or
`aws.amazon.com/neuron` from the Neuron device plugin, `--device=/dev/neuron0` (one per
device) for Docker, and whole nodes (`--exclusive`) for SLURM.

Why: the Neuron device plugin advertises NeuronCores (`aws.amazon.com/neuroncore`) and whole
devices (`aws.amazon.com/neuron`); a pod asking for GPUs is never scheduled on a Trainium
node. Containers outside Kubernetes get the devices as `/dev/neuronN`.

What differs: the count: one torchrun worker uses one NeuronCore, and a device holds several,
so a request for 8 GPUs is not a request for 8 of either. Only with `--from cuda`."""
    doc_url = D_PLUGINS
    example = Example(before="resources:\n  limits:\n    nvidia.com/gpu: 8\n",
                      after="resources:\n  limits:\n    nvidia.com/gpu: 8\n", language="yaml")


class GpuTool(CudaDependencyRule):
    id = ids.GPU_TOOL
    name = "gpu-tool"
    kind = ids.CUDA_KINDS[id]
    severity = "warning"
    summary = "`nvidia-smi`, `nvcc` and `TORCH_CUDA_ARCH_LIST` are reviewed with Neuron's tools"
    explanation = """\
What it does: reports `nvidia-smi` and `nvcc` in scripts, Dockerfiles and YAML commands, and
`TORCH_CUDA_ARCH_LIST` wherever it is set, with what to use instead.

Why: on a Trainium host there is no NVIDIA driver to query and no GPU to compile for: a
script that calls `nvidia-smi` to list or check GPUs fails there. `neuron-ls` lists the
Neuron devices and their NeuronCores, and `neuron-top` and `neuron-monitor` show their use.
CUDA kernels built with `nvcc` (custom extensions, NMC6xx in the code) cannot run; a custom
kernel for the NeuronCore is written in NKI.

What differs: the output of the Neuron tools has its own format, so a script that parses
`nvidia-smi` output needs rewriting, not a new command name. Only with `--from cuda`."""
    doc_url = f"{_DOCS}/latest/tools/neuron-sys-tools/index.html"
    example = Example(before="nvidia-smi --query-gpu=name --format=csv\n",
                      after="nvidia-smi --query-gpu=name --format=csv\n", language="shell")


RULES: tuple[type[Rule], ...] = (CudaTorch, CudaIndex, NvidiaPackage, CudaImage,
                                 CudaVisibleDevices, GpuRequest, GpuTool)
