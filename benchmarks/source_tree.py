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
    (the checkout itself for trees from before the move, which import as `codemod`).

    `neuron_migrate` there is a stub whose `__path__` is the checkout's `codemod/` plus a
    folder linking `rules/` and `emulator/`: modules added to the checkout later are found."""
    checkout = checkout.resolve()
    if not (checkout / "codemod" / "engine").is_dir():
        return checkout
    package, mapped = scratch / "neuron_migrate", scratch / "mapped"
    package.mkdir(parents=True, exist_ok=True)
    mapped.mkdir(exist_ok=True)
    for name, folder in MAPPED.items():
        if not (mapped / name).exists():
            (mapped / name).symlink_to(checkout / folder)
    init = checkout / "codemod" / "__init__.py"
    (package / "__init__.py").write_text(
        f'"""{checkout}: codemod/ as neuron_migrate (benchmarks/source_tree.py)."""\n'
        f"__path__ = [{str(checkout / 'codemod')!r}, {str(mapped)!r}]\n"
        f"__file__ = {str(init)!r}\n"
        f"exec(compile(open(__file__, encoding='utf-8').read(), __file__, 'exec'))\n")
    return scratch


def module(path: Path) -> str:
    """The module `python -m` runs with `path` (what `pythonpath` gave) on PYTHONPATH."""
    return "codemod" if (path / "codemod" / "__main__.py").is_file() else "neuron_migrate"


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 3:
        sys.exit("usage: python benchmarks/source_tree.py CHECKOUT FOLDER  "
                 "(prints the folder to put on PYTHONPATH)")
    print(pythonpath(Path(sys.argv[1]), Path(sys.argv[2]).resolve()))
