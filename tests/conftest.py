"""Shared helpers: the fixture catalogue and a way to run the real CLI in-process."""

from __future__ import annotations

import functools
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neuron_migrate.cli import app
from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import Finding
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules

# the suite's runs share one working directory, and some replace the rule catalogue: no run
# reads another's results (tests/test_cache*.py turn the cache on where they test it)
os.environ["NEURON_MIGRATE_NO_CACHE"] = "1"

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
PYTHON_FIXTURES = sorted((FIXTURES / "python").glob("*.before.py"))


def migrated(source: str, path: str = "train.py") -> tuple[str, list[Finding]]:
    """The engine's output for `source` (the source itself when nothing changes) and its
    findings; a migration error fails the test."""
    result = migrate_source(path, source.encode(), _registry())
    assert result.error is None, result.error
    return (result.new_source or source.encode()).decode(), list(result.findings)


@functools.lru_cache(maxsize=1)
def _registry() -> Registry:
    return Registry(all_rules())


def fixture_id(path: Path) -> str:
    return path.name.removesuffix(".before.py")


SOURCES = [*PYTHON_FIXTURES, ROOT / "examples" / "xla_mnist" / "train.py"]
"""Every Python input the tool is tested on: the fixtures and the shipped example."""


def source_id(path: Path) -> str:
    return fixture_id(path) if path.name.endswith(".before.py") else path.name


def after_of(before: Path) -> Path:
    return before.with_name(before.name.replace(".before.py", ".after.py"))


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        return json.loads(self.stdout)


def cli(*args: str | Path) -> Run:
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    # the raw bytes: `.stdout` would turn the "\r\n" of a CRLF file's diff into "\n"
    return Run(result.exit_code, result.stdout_bytes.decode(errors="surrogateescape"),
               result.stderr_bytes.decode(errors="surrogateescape"))


def copy_fixture(before: Path, directory: Path, name: str | None = None) -> Path:
    target = directory / (name or before.name.replace(".before.py", ".py"))
    shutil.copyfile(before, target)
    return target


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def stdlib_as_xla(monkeypatch: pytest.MonkeyPatch) -> None:
    """`os`, `sys` and `re` stand in for torch_xla: standard-library modules then have
    flagged statements of every shape, and leftover references everywhere."""
    import neuron_migrate.registry as registry_module
    import neuron_migrate.analysis.scopes as scopes

    monkeypatch.setattr(scopes, "XLA_PREFIXES", ("os", "sys", "re"))
    monkeypatch.setattr(registry_module, "BASE_TOKENS", (b"os", b"sys", b"re"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without torch (the `test-engine` extra on another Python), tests that run emitted code
    or the emulator are skipped with the reason, rather than failing on the import."""
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        return
    skip = pytest.mark.skip(reason="needs torch: install the `test` extra")
    for item in items:
        if "torch" in item.keywords:
            item.add_marker(skip)
