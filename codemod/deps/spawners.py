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
from dataclasses import dataclass
from pathlib import Path

from neuron_migrate.files import outside
from neuron_migrate.files.bounded import SOURCE_LIMIT, read_bounded

SPAWN = "torch_xla.distributed.xla_multiprocessing.spawn"
LAUNCH = frozenset({"torch_xla.launch", "torch_xla.torch_xla.launch"})
TOKENS = (b"spawn", b"launch")


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
    held: str | None = None
    """Why the Python migration (NM220) leaves the call for review rather than making the
    script a torchrun entry; None when it rewrites it. The launch line follows the script."""


def spawner_of(data: bytes) -> Spawner | None:
    """The spawn call of a script's source, or None when it starts no workers itself."""
    if b"torch_xla" not in data or not any(token in data for token in TOKENS):
        return None
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return None  # the Python migration reports it; a guess here would be worse
    aliases = _aliases(tree)
    entry = _entry_statements(tree)
    found: list[Spawner] = []
    for statement in tree.body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                name = _qualified(node.func, aliases)
                if name == SPAWN or name in LAUNCH:
                    found.append(_spawner(node, name == SPAWN, statement in entry, tree))
    if not found:
        return None
    found.sort(key=lambda s: s.line)
    first = found[0]
    held = next((s.held for s in found if s.held is not None), None)
    if len({s.count for s in found}) > 1:
        return Spawner(None, f"its {len(found)} spawn calls start different numbers of "
                             "processes", first.line, first.call, held)
    return Spawner(first.count, first.why, first.line, first.call, held)


@functools.lru_cache(maxsize=4096)
def _spawner_at(path: str, _stamp: tuple[int, int]) -> Spawner | None:
    try:  # what the runner migrates at most; never a FIFO or a link to /dev/zero
        return spawner_of(read_bounded(path, SOURCE_LIMIT))
    except OSError:
        return None


def spawner_at(path: Path) -> Spawner | None:
    """`spawner_of` a file on disk, cached by path and modification stamp."""
    try:
        stat = outside.stamp(path)
    except OSError:
        return None
    if stat.st_size > SOURCE_LIMIT:
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


SPAWN_PARAMETERS = ("fn", "args", "nprocs", "join", "daemon", "start_method")
LAUNCH_PARAMETERS = ("fn", "args", "start_method", "debug_single_process")


def _entry_statements(tree: ast.Module) -> set[ast.stmt]:
    """The module's statements that run when the script starts: its top-level code and the
    functions that code calls by name, at any depth (a spawn elsewhere, in a test method or a
    library function, belongs to a caller that goes on after the workers)."""
    functions = {s.name: s for s in tree.body
                 if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    todo: list[ast.stmt] = [s for s in tree.body if not isinstance(
        s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    entry = set(todo)
    while todo:
        for node in ast.walk(todo.pop()):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in functions and functions[node.func.id] not in entry:
                entry.add(functions[node.func.id])
                todo.append(functions[node.func.id])
    return entry


def _spawner(call: ast.Call, spawn: bool, entry: bool, tree: ast.Module) -> Spawner:
    text = ast.unparse(call)
    shown = text if len(text) <= 80 else text[:77] + "..."
    count, why = _count(call, spawn)
    return Spawner(count, why, call.lineno, shown, _held(call, spawn, entry, tree))


def _held(call: ast.Call, spawn: bool, entry: bool, tree: ast.Module) -> str | None:
    """Why NM220 reviews this call instead of rewriting it (the same conditions)."""
    parameters = SPAWN_PARAMETERS if spawn else LAUNCH_PARAMETERS
    if any(isinstance(a, ast.Starred) for a in call.args) or len(call.args) > len(parameters) \
            or any(k.arg not in parameters for k in call.keywords):
        return "its arguments are unpacked or unknown"
    if not entry:
        return "it is not in the script's entry (top-level code or a function it calls)"
    join = _argument(call, 3, "join") if spawn else None
    if join is not None and not (isinstance(join, ast.Constant) and join.value is True):
        return "join=False"
    if not any(isinstance(n, ast.Expr) and n.value is call for n in ast.walk(tree)):
        return "its result is used"
    return None


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
