"""Whether anything in a script's repository could start it as one of several processes.

The Python migration can drop the distributed machinery of a call such as `xm.save` only in a
script that provably runs as one process. A script says nothing about how it is started:
`torchrun --nproc-per-node=2 mnist.py` in a shell script, a README, a Dockerfile or a
SageMaker launcher makes it one of several. So the repository is read from the roots a launch
line would be resolved from (`launch_paths.roots_of`: the script's folder, the git work tree,
the folder the tool runs in), and the answer is "maybe several" whenever a file there
mentions the script's file name together with any word of a multi-process launcher, anywhere
in that file (a line-by-line parse would miss `SCRIPT=mnist.py` read three lines later), or
imports it as a module (the importer may run in several processes).

Reading a tree is done once per root and process, and only when a script otherwise qualifies
(rare: most scripts that call `xm.save` also use ranks or collectives). A tree too large to
read, or unreadable, answers "maybe several".
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from neuron_migrate.deps.launch_paths import roots_of
from neuron_migrate.deps.launches import HOST_LAUNCHERS, TORCHRUN_MODULES, XLA_DIST

LAUNCHER_WORDS: tuple[bytes, ...] = tuple(w.encode() for w in (
    "torchrun", *TORCHRUN_MODULES, *HOST_LAUNCHERS, XLA_DIST, "xla_dist", "nproc",
    "neuron_parallel_compile", "accelerate", "deepspeed", "horovodrun", "torch_distributed",
    "distribution", "instance_count", "WORLD_SIZE", "world_size", "spawn", "sbatch", "slurm",
    "kubectl", "PyTorchJob", "MPIJob", "launch"))
"""Words of any command or configuration that may start a script several times. A file that
holds one of them and names the script counts as starting it so."""

SKIPPED_FOLDERS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__",
                             "site-packages", ".venv", "venv", ".tox", ".mypy_cache"})
MAX_FILES = 20_000
MAX_FILE_BYTES = 5 * 1024 * 1024
MAX_TOTAL_BYTES = 200 * 1024 * 1024

_IMPORT_LINE = re.compile(
    rb"^[ \t]*(?:from[ \t]+([\w. \t]+?)[ \t]+)?import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_QUOTED_NAME = re.compile(rb"""["']([\w.]+)["']""")
_WORD = re.compile(rb"\w+")


@dataclass(frozen=True)
class _Tree:
    """What a repository says about how its scripts may be started."""

    launching: tuple[tuple[str, bytes], ...]
    """(path, content) of the files holding a launcher word."""
    imported: frozenset[tuple[str, bytes]]
    """(path, word) of every word on an import line, or quoted, in a Python file or notebook
    (a module name a file imports, or hands to importlib or runpy)."""


def maybe_several_processes(path: str) -> bool:
    """Whether the script at `path` may be started as one of several processes, or imported
    by code that may be: True unless its repository proves otherwise."""
    script = Path(path)
    if not script.is_file():
        return True  # text without a file on disk (stdin): nothing to look at
    real = os.path.realpath(script)
    name, stem = script.name.encode(), script.stem.encode()
    for root in roots_of(script):
        tree = _tree(str(root))
        if tree is None:
            return True
        if any(other != real and name in data for other, data in tree.launching):
            return True
        if any(other != real and word == stem for other, word in tree.imported):
            return True
    return False


@functools.lru_cache(maxsize=16)
def _tree(root: str) -> _Tree | None:
    launching: list[tuple[str, bytes]] = []
    imported: set[tuple[str, bytes]] = set()
    files = total = 0
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED_FOLDERS)
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
            real = os.path.realpath(file_path)
            if any(word in data for word in LAUNCHER_WORDS):
                launching.append((real, data))
            if file_name.endswith((".py", ".ipynb", ".pyi")):
                imported.update((real, word) for word in _module_words(data))
    return _Tree(tuple(launching), frozenset(imported))


def _module_words(data: bytes) -> set[bytes]:
    """Every word of the file's import statements (`from pkg import mnist`, `import
    pkg.mnist as m`) and of its quoted names (`importlib.import_module("mnist")`)."""
    words: set[bytes] = set()
    for match in _IMPORT_LINE.finditer(data):
        for part in match.groups():
            if part:
                words.update(_WORD.findall(part))
    for match in _QUOTED_NAME.finditer(data):
        words.update(match.group(1).split(b"."))
    return words
