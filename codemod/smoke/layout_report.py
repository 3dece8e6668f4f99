"""The report of `smoke --layout`: the verdict, then each layout's run and its losses."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict
from typing import Any

from neuron_migrate.smoke.layouts import Difference, LayoutComparison, LayoutRun
from neuron_migrate.smoke.report import POSITIONING, json_data, run_lines

LOSSES_PER_LINE = 8


def render_comparison_json(comparison: LayoutComparison) -> str:
    data = {"script": comparison.script, "passed": comparison.passed,
            "exit_code": comparison.exit_code(), "rtol": comparison.rtol,
            "steps_compared": comparison.steps_compared,
            "first_difference": None if comparison.difference is None
            else asdict(comparison.difference),
            "problems": comparison.problems, "seconds": comparison.seconds,
            "layouts": [_layout_json(run) for run in comparison.runs],
            "positioning": POSITIONING}
    return json.dumps(data, indent=2)


def _layout_json(run: LayoutRun) -> dict[str, Any]:
    return {"layout": run.spec.text, "nproc": run.spec.nproc, "extra_args": list(run.spec.args),
            "passed": run.result.passed, "losses": run.result.losses,
            "run": json_data(run.result)}


def render_comparison_text(comparison: LayoutComparison) -> list[tuple[str, str]]:
    """(line, style) pairs, styled as the run report's."""
    lines = [_headline(comparison)]
    lines.extend((f"  {problem}", "error") for problem in comparison.problems)
    for run in comparison.runs:
        workers = f"{run.spec.nproc} process{'es' if run.spec.nproc > 1 else ''}"
        args = shlex.join(run.spec.args)
        lines.append((f"layout {run.spec.text!r} ({workers}{'; adds ' + args if args else ''}):",
                      "plain"))
        lines.extend((f"  {line}", style) for line, style in run_lines(run.result))
        lines.extend(_loss_lines(run, comparison.difference))
    lines.append((f"{POSITIONING}", "dim"))
    return lines


def _headline(comparison: LayoutComparison) -> tuple[str, str]:
    count = len(comparison.runs)
    took = f"({comparison.seconds:.1f}s)"
    difference = comparison.difference
    if comparison.passed:
        return (f"smoke layouts AGREE: {comparison.script}: the {count} layouts have the same "
                f"loss at each of {comparison.steps_compared} optimizer "
                f"step{'s' if comparison.steps_compared != 1 else ''} (rtol "
                f"{comparison.rtol:g}) {took}", "heading")
    if difference is None:
        return f"smoke layouts FAILED: {comparison.script} {took}", "error"
    return f"smoke layouts DIFFER: {comparison.script}: {describe(difference, comparison.rtol)} " \
           f"{took}", "error"


def describe(difference: Difference, rtol: float) -> str:
    """The first differing step in words, both values given."""
    where = f"at optimizer step {difference.step}"
    if difference.loss is None or difference.reference_loss is None:
        missing, other = ((difference.layout, difference.reference) if difference.loss is None
                          else (difference.reference, difference.layout))
        return f"{where}, layout {missing!r} recorded no loss while layout {other!r} did"
    return (f"{where}, layout {difference.layout!r} has loss {difference.loss:.7g} and layout "
            f"{difference.reference!r} {difference.reference_loss:.7g} (relative difference "
            f"{difference.relative:.2g} > rtol {rtol:g})")


def _loss_lines(run: LayoutRun, difference: Difference | None) -> list[tuple[str, str]]:
    """The losses, a few steps a line, the first differing step marked."""
    marked = difference.step if difference and run.spec.text in (
        difference.layout, difference.reference) else None
    cells = [f"{step}: {'-' if loss is None else f'{loss:.7g}'}{' <' if step == marked else ''}"
             for step, loss in enumerate(run.result.losses, 1)]
    if not cells:
        return [("  loss per optimizer step: none recorded", "warning")]
    lines = [("  loss per optimizer step:", "plain")]
    for start in range(0, len(cells), LOSSES_PER_LINE):
        lines.append(("    " + ", ".join(cells[start:start + LOSSES_PER_LINE]), "plain"))
    return lines
