"""NM401-NM404: mixed precision and random numbers."""

from __future__ import annotations

import ast

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Review, Rule, Site, append_arg,
                                    argument, code, has_star_args, keep_args, keyword, keyword_arg,
                                    string, string_value, with_string)
from neuron_migrate.rules.device import neuron_device_string
from neuron_migrate.rules.review_base import ReviewRule
from neuron_migrate.rules.rng_pairs import (GET, SET, RngFacts, rng_facts, seed_like,
                                            statement_calls)

D_HOME = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html"
XLA_AMP = "https://docs.pytorch.org/xla/release/r2.8/perf/amp.html"
_TORCH_AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast",
                             "torch.amp.autocast_mode.autocast"})
_XLA_AUTOCAST = frozenset({"torch_xla.amp.autocast", "torch_xla.amp.autocast_mode.autocast"})


class Autocast(Rule):
    id = "NM401"
    name = "xla-autocast"
    kind = Kind.FIX
    summary = "`torch_xla.amp.autocast` and `torch.autocast(\"xla\")` become `torch.autocast(\"neuron\")`"
    explanation = """\
What it does: `torch_xla.amp.autocast(device, ...)` and `torch.autocast("xla", ...)` (or
`device_type="xla"`) become `torch.autocast("neuron", ...)`. When no dtype was given,
`dtype=torch.bfloat16` is written out.

Why: TorchNeuron supports mixed precision through the standard autocast API with
`device_type="neuron"`. On XLA devices autocast defaulted to bfloat16; AWS does not document
the native default, so the dtype is made explicit to keep the precision the script had.

What differs: nothing for the given arguments; `enabled=` and `cache_enabled=` are kept."""
    doc_url = XLA_AMP  # torch_xla.amp.autocast, and autocast on XLA devices
    example = Example(
        before="import torch\n\nwith torch.autocast(\"xla\"):\n    loss = model(x)\n",
        after="import torch\n\nwith torch.autocast(\"neuron\", dtype=torch.bfloat16):\n"
              "    loss = model(x)\n",
    )
    calls = _TORCH_AUTOCAST | _XLA_AUTOCAST
    emits = ("torch.autocast", "torch.bfloat16")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if has_star_args(node.args):
            return None
        args = list(node.args)
        device = argument(args, 0, "device_type")
        call = node  # `node` stays as written: the message quotes it
        if site.qualname in _XLA_AUTOCAST:
            device = argument(args, 0, "device")
            autocast = site.ref("torch.autocast")
            if autocast is None or device is None:
                return Review(f"`{code(node)}`: use torch.autocast(\"neuron\", "
                              "dtype=torch.bfloat16)")
            args[args.index(device)] = cst.Arg(string("neuron"), comma=device.comma)
            call = node.with_changes(func=autocast)
        elif device is None or string_value(device.value) is None or \
                neuron_device_string(string_value(device.value) or "") is None:
            return None  # another device type: not ours
        else:
            new_device = with_string(device.value, "neuron")  # type: ignore[arg-type]
            args[args.index(device)] = device.with_changes(value=new_device)
        note = ""
        if keyword(args, "dtype") is None and argument(args, 1, "dtype") is None:
            bf16 = site.ref("torch.bfloat16")
            if bf16 is not None:
                args = append_arg(args, keyword_arg("dtype", bf16))
                note = "; add dtype=torch.bfloat16 (XLA's autocast default)"
        new = call.with_changes(args=args)
        return Replace(new, f"`{code(node)}` → `{code(new)}`{note}")


class SyncfreeOptimizer(Rule):
    id = "NM402"
    name = "syncfree-optimizer"
    kind = Kind.FIX
    summary = "`torch_xla.amp.syncfree` optimizers become their `torch.optim` counterparts"
    explanation = """\
What it does: `syncfree.SGD`, `syncfree.Adam` and `syncfree.AdamW` become `torch.optim.SGD`,
`torch.optim.Adam` and `torch.optim.AdamW`, with the same arguments.

Why: the syncfree variants existed so that XLA's lazy graphs did not have to sync with the
host to check for infinite gradients under a GradScaler. Eager TorchNeuron has no such graph;
the standard optimizers are the native ones.

What differs: the update is the same; the syncfree optimizers skipped a step on inf/nan
gradients only together with XLA's GradScaler (reported separately)."""
    doc_url = XLA_AMP
    example = Example(
        before="from torch_xla.amp import syncfree\n\nopt = syncfree.AdamW(params, lr=1e-3)\n",
        after="import torch\n\nopt = torch.optim.AdamW(params, lr=1e-3)\n",
    )
    names = frozenset(f"torch_xla.amp.syncfree.{n}" for n in ("SGD", "Adam", "AdamW"))
    emits = ("torch.optim.SGD", "torch.optim.Adam", "torch.optim.AdamW")

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        target = "torch.optim." + (site.qualname or "").rsplit(".", 1)[-1]
        new = site.ref(target)
        if new is None:
            return Review(f"`{code(node)}`: `torch` means something else here; use {target}")
        return Replace(new, f"`{code(node)}` → `{code(new)}`")


class GradScaler(ReviewRule):
    id = "NM403"
    name = "xla-grad-scaler"
    summary = "`torch_xla.amp.GradScaler` needs a decision: none for bf16, torch.amp for fp16"
    explanation = """\
What it does: reports uses of torch_xla's GradScaler.

Why: loss scaling exists for float16. With bfloat16 autocast, which Trainium uses, there is
nothing to scale and the scaler can be removed. For float16 the native equivalent would be
`torch.amp.GradScaler("neuron")`, whose support AWS's documentation does not confirm.

What to do: with bfloat16, delete the scaler and call `loss.backward()` and
`optimizer.step()` directly; with float16, try torch.amp.GradScaler("neuron") and check it."""
    doc_url = XLA_AMP
    example = Example(
        before="from torch_xla.amp import GradScaler\n\nscaler = GradScaler()\n",
        after="from torch_xla.amp import GradScaler\n\nscaler = GradScaler()\n",
    )
    guidance = {"torch_xla.amp.GradScaler": "bfloat16 needs no loss scaling: remove the scaler;"
                " for float16 try torch.amp.GradScaler(\"neuron\") (support unconfirmed)",
                "torch_xla.amp.grad_scaler": "bfloat16 needs no loss scaling: remove the "
                "scaler; for float16 try torch.amp.GradScaler(\"neuron\")"}


class RngState(Rule):
    id = "NM404"
    name = "xla-rng-state"
    kind = Kind.FIX
    summary = ("`xm.set_rng_state(seed)` becomes `torch.neuron.manual_seed(seed)`; a state read "
               "with `get_rng_state` and restored migrates as a pair, or is reviewed")
    explanation = """\
What it does: `xm.set_rng_state(seed)` becomes `torch.neuron.manual_seed(seed)`. A state read
and restored, `s = xm.get_rng_state()` ... `xm.set_rng_state(s)`, where the name only ever
holds read states and is only ever restored, becomes `s = torch.neuron.get_rng_state()` ...
`torch.neuron.set_rng_state(s)`: the read and its restores change together. Any other
`xm.get_rng_state()` (its value returned, stored, passed on) is reported for review, and so is
every `xm.set_rng_state(value)` of that file whose value is not visibly an integer seed (a
number, arithmetic on numbers), with one explanation: that value may be the state read there.

Why: set_rng_state seeded the XLA device's random generator and nothing else;
`torch.neuron.manual_seed` seeds the Neuron device's generator and nothing else (it is the
device module's standard `manual_seed`, which `torch.manual_seed` itself calls for the
`neuron` device). The CPU generator, which data shuffling and augmentation use, is left alone,
as before. `xm.get_rng_state()` returned an integer seed; `torch.neuron.get_rng_state()`
returns a state tensor instead, which `torch.neuron.set_rng_state` restores and `manual_seed`
cannot take: a restore rewritten to `manual_seed` while the read stays for review would break
as soon as the review's advice is followed.

What differs: the device's random stream is not XLA's, so random numbers (dropout masks,
initialisations made on the device) differ from the XLA run's for the same seed, as any run on
a different backend's generator does; a restored state still replays the same numbers.
`device=` is dropped: each process drives one NeuronCore, its current device. A state saved by
an XLA run (an integer in a checkpoint) is not a native state: reseed instead."""
    doc_url = D_HOME
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\nxm.set_rng_state(1234)\n"
               "state = xm.get_rng_state()\nsample()\nxm.set_rng_state(state)\n",
        after="import torch\n\ntorch.neuron.manual_seed(1234)\n"
              "state = torch.neuron.get_rng_state()\nsample()\n"
              "torch.neuron.set_rng_state(state)\n",
    )
    calls = frozenset({GET, SET})
    emits = ("torch.neuron.manual_seed", "torch.neuron.get_rng_state",
             "torch.neuron.set_rng_state")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        facts = rng_facts(site.module_tree)
        if site.qualname == GET:
            return self._read(node, site, facts)
        pair = _pair(site, SET, facts)
        seed = argument(node.args, 0, "seed")
        if seed is None or has_star_args(node.args):
            return Review(f"`{code(node)}`: seed the device with torch.neuron.manual_seed(seed)")
        if pair is not None and any(site.silenced(self.id, s) for s in pair):
            return Review(f"`{code(node)}` restores the state `xm.get_rng_state()` read, and "
                          "part of that pair is kept by a suppression comment: change the two "
                          "together (torch.neuron.get_rng_state() / set_rng_state(state))")
        if pair is not None:
            restore = site.ref("torch.neuron.set_rng_state")
            if restore is None:
                return Review(f"`{code(node)}`: `torch` means something else here")
            new = node.with_changes(func=restore, args=keep_args(node.args, [seed]))
            return Replace(new, f"`{code(node)}` → `{code(new)}`: restores the state read by "
                           "`get_rng_state` above, which migrates with it")
        if facts.escaping and not all(seed_like(c.args[0], site.module_tree, site.statement)
                                      for c in statement_calls(site.statement,
                                                               site.module_tree, SET)
                                      if c.args):
            lines = ", ".join(map(str, facts.escaping))
            return Review(f"`{code(node)}`: this file reads the XLA RNG state "
                          f"(`xm.get_rng_state()`, line {lines}), which stays for review, and "
                          "this value may be that state: change the two together "
                          "(`torch.neuron.get_rng_state()` gives a state tensor that "
                          "`torch.neuron.set_rng_state(state)` restores); for a seed, use "
                          "`torch.neuron.manual_seed(seed)`")
        manual_seed = site.ref("torch.neuron.manual_seed")
        if manual_seed is None:
            return Review(f"`{code(node)}`: seed the device with torch.neuron.manual_seed(seed)")
        new = node.with_changes(func=manual_seed, args=keep_args(node.args, [seed]))
        device = argument(node.args, 1, "device")
        note = "; drop device= (each process drives its current NeuronCore)" \
            if device is not None and code(device.value) != "None" else ""
        return Replace(new, f"`{code(node)}` → `{code(new)}`: seeds the device generator only, "
                       f"as before (its random stream differs from XLA's){note}")

    @staticmethod
    def _read(node: cst.Call, site: Site, facts: RngFacts) -> Outcome:
        pair = _pair(site, GET, facts)
        if pair is not None and not any(site.silenced(RngState.id, s) for s in pair):
            read = site.ref("torch.neuron.get_rng_state")
            if read is not None:
                new = node.with_changes(func=read)
                return Replace(new, f"`{code(node)}` → `{code(new)}`: a state tensor, which "
                               "the restores of it below (`torch.neuron.set_rng_state`) take "
                               "back")
        return Review(f"`{code(node)}` returned an integer seed; torch.neuron.get_rng_state() "
                      "returns a state tensor (restored with torch.neuron.set_rng_state, not "
                      "manual_seed): adapt the code that stores it, and the "
                      "`xm.set_rng_state` calls that take it back, together")


def _pair(site: Site, qualname: str, facts: RngFacts) -> tuple[ast.stmt, ...] | None:
    """The statements of the native pair the read (or restore) at this statement belongs
    to, or None."""
    calls = statement_calls(site.statement, site.module_tree, qualname)
    if not calls or not all(id(c) in facts.pairs for c in calls):
        return None
    return tuple(s for c in calls for s in facts.pairs[id(c)])


RULES: tuple[type[Rule], ...] = (Autocast, SyncfreeOptimizer, GradScaler, RngState)
