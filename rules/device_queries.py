"""NM104-NM105: the small device utilities of `xla_model`: what kind of device a tensor or
the process has, and moving nested data between the host and the device."""

from __future__ import annotations

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Review, Rule, Site, argument,
                                    code, has_star_args, string, string_value, template, with_string)
from neuron_migrate.rules.device import neuron_device_string

D_HOME = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html"
XM = "torch_xla.core.xla_model"
XR = "torch_xla.runtime"


class XlaDeviceHw(Rule):
    id = "NM104"
    name = "xla-device-hw"
    kind = Kind.FIX
    summary = ("`xm.xla_device_hw(device)` / `xr.device_type()` become the native device type "
               "in capitals (\"NEURON\")")
    explanation = """\
What it does: replaces `xm.xla_device_hw(device)` with `torch.device(device).type.upper()`,
and `xr.device_type()` with the type of the process's accelerator in capitals
(`(torch.accelerator.current_accelerator() or torch.device("cpu")).type.upper()`).

Why: both named the hardware behind the XLA device in capitals: "NEURON" on Trainium, "TPU",
"CUDA" or "GPU", "CPU". The native device of a migrated script is `neuron`, whose type in
capitals is the same "NEURON", so comparisons such as `xr.device_type() == "NEURON"` (or
`!= "TPU"`) keep their result; a CPU device, or a host without an accelerator, still gives
"CPU".

What differs: nothing on Trainium. The argument of xla_device_hw must name a device (a
torch.device, or a string such as "neuron"); a literal "xla" or "xla:N" argument is renamed
to "neuron". `xr.device_type()` returned None when no PJRT device was configured, and its
replacement never does: where the call is tested for None or for truth (`xr.device_type() is
not None`, `if xr.device_type():`), it is reported instead, with `torch.neuron.is_available()`
as the way to ask."""
    doc_url = D_HOME
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\n"
               "if xm.xla_device_hw(device) == \"NEURON\":\n    pass\n",
        after="import torch\n\nif torch.device(device).type.upper() == \"NEURON\":\n    pass\n",
    )
    calls = frozenset({f"{XM}.xla_device_hw", f"{XR}.device_type"})
    prefixes = (f"{XM}.xla_device_hw", f"{XR}.device_type")
    emits = ("torch.device", "torch.accelerator.current_accelerator")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        torch_ = site.ref("torch")
        if site.qualname == f"{XR}.device_type":
            if _tested_for_none(node, site.parent):
                return Review(f"`{code(node)}` returned None when no PJRT device was "
                              "configured, which this test asks; its replacement names a "
                              "device type on every host (\"CPU\" without an accelerator), so "
                              "the test would always give the same answer: ask "
                              "`torch.neuron.is_available()` instead")
            if node.args or torch_ is None:
                return Review(f"`{code(node)}`: use `torch.accelerator.current_accelerator()"
                              ".type.upper()` (\"NEURON\" on Trainium)")
            new = template('({t}.accelerator.current_accelerator() or {t}.device("cpu"))'
                           ".type.upper()", t=torch_)
            return Replace(new, f"`{code(node)}` → `{code(new)}`: \"NEURON\" on the neuron "
                           "device, as on Trainium; \"CPU\" without an accelerator")
        device_arg = argument(node.args, 0, "device")
        if has_star_args(node.args) or device_arg is None or len(node.args) != 1:
            return Review(f"`{code(node)}`: expected one device; use "
                          "`torch.device(device).type.upper()` (\"NEURON\" on Trainium)")
        if torch_ is None:
            return Review("`torch` means something else here; use "
                          "`torch.device(device).type.upper()`")
        value = device_arg.value
        literal = string_value(value)
        renamed = neuron_device_string(literal) if literal is not None else None
        if renamed is not None:
            value = with_string(value, renamed)  # type: ignore[arg-type]
        # the call keeps its own argument (and any comment beside it); torch.device takes it
        # by position
        arg = device_arg.with_changes(value=value, keyword=None,
                                      equal=cst.MaybeSentinel.DEFAULT)
        device = template("{t}.device", t=torch_)
        new = template("{c}.type.upper()", c=node.with_changes(func=device, args=[arg]))
        return Replace(new, f"`{code(node)}` → `{code(new)}`: \"NEURON\" for the neuron "
                       "device, as xla_device_hw returned on Trainium")

    def leftover_reference(self, qualname: str) -> str:
        return (f"`{qualname}`: use `torch.device(device).type.upper()` (\"NEURON\" for the "
                "neuron device, as on Trainium)")


class TensorTransfers(Rule):
    id = "NM105"
    name = "xla-tensor-transfer"
    kind = Kind.FIX
    summary = ("`xm.is_xla_tensor(t)`, `xm.send_cpu_data_to_device(data, device)` and "
               "`xm._maybe_convert_to_cpu(data)` become device checks and moves")
    explanation = """\
What it does: replaces `xm.is_xla_tensor(t)` with `t.device.type == "neuron"`;
`xm.send_cpu_data_to_device(data, device)` with a helper that copies the tensors in `data`
(also inside lists, tuples and dicts) to `device`, returning a lone tensor in a list as the
XLA call did; and `xm._maybe_convert_to_cpu(data)` with a helper that moves them to the CPU.

Why: these asked whether a tensor lived on the XLA device and moved nested data between the
host and the device; with the native `neuron` device that is the device type and `.to()`.

What differs: send_cpu_data_to_device copied only tensors on the CPU; the helper also moves a
tensor already on another device. `input_sharding=` (SPMD) and `_maybe_convert_to_cpu(...,
convert=False)` (a sync without a copy) are reported for review."""
    doc_url = D_HOME
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\nif xm.is_xla_tensor(t):\n    pass\n",
        after="if t.device.type == \"neuron\":\n    pass\n",
    )
    calls = frozenset({f"{XM}.is_xla_tensor", f"{XM}.send_cpu_data_to_device",
                       f"{XM}._maybe_convert_to_cpu"})
    emits = ("torch.Tensor.to",)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        function = (site.qualname or "").rsplit(".", 1)[-1]
        first = argument(node.args, 0, "tensor" if function == "is_xla_tensor" else "data"
                         if function == "_maybe_convert_to_cpu" else "datas")
        if has_star_args(node.args) or first is None:
            return Review(f"`{code(node)}`: unpacked or missing arguments; rewrite by hand")
        if function == "is_xla_tensor":
            value = first.value
            if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
                value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            new = site.parenthesized(template('{v}.device.type == "neuron"', v=value),
                                     comparison=True)
            return Replace(new, f"`{code(node)}` → `{code(new)}`")
        if function == "_maybe_convert_to_cpu":
            convert = argument(node.args, 1, "convert")
            if convert is not None and code(convert.value) != "True":
                return Review(f"`{code(node)}`: without `convert` this only waited for the "
                              "tensors; use torch.neuron.synchronize()")
            new = cst.Call(site.helper("_neuron_to_device"), [
                cst.Arg(first.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                cst.Arg(string("cpu"))])
            return Replace(new, f"`{code(node)}` → `{code(new)}`: the same data, tensors on "
                           "the CPU")
        device = argument(node.args, 1, "device")
        if device is None or argument(node.args, 2, "input_sharding") is not None:
            return Review(f"`{code(node)}`: input_sharding is SPMD sharding; use DTensor "
                          "(distribute_tensor) instead")
        new = node.with_changes(func=site.helper("_neuron_send_cpu_data_to_device"))
        return Replace(new, f"`{code(node)}` → `{code(new)}`: the same data on the device (a "
                       "lone tensor in a list, as before)")



def _tested_for_none(node: cst.Call, parent: cst.CSTNode | None) -> bool:
    """Whether the call's value is tested for None or for truth (`is not None`, `if
    xr.device_type():`), the one question its native replacement answers differently."""
    if isinstance(parent, cst.Comparison):
        return any(_none(t.comparator) for t in parent.comparisons) or (
            parent.left is not node and _none(parent.left))
    if isinstance(parent, cst.ComparisonTarget):
        return True  # `None is xr.device_type()`: what it is compared with is on the left
    if isinstance(parent, (cst.If, cst.While, cst.IfExp)):
        return parent.test is node
    return isinstance(parent, cst.BooleanOperation) or \
        isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not)


def _none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"

RULES: tuple[type[Rule], ...] = (XlaDeviceHw, TensorTransfers)
