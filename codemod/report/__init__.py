"""Rendering a run: for people (text, markdown) and for machines (json, sarif, github,
concise, junit, gitlab)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from neuron_migrate.report.concise import render_concise
from neuron_migrate.report.github import render_github
from neuron_migrate.report.json_report import render_json
from neuron_migrate.report.markdown import render_markdown
from neuron_migrate.report.sarif import render_sarif
from neuron_migrate.report.text import render_text, summary_rows

if TYPE_CHECKING:
    from neuron_migrate.registry import Registry
    from neuron_migrate.runner import RunResult

FORMATS = ("text", "json", "markdown", "sarif", "github", "concise", "junit", "gitlab")


def render_junit(result: RunResult, registry: Registry | None = None) -> str:
    from neuron_migrate.report.junit import render_junit  # xml.etree: only when asked for

    return render_junit(result, registry)


def render_gitlab(result: RunResult, registry: Registry | None = None) -> str:
    from neuron_migrate.report.gitlab import render_gitlab  # hashlib: only when asked for

    return render_gitlab(result, registry)


OTHER_FORMATS: dict[str, Callable[[RunResult, Registry], str]] = {
    "concise": render_concise, "junit": render_junit, "gitlab": render_gitlab}
"""The formats rendered from the run and the catalogue alone."""

HUMAN_FORMATS = frozenset({"text", "markdown", "concise"})
"""Formats read by people, shown with control characters escaped
(`neuron_migrate.printable`); the others escape them in their own syntax."""

KEEPS_SOURCES = frozenset({"markdown", "json", "sarif"})
"""Formats that need each file as it was and as it becomes: markdown shows diffs; json and
sarif carry each fix's edit and where each finding ends."""

__all__ = ["FORMATS", "HUMAN_FORMATS", "KEEPS_SOURCES", "OTHER_FORMATS", "render_concise", "render_github",
           "render_gitlab", "render_json", "render_junit", "render_markdown", "render_sarif",
           "render_text", "summary_rows"]
