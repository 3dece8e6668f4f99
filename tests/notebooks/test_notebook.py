"""Jupyter notebooks: cells migrated as one module, magics restored, the JSON left as it was."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from neuron_migrate import rules
from neuron_migrate.notebooks import migrate as notebook_module
from neuron_migrate.notebooks.ipython_syntax import mask_cell, restore_cell
from neuron_migrate.model import FileResult, Kind, Options
from neuron_migrate.notebooks.migrate import migrate_notebook
from neuron_migrate.runner import migrate_data
from neuron_migrate.notebooks.json_file import read_notebook, write_sources
from neuron_migrate.registry import Registry
from tests.conftest import FIXTURES

NOTEBOOKS = FIXTURES / "notebooks"
BEFORE = sorted(NOTEBOOKS.glob("*.before.ipynb"))
TRAINING = NOTEBOOKS / "xla_training.before.ipynb"


def registry(**options: object) -> Registry:
    """Every rule, with the dependency rules when that scanner is installed."""
    found = list(rules.all_rules())
    try:
        from neuron_migrate.rules.dependencies import RULES
    except ImportError:
        RULES = ()
    known = {r.id for r in found}
    found += [r for r in (cls() for cls in RULES) if r.id not in known]
    return Registry(found, Options(**options))  # type: ignore[arg-type]


def after_of(before: Path) -> Path:
    return before.with_name(before.name.replace(".before.", ".after."))


def run(data: bytes, path: str = "nb.ipynb") -> FileResult:
    return migrate_notebook(path, data, registry(), migrate_data)


def notebook(*sources: str | list[str], cell_type: str = "code", **extra: object) -> bytes:
    cells = [{"cell_type": cell_type, "execution_count": None, "metadata": {}, "outputs": [],
              "source": s} for s in sources]
    return (json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
                        **extra}, indent=1, ensure_ascii=False) + "\n").encode()


def sources(data: bytes) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(data)["cells"]]


# ------------------------------------------------------------------ fixtures
@pytest.mark.parametrize("before", BEFORE, ids=lambda p: p.name.split(".")[0])
def test_fixture_migrates_to_the_after_file(before: Path) -> None:
    result = run(before.read_bytes(), before.name)
    assert result.error is None
    assert result.new_source == after_of(before).read_bytes()


@pytest.mark.parametrize("before", BEFORE, ids=lambda p: p.name.split(".")[0])
def test_second_run_changes_nothing(before: Path) -> None:
    result = run(after_of(before).read_bytes(), before.name)
    assert result.error is None and result.new_source is None
    assert not any(f.applied for f in result.findings)


@pytest.mark.parametrize("before", BEFORE, ids=lambda p: p.name.split(".")[0])
def test_migrated_cells_parse(before: Path) -> None:
    """Every Python cell of the output parses once its IPython lines are masked again."""
    import ast
    import itertools

    counter = itertools.count()
    for cell in json.loads(after_of(before).read_bytes())["cells"]:
        if cell["cell_type"] == "code":
            masked = mask_cell("".join(cell["source"]), counter)
            if masked.python:
                ast.parse(masked.text)


@pytest.mark.parametrize("indent", [1, 2, 4, "\t"])
@pytest.mark.parametrize("ascii_only", [False, True])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("final", ["\n", ""])
def test_json_style_is_kept(indent: int | str, ascii_only: bool, newline: str,
                            final: str) -> None:
    """Whatever the writer's style, the output is the expected notebook in that same style."""
    def styled(path: Path) -> bytes:
        text = json.dumps(json.loads(path.read_bytes()), indent=indent, ensure_ascii=ascii_only)
        return (text + final).replace("\n", newline).encode()

    result = run(styled(TRAINING))
    assert result.new_source == styled(after_of(TRAINING))


def test_jupyter_style_fixture_is_what_jupyter_would_write() -> None:
    """The expected file is not an artefact of our writer: Jupyter's own settings give it."""
    expected = after_of(TRAINING).read_bytes()
    data = json.loads(expected)
    assert json.dumps(data, indent=1, ensure_ascii=False).encode() + b"\n" == expected


# ------------------------------------------------------------------ nothing to do
def test_unchanged_notebooks_are_byte_identical() -> None:
    quirky = (b'{"nbformat": 4, "nbformat_minor": 4, "metadata": {"x": 1.50, "y": "a\\/b"},\n'
              b'  "cells": [{"cell_type": "code", "metadata": {}, "outputs": [],\n'
              b'    "source": ["import os\\n", "print(os.sep)"], "execution_count": 3}]}')
    for data in (quirky, notebook("!pip install torch-neuronx\n%env XLA_USE_BF16=1"),
                 after_of(TRAINING).read_bytes(),
                 notebook("# xla mentioned in a comment only\nx = 1")):
        result = run(data)
        assert result.error is None and result.new_source is None and not result.changed


def test_only_changed_sources_differ_in_an_odd_layout() -> None:
    data = (b'{"cells": [{"source": ["# a\\/b\\n", "import torch_xla.core.xla_model as xm\\n",'
            b' "d = xm.xla_device()"], "cell_type": "code", "outputs": [],\n'
            b' "metadata": {"n": 1.0e5, "s": "\\u00e9\\/"}}], "nbformat": 4, "metadata": {}}')
    new = run(data).new_source
    assert new == data.replace(b'["# a\\/b\\n", "import torch_xla.core.xla_model as xm\\n",'
                               b' "d = xm.xla_device()"]',
                               b'["# a\\/b\\n", "import torch\\n", "\\n",'
                               b' "d = torch.device(\\"neuron\\")"]')


@pytest.mark.parametrize("ascii_only", [False, True])
def test_string_source_keeps_the_escaping_style(ascii_only: bool) -> None:
    def book(source: str) -> bytes:
        cell = {"cell_type": "code", "metadata": {}, "outputs": [], "source": source}
        return json.dumps({"cells": [cell], "nbformat": 4}, ensure_ascii=ascii_only).encode()

    new = run(book('print("d\u00e9j\u00e0")\nimport torch_xla\n')).new_source
    assert new == book('print("d\u00e9j\u00e0")\n')


# ------------------------------------------------------------------ cells
def test_findings_name_the_cell_and_the_line_in_it() -> None:
    found = {(f.cell, f.cell_id, f.line, f.column, f.rule_id)
             for f in run(TRAINING.read_bytes()).findings}
    assert {(2, "imports", 2, 1, "NM001"), (3, "device", 1, 10, "NM101"),
            (5, "train", 6, 5, "NM210"), (5, "train", 7, 5, "NM110"),
            (6, "sync", 1, 1, "NM110"), (8, "plot", 4, 1, "NM204")} <= found
    assert all(f.cell is not None for f in run(TRAINING.read_bytes()).findings)


def test_one_alias_table_across_cells() -> None:
    data = notebook("import torch_xla.core.xla_model as xm", "import os", "d = xm.xla_device()")
    assert sources(run(data).new_source or b"") == ["", "import os\n\nimport torch",
                                                     'd = torch.device("neuron")']


def test_a_shadowing_cell_stops_the_match() -> None:
    data = notebook("import torch_xla.core.xla_model as xm", "xm = object()", "xm.mark_step()")
    assert not any(f.rule_id == "NM110" and f.applied for f in run(data).findings)
    data = notebook("import torch_xla.core.xla_model as xm", "y = object()", "xm.mark_step()")
    assert any(f.rule_id == "NM110" and f.applied for f in run(data).findings)


def test_cell_emptied_by_deletions() -> None:
    data = notebook("import torch_xla.core.xla_model as xm\nx = 1", "xm.mark_step()\n",
                    ["# keep\n", "xm.mark_step()"], "y = 2")
    assert sources(run(data).new_source or b"") == ["x = 1", "", "# keep", "y = 2"]


def test_cell_keeps_its_own_blank_edges() -> None:
    data = notebook("import torch_xla.core.xla_model as xm", "\n\nxm.mark_step()\nx = 1\n\n",
                    "y = 1\nxm.mark_step()\n")
    assert sources(run(data).new_source or b"") == ["", "\n\nx = 1\n\n", "y = 1\n"]


def test_cell_magic_is_put_back_first() -> None:
    """Should the rewrite ever put a statement above a `%%time` placeholder."""
    import itertools

    masked = mask_cell("%%time\nx = 1", itertools.count())
    moved = "import torch\n" + masked.text
    assert restore_cell(moved, masked.escapes) == "%%time\nimport torch\nx = 1"
    assert restore_cell(masked.text.replace("import", "imp0rt"), masked.escapes) is None


def test_markdown_and_raw_cells_are_untouched() -> None:
    xla = "import torch_xla.core.xla_model as xm\nxm.mark_step()"
    cells = [{"cell_type": "markdown", "metadata": {}, "source": xla},
             {"cell_type": "raw", "metadata": {}, "source": xla.splitlines(True)},
             {"cell_type": "code", "metadata": {}, "outputs": [], "source": "x = 1"}]
    data = json.dumps({"cells": cells, "nbformat": 4}).encode()
    result = run(data)
    assert result.error is None and result.new_source is None and not result.findings
    cells[2]["source"] = "import torch_xla"
    assert sources(run(json.dumps({"cells": cells, "nbformat": 4}).encode()).new_source
                   or b"") == [xla, xla, ""]
    before = json.loads(TRAINING.read_bytes())["cells"]
    after = json.loads(after_of(TRAINING).read_bytes())["cells"]
    assert [c for c in before if c["cell_type"] != "code"] == \
        [c for c in after if c["cell_type"] != "code"]


def test_only_source_lines_differ() -> None:
    """Jupyter puts a code cell's source items at four spaces; outputs sit deeper."""
    import difflib

    before = TRAINING.read_text().splitlines()
    after = after_of(TRAINING).read_text().splitlines()
    changed = [line[2:] for line in difflib.ndiff(before, after) if line[:2] in ("- ", "+ ")]
    assert changed
    source = re.compile(r'    "|   "source": \[\]?,?$|   \],?$')
    assert all(source.match(line) for line in changed), changed


def test_user_text_that_looks_like_a_marker_is_harmless() -> None:
    data = notebook("import torch_xla.core.xla_model as xm\n# neuron-migrate-cell 1 0123456789ab",
                    "xm.mark_step()\nx = 1")
    assert sources(run(data).new_source or b"") == ["# neuron-migrate-cell 1 0123456789ab",
                                                     "x = 1"]


def test_lost_markers_fail_the_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    def lossy(path: str, data: bytes, registry: Registry) -> FileResult:
        text = re.sub(rb"# neuron-migrate-cell 1 \w+\n", b"", data)
        return FileResult(path, original=data, new_source=text.replace(b"xm.mark_step()", b""))

    monkeypatch.setattr(notebook_module, "migrate_python", lossy)
    result = run(notebook("import torch_xla.core.xla_model as xm", "xm.mark_step()"))
    assert result.new_source is None and "cell markers" in (result.error or "")


def test_lost_placeholder_fails_the_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    def lossy(path: str, data: bytes, registry: Registry) -> FileResult:
        text = re.sub(rb"import _neuron_migrate_ipython_\d+\n", b"", data)
        return FileResult(path, original=data, new_source=text)

    monkeypatch.setattr(notebook_module, "migrate_python", lossy)
    result = run(notebook("import torch_xla\n!ls"))
    assert result.new_source is None and "IPython line" in (result.error or "")


# ------------------------------------------------------------------ IPython syntax
MAGICS = ["!pip install torch-neuronx==2.1.*", "%env XLA_USE_BF16=1", "%matplotlib inline",
          "files = !ls -la", "out, err = %sx echo", "torch.randn?", "??torch.randn",
          "!pip install \\\n    neuronx-cc", "%time x = torch.ones(1)", "/print 1 2"]


@pytest.mark.parametrize("magic", MAGICS)
def test_magics_are_restored_byte_for_byte(magic: str) -> None:
    cell = f"import torch_xla.core.xla_model as xm\n{magic}\nd = xm.xla_device()\n  \n"
    (new,) = sources(run(notebook(cell)).new_source or b"")
    expected = f"{magic}\nimport torch\n\nd = torch.device(\"neuron\")\n  \n"
    assert new.startswith(f"{magic}\n")
    assert new.replace("\n\n", "\n") == expected.replace("\n\n", "\n")  # blank lines: engine's


@pytest.mark.parametrize("magic", ["    xm.mark_step?", "  %time xm.mark_step()"])
def test_magic_using_an_xla_name_keeps_the_import_and_is_reviewed(magic: str) -> None:
    cell = f"import torch_xla.core.xla_model as xm\nif True:\n{magic}\nd = xm.xla_device()"
    result = run(notebook(cell))
    (new,) = sources(result.new_source or b"")
    assert new.startswith("import torch\nimport torch_xla.core.xla_model as xm\n")
    assert f"\n{magic}\n" in new
    (review,) = [f for f in result.findings if f.line == 3]
    assert (review.rule_id, review.kind, review.applied) == ("NM701", Kind.REVIEW, False)
    assert review.column == len(magic) - len(magic.lstrip()) + 1


def test_magic_moves_with_an_unwrapped_block() -> None:
    cell = "import torch_xla\nwith torch_xla.step():\n    !echo hi \\\n  there\n    y = 1"
    (new,) = sources(run(notebook(cell)).new_source or b"")
    assert new == "!echo hi \\\n  there\ny = 1"


@pytest.mark.parametrize(("text", "masked_lines"), [
    ("x = (1\n     % 2)\ny = (a\n     != b)", []),
    ('"""\n%d items\n!important?\n"""\nz = 1  # why?', []),
    ("s = 'a\\\n!b'\n", []),
    ("x = 1 \\\n    % 2", []),
    ("%pip install nki\nif True:\n    !ls\nobj?\nx = [1,\n 2]\n?x", [1, 3, 4, 7]),
    ("\n%%time\nfor i in range(2):\n    pass", [2]),
])
def test_only_logical_line_starts_are_escapes(text: str, masked_lines: list[int]) -> None:
    import ast
    import itertools

    masked = mask_cell(text, itertools.count())
    assert [e.line for e in masked.escapes] == masked_lines
    ast.parse(masked.text)


def test_non_python_cell_magics_leave_the_cell_alone() -> None:
    cells = ["%%bash\nxm.mark_step()\npip install torch-xla", "%%writefile t.txt\nimport torch_xla",
             "%%html\n<b>xla</b>", "%%script bash\necho xla"]
    data = notebook(*cells)
    result = run(data)
    assert result.error is None and result.new_source is None
    import itertools
    shell = [mask_cell(c, itertools.count()).shell_lines for c in cells]
    assert shell == [((2, "xm.mark_step()"), (3, "pip install torch-xla")), (), (),
                     ((2, "echo xla"),)]


WRITES_SCRIPT = ("\n%%writefile 'train.py'\nimport torch_xla.core.xla_model as xm\n"
                 "device = xm.xla_device()\nxm.mark_step()\n")


def test_a_written_script_is_migrated_as_its_own_file() -> None:
    # the notebook imports xm too; the written file has its own imports, and the notebook's
    # cell that uses xm without importing it is governed by the notebook's import alone
    data = notebook("import torch_xla.core.xla_model as xm", WRITES_SCRIPT,
                    "%%writefile -a helpers.py\nxm.mark_step()\n", "d = xm.xla_device()")
    result = run(data)
    assert result.error is None
    assert sources(result.new_source or b"") == [
        "import torch", "\n%%writefile 'train.py'\nimport torch\n\ndevice = "
        'torch.device("neuron")\n', "%%writefile -a helpers.py\nxm.mark_step()\n",
        'd = torch.device("neuron")']
    found = {(f.cell, f.line, f.rule_id) for f in result.findings}
    assert {(1, 3, "NM001"), (1, 4, "NM101"), (1, 5, "NM110"), (3, 1, "NM101")} <= found
    assert all(f.path == "nb.ipynb" for f in result.findings)
    assert not {f for f in found if f[0] == 2}  # helpers.py never imports xm: nothing known
    assert run(result.new_source or b"").new_source is None  # a second run changes nothing


def test_a_written_requirements_file_is_fixed_like_one() -> None:
    data = notebook("%%writefile requirements.txt\ntorch-neuronx==2.1.2.2.3.0\nneuronx-cc==2.*\n")
    result = run(data)
    assert sources(result.new_source or b"") == [
        '%%writefile requirements.txt\ntorch-neuronx==2.14.*\nnki\nneuronx-cc==2.*\n']
    assert {(f.cell, f.line, f.rule_id) for f in result.findings} == {
        (0, 2, "NM801"), (0, 2, "NM805")}
    assert run(result.new_source or b"").new_source is None


def test_a_written_file_that_does_not_parse_is_named_with_its_cell_and_line() -> None:
    data = notebook("import torch_xla", "%%writefile bad.py\nimport torch_xla\ndef f(:\n")
    result = run(data)
    assert result.new_source is None
    assert (result.error or "").startswith("nb.ipynb: cell 1, line 3 (in the file it writes, "
                                           "bad.py):")


def test_cell_magic_stays_first_line() -> None:
    data = notebook("%%time\nimport torch_xla.core.xla_model as xm\nd = xm.xla_device()")
    assert sources(run(data).new_source or b"") == [
        '%%time\nimport torch\n\nd = torch.device("neuron")']


def test_magic_lines_reach_the_dependency_checks() -> None:
    deps = pytest.importorskip("neuron_migrate.deps")
    if not hasattr(deps, "scan_text_lines"):
        pytest.skip("neuron_migrate.deps has no scan_text_lines")
    findings = [f for f in run(TRAINING.read_bytes()).findings if f.rule_id.startswith("NM8")]
    assert findings, "the !pip install and %env lines were not scanned"
    assert all(f.cell == 1 and f.cell_id == "setup" and f.kind is Kind.REVIEW for f in findings)
    assert {f.line for f in findings} == {1, 2}
    bash = run(notebook("x = 1", "%%bash\necho hi\nexport XLA_USE_BF16=1")).findings
    assert [(f.cell, f.line) for f in bash if f.rule_id.startswith("NM8")] == [(1, 3)]


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize(("data", "expected"), [
    (b'{"cells": [\n  {"cell_type": "code",}\n]}', "nb.ipynb:2: not a valid notebook"),
    (b"", "nb.ipynb:1: not a valid notebook"),
    (b'{"nbformat": 3, "worksheets": []}', "nbformat 3"),
    (b'{"nbformat": 4, "metadata": {}}', 'no "cells" list'),
    (b"[1, 2]", "not a notebook"),
    (b'{"cells": [{"cell_type": "code", "source": 5}]}', "cell 0: source is not text"),
    (b'\xff{"cells": []}', "not UTF-8"),
])
def test_invalid_notebooks_are_reported_never_raised(data: bytes, expected: str) -> None:
    result = run(data)
    assert result.new_source is None and expected in (result.error or ""), result.error
    assert (result.error or "").startswith("nb.ipynb")


def test_unparsable_cell_is_named_with_its_line() -> None:
    data = notebook("import torch_xla", "x = 1", "# a\nprint 'py2'")
    result = run(data)
    assert result.new_source is None
    assert (result.error or "").startswith("nb.ipynb: cell 2, line 2:")


def test_other_languages_are_skipped() -> None:
    data = notebook("import torch_xla", metadata={"kernelspec": {"language": "R"}})
    result = run(data)
    assert result.new_source is None and result.skipped and "R" in result.skipped


def test_empty_source_list_gets_the_notebook_indentation() -> None:
    data = notebook([], "x = 1")
    book = read_notebook("nb.ipynb", data)
    new = write_sources(book, {0: "a = 1\nb = 2"})
    assert new == data.replace(b'"source": []', b'"source": [\n    "a = 1\\n",\n    "b = 2"\n   ]',
                               1)


def test_damaged_notebooks_never_raise() -> None:
    import random

    rng = random.Random(6)
    base = TRAINING.read_bytes()
    for _ in range(60):
        data = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.choice(b'{}[]",:\\ \n!%?x#')
        result = run(bytes(data))
        assert result.error is None or result.error.startswith("nb.ipynb")
        assert "internal error" not in (result.error or "")
        if result.new_source is not None:
            json.loads(result.new_source)


def test_cells_of_another_language_are_untouched() -> None:
    """VS Code notebooks name each cell's language; only Python cells are migrated."""
    cells = [{"cell_type": "code", "metadata": {"vscode": {"languageId": language}},
              "outputs": [], "source": "import torch_xla"} for language in ("sql", "python")]
    new = run(json.dumps({"cells": cells, "nbformat": 4}).encode()).new_source
    assert sources(new or b"") == ["import torch_xla", ""]


def test_a_cell_pasted_indented_runs_as_ipython_runs_it() -> None:
    """IPython takes the first line's indentation off every line before it runs a cell, so
    such a cell works in Jupyter; it did not parse here, and the whole notebook was skipped.
    It is migrated without it and written back with it; its columns count it."""
    data = notebook("import torch_xla.core.xla_model as xm",
                    "  # pasted\n  d = xm.xla_device()\n  x = '''a\n  b'''\n",
                    "   !pip install torch-neuronx==2.1.2\n   y = 1\n", "  z = 1\n")
    result = run(data)
    assert result.error is None
    assert sources(result.new_source or b"")[1:] == [
        "  # pasted\n  d = torch.device(\"neuron\")\n  x = '''a\n  b'''\n",
        "   !pip install torch-neuronx==2.1.2\n   y = 1\n", "  z = 1\n"]
    found = {(f.cell, f.line, f.column, f.rule_id) for f in result.findings}
    assert (1, 2, 7, "NM101") in found
    assert (2, 1, 17, "NM801") in found  # 14 in the cell without its indentation
    unchanged = notebook("  import torch_xla\n  torch_xla.runtime.use_spmd()\n")
    assert run(unchanged).error is None


def test_audit_reads_a_cell_pasted_indented() -> None:
    from neuron_migrate.notebooks.audit import audit_notebook

    data = notebook("  import torch\n  x = torch.ones(2).double().to('neuron')\n")
    assert audit_notebook("nb.ipynb", data, registry().readiness).error is None


def test_a_null_byte_is_named_with_its_cell_and_line() -> None:
    """No Python says where a null byte is; the message still does."""
    result = run(notebook("x = 1", "import torch_xla\ny = 2\nz = '\0'\n"))
    assert result.new_source is None
    assert (result.error or "").startswith("nb.ipynb: cell 1, line 3: cannot parse (")
