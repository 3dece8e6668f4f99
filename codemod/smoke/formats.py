"""The report formats of `smoke`, by name: a run, or a comparison of layouts, as text lines
with styles or as JSON."""

from __future__ import annotations

from typing import Union

from neuron_migrate.report.renderer import Format, Formats, Renderer
from neuron_migrate.smoke.layout_report import render_comparison_json, render_comparison_text
from neuron_migrate.smoke.layouts import LayoutComparison
from neuron_migrate.smoke.report import render_json, render_text
from neuron_migrate.smoke.summary import SmokeResult

SmokeOutcome = Union[SmokeResult, LayoutComparison]


def styled_lines(outcome: SmokeOutcome) -> list[tuple[str, str]]:
    """(line, style) pairs; styles: heading, error, warning, dim, plain."""
    if isinstance(outcome, LayoutComparison):
        return render_comparison_text(outcome)
    return render_text(outcome)


def _text(outcome: SmokeOutcome) -> str:
    return "\n".join(line for line, _ in styled_lines(outcome))


def _json(outcome: SmokeOutcome) -> str:
    if isinstance(outcome, LayoutComparison):
        return render_comparison_json(outcome)
    return render_json(outcome)


TEXT: Format[SmokeOutcome] = Format(_text, styled=True)
JSON: Format[SmokeOutcome] = Format(_json)

SMOKE_FORMATS: Formats[Renderer[SmokeOutcome]] = Formats({
    "text": "neuron_migrate.smoke.formats:TEXT",
    "json": "neuron_migrate.smoke.formats:JSON",
})
