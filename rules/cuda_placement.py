"""NMC1xx (`--from cuda`): where tensors live. CUDA placement becomes the `neuron` device."""

from __future__ import annotations

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Review, Rule, Site, argument,
                                    call, code, has_star_args, keyword_arg, relaid, string,
                                    string_value, with_string)
from neuron_migrate.rules.device import DeviceStringRule, DeviceStrings

D_HOME = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html"
D_DIST = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html"

CUDA = "cuda"
"""The source every rule of the CUDA families belongs to (`--from cuda`)."""
CUDA_TOKENS = (b"cuda",)
CUDA_STRINGS = DeviceStrings("cuda")


def neuron_device_string(value: str) -> str | None:
    """"cuda" -> "neuron", "cuda:1" -> "neuron:1"; None for anything else."""
    return CUDA_STRINGS.neuron(value)


class CudaMethod(Rule):
    id = "NMC101"
    name = "cuda-method"
    kind = Kind.FIX
    summary = "`x.cuda()` / `x.cuda(i)` become `x.to(\"neuron\")` / `x.to(torch.device(\"neuron\", i))`"
    explanation = """\
What it does: the `.cuda()` method of tensors and modules becomes `.to("neuron")`; with a
device index it becomes `.to(torch.device("neuron", i))` (`"neuron:N"` for a literal index,
the device itself for an argument named like a device). `non_blocking=` and
`memory_format=` are kept, since `.to` takes them too. On a storage (`storage.cuda()` in a
`torch.load` `map_location` function) the device is passed as `.to(device=...)`, the only
form a storage's `.to` accepts.

Why: TorchNeuron registers `neuron` as a regular PyTorch device; AWS's porting rule is to
change the device in `.to(...)` calls. `.cuda()` without an index means the current CUDA
device, as `.to("neuron")` means the current NeuronCore (`torch.neuron.set_device`).

What differs: nothing for tensors and modules: both return the moved object (a module is moved
in place and returned). Under torchrun a script that calls `x.cuda(local_rank)` now puts `x` on
`neuron:local_rank`, the core its `torch.neuron.set_device(local_rank)` selects. A `.cuda`
attribute of some other object (not a tensor or module) would be renamed too: check objects
of your own classes that define `cuda()`."""
    doc_url = D_HOME
    example = Example(
        before="model = Net().cuda()\nx = batch.cuda(non_blocking=True)\n",
        after="model = Net().to(\"neuron\")\nx = batch.to(\"neuron\", non_blocking=True)\n",
    )
    source = CUDA
    tokens = CUDA_TOKENS
    attributes = frozenset({"cuda"})
    emits = ("torch.device", "torch.Tensor.to", "torch.nn.Module.to")

    def on_any_call(self, node: cst.Call, site: Site) -> Outcome | None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "cuda" or \
                site.qualname_of(func) is not None:
            return None
        if has_star_args(node.args):
            return Review(f"`{code(node)}`: unpacked arguments; use `.to(\"neuron\", ...)`")
        index = argument(node.args, 0, "device")
        unknown = [a for a in node.args if a is not index and (
            a.keyword is None or a.keyword.value not in ("non_blocking", "memory_format"))]
        if unknown:
            return Review(f"`{code(node)}`: use `.to(\"neuron\", ...)`")
        target, note = self._target(index, site)
        if target is None:
            return Review(f"`{code(node)}`: `torch` means something else here; use "
                          "`.to(torch.device(\"neuron\", i))`")
        keyword_ = None
        if _storage(func.value):  # Storage.to takes the device by keyword only
            keyword_ = keyword_arg("device", target)
        if index is not None and node.args and index is node.args[0]:
            first = index.with_changes(value=target, keyword=None,
                                       equal=cst.MaybeSentinel.DEFAULT)
            if keyword_ is not None:
                first = first.with_changes(keyword=keyword_.keyword, equal=keyword_.equal)
        else:
            first = keyword_ or cst.Arg(target)
        args = relaid(node.args, [first, *(a for a in node.args if a is not index)])
        new = node.with_changes(func=func.with_changes(attr=cst.Name("to")), args=args)
        return Replace(new, f"`{code(node)}` → `{code(new)}`{note}")

    @staticmethod
    def _target(index: cst.Arg | None, site: Site) -> tuple[cst.BaseExpression | None, str]:
        if index is None or isinstance(index.value, cst.Name) and index.value.value == "None":
            return string("neuron"), ""
        value = index.value
        if isinstance(value, cst.Integer):
            return string(f"neuron:{value.value}"), ""
        literal = string_value(value)
        if literal is not None and neuron_device_string(literal) is not None:
            return with_string(value, neuron_device_string(literal) or "neuron"), ""  # type: ignore[arg-type]
        name = code(value).rsplit(".", 1)[-1].lower()
        if "device" in name:
            return value, " (the argument is a device: check that it is a neuron device now)"
        device = site.ref("torch.device")
        if device is None:
            return None, ""
        return call(device, string("neuron"), value), \
            " (the index now names a NeuronCore: under torchrun, the worker's LOCAL_RANK)"


def _storage(receiver: cst.BaseExpression) -> bool:
    """`storage.cuda()`, as in `torch.load(..., map_location=lambda storage, loc:
    storage.cuda())`: a storage's `.to` takes `device=` by keyword only."""
    name = code(receiver).rsplit(".", 1)[-1].lower()
    return "storage" in name


class CudaDeviceString(DeviceStringRule):
    id = "NMC102"
    name = "cuda-device-string"
    kind = Kind.FIX
    summary = ("the device strings \"cuda\" and \"cuda:N\" become \"neuron\" and \"neuron:N\", "
               "everywhere the value flows or nowhere")
    explanation = """\
What it does: renames the CUDA device type in string literals, "cuda" to "neuron" and
"cuda:N" to "neuron:N" (also f"cuda:{i}"), where the string names a device:
`torch.device("cuda")`, `.to("cuda")`, `device="cuda"`, `map_location="cuda"`, comparisons
such as `t.device.type == "cuda"`, the idiom `"cuda" if torch.cuda.is_available() else "cpu"`,
and every place the same value reaches in the file. As with "xla" strings (NM102), the values
a string flows through and the strings it is compared with are renamed together or not at all.

Why: TorchNeuron's device type is `neuron`; AWS's porting rule for CUDA code is to change the
device strings. Renaming a comparison without the value it compares would silently take the
other branch, for example onto the CPU.

What differs: nothing inside the file. A value that also comes from outside it (a command-line
option, a caller elsewhere) must be passed as "neuron" there too, and the message says so;
where the value goes somewhere neuron-migrate cannot follow, every string of it is left as it
is and reported."""
    doc_url = D_HOME
    example = Example(
        before="import torch\n\ndevice = torch.device(\"cuda:0\")\n"
               "if x.device.type == \"cuda\":\n    x = x.to(\"cuda\")\n",
        after="import torch\n\ndevice = torch.device(\"neuron:0\")\n"
              "if x.device.type == \"neuron\":\n    x = x.to(\"neuron\")\n",
    )
    source = CUDA
    tokens = CUDA_TOKENS

    strings = CUDA_STRINGS


_DEVICE_MODULE = ("is_available", "device_count", "current_device", "set_device",
                  "get_device_name", "get_device_properties", "device", "is_bf16_supported")
_NOTES = {
    "set_device": " (under torchrun, each worker selects its own NeuronCore by LOCAL_RANK; "
                  "create the process group first)",
    "get_device_name": " (it names a NeuronCore now: code that looks for a GPU model in it "
                       "needs a look)",
    "get_device_properties": " (the properties are a NeuronCore's: fields such as "
                             "`multi_processor_count` or `major`/`minor` do not exist)",
    "is_available": " (the branch that used the GPU now uses the NeuronCore)",
    "is_bf16_supported": " (NeuronCores compute in bfloat16 natively)",
}


class CudaDeviceModule(Rule):
    id = "NMC103"
    name = "cuda-device-module"
    kind = Kind.FIX
    summary = ("`torch.cuda.is_available()`, `device_count()`, `current_device()`, "
               "`set_device()`, `get_device_name()` and `device(...)` become their "
               "`torch.neuron` counterparts")
    explanation = """\
What it does: `torch.cuda.is_available`, `device_count`, `current_device`, `set_device`,
`get_device_name`, `get_device_properties`, `is_bf16_supported` and the
`torch.cuda.device(i)` context manager become the same functions of `torch.neuron`, with the
same arguments.

Why: TorchNeuron registers a device module, `torch.neuron`, that mirrors `torch.cuda`'s device
management API (AWS's distributed example selects each worker's core with
`torch.neuron.set_device(rank)`). With it, `"cuda" if torch.cuda.is_available() else "cpu"`
becomes `"neuron" if torch.neuron.is_available() else "cpu"`, together with its string
(NMC102), and `torch.cuda.set_device(local_rank)` selects the worker's NeuronCore.

What differs: the answers are about NeuronCores: `device_count()` counts the cores this
process sees, and the device name and properties are a NeuronCore's, so code that reads GPU
fields (compute capability, multiprocessor count) needs a look. Under torchrun the process
group must be created before the first tensor is put on the device."""
    doc_url = D_DIST
    example = Example(
        before="import torch\n\ndevice = \"cuda\" if torch.cuda.is_available() else \"cpu\"\n"
               "torch.cuda.set_device(local_rank)\n",
        after="import torch\n\ndevice = \"neuron\" if torch.neuron.is_available() else \"cpu\"\n"
              "torch.neuron.set_device(local_rank)\n",
    )
    source = CUDA
    tokens = CUDA_TOKENS
    calls = frozenset(f"torch.cuda.{name}" for name in _DEVICE_MODULE)
    watches = ("torch.cuda",)
    emits = tuple(f"torch.neuron.{name}" for name in _DEVICE_MODULE)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        return neuron_counterpart(node, site, _NOTES.get((site.qualname or "").rsplit(".", 1)[-1],
                                                         ""))


def neuron_counterpart(node: cst.Call, site: Site, note: str = "") -> Outcome:
    """`torch.cuda.NAME(...)` as `torch.neuron.NAME(...)`, the same arguments."""
    name = (site.qualname or "").removeprefix("torch.cuda.")
    func = site.ref(f"torch.neuron.{name}")
    if func is None:
        return Review(f"`{code(node)}`: `torch` means something else here; use "
                      f"`torch.neuron.{name}`")
    new = node.with_changes(func=func)
    return Replace(new, f"`{code(node.func)}` → `{code(func)}`{note}")


class IsCuda(Rule):
    id = "NMC104"
    name = "is-cuda"
    kind = Kind.FIX
    summary = "`t.is_cuda` becomes `t.device.type == \"neuron\"`"
    explanation = """\
What it does: the `is_cuda` property of a tensor becomes the comparison
`t.device.type == "neuron"`, in parentheses where the place needs them.

Why: `is_cuda` asks whether a tensor is on the accelerator; after the migration the
accelerator is the `neuron` device, which has no `is_neuron` property on every PyTorch
release. Comparing the device type is the device-agnostic form PyTorch documents.

What differs: nothing: a tensor that was on the GPU is on the NeuronCore now, and the test
keeps its answer. An `is_cuda` attribute of an object of your own class is rewritten too,
which needs a look if that object is not a tensor."""
    doc_url = D_HOME
    example = Example(
        before="if not x.is_cuda:\n    x = x.to(device)\n",
        after="if x.device.type != \"neuron\":\n    x = x.to(device)\n",
    )
    source = CUDA
    tokens = CUDA_TOKENS
    attributes = frozenset({"is_cuda"})

    def on_attribute(self, node: cst.Attribute, site: Site) -> Outcome | None:
        if node.attr.value != "is_cuda":
            return None
        device_type = cst.Attribute(value=cst.Attribute(value=node.value, attr=cst.Name("device")),
                                    attr=cst.Name("type"))
        new = cst.Comparison(left=device_type, comparisons=[cst.ComparisonTarget(
            operator=cst.Equal(), comparator=string("neuron"))])
        new = site.parenthesized(new, comparison=True)  # type: ignore[assignment]
        return Replace(new, f"`{code(node)}` → `{code(new)}`")


RULES: tuple[type[Rule], ...] = (CudaMethod, CudaDeviceString, CudaDeviceModule, IsCuda)
