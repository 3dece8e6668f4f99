"""The code `dataclasses` compiles for each class, kept from one run to the next.

`@dataclass` writes a class's `__init__`, `__repr__`, `__eq__`, `__hash__`, ... as source text
and compiles that text (`exec`) while the class is created. LibCST's node classes are some 190
dataclasses, and compiling their methods is about half of what importing LibCST costs: a
tenth of a second or more that every run migrating a file paid again. The text depends only
on the class's fields, and the code compiled from a text is the same in every run, so the
code is kept (`neuron_migrate.kept_code.store`), keyed by the text itself, in one file per
top-level package that defines the classes.

`install` gives the `dataclasses` module an `exec` of its own, which its code finds before
the builtin: the only change is where the compiled code comes from. The code is compiled as
`exec` compiles a text (file name `<string>`, no `from __future__` flags of the caller).
"""

from __future__ import annotations

import atexit
import builtins
import sys
from pathlib import Path
from types import CodeType
from typing import Any

from neuron_migrate.kept_code.store import FOLDER, KeptFile


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
        self.files: dict[str, KeptFile] = {}  # by package

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
        kept = self.files.get(package)
        if kept is None:
            kept = self.files[package] = KeptFile(self.path(package))
        code = kept.get(source)
        if code is None:
            code = compile(source, "<string>", "exec", dont_inherit=True)
            kept.add(source, code)
        return code

    def path(self, package: str) -> Path:
        name = "".join(c if c.isalnum() or c == "_" else "-" for c in package) or "-"
        return self.folder / f"dataclass-code.{name}.{self.tag}.marshal"

    def save(self) -> None:
        """Add the texts compiled in this process to the files (at the end of the process)."""
        for kept in self.files.values():
            kept.save()
