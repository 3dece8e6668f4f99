"""Hostile or merely large input finishes in seconds: no step is quadratic (or worse) in the
size of a file, and a stopped run stops at once.

Each input is run in a child process with a deadline many times what it takes, so that a
regression fails the test instead of hanging the suite; the output is checked too."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_migrate.deps.emit import _Spans
from neuron_migrate.deps.entries import Edit
from tests.conftest import ROOT

DEADLINE = 20.0
"""Seconds a child run may take: each finishes in one or two here, and took a minute to
forever before."""


def run_cli(*args: str | Path, cwd: Path, deadline: float = DEADLINE
            ) -> subprocess.CompletedProcess[str]:
    """The CLI in a child process, killed (and the test failed) past the deadline."""
    started = time.monotonic()
    try:
        run = subprocess.run([sys.executable, "-m", "neuron_migrate", *map(str, args)],
                             cwd=cwd, capture_output=True, text=True, timeout=deadline,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{' '.join(map(str, args))} still running after {deadline} s") \
            from None
    assert time.monotonic() - started < deadline
    return run


def test_a_dockerfile_run_of_thousands_of_pins_is_read_in_linear_time(tmp_path: Path) -> None:
    lines = 5000
    (tmp_path / "Dockerfile").write_text(
        "FROM python:3.12\nRUN true \\\n"
        + "    && pip install torch-neuronx==2.1 neuronx-cc \\\n" * lines + "    && true\n")
    run = run_cli("apply", ".", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    text = (tmp_path / "Dockerfile").read_text()
    assert text.count('pip install "torch-neuronx==2.14.*"') == lines
    assert text.count(" nki ") == 1  # added once, beside the first pin


def _brute_clash(edit: Edit, taken: list[Edit]) -> bool:
    """Whether `edit` clashes with one already taken, compared with each in turn."""
    for other in taken:
        if edit == other:
            return True
        if edit.start == edit.end or other.start == other.end:
            point, span = (edit, other) if edit.start == edit.end else (other, edit)
            if span.start < point.start < span.end:
                return True
        elif edit.start < other.end and other.start < edit.end:
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 4)), max_size=40))
def test_the_sorted_edit_index_clashes_exactly_where_a_pairwise_check_does(
        spans: list[tuple[int, int]]) -> None:
    taken: list[Edit] = []
    index = _Spans()
    for start, length in spans:
        edit = Edit(start, start + length, "x")
        if edit in index:
            continue
        clash = index.clashes(edit)
        assert clash == _brute_clash(edit, taken)
        if not clash:
            taken.append(edit)
            index.add(edit)
