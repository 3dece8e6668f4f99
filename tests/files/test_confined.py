"""`confined` says a rewrite changed no line outside the statements it touched: it may only
say so when the new file really is the original with just those lines changed or dropped
and other lines inserted."""

from __future__ import annotations

import difflib
from functools import lru_cache

from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_migrate.files.diff import LineMatcher, confined

LINES = st.lists(st.sampled_from([b"a\n", b"b\n", b"\n", b"    pass\n", b"x\n"]), max_size=12)


def _explained(old: tuple[bytes, ...], new: tuple[bytes, ...], allowed: frozenset[int]) -> bool:
    """Whether some alignment keeps every line outside `allowed` (0-based) as it is."""
    @lru_cache(maxsize=None)
    def fits(i: int, j: int) -> bool:
        if i == len(old):
            return True
        if j < len(new) and (old[i] == new[j] and fits(i + 1, j + 1) or fits(i, j + 1)):
            return True
        return i in allowed and fits(i + 1, j)
    return fits(0, 0)


@settings(max_examples=400, deadline=None)
@given(LINES, LINES, st.lists(st.tuples(st.integers(1, 12), st.integers(0, 2)), max_size=4))
def test_confined_only_when_an_alignment_keeps_the_untouched_lines(
        old: list[bytes], new: list[bytes], spans: list[tuple[int, int]]) -> None:
    lines = [(first, first + extra) for first, extra in spans]
    allowed = frozenset(i for first, last in lines for i in range(first - 1, last))
    if confined(b"".join(old), b"".join(new), lines):
        assert _explained(tuple(old), tuple(new), allowed)


def test_a_change_outside_the_spans_is_seen_past_shared_ends() -> None:
    old = b"import a\n\nx = 1\ny = 2\nz = 3\n"
    assert confined(old, old.replace(b"x = 1", b"x = 10"), [(3, 3)])
    assert not confined(old, old.replace(b"y = 2", b"y = 20"), [(3, 3)])
    assert confined(old, b"import b\n" + old[len(b"import a\n"):], [(1, 1)])


def _edited(draw: st.DrawFn, base: list[bytes], alphabet: list[bytes]) -> list[bytes]:
    """`base` with a few lines inserted, dropped or replaced, as a rewrite leaves a file."""
    lines = list(base)
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, len(lines)))
        size = draw(st.integers(1, 30))
        insert = draw(st.lists(st.sampled_from(alphabet), max_size=size))
        drop = draw(st.integers(0, 12))
        lines[at:at + drop] = insert
    return lines


@st.composite
def _versions(draw: st.DrawFn) -> tuple[list[bytes], list[bytes]]:
    """Two edits of one long file of few distinct lines (most like blank lines: the runs of
    equal lines repeat, and the longest run has rivals of the same length)."""
    alphabet = [b"%d\n" % n for n in range(draw(st.sampled_from([1, 2, 3, 6, 40])))]
    period = draw(st.lists(st.sampled_from(alphabet), min_size=1, max_size=25))
    size = draw(st.integers(0, 500))
    base = (period * (size // len(period) + 1))[:size] if draw(st.booleans()) else \
        draw(st.lists(st.sampled_from(alphabet), min_size=size, max_size=size))
    return _edited(draw, base, alphabet), _edited(draw, base, alphabet)


@settings(max_examples=300, deadline=None)
@given(_versions())
def test_line_matcher_aligns_as_difflib_does(versions: tuple[list[bytes], list[bytes]]) -> None:
    """`confined` and `carry_over` keep difflib's verdicts: same blocks, same opcodes."""
    old, new = versions
    plain = difflib.SequenceMatcher(None, old, new, autojunk=False)
    fast = LineMatcher(old, new)
    assert fast.get_matching_blocks() == plain.get_matching_blocks()
    assert fast.get_opcodes() == plain.get_opcodes()
    assert fast.find_longest_match(0, len(old), 0, len(new)) == \
        plain.find_longest_match(0, len(old), 0, len(new))


def test_line_matcher_breaks_ties_as_difflib_does() -> None:
    """Three runs of the longest length: the first in the old file, then in the new wins."""
    old = [b"a\n"] * 5 + [b"x\n"] + [b"a\n"] * 5 + [b"y\n"] + [b"b\n"] * 5
    new = [b"b\n"] * 5 + [b"z\n"] + [b"a\n"] * 5 + [b"w\n"] * 3 + [b"a\n"] * 5
    old, new = old * 30, new * 30
    plain = difflib.SequenceMatcher(None, old, new, autojunk=False)
    assert LineMatcher(old, new).get_opcodes() == plain.get_opcodes()


@settings(max_examples=200, deadline=None)
@given(_versions(), st.integers(0, 300))
def test_past_its_budget_the_matcher_still_gives_a_valid_alignment(
        versions: tuple[list[bytes], list[bytes]], budget: int) -> None:
    """The linear pass that takes over from the exact search: blocks of equal lines in
    order, whose opcodes turn the old file into the new one."""
    old, new = versions
    matcher = LineMatcher(old, new, budget=budget)
    blocks = matcher.get_matching_blocks()
    assert blocks[-1] == (len(old), len(new), 0)
    for (i, j, size), (i2, j2, _) in zip(blocks, blocks[1:]):
        assert old[i:i + size] == new[j:j + size] and i + size <= i2 and j + size <= j2
    rebuilt: list[bytes] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        rebuilt += old[i1:i2] if tag == "equal" else new[j1:j2]
    assert rebuilt == new


def test_the_linear_pass_finds_the_changed_line_of_each_copy() -> None:
    """A thousand copies of one function, each with its one line rewritten: the exact search
    took minutes; the linear pass still pairs every other line."""
    old = [b"def f():\n", b"    return xm.xla_device()\n"] * 1000
    new = [b"def f():\n", b"    return torch.device('neuron')\n"] * 1000
    matcher = LineMatcher(old, new, budget=1000)
    assert [op[0] for op in matcher.get_opcodes()] == ["equal", "replace"] * 1000
    assert matcher.exhausted
