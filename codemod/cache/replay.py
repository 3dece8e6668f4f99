"""The launch scanner's questions about the file system, answered again for a kept result
(`neuron_migrate.files.outside` answers the plain ones): the roots a launch line is resolved
from, and the stamps of the tree a script's launch search read. Each is asked of the file
system once per run (`forget`), not of the scanner's memo, which a process running several
runs (a test's) keeps from an earlier one.
"""

from __future__ import annotations

from collections.abc import Callable

from neuron_migrate.files.tree_walk import tree_digest

_roots: dict[str, list[str]] | None = None
_trees: dict[str, str | None] = {}


def forget() -> None:
    """Called before a run's look-ups."""
    global _roots
    _roots = None
    _trees.clear()


def _roots_of(folder: str) -> list[str]:
    global _roots
    from neuron_migrate.deps.launch_paths import forget_roots, roots_now

    if _roots is None:
        _roots = {}
        forget_roots()
    if folder not in _roots:
        _roots[folder] = roots_now(folder)
    return _roots[folder]


def _tree_of(root: str) -> str | None:
    if root not in _trees:
        _trees[root] = tree_digest(root)
    return _trees[root]


ANSWERS: dict[str, Callable[[str], object]] = {"roots": _roots_of, "tree": _tree_of}
