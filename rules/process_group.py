"""NM20x: the process group. The XLA backend and its rendezvous become the `neuron` backend."""

from __future__ import annotations

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, ReplaceStatement, Role, Rule,
                                    Site, code, drop_args, keyword_arg, string, string_value,
                                    template, with_string)
from neuron_migrate.rules.launch import launch_facts

D_DIST = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html"

_XLA_INIT_METHODS = frozenset({"xla://", "pjrt://"})


class XlaProcessGroup(Rule):
    id = "NM201"
    name = "xla-process-group"
    kind = Kind.FIX
    summary = "`init_process_group(\"xla\", init_method=\"xla://\")` becomes `backend=\"neuron\"`"
    explanation = """\
What it does: in `torch.distributed.init_process_group`, the backend "xla" becomes "neuron",
and the XLA rendezvous `init_method="xla://"` (or "pjrt://") is dropped. When only the
init_method named XLA, it is replaced by `backend="neuron"`.

Why: TorchNeuron ships a torch.distributed backend called `neuron`; the XLA backend and its
rendezvous do not exist natively. Without an init_method, torch.distributed uses `env://`,
which reads the MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE that torchrun sets, which is
how AWS's distributed guide starts jobs.

What differs: the process group must be created before any tensor is put on the neuron
device (the native backend assigns each process its NeuronCore when the group starts); if
your script moves the model to the device first, move `init_process_group` up. In a function,
and in a script launched with `xmp.spawn` or `torch_xla.launch` (whose worker entry now
creates the group, NM220), the call runs only `if not dist.is_initialized()`: a second
`init_process_group` would raise, and a script that calls the function may have created the
group at its entry already (NM221 does so for a script that used XLA collectives without a
group of its own). Where the original call worked, no group existed, so it still runs."""
    doc_url = D_DIST
    example = Example(
        before="import torch.distributed as dist\n\n"
               "dist.init_process_group(\"xla\", init_method=\"xla://\")\n",
        after="import torch.distributed as dist\n\ndist.init_process_group(\"neuron\")\n",
    )
    calls = frozenset({"torch.distributed.init_process_group",
                       "torch.distributed.distributed_c10d.init_process_group"})
    emits = ("torch.distributed.is_initialized",)

    def interesting_string(self, value: str) -> bool:
        return value in _XLA_INIT_METHODS

    def leftover_string(self, value: str) -> str:
        return (f"the XLA rendezvous {value!r} is left as it is: it only works with torch_xla; "
                "launch with torchrun and let torch.distributed use env://")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        args = list(node.args)
        changed: list[str] = []
        backend_index: int | None = None
        init_index: int | None = None
        positional = 0
        for i, arg in enumerate(args):
            name = arg.keyword.value if arg.keyword is not None else None
            if arg.star:
                continue
            if name is None:
                name = ("backend", "init_method")[positional] if positional < 2 else None
                positional += 1
            if name == "backend":
                backend_index = i
            elif name == "init_method":
                init_index = i
        if backend_index is not None:
            arg = args[backend_index]
            if string_value(arg.value) == "xla":
                new = with_string(arg.value, "neuron")  # type: ignore[arg-type]
                args[backend_index] = arg.with_changes(value=new)
                changed.append(f"backend `{code(arg.value)}` → `{code(new)}`")
        drop: set[int] = set()
        if init_index is not None and string_value(args[init_index].value) in _XLA_INIT_METHODS:
            arg = args[init_index]
            changed.append(f"drop init_method `{code(arg.value)}` (torchrun's env:// is the "
                           "default)")
            later_positional = any(a.keyword is None for a in args[init_index + 1:])
            if backend_index is None:
                args[init_index] = keyword_arg("backend", string("neuron")).with_changes(
                    comma=arg.comma)
                changed.append("add `backend=\"neuron\"`")
            elif later_positional:
                args[init_index] = arg.with_changes(value=cst.Name("None"))
            else:
                drop.add(init_index)
        if not changed:
            return None
        new = node.with_changes(args=drop_args(args, drop))
        facts = launch_facts(site.module_tree, site.module_calls())
        # a second init_process_group raises: the worker entry NM220 writes has created the
        # group already, and a function may be called by a script whose entry has (NM221)
        if facts.entry_group:
            why = "the worker entry creates it, NM220"
        elif site.in_function:
            why = ("a script that calls this function may have created it at its entry, "
                   "NM221")
        else:
            return Replace(new, "; ".join(changed))
        dist = site.ref("torch.distributed")
        if dist is None:
            return Replace(new, "; ".join(changed))
        changed.append(f"only if no process group exists yet ({why})")
        unset = template("not {d}.is_initialized()", d=dist)
        if site.role is Role.STATEMENT and site.insert_after(()):
            guarded = cst.If(test=unset, body=cst.IndentedBlock(
                body=[cst.SimpleStatementLine(body=[cst.Expr(new)])]))
            return ReplaceStatement((guarded,), "; ".join(changed))
        return Replace(site.parenthesized(cst.IfExp(test=unset, body=new,
                                                    orelse=cst.Name("None"))),
                       "; ".join(changed))


class XlaBackendImport(Rule):
    id = "NM202"
    name = "xla-backend-import"
    kind = Kind.FIX
    summary = "side-effect imports of the XLA process-group backend are removed"
    explanation = """\
What it does: removes `import torch_xla.distributed.xla_backend` and
`import torch_xla.experimental.pjrt_backend` (in any import form).

Why: these modules were imported only for their side effect, registering the "xla" backend and
the xla:// / pjrt:// rendezvous with torch.distributed. TorchNeuron registers its `neuron`
backend itself when PyTorch loads its device extension (autoload), so there is nothing to
import.

What differs: if you disable autoload (TORCH_DEVICE_BACKEND_AUTOLOAD=0), add
`import torch_neuronx` yourself."""
    doc_url = D_DIST
    example = Example(
        before="import torch.distributed as dist\nimport torch_xla.distributed.xla_backend\n",
        after="import torch.distributed as dist\n",
    )
    imports = frozenset({"torch_xla.distributed.xla_backend",
                         "torch_xla.experimental.pjrt_backend"})


RULES: tuple[type[Rule], ...] = (XlaProcessGroup, XlaBackendImport)
