"""The code `dataclasses` compiles for each class, kept from one run to the next.

`@dataclass` writes a class's `__init__`, `__repr__`, `__eq__`, `__hash__`, ... as source text
and compiles that text (`exec`) while the class is created. LibCST's node classes are some 190
dataclasses, and compiling their methods is about half of what importing LibCST costs: a
tenth of a second or more that every run migrating a file paid again. The text depends only
on the class's fields, and the code compiled from a text is the same in every run, so the
code is kept, as Python keeps the bytecode of modules: in this package's `__pycache__`, keyed
by the text itself, in a file named for the interpreter and read only when its bytecode
version matches. A text not in the file is compiled as before, and added to the file when the
process ends (written through a temporary file and a rename, so a concurrent run reads the
old file or the new one, never half of one; not written when Python is told not to write
bytecode, or where the package's folder cannot be written).

`install` gives the `dataclasses` module an `exec` of its own, which its code finds before
the builtin: the only change is where the compiled code comes from. The code is compiled as
`exec` compiles a text (file name `<string>`, no `from __future__` flags of the caller).
"""

from __future__ import annotations

import atexit
import builtins
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any

LIMIT = 5000
"""Texts kept at most per file; past it, a file keeps only those the last run used."""
FOLDER = Path(__file__).with_name("__pycache__")


def install() -> None:
    """Let `dataclasses` take compiled code from the files (once per process; a no-op where
    the interpreter has no bytecode tag)."""
    import dataclasses

    if isinstance(getattr(dataclasses, "exec", None), _Store):
        return
    tag = sys.implementation.cache_tag
    if tag is None:
        return
    store = _Store(FOLDER, f"{tag}.opt{sys.flags.optimize}")
    dataclasses.exec = store  # type: ignore[attr-defined]
    atexit.register(store.save)


class _Store:
    """The `exec` that `dataclasses` calls: compiled code by source text. The texts are kept
    in one file per top-level package that defines the classes (`neuron_migrate`, `libcst`,
    ...), each read when the first class of its package is made: a run that never imports
    LibCST does not read LibCST's."""

    def __init__(self, folder: Path, tag: str) -> None:
        self.folder, self.tag = folder, tag
        self.kept: dict[str, dict[str, CodeType]] = {}  # by package
        self.new: dict[str, dict[str, CodeType]] = {}
        self.used: dict[str, set[str]] = {}

    def __call__(self, source: Any, globals: Any = None, locals: Any = None, /,
                 **options: Any) -> None:
        if type(source) is not str or type(globals) is not dict or options:
            # not the call `dataclasses` makes: run it as the builtin would in its caller
            frame = sys._getframe(1)
            if globals is None:
                globals, locals = frame.f_globals, frame.f_locals if locals is None else locals
            if type(source) is str:
                source = compile(source, "<string>", "exec", dont_inherit=True)
            builtins.exec(source, globals, locals, **options)
            return
        package = str(globals.get("__name__", "")).partition(".")[0]
        builtins.exec(self.code(source, package), globals, locals)

    def code(self, source: str, package: str = "") -> CodeType:
        kept = self.kept.get(package)
        if kept is None:
            kept = self.kept[package] = self._read(package)
            self.new[package], self.used[package] = {}, set()
        self.used[package].add(source)
        code = kept.get(source) or self.new[package].get(source)
        if code is None:
            code = self.new[package][source] = compile(source, "<string>", "exec",
                                                       dont_inherit=True)
        return code

    def path(self, package: str) -> Path:
        name = "".join(c if c.isalnum() or c == "_" else "-" for c in package) or "-"
        return self.folder / f"dataclass-code.{name}.{self.tag}.marshal"

    def _read(self, package: str) -> dict[str, CodeType]:
        try:
            data = self.path(package).read_bytes()
        except OSError:
            return {}
        magic = _magic()
        if not data.startswith(magic):
            return {}
        try:
            kept = marshal.loads(data[len(magic):])
        except (EOFError, ValueError, TypeError):
            return {}
        return kept if isinstance(kept, dict) else {}

    def save(self) -> None:
        """Add the texts compiled in this process to the files (at the end of the process)."""
        if sys.dont_write_bytecode:
            return
        for package, new in self.new.items():
            if new:
                self._write(package, new)
        self.new = {package: {} for package in self.new}

    def _write(self, package: str, new: dict[str, CodeType]) -> None:
        kept = {**self.kept.get(package, {}), **new}
        if len(kept) > LIMIT:
            used = self.used.get(package, set())
            kept = {text: code for text, code in kept.items() if text in used}
        path = self.path(package)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(exist_ok=True)
            temporary.write_bytes(_magic() + marshal.dumps(kept))
            os.replace(temporary, path)
        except OSError:
            try:
                temporary.unlink()
            except OSError:
                pass


def _magic() -> bytes:
    """The interpreter's bytecode version (what a `.pyc` file starts with)."""
    from importlib.util import MAGIC_NUMBER

    return MAGIC_NUMBER
