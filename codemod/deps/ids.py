"""The scanner's rule ids (NM8xx, and the NM95x readiness checks of the Python a project runs
on) and how far each one's fixes can be trusted.

The scanner (engine side) and `rules/dependencies.py` (documentation side) both read these, so
an id is spelt once.
"""

from __future__ import annotations

from neuron_migrate.model import Kind

SPAWN = "NM220"
"""Not a scanner rule: the Python rule (`rules/launch.py`) whose migration of `xmp.spawn`
changes how a script must be launched; the scanner reports launch lines under it."""
XLA_LINEAGE = "NM801"
UNPINNED = "NM802"
BETA = "NM803"
TORCH_FAMILY = "NM804"
COMPILER_PACKAGES = "NM805"
XLA_RUNTIME_PACKAGE = "NM806"
NXD_PACKAGE = "NM807"
INF1_PACKAGE = "NM808"
OPTIMUM_NEURON = "NM809"
CPU_INDEX = "NM810"
XLA_IMAGE = "NM811"
XLA_ENV_VAR = "NM812"
PARALLEL_COMPILE = "NM813"
OLD_INSTANCE = "NM814"
LOCKFILE = "NM815"
LAUNCH = "NM816"
PYTHON_IMAGE = "NM950"
REQUIRES_PYTHON = "NM951"
PYTHON_PIN = "NM952"

KINDS: dict[str, Kind] = {
    XLA_LINEAGE: Kind.FIX,
    UNPINNED: Kind.FIX,
    BETA: Kind.UNSAFE_FIX,
    TORCH_FAMILY: Kind.FIX,
    COMPILER_PACKAGES: Kind.FIX,
    XLA_RUNTIME_PACKAGE: Kind.FIX,
    NXD_PACKAGE: Kind.REVIEW,
    INF1_PACKAGE: Kind.REVIEW,
    OPTIMUM_NEURON: Kind.REVIEW,
    CPU_INDEX: Kind.FIX,
    XLA_IMAGE: Kind.REVIEW,
    XLA_ENV_VAR: Kind.FIX,  # a script's `export` of an XLA-only knob alone is removed
    PARALLEL_COMPILE: Kind.REVIEW,
    OLD_INSTANCE: Kind.REVIEW,
    LOCKFILE: Kind.REVIEW,
    LAUNCH: Kind.FIX,
    PYTHON_IMAGE: Kind.REVIEW,
    REQUIRES_PYTHON: Kind.REVIEW,
    PYTHON_PIN: Kind.REVIEW,
}
"""The kind of a finding whose edit can be made; a finding without an edit is `review`."""

# `--from cuda`: the CUDA stack's pins, indexes, images and GPU requests. They fire
# only when the run migrates from CUDA (`Options.sources`).
CUDA = "cuda"
CUDA_TORCH = "NMC801"
CUDA_INDEX = "NMC802"
NVIDIA_PACKAGE = "NMC803"
CUDA_IMAGE = "NMC804"
CUDA_VISIBLE = "NMC805"
GPU_REQUEST = "NMC806"
GPU_TOOL = "NMC807"

CUDA_KINDS: dict[str, Kind] = {
    CUDA_TORCH: Kind.FIX,
    CUDA_INDEX: Kind.FIX,
    NVIDIA_PACKAGE: Kind.FIX,
    CUDA_IMAGE: Kind.REVIEW,
    CUDA_VISIBLE: Kind.REVIEW,
    GPU_REQUEST: Kind.REVIEW,
    GPU_TOOL: Kind.REVIEW,
}
ALL_KINDS: dict[str, Kind] = {**KINDS, **CUDA_KINDS}
