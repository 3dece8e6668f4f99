"""Where code the migration adds goes in a module, so the diff reads as a careful engineer's.

Imports go into the file's own import block, in the section isort would give them (standard
library, then third party), in alphabetical order within it. Helper definitions go after the
whole import block, including imports that follow `sys.path` set-up or a configuration
block, but before the first top-level statement that uses one of them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

import libcst as cst

from neuron_migrate.notebooks.ipython_syntax import PLACEHOLDER as IPYTHON_PLACEHOLDER

# `sys.stdlib_module_names` exists from Python 3.10, the oldest this project supports.
_STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}


def is_docstring(statement: cst.BaseStatement) -> bool:
    return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)
            and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def imported_modules(statement: cst.BaseStatement) -> list[str] | None:
    """The modules a line of imports names (`import a.b, c` -> ["a.b", "c"]; `from x import
    y` -> ["x"]), or None when the line holds anything else. Relative imports name "". A
    notebook's IPython line, which stands in the joined cells as an import of a placeholder
    module, is not an import."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    modules: list[str] = []
    for small in statement.body:
        if isinstance(small, cst.Import):
            names = [_dotted(alias.name) for alias in small.names]
            if any(name.startswith(IPYTHON_PLACEHOLDER) for name in names):
                return None
            modules += names
        elif isinstance(small, cst.ImportFrom):
            relative = bool(small.relative)
            modules.append("" if relative or small.module is None else _dotted(small.module))
        else:
            return None
    return modules


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _only_imports(statement: cst.BaseStatement) -> bool:
    """A top-level `try:`/`if` block whose branches hold imports (and `pass`) only, as in
    `try: import x  except ImportError: x = None`: part of the import block."""
    if isinstance(statement, (cst.Try, cst.If)):
        return any(imported_modules(s) is not None
                   for s in _blocks(statement)) and all(
            imported_modules(s) is not None or _trivial(s) for s in _blocks(statement))
    return False


def _blocks(statement: cst.CSTNode) -> Iterable[cst.BaseStatement]:
    for child in statement.children:
        if isinstance(child, cst.BaseSuite):
            yield from (s for s in child.body if isinstance(s, cst.BaseStatement))
        elif isinstance(child, (cst.ExceptHandler, cst.Else, cst.Finally, cst.If)):
            yield from _blocks(child)


def _trivial(statement: cst.BaseStatement) -> bool:
    """`pass`, or a name set to a constant (`x = None` when an optional import fails)."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    return all(isinstance(s, cst.Pass) or (isinstance(s, cst.Assign) and isinstance(
        s.value, (cst.Name, cst.SimpleString, cst.Integer))) for s in statement.body)


def _is_import(statement: cst.BaseStatement) -> bool:
    return imported_modules(statement) is not None or _only_imports(statement)


def _header(statements: Sequence[cst.BaseStatement]) -> int:
    """How many leading statements form the module's header: its docstring, imports and the
    plain statements among them (`sys.path.insert(...)`, constants), up to the first
    definition or block that is not imports only."""
    index = 0
    while index < len(statements):
        statement = statements[index]
        if not (isinstance(statement, cst.SimpleStatementLine) or _only_imports(statement)):
            break
        index += 1
    return index


def _names(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class Names(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.add(name.value)

    node.visit(Names())
    return found


def helper_index(statements: Sequence[cst.BaseStatement], names: Iterable[str]) -> int:
    """Where helper definitions go: after the last import of the header, but before the
    first top-level statement that names one of them."""
    header = _header(statements)
    end = 0
    for index in range(header):
        if _is_import(statements[index]):
            end = index + 1
    if end == 0:
        end = _start(statements)
    wanted = set(names)
    for index in range(end):
        if not _is_import(statements[index]) and _names(statements[index]) & wanted:
            return index
    return end


def _start(statements: Sequence[cst.BaseStatement]) -> int:
    """Where a module without imports takes them: after its docstring and after a notebook's
    leading IPython lines (`!pip install ...` runs before anything is imported)."""
    index = 1 if statements and is_docstring(statements[0]) else 0
    while index < len(statements) and _ipython(statements[index]):
        index += 1
    return index


def _ipython(statement: cst.BaseStatement) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    return any(isinstance(small, cst.Import) and any(
        _dotted(alias.name).startswith(IPYTHON_PLACEHOLDER) for alias in small.names)
        for small in statement.body)


def _section(module: str) -> int:
    """isort's sections for plain imports: 0 future, 1 standard library, 2 everything else
    (third party and first party, which a codemod cannot tell apart; relative imports 3)."""
    if module == "__future__":
        return 0
    if module == "":
        return 3
    return 1 if module.split(".")[0] in _STDLIB else 2


def import_index(statements: Sequence[cst.BaseStatement], module: str) -> int:
    """Where `import module` goes: where isort would put it among the header's import lines,
    unless a top-level statement before that place already uses the name it binds (a
    constant computed between imports, an added helper); then just before that statement."""
    index = _sorted_index(statements, module)
    root = module.split(".")[0]
    for position in range(index):
        statement = statements[position]
        if imported_modules(statement) is None and root in _names(statement):
            return position
    return index


def _sorted_index(statements: Sequence[cst.BaseStatement], module: str) -> int:
    """Where isort puts `import module` among the header's top-level import lines: in its
    section, plain imports first, in alphabetical order, then the from-imports; a new section
    after the sections that sort before it. A line under a comment of its own (a section
    heading) is not displaced from it."""
    header = _header(statements)
    imports = [(index, mods) for index in range(header)
               if (mods := imported_modules(statements[index]))]
    if not imports:
        return _start(statements)
    section = _section(module)
    key = module.lower()
    same = [(index, mods) for index, mods in imports if _section(mods[0]) == section]
    for position, (index, mods) in enumerate(same):
        line = statements[index]
        from_import = isinstance(line, cst.SimpleStatementLine) and \
            isinstance(line.body[0], cst.ImportFrom)
        if from_import or mods[0].lower() > key:
            headed = any(e.comment is not None for e in line.leading_lines)
            return index + 1 if headed and position == 0 else index
    if same:
        return same[-1][0] + 1
    before = [index for index, mods in imports if _section(mods[0]) < section]
    if before:
        return before[-1] + 1
    return next(index for index, mods in imports if _section(mods[0]) > section)


def same_section(statement: cst.BaseStatement, other: cst.BaseStatement) -> bool:
    """Whether two lines are imports of the same isort section."""
    ours, theirs = imported_modules(statement), imported_modules(other)
    return bool(ours) and bool(theirs) and _section(ours[0]) == _section(theirs[0])
