"""The notebook reader's shortcuts give what the long way gives: cells without IPython lines
are not scanned."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_migrate.notebooks import ipython_syntax

_LINES = ["!pip install torch-neuronx", "%time f(xm)", "%%bash", "%%time", "%%writefile a.py",
          "x = !ls", "a, b.c = %sx ls", "x=% ls", "xm.mark_step?", "obj??  # help", "/f 1",
          ",f a b", ";f a", "  /f 1", "\t!ls", "print('?')", "# a ? in a comment",
          "y = 1 % 2", "a != b", "s = '''", "'''", "f(", ")", "x = 1 \\", "", "  ", "\r",
          "import torch_xla.core.xla_model as xm", "xm.mark_step()", "def f(a):", "    return a",
          "\f%time g()", "é = !ls"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_LINES), max_size=8), st.sampled_from(["\n", "\r\n"]),
       st.booleans())
def test_a_cell_left_unscanned_is_one_the_scan_would_leave(lines: list[str], newline: str,
                                                            last: bool) -> None:
    text = newline.join(lines) + (newline if last else "")
    assert ipython_syntax.mask_cell(text, itertools.count()) == \
        ipython_syntax._masked(text, itertools.count())

