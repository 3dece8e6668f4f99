"""Rendering a run: for people (text, markdown) and for machines (json, sarif, github,
concise, junit, gitlab). The formats by name are in `neuron_migrate.report.formats`."""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {"render_concise": "concise", "render_github": "github",
            "render_json": "json_report", "render_markdown": "markdown",
            "render_sarif": "sarif", "render_text": "text", "summary_rows": "text"}
"""Each function's module, imported when the function is first asked for: a run imports
the package for the one format it prints, and should not pay for the others."""

__all__ = sorted(_MODULES)


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
