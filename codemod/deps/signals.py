"""XLA-era signals outside package pins: environment variables, container image tags, DLAMI
virtualenvs, Inf2/Trn1 instance types (native-api.md 1, 3.8, 5.2 and 5.4.4)."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from neuron_migrate.deps import cuda, ids
from neuron_migrate.deps.emit import Emitter
from neuron_migrate.deps.lines import Guarded

REMOVE = "remove it: TorchNeuron does not read it"
REVIEW_ONLY = {  # XLA-era variables whose native fate is unclear: a reviewer decides
    "NEURON_COMPILE_CACHE_URL": "the native compile cache uses its own settings "
                                "(TORCH_NEURONX_NEFF_CACHE_DIR in early builds, unconfirmed); "
                                "check the TorchNeuron environment-variable reference",
    "NEURON_FRAMEWORK_DEBUG": "its XLA meaning (dump HLO) is gone; Neuron Explorer still "
                              "lists it for debug info: keep it only if you profile",
}
XLA_VARIABLES = {
    "PJRT_DEVICE": REMOVE,
    "XLA_USE_BF16": "remove it and cast in code: `torch.autocast(device_type=\"neuron\", "
                    "dtype=torch.bfloat16)` or bf16 parameters",
    "XLA_DOWNCAST_BF16": "remove it and cast in code: `torch.autocast(device_type=\"neuron\", "
                         "dtype=torch.bfloat16)` or bf16 parameters",
    "NEURONCORE_NUM_DEVICES": "remove it; the worker count is torchrun's `--nproc-per-node`",
    "BUCKET_CAP_MB": "remove it; pass `bucket_cap_mb=` to DistributedDataParallel",
    "ALLREDUCE_GRADIENTS_BUCKET_SIZE_MB": "remove it; pass `bucket_cap_mb=` to "
                                          "DistributedDataParallel",
    "NEURON_EXTRACT_GRAPHS_ONLY": "remove it with the neuron_parallel_compile step",
    **REVIEW_ONLY,
}
XLA_PREFIXES = ("XLA_", "NEURON_PARALLEL_COMPILE_")
KEPT = frozenset({"XLA_IR_DEBUG", "XLA_HLO_DEBUG"})  # still useful with Neuron Explorer
OTHER_XLA_KNOBS = frozenset({
    "NEURON_NUM_RECENT_MODELS_TO_KEEP", "NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE",
    "NEURON_FUSE_SOFTMAX", "NEURON_CUSTOM_SILU", "NEURON_TRANSFER_WITH_STATIC_RING_OPS",
    "NEURON_TRANSFER_ALL_PARAMETERS_WITH_STATIC_RING", "NEURON_DUMP_HLO_SNAPSHOT",
})
PLATFORM_OVERRIDE = "NEURON_PLATFORM_TARGET_OVERRIDE"
OLD_PLATFORMS = ("inf2", "trn1")

INSTANCE = Guarded(re.compile(r"\b(?:ml\.)?(?:inf2|trn1n?)\.(?:\d*x?large|xlarge)\b"),
                   ("inf2", "trn1"))
XLA_VENV = re.compile(r"/opt/aws_neuronx_venv_pytorch_(?:1_13|2_\d)\w*")
NATIVE_VENV = "/opt/aws_neuronx_venv_torch_neuronx_2_14_0"
DLC = re.compile(r"pytorch-(?:training|inference)-neuronx:(?P<torch>[\d.]+)-neuronx-"
                 r"py\d+-sdk(?P<sdk>[\d.]+)[\w.-]*")


def xla_variable_advice(name: str) -> str | None:
    """What to do about an XLA-era variable, or None for anything else. The one judgement of
    which variables are XLA settings: the Python rules (rules/environment.py) use it too."""
    if name in KEPT:
        return None
    if name in XLA_VARIABLES:
        return XLA_VARIABLES[name]
    if name.startswith(XLA_PREFIXES) or name in OTHER_XLA_KNOBS:
        return "remove it: a PyTorch/XLA knob that TorchNeuron does not read"
    return None


def check_variable(name: str, value: str, offset: int, emitter: Emitter) -> None:
    """An environment variable set in a container or script."""
    cuda.check_variable(name, offset, emitter)
    advice = xla_variable_advice(name)
    if advice is not None:
        emitter.report(ids.XLA_ENV_VAR, offset, f"`{name}` is a PyTorch/XLA setting; {advice}")
    elif name == PLATFORM_OVERRIDE and value.strip("\"'").lower().startswith(OLD_PLATFORMS):
        emitter.report(ids.OLD_INSTANCE, offset,
                       f"`{name}={value}` targets Inf2/Trn1; TorchNeuron supports Trn2/Trn3 "
                       "only: target trn2 or trn3, or keep this workload on XLA torch-neuronx "
                       "2.9 (maintenance)")


def xla_image(reference: str) -> str | None:
    """Why a deep-learning-container tag is XLA-era, or None."""
    match = DLC.search(reference)
    if match is None:
        return None
    try:
        torch, sdk = Version(match["torch"].rstrip(".")), Version(match["sdk"].rstrip("."))
    except InvalidVersion:
        return None
    if torch.release[:2] <= (2, 9):
        return f"its PyTorch {torch} is the XLA lineage"
    if sdk.release[:2] < (2, 33):
        return f"Neuron SDK {sdk} predates TorchNeuron's public release (2.33)"
    return None


def xla_image_message(reference: str) -> str | None:
    """What to say of a container reference, when it is XLA-era (also said of Python strings,
    rule NM713)."""
    why = xla_image(reference)
    if why is None:
        return None
    return (f"image `{reference}` is an XLA-era Neuron container: {why}; build on a Neuron "
            "2.33+ image with torch-neuronx 2.14 (the TorchNeuron training image's tag is not "
            "yet confirmed), or install the native set on Ubuntu 24.04/26.04")


def xla_venv_message(venv: str) -> str:
    return (f"`{venv}` is an XLA-era DLAMI virtualenv (not published after Neuron 2.31); use "
            f"the TorchNeuron DLAMI's `{NATIVE_VENV}`")


def check_image(reference: str, offset: int, emitter: Emitter) -> None:
    cuda.check_image(reference, offset, emitter)
    message = xla_image_message(reference)
    if message is not None:
        emitter.report(ids.XLA_IMAGE, offset, message)


def scan_text_signals(text: str, emitter: Emitter) -> None:
    """Instance types, DLAMI virtualenvs and GPU requests, wherever they appear in the file."""
    cuda.scan_text(text, emitter)
    for match in INSTANCE.finditer(text):
        emitter.report(ids.OLD_INSTANCE, match.start(),
                       f"`{match.group()}` is an Inf2/Trn1 instance; TorchNeuron supports "
                       "Trn2/Trn3 only: move to a trn2/trn3 instance type, or keep this "
                       "workload on XLA torch-neuronx 2.9 (maintenance)")
    for match in XLA_VENV.finditer(text):
        emitter.report(ids.XLA_IMAGE, match.start(), xla_venv_message(match.group()))
