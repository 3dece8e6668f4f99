"""NM11x: graph boundaries. Eager execution has no step marker to place."""

from __future__ import annotations

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Remove, Replace, ReplaceStatement,
                                    Review, Role, Rule, Site, argument, bool_value, call, code)

D_ABOUT = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/about-pytorch-neuron.html"
D_MEM = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/memory-profiling-guide.html"


def _synchronize(site: Site, node: cst.Call, why: str) -> Outcome:
    sync = site.ref("torch.neuron.synchronize")
    if sync is None:
        return Review(f"`{code(node)}`: `torch` means something else here; "
                      "use `torch.neuron.synchronize()`")
    new = call(sync)
    return Replace(new, f"`{code(node)}` → `{code(new)}`: {why}")


class MarkStep(Rule):
    id = "NM110"
    name = "mark-step"
    kind = Kind.FIX
    summary = "`xm.mark_step()` / `torch_xla.sync()` statements are deleted"
    explanation = """\
What it does: deletes `xm.mark_step()` and `torch_xla.sync()` when they stand alone as a
statement. A block left empty gets `pass`; comments on the lines around it stay.
`mark_step(wait=True)` / `sync(wait=True)` become `torch.neuron.synchronize()`.

Why: PyTorch/XLA recorded operations lazily and `mark_step` cut the recorded graph and sent it
to the device. TorchNeuron runs eagerly: each operation is dispatched when it is issued (and
queued asynchronously), so there is no pending graph to cut. Under `torch.compile` the compiled
region defines the graph. With `wait=True` the call also blocked until the device finished,
which `torch.neuron.synchronize()` still does.

What differs: `mark_step` also ran the closures queued by `xm.add_step_closure`; if the file
uses those, they are reported separately. Several `mark_step` calls placed to split forward,
backward and optimizer graphs need no replacement; to get one compiled graph per step, compile
the model (`model.compile(backend="neuron", dynamic=False)`). A call whose `wait` is computed
(`mark_step(wait=flag)`) becomes `if flag: torch.neuron.synchronize()` where it is a statement
of its own; a call whose value is used becomes `None`, the value it always returned."""
    doc_url = D_ABOUT
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\nfor batch in loader:\n"
               "    loss = step(batch)\n    xm.mark_step()\n",
        after="for batch in loader:\n    loss = step(batch)\n",
    )
    calls = frozenset({"torch_xla.core.xla_model.mark_step", "torch_xla.sync",
                       "torch_xla.torch_xla.sync"})
    emits = ("torch.neuron.synchronize",)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        wait = argument(node.args, 0, "wait")
        flag = False if wait is None else bool_value(wait.value)
        if flag is None:
            assert wait is not None
            sync = site.ref("torch.neuron.synchronize")
            if site.role is not Role.STATEMENT or sync is None:
                return Review(f"`{code(node)}`: `wait` is computed; delete the call, and where "
                              "it was true call `torch.neuron.synchronize()` instead",
                              suggestion=f"if {code(wait.value)}:\n    torch.neuron.synchronize()")
            guarded = cst.If(test=wait.value, body=cst.IndentedBlock(
                [cst.SimpleStatementLine([cst.Expr(call(sync))])]))
            return ReplaceStatement((guarded,), f"`{code(node)}` → `if {code(wait.value)}: "
                                    f"{code(call(sync))}`: eager execution has no graph to cut; "
                                    "where the call waited for the device, synchronize() does")
        if flag:
            return _synchronize(site, node, "eager execution has no graph to cut, but the "
                                "call also waited for the device, which synchronize() does")
        if site.role is Role.EXPRESSION:  # its value is used: it was always None
            return Replace(cst.Name("None"), f"`{code(node)}` → `None`: eager execution has no "
                           "graph to cut, and the call always returned None")
        return Remove(f"delete `{code(node)}`: TorchNeuron executes eagerly, there is no "
                      "pending graph to cut")


class StepContext(Rule):
    id = "NM111"
    name = "step-context"
    kind = Kind.FIX
    summary = "`with torch_xla.step():` is unwrapped, keeping its body"
    explanation = """\
What it does: removes the `with torch_xla.step():` line and dedents its body. When the
`with` has other context managers too, only the `torch_xla.step()` item goes.

Why: `torch_xla.step()` marked the start and end of a training step so that the lazily
recorded graph was cut at its end (a `mark_step` in a context manager). TorchNeuron executes
eagerly, so there is nothing to mark.

What differs: nothing at run time. A `torch_xla.step()` used in any other way (bound with
`as`, or called outside a `with`) is reported for review."""
    doc_url = D_ABOUT
    example = Example(
        before="import torch_xla\n\nwith torch_xla.step():\n    loss = model(x).sum()\n"
               "    loss.backward()\n",
        after="loss = model(x).sum()\nloss.backward()\n",
    )
    calls = frozenset({"torch_xla.step", "torch_xla.torch_xla.step"})

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if site.role is not Role.WITH_ITEM:
            return Review(f"`{code(node)}` outside a plain `with` statement: remove it and "
                          "keep the code it wrapped")
        return Remove(f"remove `{code(node)}` from its `with` statement: eager execution "
                      "needs no step marker")


class WaitDeviceOps(Rule):
    id = "NM112"
    name = "wait-device-ops"
    kind = Kind.FIX
    summary = "`xm.wait_device_ops()` becomes `torch.neuron.synchronize()`"
    explanation = """\
What it does: replaces `xm.wait_device_ops()` with `torch.neuron.synchronize()`.

Why: both block the host until every operation queued on the device has finished; scripts use
it around timers and before reading memory statistics. `torch.neuron.synchronize()` is what
AWS's memory-profiling guide calls for the same purpose.

What differs: the `devices=` argument has no meaning natively (each process drives one core)
and is dropped."""
    doc_url = D_MEM
    example = Example(
        before="import torch\nimport torch_xla.core.xla_model as xm\n\nxm.wait_device_ops()\n"
               "elapsed = time.time() - start\n",
        after="import torch\n\ntorch.neuron.synchronize()\nelapsed = time.time() - start\n",
    )
    calls = frozenset({"torch_xla.core.xla_model.wait_device_ops"})
    emits = ("torch.neuron.synchronize",)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        return _synchronize(site, node, "both wait until the device is idle")


class StepClosure(Rule):
    id = "NM113"
    name = "step-closure"
    kind = Kind.FIX
    summary = "`xm.add_step_closure(fn, args)` becomes the direct call `fn(*args)`"
    explanation = """\
What it does: replaces `xm.add_step_closure(fn, args=(a, b))` with `fn(a, b)`.

Why: XLA deferred the closure until the next `mark_step`, when the lazily computed tensors it
reads (a loss to log, say) had values. Eager TorchNeuron tensors have their values already,
so the closure can run where it is queued.

What differs: the closure now runs at this point rather than at the end of the step, and
reading a tensor value (`.item()`, printing) waits for the device each time: keep such
logging out of the hot loop, or log every N steps. `run_async=True` (run in a background
thread) is dropped; the call is synchronous now."""
    doc_url = D_ABOUT
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\n"
               "xm.add_step_closure(log_loss, args=(loss, step))\n",
        after="log_loss(loss, step)\n",
    )
    calls = frozenset({"torch_xla.core.xla_model.add_step_closure"})

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        closure = argument(node.args, 0, "closure")
        args = argument(node.args, 1, "args")
        if closure is None or any(a.star for a in node.args):
            return Review(f"`{code(node)}`: call the closure directly")
        if args is None:
            call_args: list[cst.Arg] = []
        elif isinstance(args.value, (cst.Tuple, cst.List)):
            call_args = _closure_args(closure.value, args.value)
        else:
            call_args = [cst.Arg(args.value, star="*")]
        new = cst.Call(closure.value, call_args)
        run_async = argument(node.args, 2, "run_async")
        note = "; drop run_async: it runs synchronously now" if run_async is not None and \
            bool_value(run_async.value) is not False else ""
        return Replace(new, f"`{code(node)}` → `{code(new)}`: runs now instead of at the next "
                       f"mark_step; tensor values are available eagerly{note}")


def _closure_args(closure: cst.BaseExpression, args: cst.Tuple | cst.List) -> list[cst.Arg]:
    """The elements as arguments: on one line when the call fits one (the tuple's own line
    breaks and indentation would not fit it), else with the tuple's layout, as when a comment
    sits among them."""
    def arguments(commas: bool) -> list[cst.Arg]:
        found = [cst.Arg(e.value, star="*" if isinstance(e, cst.StarredElement) else "",
                         comma=e.comma if commas else cst.MaybeSentinel.DEFAULT)
                 for e in args.elements]
        if found:
            found[-1] = found[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return found

    flat = arguments(commas=False)
    text = code(cst.Call(closure, flat))
    if "#" in code(args) or "\n" in text or len(text) > _ONE_LINE:
        return arguments(commas=True)
    return flat


_ONE_LINE = 72  # the call's own length: with its indentation, within most projects' limit

RULES: tuple[type[Rule], ...] = (MarkStep, StepContext, WaitDeviceOps, StepClosure)
