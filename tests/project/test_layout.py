"""The package's shape: one import package, every subpackage shipped, no import cycles.

The repository's folders are mapped onto `neuron_migrate` by pyproject.toml's package-dir, so
a new subpackage left out of the `packages` list would be missing from the wheel while every
test (run from the checkout) still passed."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _modules() -> dict[str, Path]:
    """Every module of the import package, by its dotted name, from the package-dir map."""
    found: dict[str, Path] = {}
    for package, folder in SETUPTOOLS["package-dir"].items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[0] in ("rules", "emulator") and folder == "codemod":
                continue  # not there; mapped separately
            name = ".".join([package, *(p for p in parts if p != "__init__")])
            found.setdefault(name, path)
    return found


MODULES = _modules()


def test_one_top_level_import_package() -> None:
    assert {name.split(".")[0] for name in SETUPTOOLS["packages"]} == {"neuron_migrate"}
    assert {name.split(".")[0] for name in SETUPTOOLS["package-dir"]} == {"neuron_migrate"}


def test_every_folder_with_modules_is_a_listed_package() -> None:
    packages = {name for name, path in MODULES.items() if path.name == "__init__.py"}
    folders = {".".join(name.split(".")[:-1]) for name, path in MODULES.items()
               if path.name != "__init__.py"}
    assert folders <= packages, f"folders without __init__.py: {sorted(folders - packages)}"
    assert packages == set(SETUPTOOLS["packages"]), \
        "pyproject.toml's [tool.setuptools] packages must list exactly these"


def _runtime_imports(module: str, path: Path) -> set[str]:
    """The package's modules this one imports when it runs (at import time or later), leaving
    out `if TYPE_CHECKING:` blocks and the packages Python runs first anyway (its parents)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                   for statement in block.body for node in ast.walk(statement)}
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    parents = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
    return {name for name in found if name in MODULES and name != module} - parents


def _cycles() -> list[list[str]]:
    graph = {name: _runtime_imports(name, path) for name, path in MODULES.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target):], target])
            elif target not in state:
                visit(target, [*path, target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return cycles


def test_no_import_cycles_at_run_time() -> None:
    assert _cycles() == []


@pytest.mark.parametrize("source, expected", [
    ("from neuron_migrate.engine import transform\n", {"neuron_migrate.engine.transform"}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
     "    from neuron_migrate.engine import transform\n", set()),
    ("from .diagnosis import relative\n", {"neuron_migrate.smoke.diagnosis"}),
], ids=["module", "typing-only", "relative"])
def test_the_cycle_check_reads_imports_as_python_runs_them(tmp_path: Path, source: str,
                                                           expected: set[str]) -> None:
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert _runtime_imports("neuron_migrate.smoke.probe", path) == expected


@pytest.mark.slow
def test_the_sdist_carries_what_the_tests_need(tmp_path: Path) -> None:
    """A test run from the unpacked sdist needs the fixtures, the example and the test data."""
    import subprocess
    import tarfile

    pytest.importorskip("setuptools", minversion="77", reason="builds with pyproject's backend")
    build = ("import sys; from setuptools import build_meta; "
             "print(build_meta.build_sdist(sys.argv[1]))")
    done = subprocess.run([sys.executable, "-c", build, str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    archive = tmp_path / done.stdout.strip().splitlines()[-1]
    with tarfile.open(archive) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    tracked = {"LICENSE", "tests/conftest.py", "tests/data/sarif-schema-2.1.0.json",
               "examples/xla_mnist/train.py", "fixtures/python", "benchmarks/realworld.py",
               "codemod/engine/migrate.py", "rules/emitted_helpers.py", "emulator/bootstrap/sitecustomize.py"}
    assert tracked <= names, sorted(tracked - names)
    assert not any("__pycache__" in name for name in names)
