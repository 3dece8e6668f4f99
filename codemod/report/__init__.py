"""Rendering a run: for people (text, markdown) and for machines (json, sarif, github)."""

from __future__ import annotations

from codemod.report.github import render_github
from codemod.report.json_report import render_json
from codemod.report.markdown import render_markdown
from codemod.report.sarif import render_sarif
from codemod.report.text import render_text, summary_rows

FORMATS = ("text", "json", "markdown", "sarif", "github")

__all__ = ["FORMATS", "render_github", "render_json", "render_markdown", "render_sarif",
           "render_text", "summary_rows"]
