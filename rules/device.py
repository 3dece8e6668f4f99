"""NM10x: where tensors live. The XLA device becomes the native `neuron` device."""

from __future__ import annotations

import ast
import re

import libcst as cst

from codemod.analyse import Use
from codemod.locate import ast_dotted
from codemod.model import Kind
from codemod.rule import Example, Outcome, Replace, Review, Rule, Site
from codemod.quote import code
from rules.support import (argument, call, has_star_args, string, string_value, template,
                           with_string)

D_HOME = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html"
D_SETUP_TS = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/setup/troubleshooting.html"

_DEVICE_STRING = re.compile(r"xla(?::(\d*))?")
_DEVICE_KEYWORDS = frozenset({"device", "device_type"})
_INIT_PROCESS_GROUP = frozenset({"torch.distributed.init_process_group",
                                 "torch.distributed.distributed_c10d.init_process_group"})


def neuron_device_string(value: str) -> str | None:
    """"xla" -> "neuron", "xla:1" -> "neuron:1"; None for anything else."""
    match = _DEVICE_STRING.fullmatch(value)
    if match is None:
        return None
    return "neuron" if match.group(1) is None else f"neuron:{match.group(1)}"


class XlaDevice(Rule):
    id = "NM101"
    name = "xla-device"
    kind = Kind.FIX
    summary = "`xm.xla_device()` / `torch_xla.device()` become `torch.device(\"neuron\")`"
    explanation = """\
What it does: replaces the XLA device getter with the native device.

Why: under PJRT each XLA worker process owns exactly one device, `xla:0`, and
`xm.xla_device()` returned it. TorchNeuron registers `neuron` as a regular PyTorch device
(PrivateUse1); the process's device is `torch.device("neuron")`, which AWS's own migration
snippet uses. Under torchrun the neuron process group gives each process one NeuronCore, so
the plain form is right in data-parallel scripts.

What differs: an explicit index (`xm.xla_device(n)`) is kept as `torch.device("neuron", n)`;
check that the index still means what you want, since each process sees its own core as
index 0. `devkind=` has no equivalent and is reported for review."""
    doc_url = D_SETUP_TS
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\n",
        after="import torch\n\ndevice = torch.device(\"neuron\")\n",
    )
    calls = frozenset({"torch_xla.core.xla_model.xla_device", "torch_xla.device",
                       "torch_xla.torch_xla.device"})
    emits = ("torch.device",)
    device_getter = True  # names assigned its result are devices (see the compile rule)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if has_star_args(node.args):
            return Review(f"`{code(node)}`: unpacked arguments; use `torch.device(\"neuron\")`")
        known = {"n", "index"}
        if any(a.keyword is not None and a.keyword.value not in known for a in node.args) or \
                sum(a.keyword is None for a in node.args) > 1:
            return Review(f"`{code(node)}`: the device kind has no native equivalent; "
                          "use `torch.device(\"neuron\")`")
        device = site.ref("torch.device")
        if device is None:
            return Review("`torch` means something else here; use `torch.device(\"neuron\")`")
        index = argument(node.args, 0, "n") or argument(node.args, 0, "index")
        if index is not None and isinstance(index.value, cst.Name) and index.value.value == "None":
            index = None
        new = call(device, string("neuron"), *([index.value] if index else []))
        note = "" if index is None else \
            " (check the index: under torchrun each process sees its own core as neuron:0)"
        return Replace(new, f"`{code(node)}` → `{code(new)}`{note}")


class XlaDeviceString(Rule):
    id = "NM102"
    name = "xla-device-string"
    kind = Kind.FIX
    summary = "the device strings \"xla\" and \"xla:N\" become \"neuron\" and \"neuron:N\""
    explanation = """\
What it does: renames the XLA device type where a string literal names a device:
`torch.device("xla")`, `.to("xla")`, `device="xla"`, `device_type="xla"`, a parameter named
`device` defaulting to "xla", comparisons such as `t.device.type == "xla"` or
`"xla" in str(t.device)`, and f-strings such as f"xla:{i}".

Why: the native backend's device type is `neuron`; "xla" is no longer a device PyTorch knows.

What differs: nothing for these uses. A variable assigned "xla" (`device = "xla"`) is
rewritten only when every use in the file is one of the forms above; when it is also passed to
`init_process_group`, the rewrite is still right, because the native process-group backend is
also called `neuron`, and the explanation says so. A string used anywhere neuron-migrate
cannot follow is reported for review, not rewritten."""
    doc_url = D_HOME
    example = Example(
        before="x = torch.zeros(4, device=\"xla\")\nif x.device.type == \"xla\":\n    x = x.to(\"xla:1\")\n",
        after="x = torch.zeros(4, device=\"neuron\")\nif x.device.type == \"neuron\":\n    x = x.to(\"neuron:1\")\n",
    )

    def interesting_string(self, value: str) -> bool:
        return _DEVICE_STRING.fullmatch(value) is not None

    def leftover_string(self, value: str) -> str:
        return (f"the string {value!r} is left as it is: neuron-migrate cannot tell whether it "
                "names a device here; if it does, change it to "
                f"{neuron_device_string(value) or 'neuron'!r}")

    # ----------------------------------------------------------------- hooks
    def on_any_call(self, node: cst.Call, site: Site) -> Outcome | None:
        qualname = site.qualname_of(node.func)
        is_to = isinstance(node.func, cst.Attribute) and node.func.attr.value == "to"
        first_positional = qualname == "torch.device" or is_to
        changed: list[str] = []
        args = list(node.args)
        positional_seen = False
        for i, arg in enumerate(args):
            device_slot = (arg.keyword is None and not arg.star and first_positional
                           and not positional_seen) or \
                (arg.keyword is not None and arg.keyword.value in _DEVICE_KEYWORDS)
            if arg.keyword is None and not arg.star:
                positional_seen = True
            if device_slot:
                new_value = _renamed(arg.value)
                if new_value is not None:
                    changed.append(f"`{code(arg.value)}` → `{code(new_value)}`")
                    args[i] = arg.with_changes(value=new_value)
        if not changed:
            return None
        return Replace(node.with_changes(args=args), ", ".join(changed) + _dynamic_note(changed))

    def on_comparison(self, node: cst.Comparison, site: Site) -> Outcome | None:
        changed: list[str] = []
        left = _renamed_operand(node.left, changed)
        targets = [t.with_changes(comparator=_renamed_operand(t.comparator, changed))
                   for t in node.comparisons]
        if not changed:
            return None
        return Replace(node.with_changes(left=left, comparisons=targets),
                       "in a device comparison: " + ", ".join(changed))

    def on_param(self, node: cst.Param, site: Site) -> Outcome | None:
        if node.default is None or not _device_like(node.name.value):
            return None
        new_value = _renamed(node.default)
        if new_value is None:
            return None
        return Replace(node.with_changes(default=new_value),
                       f"default of parameter `{node.name.value}`: "
                       f"`{code(node.default)}` → `{code(new_value)}`")

    def on_assign(self, node: cst.Assign, site: Site) -> Outcome | None:
        if not isinstance(node, cst.Assign) or len(node.targets) != 1 or \
                not isinstance(node.targets[0].target, cst.Name):
            return None
        new_value = _renamed(node.value)
        uses = site.string_uses()
        if new_value is None or uses is None:
            return None
        name = node.targets[0].target.value
        kinds = [(_use_kind(u), u.node.lineno) for u in uses]
        unknown = [line for kind, line in kinds if kind == "unknown"]
        if not uses or unknown:
            where = f"line {unknown[0]}" if unknown else "no use in this file"
            return Review(f"`{name}` holds {code(node.value)} and flows where neuron-migrate "
                          f"cannot follow ({where}); if it names a device, change it to "
                          f"{code(new_value)}", suggestion=f"{name} = {code(new_value)}")
        message = f"`{name} = {code(node.value)}` → `{name} = {code(new_value)}`"
        backend_lines = [line for kind, line in kinds if kind == "backend"]
        if backend_lines:
            message += (f"; `{name}` is also passed to init_process_group (line "
                        f"{backend_lines[0]}), so it now serves as both the device and the "
                        "process-group backend: both are called \"neuron\" natively")
        return Replace(node.with_changes(value=new_value), message)


def _renamed(node: cst.BaseExpression) -> cst.BaseExpression | None:
    value = string_value(node)
    if value is not None:
        new = neuron_device_string(value)
        return with_string(node, new) if new is not None else None  # type: ignore[arg-type]
    if isinstance(node, cst.FormattedString) and node.parts and \
            isinstance(node.parts[0], cst.FormattedStringText) and \
            node.parts[0].value.startswith("xla:") and len(node.parts) > 1:
        first = node.parts[0].with_changes(value="neuron:" + node.parts[0].value[4:])
        return node.with_changes(parts=[first, *node.parts[1:]])
    return None


def _renamed_operand(node: cst.BaseExpression, changed: list[str]) -> cst.BaseExpression:
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        elements = [e.with_changes(value=_renamed_operand(e.value, changed))
                    for e in node.elements]
        return node.with_changes(elements=elements)
    new = _renamed(node)
    if new is None:
        return node
    changed.append(f"`{code(node)}` → `{code(new)}`")
    return new


def _dynamic_note(changed: list[str]) -> str:
    if any("{" in c for c in changed):
        return " (the device string is built at run time; check the index it gets)"
    return ""


def _device_like(name: str) -> bool:
    return name in ("device", "dev", "device_type") or name.endswith("_device")


def _use_kind(use: Use) -> str:
    """What a load of a device-string variable is used for, as far as this file shows."""
    parent, grand = use.parent, use.grandparent
    if isinstance(parent, ast.Call) and use.node in parent.args:
        qualname = use.scope.qualname(ast_dotted(parent.func))
        first = parent.args[0] is use.node
        if qualname == "torch.device" and first:
            return "device"
        if qualname in _INIT_PROCESS_GROUP and first:
            return "backend"
        if isinstance(parent.func, ast.Attribute) and parent.func.attr == "to" and first:
            return "device"
        if isinstance(parent.func, ast.Name) and parent.func.id in ("print", "str", "repr"):
            return "display"
        return "unknown"
    if isinstance(parent, ast.keyword) and isinstance(grand, ast.Call):
        if parent.arg in _DEVICE_KEYWORDS:
            return "device"
        if parent.arg == "backend" and use.scope.qualname(ast_dotted(grand.func)) in _INIT_PROCESS_GROUP:
            return "backend"
        return "unknown"
    if isinstance(parent, ast.Compare):
        return "compare"
    if isinstance(parent, ast.FormattedValue):
        return "display"
    return "unknown"


class XlaDeviceList(Rule):
    id = "NM103"
    name = "xla-device-list"
    kind = Kind.FIX
    summary = "`xm.get_xla_supported_devices()` / `torch_xla.devices()` list the neuron devices"
    explanation = """\
What it does: replaces the list of XLA devices with
`[torch.device("neuron", i) for i in range(torch.neuron.device_count())]`.

Why: both returned the devices this process can use. TorchNeuron's device module reports how
many NeuronCores the process sees; under torchrun the neuron process group gives each process
one core, so the list usually has one entry, as it did under PJRT.

What differs: nothing for code that iterates the list or takes its length. The device kind
argument of get_xla_supported_devices (`devkind=`) has no equivalent and is reported."""
    doc_url = D_HOME
    example = Example(
        before="import torch_xla\n\ndevices = torch_xla.devices()\n",
        after="import torch\n\ndevices = [torch.device(\"neuron\", i) for i in "
              "range(torch.neuron.device_count())]\n",
    )
    calls = frozenset({"torch_xla.core.xla_model.get_xla_supported_devices", "torch_xla.devices",
                       "torch_xla.torch_xla.devices"})
    emits = ("torch.device", "torch.neuron.device_count")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        torch_ = site.ref("torch")
        if node.args or torch_ is None:
            return Review(f"`{code(node)}`: list the devices with torch.neuron.device_count()")
        new = template(
            '[{t}.device("neuron", i) for i in range({t}.neuron.device_count())]', t=torch_)
        return Replace(new, f"`{code(node)}` → `{code(new)}`")


RULES: tuple[type[Rule], ...] = (XlaDevice, XlaDeviceString, XlaDeviceList)
