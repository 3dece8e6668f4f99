"""The layering contracts of pyproject.toml's `[tool.importlinter]`, checked by import-linter.

import-linter reads a package from the folder it is imported from, and this repository maps
three folders (`codemod/`, `rules/`, `emulator/`) into one package: from the checkout it would
see the engine without the rules. So the check runs on the installed mapping, rebuilt here as
a tree of links (one per module file; folders are real, so a test may add a module to one).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

linted = pytest.mark.skipif(importlib.util.find_spec("importlinter") is None,
                            reason="the `test-engine` extra's import-linter checks the layers")

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
MAPPING = PYPROJECT["tool"]["setuptools"]["package-dir"]
CONTRACTS = PYPROJECT["tool"]["importlinter"]["contracts"]
ONLY_THE_SURFACE = "Rules import only the supported surface, neuron_migrate.ruleapi"


def _installed_tree(at: Path) -> Path:
    """`neuron_migrate` laid out as it is installed, under `at`, from pyproject's mapping."""
    for package, folder in sorted(MAPPING.items()):
        target = at.joinpath(*package.split("."))
        for path in (ROOT / folder).rglob("*.py"):
            relative = path.relative_to(ROOT / folder)
            if folder == "codemod" and relative.parts[0] in ("rules", "emulator"):
                continue  # mapped separately
            link = target / relative
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(path)
    return at


def _lint(tree: Path) -> tuple[int, str]:
    """import-linter's verdict on the package under `tree`: its exit status and report."""
    check = ("import sys; sys.path.insert(0, sys.argv[1]); "
             "from importlinter.cli import lint_imports; "
             "sys.exit(lint_imports(config_filename=sys.argv[2], no_cache=True))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", check, str(tree), str(ROOT / "pyproject.toml")],
                          cwd=tree, capture_output=True, text=True, timeout=300, env=env)
    return done.returncode, done.stdout + done.stderr


def _top_level() -> set[str]:
    """The names of the package's top-level modules and subpackages."""
    package = ROOT / MAPPING["neuron_migrate"]
    top = {path.stem for path in package.glob("*.py") if path.stem != "__init__"}
    top |= {path.parent.name for path in package.glob("*/__init__.py")}
    return top | {name.split(".")[1] for name in MAPPING if "." in name}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _installed_tree(tmp_path_factory.mktemp("installed"))


@linted
def test_the_package_keeps_its_layering(tree: Path) -> None:
    status, report = _lint(tree)
    assert status == 0, report
    assert f"{len(CONTRACTS)} kept, 0 broken" in report, report


PROBES = {
    "rules/probe_engine.py": ("from neuron_migrate.engine.site import UnitSite\n",
                              ONLY_THE_SURFACE),
    "rules/probe_bypass.py": ("from neuron_migrate.syntax.quote import code\n",
                              ONLY_THE_SURFACE),
    "engine/probe_rules.py": ("from neuron_migrate.rules import all_rules\n",
                              "The engine does not import the rule catalogue"),
    "analysis/probe_later.py": ("def later():\n    from neuron_migrate.rules import HELPERS\n",
                                "The engine does not import the rule catalogue"),
    "report/probe_runner.py": ("from neuron_migrate.runner import RunResult\n",
                               "The reports do not import the runner"),
    "syntax/probe_upward.py": ("import neuron_migrate.engine.transform\n", "Layers:"),
}
"""Imports the contracts forbid (one inside a function, which counts as well), each with the
contract it breaks."""


@linted
def test_a_forbidden_import_breaks_its_contract(tmp_path: Path) -> None:
    tree = _installed_tree(tmp_path)
    for where, (source, _) in PROBES.items():
        (tree / "neuron_migrate" / where).write_text(source)
    status, report = _lint(tree)
    assert status != 0, report
    flat = " ".join(report.split())  # rich wraps long lines
    for where, (_, broken) in PROBES.items():
        name = next(c["name"] for c in CONTRACTS if c["name"].startswith(broken))
        assert f"{name} BROKEN" in flat, report
        probe = "neuron_migrate." + where.removesuffix(".py").replace("/", ".")
        assert probe in flat, report
    assert f"0 kept, {len(CONTRACTS)} broken" in flat, report


def test_rules_are_kept_from_every_module_but_the_surface() -> None:
    """A module added to the package is outside the rules' surface until someone decides
    otherwise: the contract must name every top-level module but `ruleapi` and `rules`."""
    top = _top_level()
    contract = next(c for c in CONTRACTS if c["name"] == ONLY_THE_SURFACE)
    forbidden = {name.removeprefix("neuron_migrate.") for name in contract["forbidden_modules"]}
    assert forbidden == top - {"ruleapi", "rules"}, \
        "list the new module in the contract's forbidden_modules (pyproject.toml), or " \
        "re-export from `ruleapi` what rules may use of it"


def test_every_module_sits_in_a_layer() -> None:
    """A top-level module left out of the layers would escape them."""
    top = _top_level()
    layers = next(c for c in CONTRACTS if c["type"] == "layers")["layers"]
    placed = {name.strip().removeprefix("neuron_migrate.") for layer in layers
              for name in layer.split(":")}
    assert placed == top, "place the new module in a layer of pyproject.toml's " \
        "[tool.importlinter] layers: above what it imports, below what imports it"
