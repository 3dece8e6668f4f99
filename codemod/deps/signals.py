"""XLA-era signals outside package pins: environment variables, container image tags, DLAMI
virtualenvs, Inf2/Trn1 instance types: each names the XLA-era stack or hardware TorchNeuron
does not run on, whatever the package pins say."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from itertools import pairwise
from pathlib import PurePosixPath

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
REMOVABLE_VARIABLES = frozenset({
    "PJRT_DEVICE", "XLA_FLAGS", "XLA_USE_DUMMY_STORE", "XLA_DISABLE_FUNCTIONALIZATION",
    "XLA_ENABLE_PARAM_ALIASING", "XLA_USE_32BIT_LONG", "XLA_SYNC_WAIT", "XLA_EMIT_STEPLOG",
    "XLA_ALWAYS_ALLREDUCE", "XLA_USE_SPMD", "NEURON_NUM_RECENT_MODELS_TO_KEEP",
    "NEURON_EXTRACT_GRAPHS_ONLY", "NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE",
    "NEURON_FUSE_SOFTMAX", "NEURON_CUSTOM_SILU", "NEURON_TRANSFER_WITH_STATIC_RING_OPS",
    "NEURON_TRANSFER_ALL_PARAMETERS_WITH_STATIC_RING", "NEURON_DUMP_HLO_SNAPSHOT",
    "NEURONCORE_NUM_DEVICES", "ALLREDUCE_GRADIENTS_BUCKET_SIZE_MB", "BUCKET_CAP_MB",
})
"""Knobs of PyTorch/XLA and the XLA-era Neuron framework that TorchNeuron does not read, and
whose setting is removed where that is safe: from Python (NM601), and a shell script's
`export NAME=value` line (NM812). XLA_USE_BF16 and XLA_DOWNCAST_BF16 are not among them:
without them the model runs in float32."""
REMOVABLE_PREFIXES = ("NEURON_PARALLEL_COMPILE_",)
XLA_CC_FLAGS = re.compile(r"--(auto-cast|model-type|cache_dir|retry_failed_compilation)\b")
"""neuronx-cc flags that only made sense for the XLA flow (NM601 reports them)."""
PLATFORM_OVERRIDE = "NEURON_PLATFORM_TARGET_OVERRIDE"
OLD_PLATFORMS = ("inf2", "trn1")

FAMILY = re.compile(r"(?:ml\.)?(inf1|inf2|trn1|trn2|trn3)n?u?\.\w+$")
TEMPLATE_FOLDERS = frozenset({"issue_template", "pull_request_template", "discussion_template"})
MODEL_CARD_KEYS = frozenset({"library_name", "pipeline_tag", "base_model", "model-index",
                             "datasets", "license", "language", "inference"})
TOP_LEVEL_KEY = re.compile(r"^([\w-]+):", re.MULTILINE)
INSTANCE = Guarded(re.compile(r"\b(?:ml\.)?(?:inf2|trn1n?)\.(?:\d*x?large|xlarge)\b"),
                   ("inf2", "trn1"))
XLA_VENV = re.compile(r"/opt/aws_neuronx_venv_pytorch_(?:1_13|2_\d)\w*")
NATIVE_VENV = "/opt/aws_neuronx_venv_torch_neuronx_2_14_0"
DLC = re.compile(r"pytorch-(?:training|inference)-neuronx:(?P<torch>[\d.]+)-neuronx-"
                 r"py\d+-sdk(?P<sdk>[\d.]+)[\w.-]*")


def xla_compiler_flags(value: str) -> list[str]:
    """The neuronx-cc flags in `value` that only made sense for the XLA flow."""
    return XLA_CC_FLAGS.findall(value) if "--" in value else []


def removable_variable(name: str) -> bool:
    """Whether a setting of this variable is removed where that is safe (NM601, NM812)."""
    return name in REMOVABLE_VARIABLES or name.startswith(REMOVABLE_PREFIXES)


def instance_family(value: str) -> str | None:
    """`trn1` of `ml.trn1n.32xlarge`; None when the text is not an instance type."""
    found = FAMILY.match(value.strip())
    return found[1] if found else None


def enumerates_families(values: Iterable[str]) -> bool:
    """Whether a list of instance types names more than Inf2 or Trn1 alone (`[inf1.xlarge,
    inf2.xlarge, trn1.2xlarge, trn2.48xlarge]`): a list of what some tool supports or a
    form offers, not the hardware a workload is set to run on."""
    families = {f for f in map(instance_family, values) if f is not None}
    return len(families) > 1 or bool(families - set(OLD_PLATFORMS))


def targets_hardware(path: str, text: str) -> bool:
    """Whether a file may choose the hardware a workload runs on. An issue or pull-request
    template lists instance types for a reporter to pick; a Hugging Face model card's
    metadata says what a model was built or tested on. Neither moves a workload."""
    parts = [p.lower() for p in PurePosixPath(path.replace("\\", "/")).parts]
    if any(a == ".github" and b in TEMPLATE_FOLDERS for a, b in pairwise(parts)):
        return False
    name = parts[-1] if parts else ""
    if "modelcard" in name.replace("_", "").replace("-", ""):
        return False
    keys = {m[1] for m in TOP_LEVEL_KEY.finditer(text)}
    return len(keys & MODEL_CARD_KEYS) < 2


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


def scan_text_signals(text: str, emitter: Emitter,
                      not_targets: Sequence[tuple[int, int]] = ()) -> None:
    """Instance types, DLAMI virtualenvs and GPU requests, wherever they appear in the file.
    An instance type is reported only where it may be what the workload runs on (NM814):
    not in `not_targets` (spans the reader found to list many families,
    such as a device plugin's node affinity), not in an issue template or a model card."""
    cuda.scan_text(text, emitter)
    documents = not targets_hardware(emitter.path, text)
    for match in INSTANCE.finditer(text):
        start = match.start()
        if documents or any(low <= start < high for low, high in not_targets):
            continue
        emitter.report(ids.OLD_INSTANCE, match.start(),
                       f"`{match.group()}` is an Inf2/Trn1 instance; TorchNeuron supports "
                       "Trn2/Trn3 only: move to a trn2/trn3 instance type, or keep this "
                       "workload on XLA torch-neuronx 2.9 (maintenance)")
    for match in XLA_VENV.finditer(text):
        emitter.report(ids.XLA_IMAGE, match.start(), xla_venv_message(match.group()))
