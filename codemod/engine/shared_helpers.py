"""Helpers kept in one module of the user's repository (`helpers-module`): each migrated file
imports the helpers it calls from there instead of defining a copy of each.

The import must work wherever the file runs from. A file runs with the folder above its top
package on the import path (its own folder when it is in no package: a script), so the module
is importable from the file when it lies in that folder or in a package below it; any other
place would need the repository installed or PYTHONPATH set, which the migration cannot see,
so such a file is refused with a message rather than given an import that may fail.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import libcst as cst

from neuron_migrate.engine.placement import imported_modules
from neuron_migrate.files import outside

_LINE = 99


def import_name(file: str, module: str) -> str | None:
    """The dotted name `file` imports the module at `module` (an absolute path) by, or None
    when the module is not importable from the file's location."""
    outside.unrepeatable()  # the package folders above the file
    root = Path(file).resolve().parent
    while (root / "__init__.py").is_file():
        root = root.parent
    target = Path(module)
    try:
        parts = target.with_suffix("").relative_to(root).parts
    except ValueError:
        return None
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    for depth in range(1, len(parts)):  # every folder on the way is a package
        if not (root.joinpath(*parts[:depth]) / "__init__.py").is_file():
            return None
    return ".".join(parts)


def refusal(file: str, module: str) -> str:
    """Why `file` cannot import its helpers from `module`."""
    outside.unrepeatable()  # the package folders above the file
    root = Path(file).resolve().parent
    while (root / "__init__.py").is_file():
        root = root.parent
    return (f"{file}: not rewritten: it would import its helpers from {_shown(Path(module))} "
            f"(helpers-module), which it cannot import from where it is: put that module in "
            f"{_shown(root)}/ or in a package below it (folders with __init__.py), or exclude "
            "this file")


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd())) or "."
    except ValueError:
        return str(path)


def used_helpers(body: Sequence[cst.BaseStatement], helpers: Sequence[str]) -> list[str]:
    """The helpers the new code calls itself (not only through other helpers), in order."""
    text = cst.Module(body=list(body)).code
    return [name for name in helpers if re.search(rf"(?<![\w.]){name}\b", text)]


def add_helpers_import(body: Sequence[cst.BaseStatement], module: str, names: Sequence[str],
                       newline: str = "\n") -> list[cst.BaseStatement]:
    """`from module import names` after the file's last top-level import of its header (a
    first-party import, the section isort puts last), a blank line apart from other sections."""
    if not names:
        return list(body)
    text = f"from {module} import {', '.join(sorted(names))}"
    if len(text) > _LINE:
        inner = "".join(f"    {name},{newline}" for name in sorted(names))
        text = f"from {module} import ({newline}{inner})"
    line = cst.parse_statement(text + newline)
    statements = list(body)
    last = None
    for index, statement in enumerate(statements):
        if imported_modules(statement):
            last = index
        elif not _header_line(statement):
            break
    if last is None:
        index = next((i for i, s in enumerate(statements) if not _header_line(s)),
                     len(statements))
        following = statements[index] if index < len(statements) else None
        lines = list(following.leading_lines) if following is not None else []
        if following is not None:
            statements[index] = following.with_changes(leading_lines=[cst.EmptyLine()] * 2)
        statements.insert(index, line.with_changes(leading_lines=lines))
        return statements
    previous = imported_modules(statements[last]) or [""]
    if previous[0].split(".")[0] != module.split(".")[0]:
        line = line.with_changes(leading_lines=[cst.EmptyLine()])
    statements.insert(last + 1, line)
    return statements


def _header_line(statement: cst.BaseStatement) -> bool:
    """A docstring or a `from __future__` line: what may come before the imports."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    small = statement.body[0]
    return isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString,
                                                                    cst.ConcatenatedString))
