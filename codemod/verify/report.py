"""The report of `neuron-migrate verify`: the verdict in a line, the likely cause, then a table
of the steps (original, migrated, difference, noise); as text, JSON, or markdown for a pull
request."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from neuron_migrate.report.renderer import Format, Formats, Renderer
from neuron_migrate.verify.compare import AGREE, CANNOT, Row, Verdict

HEADLINES = {AGREE: "AGREE", "differ": "DIFFER", CANNOT: "CANNOT COMPARE"}


@dataclass
class Outcome:
    original: str
    migrated: str
    nproc: int
    steps: int
    verdict: Verdict
    reference_python: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code


def render(outcome: Outcome, fmt: str) -> str:
    return VERIFY_FORMATS.choose(fmt).render(outcome)


def render_json(outcome: Outcome) -> str:
    verdict = outcome.verdict
    data: dict[str, Any] = {
        "original": outcome.original, "migrated": outcome.migrated, "nproc": outcome.nproc,
        "steps_requested": outcome.steps, "verdict": verdict.status,
        "exit_code": outcome.exit_code, "reason": verdict.reason,
        "first_parting": None if verdict.parting is None else asdict(verdict.parting),
        "likely_cause": verdict.cause, "expected_differences": verdict.expected_differences,
        "notes": verdict.notes, "steps": [asdict(row) for row in verdict.rows],
        "reference_python": outcome.reference_python, "seconds": outcome.seconds}
    return json.dumps(data, indent=2)


def _headline(outcome: Outcome) -> str:
    verdict = outcome.verdict
    took = sum(outcome.seconds.values())
    return (f"verify {HEADLINES[verdict.status]}: {outcome.original} and {outcome.migrated}: "
            f"{verdict.reason}" + (f" ({took:.1f}s)" if took else ""))


def _extra_lines(outcome: Outcome) -> list[str]:
    verdict = outcome.verdict
    lines = []
    if verdict.cause:
        lines.append(f"likely cause: {verdict.cause}")
    for name, value in sorted(verdict.expected_differences.items()):
        lines.append(f"expected difference: the original sets {name}={value}, which the "
                     f"migration does not carry")
    lines.extend(f"note: {note}" for note in verdict.notes)
    return lines


COLUMNS = ("step", "loss original", "loss migrated", "difference", "noise",
           "grad norm original", "grad norm migrated", "difference", "noise", "")


def _cells(row: Row) -> list[str]:
    mark = {"differs": "<- parts here", "after": "", "ok": ""}[row.status]
    return [str(row.step), _g(row.original["loss"]), _g(row.migrated["loss"]),
            _e(row.difference["loss"]), _e(row.noise["loss"]),
            _g(row.original["grad_norm"]), _g(row.migrated["grad_norm"]),
            _e(row.difference["grad_norm"]), _e(row.noise["grad_norm"]), mark]


def render_text(outcome: Outcome) -> str:
    lines = [_headline(outcome)] + ["  " + line for line in _extra_lines(outcome)]
    rows = [list(COLUMNS)] + [_cells(row) for row in outcome.verdict.rows]
    if len(rows) > 1:
        widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
        for r in rows:
            lines.append("  " + "  ".join(c.rjust(w) if i < len(COLUMNS) - 1 else c
                                          for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    return "\n".join(lines)


def render_markdown(outcome: Outcome) -> str:
    verdict = outcome.verdict
    icon = {AGREE: "✅", "differ": "❌", CANNOT: "⚠️"}[verdict.status]
    lines = [f"### {icon} neuron-migrate verify: {HEADLINES[verdict.status]}", "",
             f"`{outcome.original}` → `{outcome.migrated}`, {outcome.nproc} "
             f"process{'es' if outcome.nproc != 1 else ''}, {outcome.steps} steps: "
             f"{verdict.reason}", ""]
    lines.extend(f"- {line}" for line in _extra_lines(outcome))
    if verdict.rows:
        lines += ["", "| " + " | ".join(COLUMNS[:-1]) + " |  |",
                  "|" + "---:|" * (len(COLUMNS) - 1) + "---|"]
        for row in verdict.rows:
            cells = _cells(row)
            if row.status == "differs":
                cells[-1] = "**parts here**"
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _g(value: float | None) -> str:
    return "-" if value is None else f"{value:.7g}"


def _e(value: float | None) -> str:
    return "-" if value is None else f"{value:.1e}"


TEXT: Format[Outcome] = Format(render_text)
JSON: Format[Outcome] = Format(render_json)
MARKDOWN: Format[Outcome] = Format(render_markdown)

VERIFY_FORMATS: Formats[Renderer[Outcome]] = Formats({
    "text": "neuron_migrate.verify.report:TEXT",
    "json": "neuron_migrate.verify.report:JSON",
    "markdown": "neuron_migrate.verify.report:MARKDOWN",
})
