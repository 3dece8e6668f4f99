"""Which Python scripts start their own workers (`xmp.spawn`, `torch_xla.launch`), and how many.

A launch line (`python train.py` in a shell script, a Dockerfile, a Kubernetes manifest)
needs to know this to become `torchrun --nproc-per-node=N train.py`: once the script is
migrated its entry runs once per process, so whoever starts it must start N of them.

The scripts are read when a launch line names them, not up front: a tree with no launch line
costs nothing, and one with launch lines costs a stat and a substring search per script named.
Only a script holding both tokens below is parsed (with the stdlib `ast`: no rewriting here).
"""

from __future__ import annotations

import ast
import functools
import os
from dataclasses import dataclass
from pathlib import Path

SPAWN = "torch_xla.distributed.xla_multiprocessing.spawn"
LAUNCH = frozenset({"torch_xla.launch", "torch_xla.torch_xla.launch"})
TOKENS = (b"spawn", b"launch")
MAX_BYTES = 5 * 1024 * 1024  # what the runner migrates at most


@dataclass(frozen=True)
class Spawner:
    """How a script starts its workers."""

    count: int | None
    """Processes per host, when the source says it with a literal; None: unknown."""
    why: str
    """What the count rests on, for messages (`nprocs=8`, `nprocs was omitted`...)."""
    line: int
    call: str
    """The call as written (`xmp.spawn(_mp_fn, args=(flags,), nprocs=8)`), shortened."""
    plain: bool = True
    """False when the call passes `*args`/`**kwargs`: its rewrite is not mechanical."""


def spawner_of(data: bytes) -> Spawner | None:
    """The spawn call of a script's source, or None when it starts no workers itself."""
    if b"torch_xla" not in data or not any(token in data for token in TOKENS):
        return None
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return None  # the Python migration reports it; a guess here would be worse
    aliases = _aliases(tree)
    calls = [(node, name) for node in ast.walk(tree) if isinstance(node, ast.Call)
             for name in [_qualified(node.func, aliases)] if name == SPAWN or name in LAUNCH]
    if not calls:
        return None
    found = sorted((_spawner(node, name == SPAWN) for node, name in calls),
                   key=lambda s: s.line)
    first = found[0]
    if len({s.count for s in found}) > 1:
        return Spawner(None, f"its {len(found)} spawn calls start different numbers of "
                             "processes", first.line, first.call, first.plain)
    return Spawner(first.count, first.why, first.line, first.call,
                   all(s.plain for s in found))


@functools.lru_cache(maxsize=4096)
def _spawner_at(path: str, _stamp: tuple[int, int]) -> Spawner | None:
    try:
        with open(path, "rb") as handle:
            return spawner_of(handle.read())
    except OSError:
        return None


def spawner_at(path: Path) -> Spawner | None:
    """`spawner_of` a file on disk, cached by path and modification stamp."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    if stat.st_size > MAX_BYTES:
        return None
    return _spawner_at(str(path), (stat.st_mtime_ns, stat.st_size))


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> qualified name, for every import in the file (guarded and function-local
    ones too: a script imports xmp where it spawns as often as at the top)."""
    table: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    table[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    table[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                table[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return table


def _qualified(func: ast.expr, aliases: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id not in aliases:
        return None
    return ".".join([aliases[func.id], *reversed(parts)])


def _argument(call: ast.Call, position: int, name: str) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    return positional[position] if len(positional) > position else None


def _spawner(call: ast.Call, spawn: bool) -> Spawner:
    plain = not any(isinstance(a, ast.Starred) for a in call.args) and \
        all(k.arg is not None for k in call.keywords)
    text = ast.unparse(call)
    shown = text if len(text) <= 80 else text[:77] + "..."
    count, why = _count(call, spawn)
    return Spawner(count, why, call.lineno, shown, plain)


def _count(call: ast.Call, spawn: bool) -> tuple[int | None, str]:
    if not spawn:  # torch_xla.launch(fn, args, start_method, debug_single_process)
        single = _argument(call, 3, "debug_single_process")
        if isinstance(single, ast.Constant) and single.value is True:
            return 1, "debug_single_process=True"
        return None, "torch_xla.launch started one process per NeuronCore"
    nprocs = _argument(call, 2, "nprocs")
    if nprocs is None or (isinstance(nprocs, ast.Constant) and nprocs.value is None):
        return None, "nprocs was omitted, so PJRT started one process per NeuronCore"
    if isinstance(nprocs, ast.Constant) and type(nprocs.value) is int and nprocs.value > 0:
        return nprocs.value, f"nprocs={nprocs.value}"
    return None, f"nprocs comes from `{ast.unparse(nprocs)}`"
