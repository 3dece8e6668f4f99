"""`confined` says a rewrite changed no line outside the statements it touched: it may only
say so when the new file really is the original with just those lines changed or dropped
and other lines inserted."""

from __future__ import annotations

from functools import lru_cache

from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_migrate.files.diff import confined

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
