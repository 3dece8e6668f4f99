"""NM960: code and dependency files of the XLA era, seen by `audit`. The readiness rules say
what in PyTorch code may not run well on TorchNeuron; a file that still calls torch_xla, or
pins the XLA library, does not run there at all until `apply` migrates it.

`neuron_migrate.analysis.readiness_audit` reports it, one finding per file, with the number of
changes and review items the migration holds for that file; `check` and `apply` report those
themselves, so this rule is `audit`'s alone.
"""

from __future__ import annotations

from neuron_migrate.ruleapi import Example, Kind, Rule
from neuron_migrate.ruleapi.findings import XLA_ERA
from neuron_migrate.ruleapi.readiness import Limit


class XlaEraNotMigrated(Rule):
    id = XLA_ERA
    name = "xla-era-not-migrated"
    kind = Kind.REVIEW
    limit = Limit.BLOCKS
    summary = "XLA-era code or pins do not run on TorchNeuron until `apply` migrates them"
    explanation = """\
What it does: in `audit`, reports each file that the migration would still change or asks to
review: Python files and notebooks that use torch_xla, NeuronX Distributed or the other
XLA-era APIs, and requirements files, Dockerfiles and scripts that pin or install the XLA
library. The message gives the number of findings `apply` holds for the file (fixes, unsafe
fixes and review items); the summary counts the files.

Why: the readiness rules judge PyTorch code as TorchNeuron would run it. Code written for
PyTorch/XLA does not run there at all (`xm.xla_device()`, `xm.mark_step()`, an XLA-lineage
`torch-neuronx` pin), so an audit that found no readiness problem in it would answer
"will this run on TorchNeuron?" wrongly.

What differs: nothing is changed. Run `neuron-migrate apply` (`--dry-run` first to see the
changes), review what it reports, then `audit` the migrated code again: the readiness rules
then see the code TorchNeuron will run."""
    doc_url = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/"
               "announcements/neuron2.x/announce-no-support-pytorch-xla-training.html")
    example = Example.unchanged("import torch_xla.core.xla_model as xm\n\n"
                                "device = xm.xla_device()\n", language="audit")


RULES: tuple[type[Rule], ...] = (XlaEraNotMigrated,)
