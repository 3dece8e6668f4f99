"""`audit` of a Jupyter notebook: its Python cells joined into one module (they share one
namespace, as `neuron_migrate.notebooks.migrate` migrates them) and read by the readiness rules; each finding
goes back to its cell."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence

from neuron_migrate.engine.failsafe import never_raise
from neuron_migrate.notebooks.ipython_syntax import mask_cell
from neuron_migrate.model import FileResult
from neuron_migrate.notebooks.migrate import (MARKER, _cell_error, _in_cell, _layout, _with_file_lines,
                                              python_cells, reindented)
from neuron_migrate.notebooks.json_file import NotebookError, read_notebook
from neuron_migrate.analysis.readiness import ReadinessRule, audit_source, mentions_torch


def audit_notebook(path: str, data: bytes, rules: Sequence[ReadinessRule]) -> FileResult:
    """Never raises for bad input: problems become `error`."""
    return never_raise(path, data, lambda: _audit(path, data, rules), (NotebookError,))


def _audit(path: str, data: bytes, rules: Sequence[ReadinessRule]) -> FileResult:
    if not mentions_torch(data):
        return FileResult(path, original=data)
    notebook = read_notebook(path, data)
    if notebook.language is not None and not notebook.language.lower().startswith(
            ("python", "ipython")):
        return FileResult(path, original=data,
                          skipped=f"a {notebook.language} notebook, not Python")
    numbers = itertools.count()
    cells, indents = python_cells(notebook)
    code = [(cell, mask_cell(cell.text, numbers)) for cell in cells]
    tag = hashlib.sha256(data).hexdigest()[:12]
    header = f"# -*- coding: utf-8 -*- neuron-migrate notebook {tag}\n"
    parts = _layout([(c, m) for c, m in code if m.python], header)
    if not parts:
        return FileResult(path, original=data)
    module = header + "".join(f"{MARKER} {p.cell.index} {tag}\n{p.region}" for p in parts)
    result = audit_source(path, module.encode("utf-8"), rules)
    if result.error is not None:
        return FileResult(path, original=data, error=_cell_error(path, result.error, parts))
    findings = reindented((_in_cell(f, parts) for f in result.findings), indents)
    return FileResult(path, tuple(_with_file_lines(findings, notebook.text)), original=data)
