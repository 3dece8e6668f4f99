"""Rendering a run: for people (text, markdown) and for machines (json, sarif, github,
concise, junit, gitlab). The formats by name are in `neuron_migrate.report.formats`."""

from __future__ import annotations

from neuron_migrate.report.concise import render_concise
from neuron_migrate.report.github import render_github
from neuron_migrate.report.json_report import render_json
from neuron_migrate.report.markdown import render_markdown
from neuron_migrate.report.sarif import render_sarif
from neuron_migrate.report.text import render_text, summary_rows

__all__ = ["render_concise", "render_github", "render_json", "render_markdown", "render_sarif",
           "render_text", "summary_rows"]
