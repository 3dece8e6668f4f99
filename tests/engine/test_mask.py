"""Hiding untouched statements from LibCST must never change a result, only its cost."""

from __future__ import annotations

import ast
import sysconfig
from pathlib import Path

import pytest

import neuron_migrate.engine.migrate as migrate
from neuron_migrate.analysis.analyse import analyse
from neuron_migrate.engine.mask import mask
from neuron_migrate.model import Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from tests.conftest import SOURCES, source_id

REGISTRY = Registry(all_rules(), Options())


def _masked(data: bytes):
    tree = ast.parse(data)
    analysis = analyse(tree, REGISTRY.interesting_string, REGISTRY.star_names,
                       REGISTRY.watched_roots, REGISTRY.device_calls)
    return mask(data, tree, analysis.on_path, analysis.flagged)


def _without_masking(monkeypatch: pytest.MonkeyPatch, path: Path, data: bytes,
                     registry: Registry = REGISTRY):
    with monkeypatch.context() as patch:
        patch.setattr(migrate, "mask", lambda *args: None)
        return migrate.migrate_source(str(path), data, registry)


@pytest.mark.parametrize("options", [Options(), Options(annotate=True, unsafe_fixes=True,
                                                         compile=False)],
                         ids=["default", "annotate-unsafe-no-compile"])
@pytest.mark.parametrize("source", SOURCES, ids=source_id)
def test_masking_changes_no_result(source: Path, options: Options,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    data = source.read_bytes()
    registry = Registry(all_rules(), options)
    fast = migrate.migrate_source(str(source), data, registry)
    slow = _without_masking(monkeypatch, source, data, registry)
    assert fast == slow


def test_masking_happens_on_the_fixtures() -> None:
    """Otherwise the test above compares the slow path with itself."""
    hidden = [p for p in SOURCES if _masked(p.read_bytes()) is not None]
    assert len(hidden) >= 5


def test_restoring_the_masked_text_gives_the_file_back() -> None:
    for source in SOURCES:
        data = source.read_bytes()
        masked = _masked(data)
        if masked is not None:
            assert b"__nm_kept_" in masked.data
            assert len(masked.data) < len(data)
            assert masked.restore(masked.data) == data


XLA = b"import torch_xla.core.xla_model as xm\n\n"


def test_untouched_function_is_hidden_and_flagged_one_is_not() -> None:
    data = XLA + (b"def helper(a,\n           b):\n    return a + b\n\n\n"
                  b"def train():\n    device = xm.xla_device()\n    total = sum(\n        [1, 2]\n    )\n")
    masked = _masked(data)
    assert masked is not None
    text = masked.data.decode()
    assert "def helper" not in text and "def train():" in text
    assert "xm.xla_device()" in text and "total = sum(" not in text
    assert masked.restore(masked.data) == data


@pytest.mark.parametrize("body", [
    b"    if xm.is_master_ordinal():\n        a = 1\n    elif b:\n        c = (1,\n             2)\n",
    b"    x = xm.xla_device(); y = (1,\n        2)\n",
    b"    y = (1,\n        2); x = xm.xla_device()\n",
    b"    if xm.is_master_ordinal(): y = (1,\n        2)\n",
])
def test_statements_that_share_lines_stay(body: bytes) -> None:
    """An `elif`, a statement after a `;` or on a compound statement's line is not a
    statement with lines of its own; hiding it would break the file."""
    data = XLA + b"def train(b):\n" + body
    masked = _masked(data)
    assert masked is None or masked.restore(masked.data) == data
    result = migrate.migrate_source("t.py", data, REGISTRY)
    assert result.error is None


@pytest.mark.parametrize("data", [
    b"\xef\xbb\xbf" + XLA + b"def f():\n    xm.mark_step()\n    y = (1,\n        2)\n",
    b"# -*- coding: latin-1 -*-\n" + XLA + b"def f():\n    xm.mark_step()\n    y = ('\xe9',\n        2)\n",
    XLA.replace(b"\n", b"\r") + b"def f():\r    xm.mark_step()\r    y = (1,\r        2)\r",
    XLA + b"def f():\n    xm.mark_step()\n    y = (1,\n        __nm_kept_0__)\n",
])
def test_files_whose_lines_cannot_be_trusted_are_not_masked(data: bytes) -> None:
    assert _masked(data) is None


def test_unwrapped_block_falls_back_to_the_whole_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Removing `with torch_xla.step():` re-indents its body, placeholders included: the
    masked rewrite is abandoned and the whole file is rewritten instead."""
    data = (b"import torch_xla\n\n\ndef train(model, x):\n    with torch_xla.step():\n"
            b"        loss = model(x)\n        note = '''two\n   lines of text'''\n")
    masked = _masked(data)
    assert masked is not None
    calls: list[bytes | None] = []
    real = migrate._rewrite

    def spy(path, data, masked, **kwargs):
        calls.append(masked.data if masked is not None else None)
        return real(path, data, masked, **kwargs)

    monkeypatch.setattr(migrate, "_rewrite", spy)
    result = migrate.migrate_source("t.py", data, REGISTRY)
    assert calls == [masked.data, None]
    assert result.new_source == (b"def train(model, x):\n    loss = model(x)\n"
                                 b"    note = '''two\n   lines of text'''\n")


@pytest.mark.slow
def test_real_modules_round_trip_through_the_mask(monkeypatch: pytest.MonkeyPatch,
                                                  stdlib_as_xla: None) -> None:
    """Standard-library modules give masks of every shape: decorators, elif chains, nested
    classes, comments at odd indentation."""
    registry = Registry(all_rules())
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    hidden = 0
    for name in ("inspect", "argparse", "tarfile", "shutil", "tempfile", "subprocess"):
        path = stdlib / f"{name}.py"
        data = path.read_bytes()
        tree = ast.parse(data)
        analysis = analyse(tree, registry.interesting_string, registry.star_names,
                           registry.watched_roots, registry.device_calls)
        masked = mask(data, tree, analysis.on_path, analysis.flagged)
        if masked is None:
            continue
        hidden += 1
        assert masked.restore(masked.data) == data
        fast = migrate.migrate_source(str(path), data, registry)
        slow = _without_masking(monkeypatch, path, data, registry)
        assert fast == slow and fast.error is None
    assert hidden >= 4


def test_blocks_of_a_try_are_hidden_in_source_order() -> None:
    data = XLA + (b"def train():\n    try:\n        xm.mark_step()\n    except ValueError:\n"
                  b"        a = (1,\n             2)\n    else:\n        b = (3,\n             4)\n"
                  b"    finally:\n        c = (5,\n             6)\n")
    masked = _masked(data)
    assert masked is not None and len(masked.regions) == 3
    assert masked.restore(masked.data) == data
    result = migrate.migrate_source("t.py", data, REGISTRY)
    assert result.new_source == data.replace(XLA, b"").replace(b"xm.mark_step()", b"pass")


def test_lines_libcst_would_not_reproduce_stay_as_they_were() -> None:
    """LibCST drops the space in `except (A, B) :`. The line is on the way to a rewritten
    statement, so it is parsed; the change outside the rewritten lines sends the rewrite
    through the round-trip check, and the line is kept byte for byte."""
    data = XLA + (b"def train():\n    try:\n        xm.mark_step()\n"
                  b"    except (ValueError, KeyError) :\n        pass\n")
    result = migrate.migrate_source("t.py", data, REGISTRY)
    assert result.new_source == (b"def train():\n    try:\n        pass\n"
                                 b"    except (ValueError, KeyError) :\n        pass\n")


@pytest.mark.parametrize(("new", "spans", "expected"), [
    (b"a\nB\nc\n", [(2, 2)], True),
    (b"a\nB\nc\n", [(1, 1), (3, 3)], False),
    (b"a\nc\n", [(2, 2)], True),
    (b"a\nc\n", [], False),
    (b"a\nb\nnew\nc\n", [], True),
    (b"a\nb\nc\n", [], True),
])
def test_confined_allows_changes_only_in_the_spans(new: bytes, spans, expected: bool) -> None:
    from neuron_migrate.files.diff import confined

    assert confined(b"a\nb\nc\n", new, spans) is expected


def test_one_line_headers_on_the_path_are_hidden() -> None:
    data = XLA + (b"def train(model, loader, optimizer, epochs=10, log=print):\n"
                  b"    for step, batch in enumerate(loader):\n"
                  b"        if step == 0:\n            pass\n"
                  b"        elif step % 10 == 0:\n            xm.mark_step()\n")
    masked = _masked(data)
    assert masked is not None
    text = masked.data.decode()
    assert "def __nm_kept_" in text and "    for __nm_kept_" in text and "elif __nm_kept_" in text
    assert "optimizer" not in text and "enumerate" not in text
    assert masked.restore(masked.data) == data
    result = migrate.migrate_source("t.py", data, REGISTRY)
    assert result.new_source == data.replace(XLA, b"").replace(b"xm.mark_step()", b"pass")


@pytest.mark.parametrize("header", [
    b"def train(model,\n          loader):\n",
    b"def train(model, loader\n          ):\n",
    b"@decorated\ndef train(model, loader):\n",
    b"@decorated(\n    1)\n# a note\nasync def train(model, loader) -> dict[\n        str, int]:\n",
])
def test_headers_over_several_lines_are_hidden_whole(header: bytes,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    data = XLA + header + b"    xm.mark_step()\n    return model\n"
    masked = _masked(data)
    assert masked is not None and b"train" not in masked.data and b"decorated" not in masked.data
    assert masked.restore(masked.data) == data
    result = migrate.migrate_source("t.py", data, REGISTRY)
    assert result.new_source == data.replace(XLA, b"").replace(b"    xm.mark_step()\n", b"")
    assert result == _without_masking(monkeypatch, Path("t.py"), data)


@pytest.mark.parametrize("header", [
    b"def train(model, loader):  # the loop\n",
    b"def train(model,  # the model\n          loader):  # and its data\n",
    b"def train(model,\n          loader=\"#\"):\n",
])
def test_headers_whose_colon_cannot_be_told_stay(header: bytes) -> None:
    data = XLA + header + b"    xm.mark_step()\n    return model\n"
    masked = _masked(data)
    assert masked is None or b"train" in masked.data


def test_runs_of_untouched_statements_become_one_placeholder(
        monkeypatch: pytest.MonkeyPatch) -> None:
    data = XLA + (b"LIMIT = 10\n\n\ndef helper(a,\n           b):\n    return a + b\n\n\n"
                  b"# the loop\ndef train(model):\n    total = sum(\n        [1, 2]\n    )\n"
                  b"    # keep\n    count = len(\n        model)\n    xm.mark_step()\n"
                  b"    return (total,\n            count)\n")
    masked = _masked(data)
    assert masked is not None
    text = masked.data.decode()
    assert "LIMIT" not in text and "helper" not in text and "count" not in text
    # LIMIT and helper are one run; the two statements above mark_step another; the return
    # a third (train's header is shorter than its placeholder, so it stays)
    assert [line.strip() for line in text.splitlines() if "__nm_kept_" in line] == [
        "__nm_kept_0_2__", "__nm_kept_2_2__", "__nm_kept_3__"]
    assert "# the loop" in text  # comments above a run stay outside it
    assert masked.restore(masked.data) == data
    result = migrate.migrate_source("t.py", data, REGISTRY)
    assert result.new_source == data.replace(XLA, b"").replace(b"    xm.mark_step()\n", b"")
    assert result == _without_masking(monkeypatch, Path("t.py"), data)


def test_at_the_top_the_docstring_and_the_imports_stay_visible() -> None:
    """Added imports go into their isort section and helpers after the last import, so the
    import block is never hidden; what sits between imports may be."""
    data = (b'"""The docs."""\nfrom __future__ import annotations\nimport os\n'
            b'from typing import (\n    Any)\nVALUE = os.environ.get(\n    "A")\nimport torch\n'
            + XLA + b"def f():\n    xm.mark_step()\n")
    masked = _masked(data)
    assert masked is not None
    text = masked.data.decode()
    assert text.startswith('"""The docs."""\nfrom __future__ import annotations\nimport os\n'
                           'from typing import (\n    Any)\n__nm_kept_0__\nimport torch\n'
                           + XLA.decode())
    assert masked.restore(masked.data) == data


def test_imports_added_go_into_their_section_as_without_masking() -> None:
    data = (b'"""The docs."""\nimport os\nimport sys\nfrom typing import (\n    Any)\n'
            + XLA + b"LIMIT = int(\n    os.environ['LIMIT'])\n\n\n"
            b"def f(t):\n    return t.to(xm.xla_device())\n")
    masked = _masked(data)
    assert masked is not None and b"__nm_kept_" in masked.data
    result = migrate.migrate_source("t.py", data, REGISTRY)
    assert result.new_source is not None and b"xm" not in result.new_source
    assert b"    Any)\n\nimport torch\n\nLIMIT" in result.new_source
    slow = _without_masking(pytest.MonkeyPatch(), Path("t.py"), data)
    assert result == slow
