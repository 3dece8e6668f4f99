"""NMC4xx (`--from cuda`): torch.distributed. The NCCL backend becomes the `neuron` one."""

from __future__ import annotations

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Review, Rule, Site, code,
                                    string, string_value, with_string)
from neuron_migrate.rules.cuda_placement import CUDA
from neuron_migrate.rules.review_base import ReviewRule

D_DIST = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html"
_NCCL = "nccl"


class NcclBackend(Rule):
    id = "NMC401"
    name = "nccl-backend"
    kind = Kind.FIX
    summary = "the process-group backend \"nccl\" (and `dist.Backend.NCCL`) becomes \"neuron\""
    explanation = """\
What it does: the string "nccl" becomes "neuron" wherever it appears: in
`init_process_group("nccl")` or `backend="nccl"`, in a backend variable
(`backend = "nccl" if torch.cuda.is_available() else "gloo"`) and in comparisons with
`dist.get_backend()`; `torch.distributed.Backend.NCCL` becomes "neuron".

Why: TorchNeuron ships a torch.distributed backend called `neuron`, launched by torchrun with
the usual `env://` rendezvous (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR); NCCL exists only
with NVIDIA GPUs. The rest of a torchrun DDP template carries over: `torch.cuda.set_device(
local_rank)` becomes `torch.neuron.set_device(local_rank)` (NMC103), `.cuda(local_rank)` puts
the model on that core (NMC101), and `DistributedDataParallel(model, device_ids=[local_rank])`
keeps meaning the worker's own device.

What differs: the process group must be created before any tensor is put on the neuron device
(the native backend assigns each process its NeuronCore when the group starts); move
`init_process_group` up if the script places the model first. A "gloo" fallback for CPU runs
is kept."""
    doc_url = D_DIST
    example = Example(
        before="import torch.distributed as dist\n\ndist.init_process_group(backend=\"nccl\")\n",
        after="import torch.distributed as dist\n\ndist.init_process_group(backend=\"neuron\")\n",
    )
    source = CUDA
    tokens = (b"nccl", b"NCCL")
    names = frozenset({"torch.distributed.Backend.NCCL",
                       "torch.distributed.distributed_c10d.Backend.NCCL"})
    watches = ("torch.distributed.Backend", "torch.distributed.distributed_c10d.Backend")

    def interesting_string(self, value: str) -> bool:
        return value == _NCCL

    def leftover_string(self, value: str) -> str:
        return f"the backend {value!r} exists only with NVIDIA GPUs; use \"neuron\""

    def on_string(self, node: cst.SimpleString | cst.FormattedString, site: Site
                  ) -> Outcome | None:
        if not isinstance(node, cst.SimpleString) or string_value(node) != _NCCL:
            return None
        new = with_string(node, "neuron")
        return Replace(new, f"`{code(node)}` → `{code(new)}`: the NCCL process-group backend "
                       "becomes TorchNeuron's (create the group before placing tensors)")

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        new = string("neuron")
        return Replace(new, f"`{code(node)}` → `{code(new)}`: the NCCL process-group backend "
                       "becomes TorchNeuron's")


class DataParallel(ReviewRule):
    id = "NMC402"
    name = "data-parallel"
    summary = "`torch.nn.DataParallel` is reviewed: use DistributedDataParallel, one NeuronCore per process"
    explanation = """\
What it does: reports `torch.nn.DataParallel` (and `torch.nn.parallel.DataParallel`), leaving
the code as it is.

Why: DataParallel replicates the model over the GPUs of one process, scattering each batch
and gathering the outputs on the first device every step. PyTorch recommends
DistributedDataParallel instead, and TorchNeuron's data parallelism is built on it: launch
with torchrun, create the "neuron" process group, give each process its NeuronCore
(`torch.neuron.set_device(local_rank)`) and wrap the model in
`DistributedDataParallel(model)` with a DistributedSampler for the data.

What differs: the code is unchanged; it runs on one NeuronCore when only one is visible."""
    doc_url = D_DIST
    example = Example.unchanged(
        "import torch\n\nmodel = torch.nn.DataParallel(model)\n")
    source = CUDA
    tokens = (b"DataParallel",)
    watches = ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
               "torch.nn.parallel.data_parallel")
    guidance = {name: "use DistributedDataParallel under torchrun (\"neuron\" process group, "
                      "one NeuronCore per process) instead of DataParallel"
                for name in watches}


_VISIBLE = "CUDA_VISIBLE_DEVICES"


class VisibleDevices(Rule):
    id = "NMC403"
    name = "cuda-visible-devices"
    kind = Kind.REVIEW
    summary = "`CUDA_VISIBLE_DEVICES` in Python code is reviewed: NeuronCores are chosen with `NEURON_RT_VISIBLE_CORES`"
    explanation = """\
What it does: reports the string "CUDA_VISIBLE_DEVICES" in Python code (setting or reading the
variable through `os.environ`), leaving the code as it is.

Why: the variable hides GPUs from CUDA; the Neuron runtime reads `NEURON_RT_VISIBLE_CORES`
instead, with NeuronCore indices. Under torchrun the native process group sets
`NEURON_RT_VISIBLE_CORES` to the worker's local rank itself, but only when it is unset, so a
script that pins devices per rank by hand should usually stop doing so; a single-process script
that picks a core can set `NEURON_RT_VISIBLE_CORES` before the device is first used.

What differs: the code is unchanged: `CUDA_VISIBLE_DEVICES` no longer selects anything."""
    doc_url = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/env-vars.html"
    example = Example.unchanged("import os\n\nos.environ[\"CUDA_VISIBLE_DEVICES\"] = \"0,1\"\n")
    source = CUDA
    tokens = (b"CUDA_VISIBLE_DEVICES",)

    def interesting_string(self, value: str) -> bool:
        return value == _VISIBLE

    def leftover_string(self, value: str) -> str:
        return (f"{value} selects GPUs only: the Neuron runtime reads NEURON_RT_VISIBLE_CORES "
                "(which the neuron process group sets per local rank when it is unset)")

    def on_string(self, node: cst.SimpleString | cst.FormattedString, site: Site
                  ) -> Outcome | None:
        if not isinstance(node, cst.SimpleString) or string_value(node) != _VISIBLE:
            return None
        return Review(self.leftover_string(_VISIBLE), suggestion="\"NEURON_RT_VISIBLE_CORES\"")


RULES: tuple[type[Rule], ...] = (NcclBackend, DataParallel, VisibleDevices)
