"""Rendering a run for people (text) and for programs (json)."""

from __future__ import annotations

from codemod.report.json_report import render_json
from codemod.report.text import render_text

FORMATS = ("text", "json")

__all__ = ["FORMATS", "render_json", "render_text"]
