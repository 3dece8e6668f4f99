"""The regular expressions modules compile at import, kept from one run to the next.

`re.compile` parses a pattern and compiles it to the engine's code in Python; the engine
itself only takes that code. The modules a run imports (packaging's version and requirement
grammars, PyYAML's reader, the rules' own searches) compile a few hundred patterns at import
time, about a sixth of what loading the engine and the rules costs, and the code of a
pattern depends only on its text, its flags and the interpreter. So that code is kept
(`neuron_migrate.kept_code.store`, one file per interpreter, also keyed by the engine's
version), and a later process hands it to the engine directly.

Only patterns compiled while a module is being imported are kept: a pattern built from a
user's file names at run time would only grow the file. A pattern compiled with
`re.DEBUG`, or given as an already parsed pattern, is compiled as before. What the stdlib
compiles is not changed, only observed: its last step, the call into the engine, goes through
`_Compile.record`, which notes the arguments. A pattern taken from the file is equal (`==`:
same text, flags and code) to the one `re` would compile. The one difference: warnings the
parser gives for a pattern (a possible nested set) are given by the run that compiles it,
not by the later runs that take its code from the file.
"""

from __future__ import annotations

import atexit
import importlib
import re
import sys
import types
from collections.abc import Callable
from typing import Any

import _sre

from neuron_migrate.kept_code.store import FOLDER, KeptFile

_SIGNATURE = ("($module, /, pattern, flags, code, groups, groupindex,\n"
              "        indexgroup)")
"""The engine's entry point as Python 3.10 to 3.13 define it; another one is left alone."""
_IMPORTING = "<frozen importlib._bootstrap>"


def install() -> None:
    """Let `re` take compiled patterns from the file (once per process; a no-op where the
    interpreter has no bytecode tag or another regular expression engine)."""
    compiler: Any = getattr(re, "_compiler", None) or importlib.import_module("sre_compile")
    tag = sys.implementation.cache_tag
    if isinstance(compiler.compile, _Compile) or tag is None or \
            getattr(_sre.compile, "__text_signature__", None) != _SIGNATURE:
        return
    kept = KeptFile(FOLDER / f"regex-code.{tag}.marshal", salt())
    hook = _Compile(compiler.compile, kept)
    engine = types.ModuleType(_sre.__name__, _sre.__doc__)
    engine.__dict__.update(_sre.__dict__)
    engine.compile = hook.record  # type: ignore[attr-defined]
    compiler._sre = engine
    compiler.compile = hook
    atexit.register(kept.save)


def salt() -> str:
    """The engine's version, which its code depends on beside the interpreter's."""
    return f"sre {_sre.MAGIC} {_sre.CODESIZE}"


class _Compile:
    """`re`'s compile step (text -> pattern), with the code of the patterns it has kept."""

    def __init__(self, original: Callable[..., re.Pattern[Any]], kept: KeptFile) -> None:
        self.original = original
        self.kept = kept
        self.recorded: dict[int, tuple[Any, ...]] = {}  # by id of a pattern just made

    def __call__(self, pattern: Any, flags: int = 0) -> re.Pattern[Any]:
        if type(pattern) not in (str, bytes) or flags & re.DEBUG:
            compiled = self.original(pattern, flags)
            self.recorded.pop(id(compiled), None)
            return compiled
        key = (pattern, int(flags))
        found = self.kept.get(key)
        if found is not None:
            return _sre.compile(pattern, *found)
        compiled = self.original(pattern, flags)
        arguments = self.recorded.pop(id(compiled), None)
        if arguments is not None and _importing():
            self.kept.add(key, arguments)
        return compiled

    def record(self, pattern: Any, flags: int, code: list[int], groups: int,
               groupindex: dict[str, int], indexgroup: tuple[str | None, ...]
               ) -> re.Pattern[Any]:
        """The engine's entry point, noting what it was given (as plain values: the code
        holds named int constants, which `marshal` does not write)."""
        compiled = _sre.compile(pattern, flags, code, groups, groupindex, indexgroup)
        self.recorded[id(compiled)] = (int(flags), [int(op) for op in code], groups,
                                       dict(groupindex), tuple(indexgroup))
        return compiled


def _importing() -> bool:
    """Whether a module is being imported (an import machinery frame is on the stack)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == _IMPORTING:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False
