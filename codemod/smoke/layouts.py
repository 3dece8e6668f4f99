"""`smoke --layout`: run one script at several layouts and compare the loss of every step.

A parallelisation is proved the way one checks it by hand: the same training, on one process
and on several (data parallel), or with the model split over one rank and over two (tensor
parallel), must optimise the same loss, step after step. Each layout is a smoke run of its
own (``NPROC[:EXTRA ARGS]``: that many workers, these arguments after the common ones); each
worker records the loss of every optimizer step itself (emulator/losses.py), so the script
prints nothing for it; a layout's loss at a step is the mean over its workers (summary.py).
The first layout is the reference; the report names the first step at which another layout's
loss differs from it by more than a relative tolerance.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from neuron_migrate.smoke.processes import MAX_WORKERS

if TYPE_CHECKING:
    from neuron_migrate.smoke.run import SmokeOptions
    from neuron_migrate.smoke.summary import SmokeResult

DEFAULT_RTOL = 1e-3


@dataclass(frozen=True)
class LayoutSpec:
    """One layout as given on the command line: ``2:--tp 2`` is 2 workers, ``--tp 2`` added."""

    text: str
    nproc: int
    args: tuple[str, ...] = ()


def parse_layout(text: str) -> LayoutSpec:
    """``NPROC[:EXTRA ARGS]``, the arguments split as a shell would; ValueError says why not."""
    count, _, extra = text.partition(":")
    if not count.strip().isdigit() or not 1 <= int(count) <= MAX_WORKERS:
        raise ValueError(f"{text!r}: a layout is NPROC[:EXTRA ARGS], NPROC a number of workers "
                         f"(1 to {MAX_WORKERS}), e.g. 1 or \"2:--tp 2\"")
    try:
        args = tuple(shlex.split(extra))
    except ValueError as error:
        raise ValueError(f"{text!r}: its arguments do not split: {error}") from None
    return LayoutSpec(text, int(count), args)


@dataclass
class LayoutRun:
    spec: LayoutSpec
    result: SmokeResult


@dataclass(frozen=True)
class Difference:
    """The first step at which a layout's loss is not the reference's (1-based step)."""

    step: int
    layout: str
    reference: str
    loss: float | None
    reference_loss: float | None
    relative: float | None  # None when one of the two recorded no loss at that step


@dataclass
class LayoutComparison:
    script: str
    rtol: float
    runs: list[LayoutRun]
    steps_compared: int = 0
    difference: Difference | None = None
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.difference is None and not self.problems

    def exit_code(self) -> int:
        if any(run.result.install_failed is not None for run in self.runs):
            return 2
        return 0 if self.passed else 1


def layout_options(options: SmokeOptions, spec: LayoutSpec, index: int) -> SmokeOptions:
    """The smoke run of one layout: its workers, the common arguments then its own; replicas
    checked where there are several workers; each layout's logs in a folder of its own."""
    return dataclasses.replace(
        options, nproc=spec.nproc, script_args=(*options.script_args, *spec.args),
        check_replicas=options.check_replicas and spec.nproc > 1,
        logs=None if options.logs is None else options.logs / f"layout{index + 1}")


def compare_layouts(options: SmokeOptions, specs: list[LayoutSpec], rtol: float,
                    run: Callable[[SmokeOptions], SmokeResult]) -> LayoutComparison:
    """Run each layout in turn (on a shared CPU, at once they would only slow each other)."""
    started = time.monotonic()
    runs = [LayoutRun(spec, run(layout_options(options, spec, index)))
            for index, spec in enumerate(specs)]
    return judge(str(options.script), runs, rtol, time.monotonic() - started)


def judge(script: str, runs: list[LayoutRun], rtol: float, seconds: float) -> LayoutComparison:
    """The verdict: every run ran, recorded losses, and agrees with the first at every step."""
    comparison = LayoutComparison(script, rtol, runs, seconds=round(seconds, 2))
    for layout in runs:
        if not layout.result.passed:
            comparison.problems.append(f"layout {layout.spec.text!r} did not run cleanly: "
                                       f"its report below says why")
        elif not any(loss is not None for loss in layout.result.losses):
            comparison.problems.append(
                f"layout {layout.spec.text!r} recorded no loss: the script never called "
                f"backward() on a one-element tensor before an optimizer step")
    reference, others = runs[0], runs[1:]
    found = [d for d in (_first_difference(reference, other, rtol) for other in others) if d]
    comparison.difference = min(found, key=lambda d: d.step, default=None)
    last = comparison.difference.step - 1 if comparison.difference else None
    comparison.steps_compared = sum(
        1 for step, loss in enumerate(reference.result.losses[:last])
        if loss is not None and all(_loss_at(o, step) is not None for o in others))
    if not comparison.steps_compared and not comparison.problems and not found:
        comparison.problems.append("no optimizer step had a loss in every layout to compare")
    return comparison


def _loss_at(layout: LayoutRun, step: int) -> float | None:
    losses = layout.result.losses
    return losses[step] if step < len(losses) else None


def _first_difference(reference: LayoutRun, other: LayoutRun, rtol: float) -> Difference | None:
    """The first step at which ``other`` recorded a loss ``reference`` did not (or the other way
    round), or a loss further than ``rtol`` from it (relative to the larger). Steps at which
    neither recorded one are passed over."""
    for step in range(max(len(reference.result.losses), len(other.result.losses))):
        expected, got = _loss_at(reference, step), _loss_at(other, step)
        if expected is None and got is None:
            continue
        relative = None if expected is None or got is None else relative_difference(expected, got)
        if relative is None or not relative <= rtol:  # NaN is never within the tolerance
            return Difference(step + 1, other.spec.text, reference.spec.text, got, expected,
                              relative)
    return None


def relative_difference(a: float, b: float) -> float:
    """|a - b| over the larger magnitude; 0 for equal values (zeros included), NaN with a NaN."""
    if a == b:
        return 0.0
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return abs(a - b) / max(abs(a), abs(b))
