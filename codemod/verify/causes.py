"""The likely cause of the first difference: the rule whose rewrite is on the path that
parted, or a known difference that is not the migration's.

The path is read from what parted and how (the symptom): the data, the initial parameters,
the loss, the gradient norm (with the loss equal), or the update. The rules are those the
engine applies to the original (its findings), filtered to the families that act on that
path; none there means the path was changed after the migration, by hand.
"""

from __future__ import annotations

from collections.abc import Sequence

from neuron_migrate.model import Finding
from neuron_migrate.verify.compare import Parting

RULES_ON_PATH = {
    "data": ("NM203", "NM220", "NM221", "NM301", "NM302"),
    "initial_params": ("NM101", "NM102", "NM404", "NM405", "NM245", "NM208"),
    "loss": ("NM101", "NM102", "NM401", "NM403", "NM503", "NM501", "NM502", "NM602", "NM120"),
    "grad_norm": ("NM207", "NM210", "NM211", "NM212", "NM253", "NM243", "NM403", "NM706"),
    "update": ("NM210", "NM211", "NM402", "NM706", "NM403"),
    "steps": ("NM301", "NM302", "NM203"),
}


def likely_cause(parting: Parting, findings: Sequence[Finding], nproc: int,
                 expected: dict[str, str], matched_numerics: bool) -> str:
    """One paragraph: the symptom read as a cause, then the rewrites on that path."""
    if expected and not matched_numerics:
        settings = ", ".join(f"{k}={v}" for k, v in sorted(expected.items()))
        return (f"expected, not the migration's: the original ran with {settings}, which "
                f"changes its numerics (bf16 or stochastic rounding); the migrated script does "
                f"not (NM602). Run with --match-numerics to compare without it")
    path, symptom = _symptom(parting, nproc)
    found = sorted({f"{f.rule_id} (line {f.line})" for f in findings
                    if f.rule_id in RULES_ON_PATH[path]})
    if found:
        return f"{symptom}; rewrites on this path: {', '.join(found)}"
    return (f"{symptom}; no rule of the migration rewrites this path, so it was changed after "
            f"the migration (by hand?)")


def _symptom(parting: Parting, nproc: int) -> tuple[str, str]:
    quantity, step = parting.quantity, parting.step
    ratio = (parting.migrated / parting.original
             if parting.original and parting.migrated is not None else None)
    if quantity == "data":
        return "data", ("a replica reads other data than in the original: the sampler's "
                        "num_replicas or rank, or the rank a worker takes")
    if quantity == "initial_params":
        return "initial_params", ("the parameters start elsewhere: the seed, or parameters "
                                  "initialised on the device")
    if quantity == "steps":
        return "steps", "one side ran out of batches first: the loader's length or shard"
    if quantity == "loss":
        if step == 1:
            scaled = ratio is not None and _whole_ratio(ratio)
            return "loss", ("the loss is scaled differently (ratio {:.4g}): scaled twice, or a "
                            "scaling lost".format(ratio) if scaled
                            else "the forward pass or the loss computes something else")
        return "update", (f"the loss of step {step} differs while step {step - 1} agreed: "
                          f"the update of step {step - 1} (optimizer, learning rate, gradients "
                          f"applied)")
    if quantity == "grad_norm":
        if step == 1 and nproc > 1 and ratio is not None and abs(ratio - nproc) < 0.05 * nproc:
            return "grad_norm", (f"the gradients are {ratio:.3g}x the original's over {nproc} "
                                 f"processes: summed, not averaged")
        if step == 1 and nproc > 1 and ratio is not None and abs(ratio * nproc - 1) < 0.05:
            return "grad_norm", (f"the gradients are 1/{nproc} of the original's: averaged "
                                 f"twice, or divided by the world size once more")
        if step > 1:
            return "grad_norm", (f"the gradient of step {step} differs while its loss agrees: "
                                 f"gradients left over from step {step - 1} (a dropped "
                                 f"zero_grad?) or accumulated differently")
        return "grad_norm", "the backward pass or the gradient averaging differs"
    return "update", "the optimizer's update differs (optimizer, learning rate, clipping)"


def _whole_ratio(ratio: float) -> bool:
    """2, 4, 1/2, 1/8...: a loss divided (or multiplied) once too often, or once too few."""
    if ratio <= 0:
        return False
    larger = max(ratio, 1 / ratio)
    return larger > 1.5 and abs(larger - round(larger)) < 0.01 * larger
