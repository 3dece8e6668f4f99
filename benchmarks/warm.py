"""Re-checks with the result cache, next to ruff's with its own: what pre-commit and CI pay
on a tree where almost nothing changed. Used by run.py; measured on the same trees.

  cold         check with an empty cache (it fills it)      | ruff, empty cache
  warm         check again, nothing changed                  | ruff again
  one edited   check after one XLA-era file is edited        | ruff after the same edit
  one file     check of that file alone, no cache            |

Goals (docs/performance.md): warm <= 2x ruff's warm; one edited <= 2x (one file + warm),
the warm run standing for the walk and look-ups of the unchanged files.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

Measure = Callable[..., tuple[float, float]]
CACHE_DIR = "NEURON_MIGRATE_CACHE_DIR"


def _environment(cache: Path) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k != "NEURON_MIGRATE_NO_CACHE"}
    environment[CACHE_DIR] = str(cache)
    return environment


def report(tool: list[str], ruff: str | None, trees: list[str], edited: Path, repeat: int,
           measure: Measure) -> dict[str, float]:
    """Measure, print and return the times (seconds; the fastest of `repeat`)."""
    scratch = Path(tempfile.mkdtemp(prefix="neuron-migrate-warm-"))
    ours, theirs = scratch / "ours", scratch / "ruff"
    check = [*tool, "check", *trees, "-q"]
    ruff_check = [ruff, "check", "--select", "F", "--isolated", "--cache-dir", str(theirs),
                  "-q", *trees] if ruff else None
    times: dict[str, float] = {}
    original = edited.read_bytes()
    try:
        colds = []
        for _ in range(repeat):
            shutil.rmtree(ours, ignore_errors=True)
            colds.append(measure(check, env=_environment(ours))[0])
        times["cold"] = min(colds)
        times["warm"] = measure(check, repeat, env=_environment(ours))[0]
        times["one edited"] = _edited(edited, original, repeat,
                                      lambda: measure(check, env=_environment(ours))[0])
        times["one file"] = measure([*tool, "check", str(edited), "-q", "--no-cache"],
                                    repeat)[0]
        if ruff_check is not None:
            colds = []
            for _ in range(repeat):
                shutil.rmtree(theirs, ignore_errors=True)
                colds.append(measure(ruff_check)[0])
            times["ruff cold"] = min(colds)
            times["ruff warm"] = measure(ruff_check, repeat)[0]
            times["ruff one edited"] = _edited(edited, original, repeat,
                                               lambda: measure(ruff_check)[0])
    finally:
        edited.write_bytes(original)
        shutil.rmtree(scratch, ignore_errors=True)
    _print(times, edited)
    return times


def _edited(path: Path, original: bytes, repeat: int, run: Callable[[], float]) -> float:
    """A new edit before each run (so each is a miss for that file), the fastest run."""
    walls = []
    for number in range(repeat):
        path.write_bytes(original + f"\n# edited {os.getpid()} {number}\n".encode())
        walls.append(run())
    path.write_bytes(original)
    return min(walls)


def _print(times: dict[str, float], edited: Path) -> None:
    print(f"\nre-checks with the cache (edited file: {edited})")
    for name, wall in times.items():
        print(f"  {name:<16} {wall:8.2f} s")
    if "ruff warm" in times:
        print(f"warm / ruff warm: {times['warm'] / times['ruff warm']:.1f}x (goal: <= 2x); "
              f"cold / ruff cold: {times['cold'] / times['ruff cold']:.1f}x")
    bound = times["one file"] + times["warm"]
    print(f"one edited / (one file + warm): {times['one edited'] / bound:.2f}x (goal: <= 2x)")
