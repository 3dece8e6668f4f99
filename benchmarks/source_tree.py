"""Run neuron-migrate from a source tree without installing it, so a benchmark can measure
several checkouts (an older commit, a branch) with one interpreter.

Since the move to one import package, `neuron_migrate` is not a folder of the repository:
setuptools maps `codemod/` to it and `rules/`, `emulator/` to its subpackages. A checkout is
made importable the same way an install would, by a folder of symbolic links; putting the
checkout itself on PYTHONPATH would silently import whatever neuron-migrate is installed."""

from __future__ import annotations

from pathlib import Path

MAPPED = {"rules": "rules", "emulator": "emulator"}
"""Subpackages that live beside `codemod/` in the repository (pyproject's package-dir)."""


def pythonpath(checkout: Path, scratch: Path) -> Path:
    """The folder to put on PYTHONPATH to import `checkout`'s code as `neuron_migrate`
    (the checkout itself for trees from before the move, which import as `codemod`)."""
    checkout = checkout.resolve()
    if not (checkout / "codemod" / "engine").is_dir():
        return checkout
    package = scratch / "neuron_migrate"
    package.mkdir(parents=True, exist_ok=True)
    for entry in (checkout / "codemod").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in MAPPED.items():
        (package / name).symlink_to(checkout / folder)
    return scratch


def module(path: Path) -> str:
    """The module `python -m` runs with `path` (what `pythonpath` gave) on PYTHONPATH."""
    return "codemod" if (path / "codemod" / "__main__.py").is_file() else "neuron_migrate"
