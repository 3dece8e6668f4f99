"""Whether code compiles, in time linear in its length.

CPython's compiler merges equal constants through a table in which code objects that differ
only in their line numbers collide: a module of thousands of identical functions (a
generated file, or a hostile one) compiles in time that grows with their square (20,000
copies of a two-line function took 14 s, 136,000 would take ten minutes). Such a module is
compiled a slice of its top-level statements at a time, from one parse; its scopes are
checked once over the whole module by the symbol table, so every error a whole compile
finds is still found (a `from __future__` import out of place is checked by hand).
"""

from __future__ import annotations

import __future__
import ast
import symtable
import warnings

SLICE = 500
"""Top-level statements compiled at once: a slice this size compiles in milliseconds."""


def compile_check(source: bytes, path: str) -> None:
    """Raise the SyntaxError `compile(source, path, "exec")` raises, if any. Warnings are
    not shown: only whether the code compiles counts here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if source.count(b"\ndef ") + source.count(b"\nclass ") < SLICE:
            compile(source, path, "exec", dont_inherit=True)
            return
        tree = ast.parse(source, path)
        symtable.symtable(source, path, "exec")  # scopes across the whole module
        body = tree.body
        flags = _future_flags(body)
        for start in range(0, len(body), SLICE):
            module = ast.Module(body=body[start:start + SLICE], type_ignores=[])
            compile(module, path, "exec", flags=flags if start else 0, dont_inherit=True)


def _future_flags(body: list[ast.stmt]) -> int:
    """The compiler flags of the module's `from __future__` imports; a SyntaxError, as the
    compiler raises it, for one after the module's first statements."""
    flags = 0
    leading = True
    for index, statement in enumerate(body):
        future = isinstance(statement, ast.ImportFrom) and statement.module == "__future__"
        docstring = index == 0 and isinstance(statement, ast.Expr) and \
            isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str)
        if future and not leading:
            raise SyntaxError("from __future__ imports must occur at the beginning of the file",
                              (None, statement.lineno, statement.col_offset + 1, None))
        if future:
            for alias in statement.names:  # type: ignore[attr-defined]
                feature = getattr(__future__, alias.name, None)
                flags |= getattr(feature, "compiler_flag", 0)
        elif not docstring:
            leading = False
    return flags
