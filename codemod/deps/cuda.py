"""`--from cuda`: the CUDA stack in dependency files and containers.

The decisions mirror `check.py`'s for the XLA stack: a CUDA build of torch and the CUDA wheel
index become the TorchNeuron set (as AWS installs it: torch 2.14.0 from the PyTorch CPU wheel
index, torch-neuronx, neuronx-cc and nki from the Neuron pip index); the CUDA libraries torch's
CUDA wheels pull in are removed. What has no one-to-one replacement (other NVIDIA packages,
CUDA base images, GPU selection and GPU resource requests) is reviewed with what to use
instead. Nothing here runs unless the run migrates from CUDA (`emit.from_cuda`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from neuron_migrate.deps import ids
from neuron_migrate.deps.emit import Emitter, from_cuda
from neuron_migrate.deps.entries import Edit, Entry, Index, Manifest, Verdict
from neuron_migrate.deps.lines import Guarded
from neuron_migrate.deps.versions import (
    CPU_INDEX, CUDA_COMPANIONS, CUDA_RUNTIME_WHEEL, GPU_ONLY, NATIVE_COMPILER, NATIVE_NEURONX,
    NATIVE_NKI, NATIVE_TORCH, NATIVE_TORCH_VERSION, NEURON_INDEX, cuda_label, is_cuda_index,
    is_neuron_index,
)

NEURONX = "torch-neuronx"
NATIVE_COMPANIONS = (("torch-neuronx", NATIVE_NEURONX), ("neuronx-cc", NATIVE_COMPILER),
                     ("nki", NATIVE_NKI))
GPU_MONITORING = frozenset({"nvidia-ml-py", "nvidia-ml-py3"})
CUDA_IMAGE = re.compile(r"(?:^|/)nvidia/cuda(?::|@|$)|^nvcr\.io/nvidia/|"
                        r"^(?:docker\.io/)?pytorch/pytorch(?::|@|$)|:[^\s/:]*cuda")
"""CUDA's own images, NGC's, PyTorch's (all CUDA builds), and any tag that names CUDA."""
VISIBLE = {
    "CUDA_VISIBLE_DEVICES": "selects the GPUs a process sees",
    "NVIDIA_VISIBLE_DEVICES": "tells the NVIDIA container runtime which GPUs to mount",
}
GPU_RESOURCE = Guarded(re.compile(r"\bnvidia\.com/gpu(?![\w.-])"), ("nvidia.com/gpu",))
GPU_LABEL = Guarded(re.compile(r"\bnvidia\.com/gpu\.[\w.-]+"), ("nvidia.com/gpu.",))
"""GPU feature discovery's node labels (`nvidia.com/gpu.product`), in node selectors and
affinities."""
COMPOSE_NVIDIA = Guarded(re.compile(
    r"^[ \t-]*(?:driver|runtime|runtimeClassName)[ \t]*:[ \t]*[\"']?nvidia\b", re.MULTILINE),
    ("nvidia",))
GPUS_OPTION = Guarded(re.compile(r"(?<![\w-])(?:--gpus|--runtime[ =]nvidia)(?:[ =]|$)",
                                  re.MULTILINE), ("--gpus", "--runtime"))
SLURM_GPUS = Guarded(re.compile(r"(?<![\w-])(?:--gres[ =](?:gpu|\S*,gpu)\S*|"
                                 r"--gpus-per-(?:node|task|socket)(?:[ =]\S+)?)",
                                 re.MULTILINE), ("--gres", "--gpus-per-"))
GPU_TOOLS = {
    "nvidia-smi": "queries NVIDIA GPUs; on Trainium `neuron-ls` lists the devices and their "
                  "NeuronCores, `neuron-top` and `neuron-monitor` show their use",
    "nvcc": "compiles CUDA kernels, which Trainium cannot run; a custom kernel for the "
            "NeuronCore is written in NKI (the `nki` package)",
}
GPU_TOOL = Guarded(re.compile(
    r"(?<![\w./-])(?:/usr/local/cuda[\w./-]*/bin/)?(nvidia-smi|nvcc)(?![\w.-])"),
    ("nvidia-smi", "nvcc"))
ARCH_LIST = "TORCH_CUDA_ARCH_LIST"
VARIABLES = frozenset({*VISIBLE, ARCH_LIST})
"""The variables these checks read, set anywhere."""
CONDA_CUDA = Guarded(re.compile(r"(?<![\w-])(?:pytorch-cuda|cudatoolkit|cuda-toolkit)"
                                 r"(?![\w-])(?:[=<>]\S*)?"),
                      ("pytorch-cuda", "cudatoolkit", "cuda-toolkit"))
CUDA_WHEEL_URL = re.compile(r"https?://download\.pytorch\.org/whl/(?:nightly/|test/)?cu\d+"
                            r"[^\s\"'`]*")
RESOURCE_ADVICE = ("request `aws.amazon.com/neuroncore` (NeuronCores: one per torchrun worker) "
                   "or `aws.amazon.com/neuron` (whole Neuron devices) from the Neuron device "
                   "plugin instead; a GPU is not a core, so recount: a trn2 device holds "
                   "several NeuronCores")


def verdicts(manifest: Manifest) -> Iterator[Verdict]:
    """The CUDA verdicts for one file's requirements and indexes."""
    locked = manifest.lock_command is not None  # torch's own CUDA dependencies are listed
    for group in manifest.groups().values():
        names = {e.name for e in group}
        gains = [e for e in group if e.name == "torch" and _moves(e, manifest.indexes)]
        for entry in group:
            indexes = _near(entry.command, manifest.indexes)
            cuda_index = any(is_cuda_index(i.url) for i in indexes)
            if entry.name == "torch" and NEURONX not in names:
                beside = any(e is not entry for e in gains)
                yield from _torch(entry, names, cuda_index, _indexed(indexes), beside)
            elif locked:
                continue  # they move with torch when the lockfile is regenerated
            elif entry.name in CUDA_COMPANIONS:
                yield from _companion(entry, cuda_index)
            elif entry.name.startswith("nvidia-"):
                yield _nvidia(entry)
            elif entry.name in GPU_ONLY:
                yield Verdict(ids.NVIDIA_PACKAGE, entry.offset,
                              f"`{entry.raw}` does not run on Trainium ({GPU_ONLY[entry.name]}): "
                              "replace its uses, then remove it")
    if not locked:
        yield from _indexes(manifest.indexes)


def _near(command: int | None, indexes: list[Index]) -> list[Index]:
    """The indexes a requirement installs from: a pip command's own options and those set for
    every command (`pip config`, PIP_EXTRA_INDEX_URL); in a requirements file, all of them."""
    return [i for i in indexes if command is None or i.command in (None, command)]


def _moves(torch: Entry, indexes: list[Index]) -> bool:
    """Whether NMC801 installs the Neuron packages beside this torch (and so in the file's
    environment, where the XLA rules then hold every torch to 2.14.0)."""
    near = _near(torch.command, indexes)
    return (cuda_label(torch.spec) is not None or any(is_cuda_index(i.url) for i in near)) \
        and _indexed(near)


def _indexed(indexes: list[Index]) -> bool:
    """Whether, once NMC802's edits are made, the Neuron and CPU indexes are both there."""
    cuda = [i for i in indexes if is_cuda_index(i.url)]
    movable = bool(cuda) and all(i.replace is not None and i.add_after is not None
                                 for i in cuda)
    return movable or any(is_neuron_index(i.url) for i in indexes)


def _torch(entry: Entry, names: set[str], cuda_index: bool, indexed: bool,
           beside: bool) -> Iterator[Verdict]:
    """`beside`: another torch of the group gets the Neuron packages; this one then only
    moves to 2.14.0, as NM804 would have it once they are there."""
    label = cuda_label(entry.spec)
    if label is None and not cuda_index:
        return  # a torch with no CUDA mark in this file: its index is configured elsewhere
    build = f"a CUDA {label[2:-1]}.{label[-1]} build of PyTorch" if label else \
        "PyTorch installed from the CUDA wheel index"
    missing = [spec for name, spec in NATIVE_COMPANIONS if name not in names]
    exact = entry.spec is not None and str(entry.spec) == "==2.14.0"
    edits: list[Edit | None] = []
    if not exact:
        edits.append(entry.rewrite("==2.14.0") if entry.rewrite is not None and
                     entry.spec is not None else None)
    if missing:
        edits.append(entry.insert(missing) if entry.insert is not None else None)
    if not edits:
        return
    wanted = ", ".join(f"`{r}`" for r in (NATIVE_TORCH, *missing))
    message = (f"`{entry.raw}` is {build}; TorchNeuron installs {wanted} (torch from the "
               "PyTorch CPU wheel index, the Neuron packages from the Neuron pip index)")
    if not indexed and beside:
        if exact:
            return
        yield Verdict(ids.CUDA_TORCH, entry.offset,
                      f"`{entry.raw}` is {build}; the Neuron packages this file installs "
                      f"need `{NATIVE_TORCH}`: change it", (edits[0],))
        return
    if not indexed:
        where = "once its CUDA index moves (NMC802)" if cuda_index else \
            "and configure both indexes, which this file does not"
        yield Verdict(ids.CUDA_TORCH, entry.offset,
                      f"{message}: change it {where} (`--extra-index-url {NEURON_INDEX}` and "
                      f"`--extra-index-url {CPU_INDEX}`)")
        return
    yield Verdict(ids.CUDA_TORCH, entry.offset, f"{message}: change it", tuple(edits))


def _companion(entry: Entry, cuda_index: bool) -> Iterator[Verdict]:
    label = cuda_label(entry.spec)
    pinned = entry.spec is not None and bool(str(entry.spec)) and \
        not (label is None and not cuda_index)
    if not pinned:
        return  # unpinned: resolves to the release that matches the torch beside it
    yield Verdict(ids.CUDA_TORCH, entry.offset,
                  f"`{entry.raw}` is pinned to the build for a CUDA torch; pin the "
                  f"{entry.name} release made for torch {NATIVE_TORCH_VERSION} (from the "
                  "PyTorch CPU wheel index), or leave it unpinned")


def _nvidia(entry: Entry) -> Verdict:
    if CUDA_RUNTIME_WHEEL.fullmatch(entry.name):
        return Verdict(ids.NVIDIA_PACKAGE, entry.offset,
                       f"`{entry.raw}` is a CUDA library that CUDA builds of torch install; "
                       "nothing on Trainium loads it: remove it", (entry.remove,))
    if entry.name in GPU_MONITORING:
        advice = ("it queries NVIDIA GPUs through NVML; Neuron devices are watched with "
                  "`neuron-monitor`, `neuron-top` and `neuron-ls`: replace its uses, then "
                  "remove it")
    else:
        advice = ("it is an NVIDIA GPU package with no Trainium build: replace what uses it "
                  "(plain PyTorch, or a Neuron library), then remove it")
    return Verdict(ids.NVIDIA_PACKAGE, entry.offset, f"`{entry.raw}`: {advice}")


def _indexes(indexes: list[Index]) -> Iterator[Verdict]:
    added: set[int | None] = set()  # the commands (None: the file) given the Neuron index
    for index in indexes:
        if not is_cuda_index(index.url):
            continue
        edits: list[Edit | None] = [index.replace(CPU_INDEX) if index.replace else None]
        also = ""
        near = _near(index.command, indexes)
        if index.command not in added and not any(is_neuron_index(i.url) for i in near):
            edits.append(index.add_after([NEURON_INDEX]) if index.add_after else None)
            also = f", and add `--extra-index-url {NEURON_INDEX}` for torch-neuronx"
            added.add(index.command)
        yield Verdict(ids.CUDA_INDEX, index.offset,
                      f"`{index.url}` is the PyTorch CUDA wheel index; TorchNeuron takes torch "
                      f"2.14.0 from the CPU wheel index: use `{CPU_INDEX}`{also}", tuple(edits))


def check_variable(name: str, offset: int, emitter: Emitter) -> None:
    """GPU selection (and CUDA's build settings) set in a container, script or manifest."""
    if name == ARCH_LIST and from_cuda(emitter.registry):
        emitter.report(ids.GPU_TOOL, offset,
                       f"`{name}` sets the GPU architectures CUDA extensions compile for; "
                       "Trainium runs no CUDA code: remove it with the extension build (a "
                       "custom kernel for the NeuronCore is written in NKI)")
        return
    what = VISIBLE.get(name)
    if what is None or not from_cuda(emitter.registry):
        return
    emitter.report(ids.CUDA_VISIBLE, offset,
                   f"`{name}` {what}; the Neuron runtime reads `NEURON_RT_VISIBLE_CORES` "
                   "(NeuronCores, e.g. `0-1`) instead. Cores are not GPUs: recount, and note "
                   "that under torchrun the `neuron` process group sets it per rank itself "
                   "when it is unset, so set it only to confine one process")


def check_image(reference: str, offset: int, emitter: Emitter) -> None:
    if CUDA_IMAGE.search(reference) is None or not from_cuda(emitter.registry):
        return
    emitter.report(ids.CUDA_IMAGE, offset,
                   f"image `{reference}` is a CUDA base image; build on a Neuron deep learning "
                   "container (public.ecr.aws/neuron/, Neuron 2.33 or later: the TorchNeuron "
                   "training image's repository and tag are not yet confirmed), or on Ubuntu "
                   f"24.04/26.04 with `pip install {NATIVE_NEURONX} {NATIVE_COMPILER} "
                   f"{NATIVE_NKI}` from the Neuron and CPU wheel indexes")


def scan_text(text: str, emitter: Emitter) -> None:
    """What is read from the text alone, wherever it stands: GPU requests (Kubernetes
    resources and node labels, compose device reservations and runtimes, `docker run
    --gpus`, SLURM's `--gres=gpu`), conda's CUDA packages (`pytorch-cuda=12.1`) and the
    GPU tools (`nvidia-smi`, `nvcc`)."""
    if not from_cuda(emitter.registry):
        return
    _wheel_urls(text, emitter)
    for match in GPU_RESOURCE.finditer(text):
        emitter.report(ids.GPU_REQUEST, match.start(),
                       f"`nvidia.com/gpu` requests NVIDIA GPUs; {RESOURCE_ADVICE}")
    for match in GPU_LABEL.finditer(text):
        emitter.report(ids.GPU_REQUEST, match.start(),
                       f"`{match.group()}` is a GPU node label: this selects GPU nodes; select "
                       "Trainium nodes instead (for example by `node.kubernetes.io/"
                       "instance-type`), where the Neuron device plugin runs")
    for match in COMPOSE_NVIDIA.finditer(text):
        start = match.start() + len(match.group()) - len("nvidia")
        emitter.report(ids.GPU_REQUEST, start,
                       "the NVIDIA runtime or device driver reserves GPUs; pass the Neuron "
                       "devices instead (compose `devices: [\"/dev/neuron0:/dev/neuron0\"]`, "
                       "one per device), or on Kubernetes " + RESOURCE_ADVICE)
    for match in GPUS_OPTION.finditer(text):
        emitter.report(ids.GPU_REQUEST, match.start(),
                       f"`{match.group().strip()}` mounts NVIDIA GPUs; pass the Neuron devices "
                       "instead (`--device=/dev/neuron0`, one per device)")
    for match in SLURM_GPUS.finditer(text):
        emitter.report(ids.GPU_REQUEST, match.start(),
                       f"`{match.group()}` asks SLURM for GPUs; AWS's Trainium jobs take whole "
                       "nodes (`--exclusive`) and start one torchrun worker per NeuronCore "
                       "(`--nproc-per-node`): count cores, not GPUs")
    for match in GPU_TOOL.finditer(text):
        emitter.report(ids.GPU_TOOL, match.start(),
                       f"`{match.group()}` {GPU_TOOLS[match.group(1)]}")
    for match in CONDA_CUDA.finditer(text):
        emitter.report(ids.CUDA_TORCH, match.start(),
                       f"`{match.group()}` is conda's CUDA packaging for PyTorch; TorchNeuron "
                       f"is installed with pip: drop it (and conda's `pytorch`) and install "
                       f"`{NATIVE_TORCH}` `{NATIVE_NEURONX}` `{NATIVE_COMPILER}` `{NATIVE_NKI}` "
                       "from the Neuron and CPU wheel indexes")


def _wheel_urls(text: str, emitter: Emitter) -> None:
    """CUDA wheel URLs that no index option holds (`-f .../cu118/torch_nightly.html`, a wheel's
    own URL, a variable a CI job passes to pip): reported once a line, beside NMC802's."""
    done = {f.line for f in emitter.findings if f.rule_id == ids.CUDA_INDEX}
    for match in CUDA_WHEEL_URL.finditer(text):
        line, _ = emitter.position(match.start())
        if line in done:
            continue
        done.add(line)
        emitter.report(ids.CUDA_INDEX, match.start(),
                       f"`{match.group()}` serves CUDA builds of PyTorch; TorchNeuron takes torch "
                       f"2.14.0 from `{CPU_INDEX}` and torch-neuronx from `{NEURON_INDEX}`: "
                       "install from those indexes instead")
