"""How much code `apply` adds to each file it changes, and how much of that is helper
definitions (`def _neuron_*`, `class _Neuron*`): the volume a reviewer reads.

Each tree is copied into a scratch folder (without `.git`), migrated there with
`apply --format json --force`, and every Python file and notebook that changed is compared
with its original:

  added lines   lines of the new file that a line diff marks as added (and their characters,
                leading and trailing blanks left out)
  helper lines  lines of the helper definitions the new file has and the original had not
                (in a notebook, over its code cells)

    python benchmarks/helper_lines.py TREE... [--tool-root PATH] [--json OUT]

The tool under test is the neuron-migrate source tree at --tool-root (default: the
repository this file is in), run as `realworld.py` runs it, so that two commits can be
compared: check the older one out in a git worktree and pass it as --tool-root.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import source_tree  # noqa: E402

HERE = Path(__file__).resolve().parent
HELPER_PREFIXES = ("_neuron_", "_Neuron")


@dataclass
class TreeFigures:
    tree: str
    changed: int = 0
    added: int = 0
    added_chars: int = 0
    helper: int = 0
    with_helpers: int = 0
    by_helper: Counter[str] = field(default_factory=Counter)
    files: dict[str, tuple[int, int]] = field(default_factory=dict)
    """(added lines, helper lines) by changed file."""

    def line(self) -> str:
        per = (lambda n: f"{n / self.changed:.1f}") if self.changed else (lambda n: "-")
        return (f"| {self.tree} | {self.changed} | {self.with_helpers} | {self.added} | "
                f"{per(self.added)} | {per(self.added_chars)} | {self.helper} | "
                f"{per(self.helper)} |")


def python_text(path: Path, data: bytes) -> str | None:
    """The code of a Python file, or of a notebook's code cells joined."""
    text = data.decode("utf-8", errors="replace")
    if path.suffix != ".ipynb":
        return text
    try:
        cells = json.loads(text).get("cells", [])
    except (ValueError, AttributeError):
        return None
    return "\n".join("".join(c.get("source", "")) if isinstance(c.get("source"), list)
                     else str(c.get("source", "")) for c in cells
                     if c.get("cell_type") == "code")


def helpers(text: str) -> dict[str, int]:
    """The module's top-level helper definitions and their lengths in lines (decorators and
    docstrings included); {} for code that does not parse (a notebook with magics)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                node.name.startswith(HELPER_PREFIXES):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found[node.name] = (node.end_lineno or node.lineno) - first + 1
    return found


def added(old: str, new: str) -> list[str]:
    """The lines of `new` that a line diff from `old` marks as added."""
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
    return [line[1:] for line in diff if line.startswith("+") and not line.startswith("+++")]


def measure(tree: Path, tool_root: Path, scratch: Path) -> TreeFigures:
    copy = scratch / tree.name
    shutil.copytree(tree, copy, ignore=shutil.ignore_patterns(".git"), symlinks=True)
    pythonpath = source_tree.pythonpath(tool_root, scratch / "tool")
    command = [sys.executable, "-m", source_tree.module(pythonpath), "apply", "--format",
               "json", "-o", str(scratch / "report.json"), "--quiet", "--force", "."]
    subprocess.run(command, cwd=copy, env=dict(os.environ, PYTHONPATH=str(pythonpath)),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    figures = TreeFigures(tree.name)
    for new_path in sorted(copy.rglob("*")):
        if new_path.suffix not in (".py", ".ipynb") or not new_path.is_file():
            continue
        old_path = tree / new_path.relative_to(copy)
        old_data, new_data = old_path.read_bytes(), new_path.read_bytes()
        if old_data == new_data:
            continue
        old, new = python_text(old_path, old_data), python_text(new_path, new_data)
        if old is None or new is None:
            continue
        figures.changed += 1
        lines = added(old, new)
        figures.added += len(lines)
        figures.added_chars += sum(len(line.strip()) for line in lines)
        before = helpers(old)
        gained = {name: size for name, size in helpers(new).items() if name not in before}
        if gained:
            figures.with_helpers += 1
        figures.helper += sum(gained.values())
        figures.by_helper.update(gained)
        figures.files[str(new_path.relative_to(copy))] = (len(lines), sum(gained.values()))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--tool-root", type=Path, default=HERE.parent)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    print("| tree | Python files and notebooks changed | of them with helpers | added lines "
          "| per changed file | added characters per changed file | helper lines "
          "| per changed file |")
    print("|---|---|---|---|---|---|---|---|")
    for tree in args.trees:
        with tempfile.TemporaryDirectory(prefix="helper-lines-") as scratch:
            figures = measure(tree.resolve(), args.tool_root.resolve(), Path(scratch))
        print(figures.line(), flush=True)
        results.append(figures)
    total = TreeFigures("all", sum(r.changed for r in results), sum(r.added for r in results),
                        sum(r.added_chars for r in results), sum(r.helper for r in results),
                        sum(r.with_helpers for r in results),
                        sum((r.by_helper for r in results), Counter()))
    print(total.line())
    print("\nhelper lines by helper (all trees): " + ", ".join(
        f"{name} {lines}" for name, lines in total.by_helper.most_common(12)))
    if args.json:
        args.json.write_text(json.dumps([{**asdict(r), "by_helper": dict(r.by_helper)}
                                         for r in [*results, total]], indent=1))


if __name__ == "__main__":
    main()
