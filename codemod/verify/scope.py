"""What verify can prove, and what it says plainly it cannot.

In scope: single-device and data-parallel scripts (xm.optimizer_step, xm.all_reduce,
MpDeviceLoader, xmp.spawn, torch_xla.launch, torchrun with the xla backend) on fake,
synthetic or bundled data. Out of scope: the parallelisms whose replicas do not hold the same
parameters (tensor and pipeline parallel, FSDP, ZeRO-1, SPMD; `smoke --layout` proves those by
comparing layouts), NKI kernels (no CPU implementation of the original's), and datasets
fetched at run time (the run needs no network, and a download is not reproducible).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from neuron_migrate.model import Finding

OUT_OF_SCOPE_RULES = {
    "NM704": "FSDP (XlaFullyShardedDataParallel)",
    "NM705": "SPMD sharding",
    "NM706": "ZeRO-1 (a sharded optimizer)",
    "NM240": "NeuronX Distributed tensor/pipeline parallelism",
    "NM241": "tensor-parallel layers",
    "NM242": "tensor-parallel cross entropy",
    "NM244": "tensor/sequence-parallel regions",
    "NM250": "sequence parallelism",
    "NM252": "NeuronX Distributed's trainer API",
    "NM710": "NeuronX Distributed or transformers-neuronx",
}
_NKI = re.compile(r"^\s*(from|import)\s+(neuronxcc\.nki|nki)\b", re.MULTILINE)
_PIPELINE = re.compile(r"\b(PipelineStage|pipeline_parallel|NxDPPModel)\b")


def out_of_scope(source: str, findings: Sequence[Finding]) -> list[str]:
    """Why the original cannot be verified, one reason per kind met (empty: in scope)."""
    reasons = sorted({f"{OUT_OF_SCOPE_RULES[f.rule_id]} (line {f.line}, {f.rule_id})"
                      for f in findings if f.rule_id in OUT_OF_SCOPE_RULES})
    if _NKI.search(source):
        reasons.append("NKI kernels (no CPU implementation of the original's)")
    if _PIPELINE.search(source):
        reasons.append("pipeline parallelism")
    return reasons


OUT_OF_SCOPE_NOTE = ("verify proves single-device and data-parallel scripts; tensor and "
                     "pipeline parallel, FSDP, ZeRO-1, SPMD, NKI and datasets fetched at run "
                     "time are out of its scope (for the parallelisms, `smoke --layout` "
                     "compares layouts of the migrated script)")
