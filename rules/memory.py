"""NM120: activation checkpointing."""

from __future__ import annotations

import libcst as cst

from neuron_migrate.ruleapi import Example, Kind, Outcome, Replace, Review, Rule, Site, code

D_MEMGL = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/"
           "guidelines-memory-management.html")


class ActivationCheckpoint(Rule):
    id = "NM120"
    name = "xla-activation-checkpoint"
    kind = Kind.FIX
    summary = "`torch_xla.utils.checkpoint.checkpoint` becomes `torch.utils.checkpoint.checkpoint`"
    explanation = """\
What it does: replaces torch_xla's activation checkpointing function with PyTorch's, keeping
the arguments.

Why: torch_xla shipped a copy of `torch.utils.checkpoint.checkpoint` adjusted for XLA's random
number state and lazy tensors. On TorchNeuron, tensors are eager and the standard function
works for the neuron device.

What differs: pass `use_reentrant=False` explicitly if the call does not already choose;
PyTorch recommends it and warns when it is left out."""
    doc_url = D_MEMGL
    example = Example(
        before="from torch_xla.utils.checkpoint import checkpoint\n\n"
               "out = checkpoint(block, hidden)\n",
        after="import torch\n\nout = torch.utils.checkpoint.checkpoint(block, hidden)\n",
    )
    names = frozenset({"torch_xla.utils.checkpoint.checkpoint"})
    emits = ("torch.utils.checkpoint.checkpoint",)

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        new = site.ref("torch.utils.checkpoint.checkpoint")
        if new is None:
            return Review(f"`{code(node)}`: use torch.utils.checkpoint.checkpoint")
        return Replace(new, f"`{code(node)}` → `{code(new)}`")


RULES: tuple[type[Rule], ...] = (ActivationCheckpoint,)
