"""The verdict of a verify: do the original and the migrated script compute the same thing?

What is compared, in order, each on every rank:
1. the data: the fingerprints of the batches each side's DataLoaders yielded, over the
   batches the migrated side took in its K steps (a device loader prefetches on the original
   side, so only the common prefix counts). Two runs of the migrated script that read
   different data make any comparison meaningless (a shuffle without a seed, data fetched at
   run time): that cannot be compared. Otherwise data that differs from the original's is a
   difference of the migration (a sampler or a rank rewritten wrongly).
2. the parameters before the first step (the script's seed, parameters made on the CPU).
3. per optimizer step: the loss (what backward() was called on), the norm of the gradient
   the optimizer applies, and the parameter norm after the step. Step 1 must agree within
   STRICT (relative): nothing has had time to drift. From step 2, float32 rounding differs
   between XLA and the emulator and grows chaotically, so a step parts only when the two
   differ by more than NOISE_FACTOR times the noise measured between the migrated run and the
   same run with its parameters perturbed by about float32's rounding (the largest measured up
   to that step: the noise grows, one sample of it may dip), and by more than STRICT.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from neuron_migrate.smoke.layouts import relative_difference

STRICT = 1e-5
NOISE_FACTOR = 10.0
DATA_RTOL = 1e-9  # batch sums are computed the same way on both sides, in float64
QUANTITIES = ("loss", "grad_norm", "param_norm")
NAMES = {"loss": "loss", "grad_norm": "gradient norm", "param_norm": "parameter norm after the step",
         "data": "data", "initial_params": "initial parameters", "steps": "number of steps"}

AGREE, DIFFER, CANNOT = "agree", "differ", "cannot compare"
EXIT_CODES = {AGREE: 0, DIFFER: 1, CANNOT: 2}


@dataclass(frozen=True)
class Parting:
    """Where the two sides first part: the step (1-based; 0 before the first step), the rank,
    what differs, both values and the allowed difference."""

    step: int
    rank: int
    quantity: str
    original: float | None
    migrated: float | None
    difference: float | None
    allowed: float | None


@dataclass
class Row:
    """One optimizer step, the largest difference over the ranks for each quantity."""

    step: int
    original: dict[str, float | None]
    migrated: dict[str, float | None]
    difference: dict[str, float | None]
    noise: dict[str, float | None]
    status: str = "ok"  # ok, differs, after (past the first parting)


@dataclass
class Verdict:
    status: str
    reason: str
    parting: Parting | None = None
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    expected_differences: dict[str, str] = field(default_factory=dict)
    cause: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


def judge(original: list[dict[str, Any] | None], migrated: list[dict[str, Any] | None],
          noise: list[dict[str, Any] | None] | None, steps: int) -> Verdict:
    """The verdict from the records of each side's ranks (noise: the perturbed migrated run,
    None when it was not run). Records must be there (the caller reports failed runs)."""
    notes: list[str] = []
    missing = [f"{side} rank {r}" for side, records in (("original", original),
                                                        ("migrated", migrated))
               for r, record in enumerate(records) if record is None or not record["steps"]]
    if missing:
        return Verdict(CANNOT, "no optimizer step was recorded on " + ", ".join(missing) +
                       ": the script never reached optimizer.step() (or a step of a "
                       "torch.optim optimizer)")
    expected = dict(original[0].get("numerics_env") or {})  # type: ignore[index]
    verdict = _data(original, migrated, noise, notes) or _initial(original, migrated, noise)
    rows = _rows(original, migrated, noise, steps)
    if verdict is None:
        verdict = _steps(original, migrated, noise, rows)
    verdict.rows, verdict.notes, verdict.expected_differences = rows, notes, expected
    if noise is None:
        verdict.notes.append("no noise baseline: later steps were held to the strict tolerance")
    _mark(verdict)
    return verdict


# ----------------------------------------------------------------------------- the data
def _batches(record: dict[str, Any], steps: int | None = None) -> list[Any]:
    """The batches the run had taken by the end of its last recorded step (or of ``steps``)."""
    taken = record["steps"][(steps or len(record["steps"])) - 1]["batches_taken"]
    return record["batches"][:taken]


def _step_of_batch(record: dict[str, Any], index: int) -> int:
    """The first step by whose end the run had taken batch ``index`` (0-based)."""
    for step, entry in enumerate(record["steps"], 1):
        if entry["batches_taken"] > index:
            return step
    return len(record["steps"])


def _first_data_difference(a: list[Any], b: list[Any]) -> int | None:
    for index, (x, y) in enumerate(zip(a, b)):
        if not _same_batch(x, y):
            return index
    return None


def _same_batch(x: Any, y: Any) -> bool:
    if x is None or y is None:
        return x is y
    if len(x) != len(y):
        return False
    for (shape_x, *sums_x), (shape_y, *sums_y) in zip(x, y):
        if shape_x != shape_y:
            return False
        if any(relative_difference(p, q) > DATA_RTOL for p, q in zip(sums_x, sums_y)):
            return False
    return True


def _data(original: list[Any], migrated: list[Any], noise: list[Any] | None,
          notes: list[str]) -> Verdict | None:
    compared = False
    for rank, (o, m) in enumerate(zip(original, migrated)):
        mine = _batches(m)
        if noise is not None and noise[rank] is not None and noise[rank]["steps"]:
            again = _batches(noise[rank], min(len(noise[rank]["steps"]), len(m["steps"])))
            where = _first_data_difference(mine, again)
            if where is not None:
                return Verdict(CANNOT, f"the data differs between two runs of the migrated "
                               f"script (rank {rank}, batch {where + 1}): a shuffle or a "
                               f"random transform without a seed, or data fetched at run time; "
                               f"seed it (torch.manual_seed before the DataLoader, or a "
                               f"generator=) to compare")
        theirs = o["batches"]
        if not mine or not theirs:
            continue
        compared = True
        where = _first_data_difference(mine, theirs)
        if where is not None:
            step = _step_of_batch(m, where)
            return Verdict(DIFFER, f"the data differs: rank {rank}'s batch {where + 1} (taken "
                           f"for optimizer step {step}) is not the original's",
                           Parting(step, rank, "data", None, None, None, None))
    if not compared:
        notes.append("batches not compared: no DataLoader batch on one side (synthetic data "
                     "made in the loop, or a generator)")
    return None


def _initial(original: list[Any], migrated: list[Any], noise: list[Any] | None) -> Verdict | None:
    for rank, (o, m) in enumerate(zip(original, migrated)):
        if noise is not None and noise[rank] is not None:
            if _differs(m["initial_params"], noise[rank]["initial_params"], STRICT):
                return Verdict(CANNOT, f"the parameters differ between two runs of the migrated "
                               f"script before the first step (rank {rank}): no seed? Set "
                               f"torch.manual_seed before the model is built to compare")
        if _differs(o["initial_params"], m["initial_params"], STRICT):
            return Verdict(DIFFER, f"the parameters differ before the first step on rank {rank} "
                           f"(norm {_g(o['initial_params'])} in the original, "
                           f"{_g(m['initial_params'])} migrated)",
                           Parting(0, rank, "initial_params", o["initial_params"],
                                   m["initial_params"], _rel(o["initial_params"],
                                                             m["initial_params"]), STRICT))
    return None


# ----------------------------------------------------------------------------- the steps
def _rows(original: list[Any], migrated: list[Any], noise: list[Any] | None,
          steps: int) -> list[Row]:
    count = min(steps, max(max(len(r["steps"]) for r in original),
                           max(len(r["steps"]) for r in migrated)))
    rows = []
    for index in range(count):
        row = Row(index + 1, {}, {}, {}, {})
        for quantity in QUANTITIES:
            worst: tuple[float, Any, Any] | None = None
            noisiest: float | None = None
            for rank, (o, m) in enumerate(zip(original, migrated)):
                a, b = _value(o, index, quantity), _value(m, index, quantity)
                diff = _rel(a, b)
                if worst is None or (diff is not None and (worst[0] is None or diff > worst[0])):
                    worst = (diff, a, b)
                if noise is not None and noise[rank] is not None:
                    n = _rel(b, _value(noise[rank], index, quantity))
                    if n is not None and (noisiest is None or n > noisiest):
                        noisiest = n
            assert worst is not None
            row.difference[quantity], row.original[quantity], row.migrated[quantity] = worst
            # the largest so far: rounding noise grows, but one sample of it may dip
            earlier = rows[-1].noise[quantity] if rows else None
            row.noise[quantity] = max((n for n in (noisiest, earlier) if n is not None),
                                      default=None)
        rows.append(row)
    return rows


def allowed(step: int, noise: float | None) -> float:
    """The relative difference a quantity may have at a step."""
    if step <= 1 or noise is None or math.isnan(noise):
        return STRICT
    return max(STRICT, NOISE_FACTOR * noise)


def _steps(original: list[Any], migrated: list[Any], noise: list[Any] | None,
           rows: list[Row]) -> Verdict:
    for row in rows:
        for rank, (o, m) in enumerate(zip(original, migrated)):
            for quantity in QUANTITIES:
                a, b = _value(o, row.step - 1, quantity), _value(m, row.step - 1, quantity)
                if a is None and b is None:
                    continue
                stopped = [(side, len(r["steps"])) for side, r in (("original", o), ("migrated", m))
                           if len(r["steps"]) < row.step]
                if stopped:
                    side, count = stopped[0]
                    return Verdict(DIFFER, f"the {side} script stopped after {count} optimizer "
                                   f"step{'s' if count != 1 else ''} on rank {rank}; the other "
                                   f"ran on", Parting(row.step, rank, "steps", None, None, None, None))
                limit = allowed(row.step, row.noise[quantity])
                diff = _rel(a, b)
                if diff is None or not diff <= limit:
                    return Verdict(DIFFER, _describe(row.step, rank, quantity, a, b, diff, limit,
                                                     len(original)),
                                   Parting(row.step, rank, quantity, a, b, diff, limit))
    return Verdict(AGREE, f"the same loss, gradient norm and parameters at each of {len(rows)} "
                   f"optimizer step{'s' if len(rows) != 1 else ''} on {len(original)} "
                   f"process{'es' if len(original) != 1 else ''} (step 1 within {STRICT:g}; "
                   f"later steps within {NOISE_FACTOR:g}x the measured noise)")


def _describe(step: int, rank: int, quantity: str, a: float | None, b: float | None,
              diff: float | None, limit: float, nproc: int) -> str:
    who = f" on rank {rank}" if nproc > 1 else ""
    if a is None or b is None:
        side = "migrated" if b is None else "original"
        return f"at optimizer step {step}{who}, the {side} script recorded no {NAMES[quantity]}"
    ratio = f"; ratio {b / a:.4g}" if a else ""
    return (f"at optimizer step {step}{who}, the {NAMES[quantity]} is {_g(b)} migrated and "
            f"{_g(a)} in the original (relative difference {diff:.2g} > {limit:.2g}{ratio})")


def _mark(verdict: Verdict) -> None:
    if verdict.parting is None:
        return
    for row in verdict.rows:
        if row.step == verdict.parting.step:
            row.status = "differs"
        elif row.step > verdict.parting.step:
            row.status = "after"


def _value(record: dict[str, Any], index: int, quantity: str) -> float | None:
    steps = record["steps"]
    return steps[index].get(quantity) if index < len(steps) else None


def _rel(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return relative_difference(a, b)


def _differs(a: float | None, b: float | None, tolerance: float) -> bool:
    if a is None or b is None:
        return a is not b
    return not relative_difference(a, b) <= tolerance


def _g(value: float | None) -> str:
    return "-" if value is None else f"{value:.7g}"
