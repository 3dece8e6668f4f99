"""Whether anything in a script's repository could start it as one of several processes.

The Python migration can drop the distributed machinery of a call such as `xm.save` only in a
script that provably runs as one process. A script says nothing about how it is started:
`torchrun --nproc-per-node=2 mnist.py` in a shell script, a README, a Dockerfile or a
SageMaker launcher makes it one of several. So the repository is read from the roots a launch
line would be resolved from (`launch_paths.roots_of`: the script's folder, the git work tree,
the folder the tool runs in), and the answer is "maybe several" whenever a file there holds
any word of a multi-process launcher and mentions the script's file name anywhere (a
line-by-line parse would miss `SCRIPT=mnist.py` read three lines later) in a way that may
mean this script, or imports it as a module (the importer may run in several processes).

Reading a tree is done once per root and process, and only when a script otherwise qualifies
(rare: most scripts that call `xm.save` also use ranks or collectives). A tree too large to
read, or unreadable, answers "maybe several".
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from neuron_migrate.deps.launch_paths import roots_of
from neuron_migrate.deps.launches import HOST_LAUNCHERS, TORCHRUN_MODULES, XLA_DIST
from neuron_migrate.files import outside
from neuron_migrate.files.tree_walk import CACHE_TAG, MAX_FILES, SKIPPED_FOLDERS, tree_digest

LAUNCHER_WORDS: tuple[bytes, ...] = tuple(w.encode() for w in (
    "torchrun", *TORCHRUN_MODULES, *HOST_LAUNCHERS, XLA_DIST, "xla_dist", "nproc",
    "neuron_parallel_compile", "accelerate", "deepspeed", "horovodrun", "torch_distributed",
    "distribution", "instance_count", "WORLD_SIZE", "world_size", "spawn", "sbatch", "slurm",
    "kubectl", "PyTorchJob", "MPIJob", "launch"))
"""Words of any command or configuration that may start a script several times. A file that
holds one of them and names the script counts as starting it so."""

MAX_FILE_BYTES = 5 * 1024 * 1024
MAX_TOTAL_BYTES = 200 * 1024 * 1024

_IMPORT_LINE = re.compile(
    rb"^[ \t]*(?:from[ \t]+([\w. \t]+?)[ \t]+)?import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_WORD = re.compile(rb"\w+")


@dataclass(frozen=True)
class _Tree:
    """What a repository says about how its scripts may be started."""

    texts: tuple[tuple[str, bytes], ...]
    """(path, content) of every file that is not binary. Whether one holds a launcher word is
    asked only of those that name the script: one search for the name costs a thirtieth of
    searching every file for every word, and few files name a given script."""
    python: tuple[tuple[str, bytes], ...]
    """(path, content) of its Python files and notebooks (that may import a script)."""
    imported: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    """What each Python file imports (`_imported_modules`), once read: a run asks it of the
    same files for every script it searches for."""

    def imports_of(self, path: str, data: bytes) -> list[tuple[str, int]]:
        if path not in self.imported:
            self.imported[path] = _imported_modules(data)
        return self.imported[path]


def maybe_several_processes(path: str) -> bool:
    """Whether the script at `path` may be started as one of several processes, or imported
    by code that may be: True unless its repository proves otherwise."""
    script = Path(path)
    if not outside.is_file(script):
        return True  # text without a file on disk (stdin): nothing to look at
    real = outside.resolved(script)
    for root in roots_of(script):
        if outside.recording_now():  # every file it reads, by stamp
            outside.note_tree(str(root), tree_digest(str(root)))
        tree = _tree(str(root))
        if tree is None:
            return True
        name = real.name.encode()
        if any(other != str(real) and name in data and _launches(data) and
               _names(Path(other), data, real) for other, data in tree.texts):
            return True
        mentions = _stem_mentions(real.stem)
        if any(other != str(real) and mentions(data) and
               _imports(Path(other), data, real, tree.imports_of(other, data))
               for other, data in tree.python):
            return True
    return False


def _stem_mentions(stem: str) -> Callable[[bytes], bool]:
    """Whether a file may import a module named `stem`: it holds the name, and, in a file of
    plain ASCII, holds it as a whole word (a module name is one in every way a file can
    import it). A file that is not plain ASCII is only asked for the name: Python normalises
    the identifiers it reads (a fullwidth letter reads as its ASCII one), so the bytes need
    not spell the name the parser sees. Common stems (`train`) are in most files of an ML
    repository, and parsing each of them is what a launch search spent most on."""
    name = stem.encode()
    word = re.compile(rb"(?<!\w)" + re.escape(name) + rb"(?!\w)")
    return lambda data: name in data and (not data.isascii() or word.search(data) is not None)


def _launches(data: bytes) -> bool:
    return any(word in data for word in LAUNCHER_WORDS)


def _names(other: Path, data: bytes, script: Path) -> bool:
    """Whether a mention of the script's file name in `other` may mean this script: a path
    whose folders are the script's last folders (`mnist/train.py`), or a bare name (`train.py`)
    in a file of the script's folder or above it, or one that names the script's folder. A
    path with a variable, `~`, `..` or a wildcard in it may mean anything."""
    name = script.name.encode()
    for found in re.finditer(rb"[\w./${}~*\\-]*" + re.escape(name) + rb"(?![\w.-])", data):
        text = found.group()
        head = text[:-len(name)]
        if head and not head.endswith((b"/", b"\\")):
            continue  # `my_train.py`: another file
        folders = [p for p in re.split(rb"[/\\]", head) if p and p != b"."]
        if any(p == b".." or re.search(rb"[${}~*]", p) for p in folders):
            return True
        if folders:
            mine = [p.encode() for p in script.parent.parts]
            if mine[-len(folders):] == folders:
                return True
        elif script.parent.is_relative_to(other.parent) or \
                script.parent.name.encode() in data:
            return True
    return False


def _imports(other: Path, data: bytes, script: Path,
             imported: list[tuple[str, int]]) -> bool:
    """Whether the Python file (or notebook) `other` may import the script as a module: by
    its bare name from the script's own folder (or after changing `sys.path`), by a dotted
    name whose packages are the script's last folders, relatively from inside its folder, or
    through importlib/runpy."""
    stem = script.stem
    for module, level in imported:
        parts = module.split(".")
        if stem not in parts:
            continue
        inside = parts[:parts.index(stem)]
        if level:
            if other.parent.is_relative_to(script.parent):
                return True
        elif not inside:
            if other.parent == script.parent or b"sys.path" in data:
                return True
        elif list(script.parent.parts[-len(inside):]) == inside:
            return True
    return False


_DYNAMIC = re.compile(rb"""(?:import_module|__import__|run_module)\(\s*["']([\w.]+)["']""")


def _imported_modules(data: bytes) -> list[tuple[str, int]]:
    """(dotted name, relative level) of everything the file imports; a file that does not
    parse (a notebook, Python 2) is read line by line."""
    found = [(m.group(1).decode(), 0) for m in _DYNAMIC.finditer(data)]
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        words = {w.decode() for m in _IMPORT_LINE.finditer(data) for part in m.groups() if part
                 for w in _WORD.findall(part)}
        return found + [(w, 0) for w in words] + [(w, 1) for w in words]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, 0) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            found += [(f"{base}.{a.name}" if base else a.name, node.level) for a in node.names]
            if base:
                found.append((base, node.level))
    return found


@functools.lru_cache(maxsize=16)
def _tree(root: str) -> _Tree | None:
    texts: list[tuple[str, bytes]] = []
    python: list[tuple[str, bytes]] = []
    files = total = 0
    for folder, subfolders, names in os.walk(root):
        if CACHE_TAG in names:  # a result cache, wherever `cache-dir` put it: its entries
            subfolders[:] = []  # quote file names and launcher words
            continue
        subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED_FOLDERS)
        real_folder = os.path.realpath(folder)  # links are skipped: a name resolves to itself
        for file_name in names:
            files += 1
            if files > MAX_FILES:
                return None
            file_path = os.path.join(folder, file_name)
            try:
                if os.path.getsize(file_path) > MAX_FILE_BYTES or os.path.islink(file_path):
                    continue
                with open(file_path, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            total += len(data)
            if total > MAX_TOTAL_BYTES:
                return None
            if b"\0" in data[:4096]:
                continue  # binary
            real = os.path.join(real_folder, file_name)
            texts.append((real, data))
            if file_name.endswith((".py", ".ipynb", ".pyi")):
                python.append((real, data))
    return _Tree(tuple(texts), tuple(python))
