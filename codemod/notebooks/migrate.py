"""Jupyter notebooks: the code cells migrated as one module, the rest of the file untouched.

A notebook's cells share one namespace: an import in cell 1 governs its use in cell 5. So the
Python cells are joined in order into one module, with a marker comment before each, and
the Python engine runs once over it with one alias table. The result is split back at the
markers. The engine keeps comments in order (a deleted statement hands its comments to the next
one), so the markers come back in order; when they do not, the notebook fails with an error
rather than a guess. `import torch` and helper functions land after the leading imports, hence
in the cell that holds them.

A `%%writefile NAME` cell (how notebooks often write the training script they then launch) is
migrated as the file it writes, on its own: Python when NAME ends in `.py`, a requirements
file, Dockerfile or script when the dependency scanner reads files of that name.

Findings keep their line and column inside the cell and carry `cell` (the index in the
notebook's `cells` list, markdown and raw cells included) and `cell_id`.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import functools
import hashlib
import itertools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from neuron_migrate.analysis.statements import statements
from neuron_migrate.deps import LineEdit, fix_text_lines, is_dependency_file
from neuron_migrate.deps.launch_paths import HostPaths
from neuron_migrate.files import outside
from neuron_migrate.files.diff import split_lines
from neuron_migrate.notebooks.ipython_syntax import (MaskedCell, dedented, indented, leading_indent,
                                                     mask_cell, reference_names, restore_cell)
from neuron_migrate.engine import migrate_python
from neuron_migrate.engine.failsafe import never_raise
from neuron_migrate.engine_size import over_engine_limit
from neuron_migrate.model import FileResult, Finding, Kind
from neuron_migrate.notebooks.json_file import (Cell, Notebook, NotebookError, file_lines, read_notebook,
                                                write_sources)
from neuron_migrate.registry import Registry

MARKER = "# neuron-migrate-cell"
_LEADING_BLANKS = re.compile(r"\A(?:[ \t\f]*\r?\n)*")
_TRAILING_BLANKS = re.compile(r"(?:\r?\n[ \t\f]*)*\Z")



@dataclass(frozen=True)
class Part:
    """One Python cell inside the joined module."""

    cell: Cell
    masked: MaskedCell
    region: str
    """The cell's text as it stands in the module (masked, ending in a newline)."""
    first_line: int
    """The module line of the cell's line 1."""


WrittenFile = Callable[..., FileResult]
"""How the file a `%%writefile NAME` cell writes is migrated: as a file of that name, called
`(name, data, registry, code=...)`. The run hands in its own (`runner.migrate_data`), so
that notebooks, which the run dispatches to, do not import the run."""


def migrate_notebook(path: str, data: bytes, registry: Registry, written_file: WrittenFile,
                     code: bool = True) -> FileResult:
    """Migrate one `.ipynb` file's bytes. Never raises for bad input: problems become `error`.

    Without `code` (what `scan` does), only the install and shell lines and the dependency
    files `%%writefile` cells write are read."""
    return never_raise(path, data,
                       lambda: _migrate(path, data, registry, written_file, code),
                       (NotebookError,))


def _migrate(path: str, data: bytes, registry: Registry, written_file: WrittenFile,
             code_too: bool = True) -> FileResult:
    notebook = read_notebook(path, data)
    if notebook.language is not None and not notebook.language.lower().startswith(
            ("python", "ipython")):
        return FileResult(path, original=data,
                          skipped=f"a {notebook.language} notebook, not Python")
    numbers = itertools.count()
    cells, indents = python_cells(notebook)
    code = [(cell, mask_cell(cell.text, numbers)) for cell in cells]
    first_read = [masked for _, masked in code]
    imported = functools.cache(lambda: _imported_names(first_read))  # read if a cell needs them
    code = [(cell, _referencing(masked, imported)) for cell, masked in code]
    findings, launches = _shell_findings(path, code, registry)
    if launches:  # `!python train.py` lines now read `!torchrun ...` (NM816): cells read anew
        code = [(cell, _referencing(mask_cell(cell.text, numbers), imported))
                for cell in (launches.get(c.index, c) for c, _ in code)]
    new_texts: dict[int, str] = {}
    errors = [_written_file(path, cell, masked.written, registry, written_file, findings,
                            new_texts, code_too)
              for cell, masked in code if masked.written is not None
              and (code_too or is_dependency_file(Path(masked.written[0])))]
    if code_too:
        errors.append(_migrate_cells(path, data, code, registry, findings, new_texts))
    for cell in launches.values():
        new_texts.setdefault(cell.index, cell.text)
    error = next((e for e in errors if e is not None), None)
    findings = _with_file_lines(reindented(findings, indents), notebook.text)
    new_texts = {index: indented(text, indents[index]) if index in indents else text
                 for index, text in new_texts.items()}
    if error is not None or not new_texts:
        return FileResult(path, tuple(findings), original=data, error=error)
    return FileResult(path, tuple(findings), original=data,
                      new_source=write_sources(notebook, new_texts))


def python_cells(notebook: Notebook) -> tuple[list[Cell], dict[int, str]]:
    """The code cells a Python kernel runs, each as IPython runs it: without the indentation
    it takes off a cell pasted indented (which does not parse as it is). That indentation,
    by cell index, goes back on the cell's new text and into its findings' columns."""
    cells: list[Cell] = []
    indents: dict[int, str] = {}
    for cell in notebook.cells:
        if cell.cell_type != "code" or not cell.python:
            continue
        indent = leading_indent(cell.text)
        if indent:
            indents[cell.index] = indent
            cell = dataclasses.replace(cell, text=dedented(cell.text, indent))
        cells.append(cell)
    return cells, indents


def reindented(findings: Iterable[Finding], indents: dict[int, str]) -> list[Finding]:
    """Findings in the order of the notebook, their columns counted in the cells as written."""
    placed = [dataclasses.replace(f, column=f.column + len(indents[f.cell]))
              if f.cell in indents else f for f in findings]
    return sorted(placed, key=lambda f: (f.cell or 0, f.line, f.column, f.rule_id))


def _migrate_cells(path: str, data: bytes, code: list[tuple[Cell, MaskedCell]],
                   registry: Registry, findings: list[Finding],
                   new_texts: dict[int, str]) -> str | None:
    """The Python cells, joined into one module and migrated at once: their findings and new
    texts are added to the two collections; the error, if the module cannot be migrated."""
    python = [(cell, masked) for cell, masked in code if masked.python]
    if not python or not registry.prefilter("".join(cell.text for cell, _ in python).encode()):
        return None  # before hashing the notebook, outputs and all
    tag = hashlib.sha256(data).hexdigest()[:12]
    header = f"# -*- coding: utf-8 -*- neuron-migrate notebook {tag}\n"
    parts = _layout(python, header)
    module = header + "".join(f"{MARKER} {p.cell.index} {tag}\n{p.region}" for p in parts)
    refused = over_engine_limit(path, len(module.encode("utf-8")),
                                registry.options.max_engine_size)
    if refused is not None:
        return refused
    result = migrate_python(path, module.encode("utf-8"), registry)
    if result.error is not None:
        return _cell_error(path, result.error, parts)
    result = _settled(path, module.encode("utf-8"), result, registry, parts)
    findings += [_escape_review(_in_cell(f, parts), parts) for f in result.findings]
    if result.new_source is not None:
        new_texts.update(_new_cell_texts(path, result.new_source.decode("utf-8"), header, tag,
                                         parts))
    return None


_NOTE_MARK = b"neuron-migrate: NM"
_PLACED = re.compile(r" \(a note above line \d+ keeps it")
_LEFT = re.compile(r"left at line (\d+) says")


def _settled(path: str, module: bytes, result: FileResult, registry: Registry,
             parts: Sequence[Part]) -> FileResult:
    """The joined cells' result with the review notes `apply` leaves in a `.py` file
    (`neuron_migrate.gate.notes`): a note in the cell where the rewrite would hide a review
    item, and the notes already in the cells reported until acknowledged."""
    leave = result.new_source is not None and any(f.kind is Kind.REVIEW
                                                  for f in result.findings)
    if _NOTE_MARK not in module and not leave:
        return result
    from neuron_migrate.gate.notes import settle

    settled = settle(path, module, result, registry,
                     lambda new: migrate_python(path, new, registry), leave)
    # the notes' lines are the joined module's: a note found is told by its line in the
    # cell (as findings are), one about to be added by its cell
    def in_cell(found: re.Match[str]) -> str:
        return f"left at line {_locate(int(found.group(1)), parts)[1]} says"

    return dataclasses.replace(settled, findings=tuple(dataclasses.replace(
        f, message=_LEFT.sub(in_cell, _PLACED.sub(" (a note in this cell keeps it", f.message)))
        for f in settled.findings))


def _written_file(path: str, cell: Cell, written: tuple[str, int], registry: Registry,
                  migrate_data: WrittenFile, findings: list[Finding], new_texts: dict[int, str],
                  code_too: bool = True) -> str | None:
    """Migrate the file a `%%writefile` cell writes, as a file of its name; adds to the two
    collections as `_migrate_cells` does, and returns the error if it cannot be migrated."""
    name, first = written
    if not name.endswith(".py") and not is_dependency_file(Path(name)):
        return None
    lines = split_lines(cell.text)
    result = migrate_data(name, "".join(lines[first - 1:]).encode("utf-8"), registry,
                          code=code_too)
    shift = first - 1
    if result.error is not None:
        match = re.match(rf"{re.escape(name)}:(\d+):", result.error)
        line = int(match.group(1)) + shift if match else first
        detail = result.error[match.end():] if match else f" {result.error}"
        return f"{path}: cell {cell.index}, line {line} (in the file it writes, {name}):{detail}"
    findings += [dataclasses.replace(f, path=path, line=f.line + shift, cell=cell.index,
                                     cell_id=cell.cell_id) for f in result.findings]
    if result.new_source is not None:
        new_texts[cell.index] = "".join(lines[:first - 1]) + result.new_source.decode("utf-8")
    return None


def _with_file_lines(findings: list[Finding], text: str) -> list[Finding]:
    if not any(f.cell is not None for f in findings):
        return findings
    where = file_lines(text, {f.cell for f in findings if f.cell is not None})
    placed = []
    for finding in findings:
        lines = where.get(finding.cell) if finding.cell is not None else None
        if lines:
            line = lines[min(finding.line, len(lines)) - 1]
            finding = dataclasses.replace(finding, file_line=line)
        placed.append(finding)
    return placed


def _layout(code: Sequence[tuple[Cell, MaskedCell]], header: str) -> list[Part]:
    parts: list[Part] = []
    line = header.count("\n") + 1
    for cell, masked in code:
        region = masked.text if masked.text.endswith("\n") or not masked.text \
            else masked.text + "\n"
        parts.append(Part(cell, masked, region, line + 1))  # + 1: the marker line
        line += 1 + region.count("\n")
    return parts


def _in_cell(finding: Finding, parts: Sequence[Part]) -> Finding:
    """A finding of the joined module, placed in its cell."""
    part, line = _locate(finding.line, parts)
    return dataclasses.replace(finding, line=line, cell=part.cell.index,
                               cell_id=part.cell.cell_id)


def _escape_review(finding: Finding, parts: Sequence[Part]) -> Finding:
    """What the engine says about a placeholder is said of an IPython line it never rewrites:
    a review item, never an applied fix."""
    part = next(p for p in parts if p.cell.index == finding.cell)
    escape = next((e for e in part.masked.escapes if e.line == finding.line), None)
    if escape is None:
        return finding
    column = len(escape.lines[0]) - len(escape.lines[0].lstrip()) + 1  # not the placeholder's
    return dataclasses.replace(finding, column=column, kind=Kind.REVIEW, applied=False,
                               suggestion=None,
                               message="in an IPython line, which neuron-migrate does not "
                                       f"rewrite: {finding.message}")


def _referencing(masked: MaskedCell, imported: Callable[[], set[str]]) -> MaskedCell:
    """`reference_names` for a cell with a help or `%time` line: only those need the
    notebook's imported names, which take a parse of every cell."""
    if not any(escape.python for escape in masked.escapes):
        return masked
    return reference_names(masked, imported())


def _imported_names(cells: Iterable[MaskedCell]) -> set[str]:
    """Names any import statement of the notebook binds (cells that do not parse aside)."""
    names: set[str] = set()
    for masked in cells:
        if not masked.python or "import" not in masked.text:
            continue
        try:
            tree = ast.parse(masked.text)
        except (SyntaxError, ValueError):
            continue
        for node in statements(tree.body):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _locate(line: int, parts: Sequence[Part]) -> tuple[Part, int]:
    """The cell holding a line of the joined module, and the line inside it."""
    index = max(bisect.bisect_right([p.first_line for p in parts], line) - 1, 0)
    return parts[index], max(line - parts[index].first_line + 1, 1)


def _cell_error(path: str, error: str, parts: Sequence[Part]) -> str:
    """`path:LINE: ...` of the joined module, said of the cell and its line."""
    match = re.match(rf"{re.escape(path)}:(\d+):", error)
    if match is None:
        return error
    part, line = _locate(int(match.group(1)), parts)
    return f"{path}: cell {part.cell.index}, line {line}:{error[match.end():]}"


def _new_cell_texts(path: str, module: str, header: str, tag: str,
                    parts: Sequence[Part]) -> dict[int, str]:
    """Split the rewritten module at the markers; the cells whose source changed."""
    regions = _split(module, header, tag)
    if regions is None or [index for index, _ in regions] != [p.cell.index for p in parts]:
        raise NotebookError(f"{path}: the cell markers did not survive the rewrite; "
                            "notebook not written (please report this)")
    changed: dict[int, str] = {}
    for part, (_, region) in zip(parts, regions):
        if region == part.region:
            continue
        restored = restore_cell(region, part.masked.escapes)
        if restored is None:
            raise NotebookError(f"{path}: cell {part.cell.index}: an IPython line did not "
                                "survive the rewrite; notebook not written (please report this)")
        text = _same_edges(restored, part.cell.text)
        if text != part.cell.text:
            changed[part.cell.index] = text
    return changed


def _split(module: str, header: str, tag: str) -> list[tuple[int, str]] | None:
    """(cell index, text) between the markers; what the rewrite put before the first marker
    (an import) belongs to the first cell."""
    if not module.startswith(header):
        return None
    marker = re.compile(rf"[ \t]*{re.escape(MARKER)} (\d+) {tag}\r?\n?\Z")
    regions: list[tuple[int, list[str]]] = []
    before: list[str] = []
    for line in split_lines(module[len(header):]):
        found = marker.match(line)
        if found is not None:
            regions.append((int(found.group(1)), []))
        else:
            (regions[-1][1] if regions else before).append(line)
    if not regions:
        return None
    regions[0] = (regions[0][0], before + regions[0][1])
    return [(index, "".join(lines)) for index, lines in regions]


def _same_edges(new: str, original: str) -> str:
    """The cell's own leading and trailing blank lines and final newline, whatever blank
    lines the rewrite left at the cell's edges (two before a helper, none after an import)."""
    core = new[_LEADING_BLANKS.match(new).end():]  # type: ignore[union-attr]
    core = core[:_TRAILING_BLANKS.search(core).start()]  # type: ignore[union-attr]
    if not core.strip():
        return ""
    lead = _LEADING_BLANKS.match(original).group()  # type: ignore[union-attr]
    trail = _TRAILING_BLANKS.search(original).group()  # type: ignore[union-attr]
    return lead + core + trail


def _shell_findings(path: str, code: Sequence[tuple[Cell, MaskedCell]],
                    registry: Registry) -> tuple[list[Finding], dict[int, Cell]]:
    """The dependency and environment checks over `!pip install`, `%env` and `%%bash` lines;
    and the cells whose launch lines were rewritten to torchrun (NM816), by index."""
    findings: list[Finding] = []
    launches: dict[int, Cell] = {}
    if not any(masked.shell_lines for _, masked in code):
        return findings, launches  # and no paths to resolve
    paths = HostPaths(Path(path), _written_files(path, code), widen=True)
    for cell, masked in code:
        if masked.shell_lines:
            found, edits = fix_text_lines(path, list(masked.shell_lines), registry, paths)
            findings += [dataclasses.replace(f, cell=cell.index, cell_id=cell.cell_id)
                         for f in found]
            if edits:
                launches[cell.index] = dataclasses.replace(cell, text=_edited(cell.text, edits))
    return findings, launches


def _edited(text: str, edits: Sequence[LineEdit]) -> str:
    lines = split_lines(text)
    for edit in sorted(edits, key=lambda e: (e.line, e.start), reverse=True):
        line = lines[edit.line - 1]
        lines[edit.line - 1] = line[:edit.start] + edit.new + line[edit.end:]
    return "".join(lines)


def _written_files(path: str, code: Sequence[tuple[Cell, MaskedCell]]) -> dict[Path, bytes]:
    """What the `%%writefile` cells write, by path: the script a `!python` line launches is
    often one of them, and the notebook's own text of it is the one that will run."""
    folder = outside.resolved(Path(path)).parent
    written: dict[Path, bytes] = {}
    for cell, masked in code:
        if masked.written is not None:
            name, first = masked.written
            body = "".join(split_lines(cell.text)[first - 1:])
            written[Path(os.path.normpath(folder / name))] = body.encode("utf-8")
    return written
