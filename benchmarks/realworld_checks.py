"""The counting behind benchmarks/realworld.py, kept apart so it can be tested without the
public checkouts: which files are XLA-era, which undefined names a file has (pyflakes), and
which torch_xla references a migrated file still holds.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

XLA_TOKEN = re.compile(rb"torch_xla|torch_neuronx|xla_device")
CUDA_TOKEN = re.compile(rb"torch\.cuda|\.cuda\(|[\"']cuda[\"':]|[\"']nccl[\"']")
DEPENDENCY_NAME = re.compile(r"((requirements|constraints)[\w.-]*\.(txt|in)|pyproject\.toml|"
                             r"setup\.cfg|Pipfile|environment[\w.-]*\.ya?ml|Dockerfile[\w.-]*|"
                             r"[\w.-]+\.dockerfile|[\w.-]+\.(sh|bash|ya?ml))$")
DOCUMENTS = frozenset({".rst", ".md", ".html", ".txt.orig"})
DEPENDENCY_TOKEN = re.compile(rb"neuron|torch[-_]xla", re.IGNORECASE)
SKIPPED_DIRS = frozenset({".git", "__pycache__", ".ipynb_checkpoints", "node_modules"})
UNDEFINED = ("UndefinedName", "UndefinedExport", "UndefinedLocal")
MAGIC = re.compile(r"^\s*[!%]")


def xla_era_files(root: Path, include: tuple[str, ...] = ()) -> list[Path]:
    """Python files and notebooks with an XLA token, and dependency files that mention Neuron
    or XLA, under root (or only under its `include` subfolders), in a stable order."""
    tops = [root / part for part in include] if include else [root]
    return sorted(path for top in tops for path in _walk(top) if _is_xla_era(path))


def cuda_era_files(root: Path, include: tuple[str, ...] = ()) -> list[Path]:
    """Python files and notebooks that use CUDA (`torch.cuda`, `.cuda(`, "cuda" devices,
    NCCL), for repositories migrated with `--from cuda`, in a stable order."""
    tops = [root / part for part in include] if include else [root]
    return sorted(path for top in tops for path in _walk(top)
                  if path.suffix in (".py", ".ipynb") and CUDA_TOKEN.search(path.read_bytes()))


def _walk(top: Path) -> Iterator[Path]:
    for folder, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in names:
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                yield path


def _is_xla_era(path: Path) -> bool:
    if path.suffix in DOCUMENTS:
        return False
    if path.suffix in (".py", ".ipynb"):
        return bool(XLA_TOKEN.search(path.read_bytes()))
    if DEPENDENCY_NAME.search(path.name):
        return bool(DEPENDENCY_TOKEN.search(path.read_bytes()))
    return False


def notebook_source(text: str) -> str:
    """A notebook's code cells as one module; IPython lines (`!pip`, `%%time`) become `pass`
    so that both sides of a comparison parse alike."""
    try:
        cells = json.loads(text).get("cells", [])
    except (json.JSONDecodeError, AttributeError):
        return ""
    parts = []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        parts.append("\n".join(_without_magic(line) for line in source.splitlines()))
    return "\n\n".join(parts) + "\n"


def _without_magic(line: str) -> str:
    if not MAGIC.match(line):
        return line
    return line[:len(line) - len(line.lstrip())] + "pass"


def undefined_names(source: str, filename: str = "<source>") -> Counter[str]:
    """pyflakes' undefined names (loads, `__all__` entries, locals read before assignment),
    counted by name: lines move in a migration, names do not. A file that does not parse
    counts as one `<syntax error>`."""
    from pyflakes import checker

    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        return Counter({"<syntax error>": 1})
    found = checker.Checker(tree, filename=filename)
    return Counter(str(message.message_args[0]) for message in found.messages
                   if type(message).__name__ in UNDEFINED)


def leftover_xla(source: str) -> Counter[str]:
    """torch_xla references still in a file, by torch_xla module: each import of it and each
    use of a name such an import binds."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return Counter()
    bound: dict[str, str] = {}
    found: Counter[str] = Counter()
    for node in ast.walk(tree):
        for local, module in _xla_bindings(node):
            bound[local] = module
            found[module] += 1
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in bound:
            found[bound[node.id]] += 1
    return found


def _xla_bindings(node: ast.AST) -> Iterator[tuple[str, str]]:
    """(local name, torch_xla module) for each name an import of torch_xla binds."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if _is_xla(alias.name):
                yield (alias.asname or alias.name.split(".")[0]), alias.name
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and _is_xla(node.module or ""):
        for alias in node.names:
            yield (alias.asname or alias.name), f"{node.module}.{alias.name}"


def _is_xla(module: str) -> bool:
    return module == "torch_xla" or module.startswith("torch_xla.")
