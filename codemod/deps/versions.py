"""What a version or a version range of the Neuron packages means. TorchNeuron and the
XLA-based library are both published as `torch-neuronx`, so the version alone tells them apart.

Every version question goes through packaging's `Version` and `SpecifierSet`: a range is
judged by which *published* versions it admits, so `~=2.9.0`, `<2.13` and `>=2.1,<2.10` need
no hand-written interpretation.
"""

from __future__ import annotations

import enum
import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

NATIVE_TORCH = "torch==2.14.0"
NATIVE_NEURONX = "torch-neuronx==2.14.*"
NATIVE_COMPILER = "neuronx-cc==2.*"
NATIVE_NKI = "nki"
NATIVE_TORCH_VERSION = Version("2.14.0")
CURRENT_COMPILER = Version("2.28.7631.0")  # neuronx-cc shipped with Neuron 2.33
NATIVE_TARGET = Version("2.14.3.0")

RELEVANT = frozenset({
    "torch", "torch-neuronx", "neuronx-cc", "nki", "torch-xla", "libneuronxla", "torch-neuron",
    "optimum-neuron", "neuronx-distributed", "neuronx-distributed-training",
    "neuronx-distributed-inference", "transformers-neuronx",
})
"""The packages any dependency decision looks at; other requirements are never parsed."""

NEURON_INDEX_HOST = "pip.repos.neuron.amazonaws.com"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

# Every XLA-lineage torch-neuronx published from Neuron 2.3 to 2.31 (GH-sdk manifest, 5.3),
# ranges (`a` ... `b`) represented by their ends. A range admitting one of these can resolve
# to the XLA library.
_XLA_PUBLISHED = (
    "1.11.0.1.1.1", "1.11.0.1.2.0", "1.12.0.1.4.0", "1.13.0.1.4.0", "1.13.0.1.6.1",
    "1.13.1.1.7.0", "1.13.1.1.17.0", "2.0.0.2.0.0b0", "2.0.0.2.0.1b0", "2.1.1.2.0.0b0",
    "2.1.1.2.0.1b0", "2.1.2.2.1.0", "2.1.2.2.4.0", "2.5.1.2.4.0", "2.5.1.2.8.6734",
    "2.6.0.2.7.5413", "2.6.0.2.10.16998", "2.7.0.2.8.6734", "2.7.0.2.12.22436",
    "2.8.0.2.10.13553", "2.8.0.2.12.22436", "2.9.0.2.11.19912", "2.9.0.2.13.26312",
    "2.9.0.2.15.32035",
)
XLA_PUBLISHED = tuple(Version(v) for v in _XLA_PUBLISHED)
# Private-beta native builds for PyTorch 2.10-2.12 have no public version strings; these
# stand-ins share their torch part, which is all a range can say about them.
NATIVE_ERA_TORCH = tuple(Version(f"2.{minor}.0") for minor in range(10, 15))
"""torch releases a native torch-neuronx exists (or existed in beta) for."""
BETA_PROBES = tuple(Version(v) for v in ("2.10.0", "2.11.0", "2.12.0", "2.13.3.0"))


class Lineage(str, enum.Enum):
    XLA = "XLA lineage"
    BETA = "native beta (2.10-2.13)"
    NATIVE = "native"
    UNPINNED = "unpinned"
    AMBIGUOUS = "a range that admits XLA-lineage versions"


def name_of(text: str) -> str:
    """PEP 503 normal form: `Torch_NeuronX` and `torch-neuronx` are one package."""
    return canonicalize_name(text)


def torch_minor(version: Version) -> tuple[int, int]:
    release = (*version.release, 0)
    return release[0], release[1]


def lineage_of_version(version: Version) -> Lineage:
    """The torch part decides (torch-neuronx follows torch's major.minor: 2.9 and lower is the
    XLA library, 2.10 to 2.13 native beta builds); five or more release parts with a plugin
    generation of 1 or 2 in the fourth place are the XLA library whatever the torch part says."""
    release = version.release
    if len(release) >= 5 and release[3] in (1, 2):
        return Lineage.XLA
    major, minor = torch_minor(version)
    if major < 2 or (major == 2 and minor <= 9):
        return Lineage.XLA
    if major == 2 and minor <= 13:
        return Lineage.BETA
    return Lineage.NATIVE


def exact_version(spec: SpecifierSet) -> Version | None:
    """The one version an `==X` / `===X` pin names (no wildcard), else None."""
    specifiers = list(spec)
    if len(specifiers) != 1 or specifiers[0].operator not in ("==", "===") \
            or specifiers[0].version.endswith(".*"):
        return None
    try:
        return Version(specifiers[0].version)
    except InvalidVersion:
        return None


def lineage_of_spec(spec: SpecifierSet) -> Lineage:
    """A range by the published versions it admits: XLA ones, the native target, or both (which
    may resolve to the XLA library, so it is ambiguous)."""
    if not str(spec):
        return Lineage.UNPINNED
    exact = exact_version(spec)
    if exact is not None:
        return lineage_of_version(exact)
    admits_xla = any(spec.contains(v, prereleases=True) for v in XLA_PUBLISHED)
    admits_target = spec.contains(NATIVE_TARGET, prereleases=True)
    if admits_xla:
        return Lineage.AMBIGUOUS if admits_target else Lineage.XLA
    if not admits_target and any(spec.contains(v, prereleases=True) for v in BETA_PROBES):
        return Lineage.BETA
    return Lineage.NATIVE


def parse_spec(text: str) -> SpecifierSet | None:
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        return None


def admits(spec: SpecifierSet, version: Version) -> bool:
    return not str(spec) or spec.contains(version, prereleases=True)


def is_neuron_index(url: str) -> bool:
    return NEURON_INDEX_HOST in url


def is_cpu_index(url: str) -> bool:
    return "download.pytorch.org/whl/cpu" in url


# `--from cuda`: AWS's TorchNeuron install takes torch from the PyTorch CPU index and
# torch-neuronx from the Neuron index
NEURON_INDEX = f"https://{NEURON_INDEX_HOST}"
CUDA_COMPANIONS = frozenset({"torchvision", "torchaudio"})
"""Built per CUDA release beside torch (`torchvision==0.18.1+cu121`); their release for torch
2.14.0 is not one this tool knows, so they are reviewed."""
CUDA_RUNTIME_WHEEL = re.compile(
    r"nvidia-(?:cublas|cuda-cupti|cuda-nvrtc|cuda-runtime|cuda-nvcc|cudnn|cufft|cufile|curand|"
    r"cusolver|cusparse|cusparselt|nccl|nvjitlink|nvtx|nvshmem)-cu\d+")
"""The CUDA libraries torch's CUDA wheels install (PEP 503 names): nothing but CUDA uses them."""
CUDA_INDEX = re.compile(r"download\.pytorch\.org/whl/(?:nightly/|test/)?cu\d+")
CUDA_LABEL = re.compile(r"\+cu\d+$")


def is_cuda_index(url: str) -> bool:
    """A PyTorch CUDA wheel index (`https://download.pytorch.org/whl/cu121`)."""
    return CUDA_INDEX.search(url) is not None


def cuda_label(spec: SpecifierSet | None) -> str | None:
    """The `+cuNNN` local label a pin carries (`torch==2.3.1+cu121`), or None."""
    for specifier in spec or ():
        match = CUDA_LABEL.search(specifier.version)
        if match is not None:
            return match.group()[1:]
    return None


GPU_ONLY = {
    "flash-attn": "build-time CUDA kernels; use `torch.nn.functional.scaled_dot_product_attention`"
                  " (NMC602 in the code)",
    "xformers": "CUDA attention kernels; use `torch.nn.functional.scaled_dot_product_attention` "
                "(NMC602 in the code)",
    "bitsandbytes": "CUDA-only 8-bit optimizers and quantization; use the plain torch.optim "
                    "optimizer (NMC603 in the code)",
    "apex": "NVIDIA Apex's fused CUDA kernels; plain PyTorch replaces them (NMC601 in the code)",
    "triton": "GPU kernels; write them in PyTorch or as NKI kernels (NMC604 in the code)",
    "cupy-cuda11x": "CUDA arrays; use torch tensors or NumPy",
    "cupy-cuda12x": "CUDA arrays; use torch tensors or NumPy",
    "pynvml": "NVML queries of NVIDIA GPUs; Neuron devices are watched with `neuron-monitor`, "
              "`neuron-top` and `neuron-ls`",
}
"""GPU-only packages without an `nvidia-` name: what replaces each (the code rules NMC6xx
review their uses)."""


def is_cuda_relevant(name: str) -> bool:
    """A requirement the `--from cuda` checks look at besides RELEVANT's."""
    return name in CUDA_COMPANIONS or name in GPU_ONLY or name.startswith("nvidia-")
