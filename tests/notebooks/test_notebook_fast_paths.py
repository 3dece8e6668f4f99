"""The notebook reader's shortcuts give what the long way gives: cells without IPython lines
are not scanned, the cells' sources are found in one walk of the JSON, and the file lines of
only the cells with findings are computed."""

from __future__ import annotations

import itertools
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_migrate.notebooks import ipython_syntax, json_file

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


_SOURCE = st.lists(st.sampled_from(["import torch\n", "x = 1\n", "\"q\"\n", "é\\n", "", "{[\n"]),
                   max_size=4)
_CELL = st.fixed_dictionaries(
    {"cell_type": st.sampled_from(["code", "markdown"])},
    optional={"source": st.one_of(_SOURCE, _SOURCE.map("".join)),
              "outputs": st.lists(st.fixed_dictionaries({"text": _SOURCE}), max_size=2),
              "metadata": st.fixed_dictionaries({}, optional={"source": _SOURCE})})


@settings(max_examples=200, deadline=None)
@given(st.lists(_CELL, max_size=5), st.sampled_from([None, 0, 1, 2]), st.booleans(),
       st.sets(st.integers(0, 5)))
def test_each_cells_source_is_found_where_the_json_has_it(cells: list[dict[str, object]],
                                                          indent: int | None, cells_first: bool,
                                                          asked: set[int]) -> None:
    notebook = {"cells": cells, "metadata": {"cells": [1]}, "nbformat": 4}
    if not cells_first:
        notebook = {"metadata": notebook.pop("metadata"), **notebook}
    text = json.dumps(notebook, indent=indent, ensure_ascii=False)
    spans = json_file._source_spans(text)
    assert len(spans) == len(cells)
    for cell, span in zip(cells, spans):
        if "source" not in cell:
            assert span is None
        else:
            assert span is not None and json.loads(text[span[0]:span[1]]) == cell["source"]
    every = json_file.file_lines(text, range(len(cells)))
    assert json_file.file_lines(text, asked) == {i: n for i, n in every.items() if i in asked}
    for index, numbers in every.items():
        span = spans[index]
        assert span is not None
        items = json_file._elements(text, span[0]) if text[span[0]] == "[" else [span]
        source = cells[index]["source"]
        assert [json.loads(text[s:e]) for s, e in items] == \
            (source if isinstance(source, list) else [source])
        assert numbers == [text.count("\n", 0, start) + 1 for start, _ in items]
