"""Fixtures the smoke tests share."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


@pytest.fixture
def plain_python(tmp_path: Path) -> str:
    """An interpreter for the workers with the emulator turned off."""
    wrapper = tmp_path / "python-no-emulator"
    wrapper.write_text(f'#!/bin/sh\nNEURON_EMU=0 exec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)
