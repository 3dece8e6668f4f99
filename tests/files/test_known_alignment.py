"""A line alignment rebuilt from the blocks a result keeps (`FileResult.changes`) gives the
opcodes and the unified diff of the matcher that found it."""

from __future__ import annotations

import random

import pytest

from neuron_migrate.files.diff import KnownAlignment, LineMatcher, diff_of_lines


def _pair(chooser: random.Random) -> tuple[list[str], list[str]]:
    words = ["import torch\n", "x = 1\n", "\n", "xm.mark_step()\n", "y = f(x)\n", "pass\n"]
    old = [chooser.choice(words) for _ in range(chooser.randint(0, 40))]
    new = list(old)
    for _ in range(chooser.randint(0, 6)):
        at = chooser.randint(0, len(new))
        action = chooser.random()
        if action < 0.4 and at < len(new):
            del new[at:at + chooser.randint(1, 3)]
        elif action < 0.7:
            new[at:at] = [chooser.choice(words) for _ in range(chooser.randint(1, 3))]
        elif at < len(new):
            new[at] = "changed()\n"
    if new and chooser.random() < 0.2:
        new[-1] = new[-1].rstrip("\n")  # a last line without its newline
    return old, new


@pytest.mark.parametrize("seed", range(5))
def test_kept_blocks_give_the_matchers_opcodes_and_diff(seed: int) -> None:
    chooser = random.Random(seed)
    for _ in range(200):
        old, new = _pair(chooser)
        found = LineMatcher(old, new)  # type: ignore[arg-type]
        opcodes = found.get_opcodes()
        kept = [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in opcodes if tag != "equal"]
        if not kept:
            continue
        known = KnownAlignment(kept, len(old), len(new))
        assert known.get_opcodes() == opcodes
        # the diff groups opcodes by trimming a shared list: each answer is whole again
        expected = diff_of_lines("f.py", old, new, LineMatcher(old, new))  # type: ignore[arg-type]
        assert diff_of_lines("f.py", old, new, known) == expected
        assert diff_of_lines("f.py", old, new, known) == expected
