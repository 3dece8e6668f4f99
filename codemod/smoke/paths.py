"""Paths in what `smoke` prints."""

from __future__ import annotations

from pathlib import Path


def relative(file: str) -> str:
    """A path as the user would type it from here, when it is below here."""
    try:
        return str(Path(file).resolve().relative_to(Path.cwd()))
    except ValueError:
        return file
