"""NM10x: where tensors live. The XLA device becomes the native `neuron` device."""

from __future__ import annotations

import ast
import re

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Review, Rule, Site, argument,
                                    call, code, has_star_args, string, string_value, template,
                                    with_string)
from neuron_migrate.rules.device_flow import Verdict, judge
from neuron_migrate.rules.device_probe import tests_for_device

D_HOME = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html"
D_SETUP_TS = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/setup/troubleshooting.html"

class DeviceStrings:
    """One stack's device strings ("xla", "xla:1"; "cuda", "cuda:1") and their neuron names."""

    def __init__(self, stack: str) -> None:
        self.stack = stack
        self.device = re.compile(rf"{stack}(?::(\d*))?")
        self.prefix = re.compile(rf"{stack}:\d*")  # the text in front of f"xla:{i}"

    def neuron(self, value: str) -> str | None:
        """"xla" -> "neuron", "xla:1" -> "neuron:1"; None for anything else."""
        match = self.device.fullmatch(value)
        if match is None:
            return None
        return "neuron" if match.group(1) is None else f"neuron:{match.group(1)}"

    def renamed(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """The literal (or the f-string's leading `xla:`) with the neuron name."""
        value = string_value(node)
        if value is not None:
            new = self.neuron(value)
            return with_string(node, new) if new is not None else None  # type: ignore[arg-type]
        head = f"{self.stack}:"
        if isinstance(node, cst.FormattedString) and node.parts and \
                isinstance(node.parts[0], cst.FormattedStringText) and \
                node.parts[0].value.startswith(head) and len(node.parts) > 1:
            first = node.parts[0].with_changes(value="neuron:" + node.parts[0].value[len(head):])
            return node.with_changes(parts=[first, *node.parts[1:]])
        return None


XLA_STRINGS = DeviceStrings("xla")


def neuron_device_string(value: str) -> str | None:
    """"xla" -> "neuron", "xla:1" -> "neuron:1"; None for anything else."""
    return XLA_STRINGS.neuron(value)


class DeviceStringRule(Rule):
    """A device string renamed everywhere its value flows, or nowhere (reported): NM102 for
    XLA's, NMC102 for CUDA's, one mechanism over the strings of their stack."""

    strings: DeviceStrings

    def interesting_string(self, value: str) -> bool:
        return self.strings.device.fullmatch(value) is not None

    def flow_string(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str) and \
                self.strings.device.fullmatch(node.value) is not None
        if not isinstance(node, ast.JoinedStr) or len(node.values) < 2:
            return False
        first = node.values[0]
        return isinstance(first, ast.Constant) and isinstance(first.value, str) and \
            self.strings.prefix.fullmatch(first.value) is not None

    def leftover_string(self, value: str) -> str:
        return (f"the string {value!r} is left as it is: neuron-migrate cannot tell whether it "
                "names a device here; if it does, change it to "
                f"{self.strings.neuron(value) or 'neuron'!r}")

    def may_act(self, node: ast.AST, names: frozenset[str]) -> bool:
        texts = [node] if isinstance(node, ast.Constant) else \
            getattr(node, "values", [])  # an f-string's parts
        return any(isinstance(t, ast.Constant) and isinstance(t.value, str)
                   and self.strings.stack in t.value for t in texts)

    def on_string(self, node: cst.SimpleString | cst.FormattedString, site: Site
                  ) -> Outcome | None:
        new = self.strings.renamed(node)
        flow = site.string_flow() if new is not None else None
        if flow is None or new is None:
            return None
        verdict = flow.memo.get(self.id)
        if not isinstance(verdict, Verdict):
            verdict = flow.memo[self.id] = judge(flow, site)
        if verdict.deferred:
            return None  # a call whose own rule renames it (init_process_group, autocast)
        if not verdict.rename:
            return Review(f"the string {code(node)} is left as it is{verdict.text}",
                          suggestion=_unindexed(node) if verdict.unindexed else code(new))
        return Replace(new, f"`{code(node)}` → `{code(new)}`{verdict.text}")


def _unindexed(node: cst.SimpleString | cst.FormattedString) -> str:
    """The native device's name in the literal's quotes: what `str(torch.device("neuron"))`
    prints, so what a string compared with it must hold (an index would never match)."""
    quote = node.quote if isinstance(node, cst.SimpleString) else node.end
    return f"{quote}neuron{quote}"


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
index 0. `devkind=` has no equivalent and is reported for review. So is a test for the device:
a `try` around the call that catches RuntimeError (or any exception) and falls back (to the
CPU, to CUDA, to a flag), whose body does little besides getting the device, or one that
imports torch_xla and names RuntimeError: `xm.xla_device()` raised it when no device was
there, `torch.device("neuron")` never does, so such a test is rewritten by hand
(`torch.neuron.is_available()`). Any other `try` (an error logger around a whole function, a
handler that stops the program) keeps the rewrite."""
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
        handler = site.catching(frozenset({"RuntimeError"}))
        if handler is not None and tests_for_device(handler, site.module_tree, site.statement):
            return Review(f"`{code(node)}` raised RuntimeError when no XLA device was there, "
                          f"which the `except` on line {handler.lineno} catches; "
                          "`torch.device(\"neuron\")` never raises, so that test would always "
                          "pass: ask `torch.neuron.is_available()` instead")
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


class XlaDeviceString(DeviceStringRule):
    id = "NM102"
    name = "xla-device-string"
    kind = Kind.FIX
    summary = ("the device strings \"xla\" and \"xla:N\" become \"neuron\" and "
               "\"neuron:N\", everywhere the value flows or nowhere")
    explanation = """\
What it does: renames the XLA device type in string literals, "xla" to "neuron" and "xla:N"
to "neuron:N" (also f"xla:{i}"), where the string names a device: `torch.device("xla")`,
`.to("xla")`, `device="xla"`, comparisons such as `t.device.type == "xla"`, and every place
the same value reaches in the file. A string is never renamed alone: the defaults, variables,
parameters, attributes (`self.device`, an argparse option's `args.device`), dict items and
return values its value flows through, and the strings it is compared with (`==`, `in`,
`startswith`, `case`), are renamed all together or not at all.

Why: the native backend's device type is `neuron`; "xla" is no longer a device PyTorch knows.
Renaming a comparison without the value it compares (`if requested == "neuron":` while the
default stays "xla") would silently take the other branch, for example onto the CPU.

What differs: nothing inside the file. Where the value also comes from outside it (a
command-line option, a parameter of a function called from elsewhere), those callers must
pass "neuron" too, and the message says so. A value also passed to `init_process_group` is
still right: the native process-group backend is also called `neuron`. When the value comes
from, or goes to, somewhere neuron-migrate cannot follow (an environment variable, a function
it cannot see), none of its strings is renamed and each is reported with the reason; so is a
value that only serves as a label (a command-line choice, or a module-level name or class
attribute other modules can read, that never selects a device here). An enum member's value
is never renamed: `Backend("xla")` would no longer find the member, and it could become an
alias of another."""
    doc_url = D_HOME
    example = Example(
        before="def place(x, requested=\"xla\"):\n"
               "    if requested == \"xla\" and x.device.type != \"xla\":\n"
               "        x = x.to(\"xla:1\")\n"
               "    return x\n",
        after="def place(x, requested=\"neuron\"):\n"
              "    if requested == \"neuron\" and x.device.type != \"neuron\":\n"
              "        x = x.to(\"neuron:1\")\n"
              "    return x\n",
    )

    strings = XLA_STRINGS


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
