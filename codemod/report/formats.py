"""The report formats of `apply`, `check`, `scan` and `audit`, by name.

To add a format: write its module in this package, ending in a `RunFormat` (see
`neuron_migrate.report.renderer`), and give it one entry here. `--format`'s choices, its
help and its shell completion are read from this map (a test renders every entry)."""

from __future__ import annotations

from neuron_migrate.report.renderer import Formats, RunRenderer

RUN_FORMATS: Formats[RunRenderer] = Formats({
    "text": "neuron_migrate.report.text:TEXT",
    "json": "neuron_migrate.report.json_report:JSON",
    "markdown": "neuron_migrate.report.markdown:MARKDOWN",
    "sarif": "neuron_migrate.report.sarif:SARIF",
    "github": "neuron_migrate.report.github:GITHUB",
    "concise": "neuron_migrate.report.concise:CONCISE",
    "junit": "neuron_migrate.report.junit:JUNIT",
    "gitlab": "neuron_migrate.report.gitlab:GITLAB",
})

AUDIT_FORMATS: Formats[RunRenderer] = RUN_FORMATS.extended({
    "text": "neuron_migrate.report.audit:AUDIT_TEXT",
    "json": "neuron_migrate.report.audit:AUDIT_JSON",
    "markdown": "neuron_migrate.report.audit:AUDIT_MARKDOWN",
})
"""`audit` adds its readiness summary to these three; the rest are the usual reports."""


def formats_of(mode: str) -> Formats[RunRenderer]:
    return AUDIT_FORMATS if mode == "audit" else RUN_FORMATS
