"""NM950-NM952: the Python a project settles on, read by the dependency scanner from files
that need not name Neuron."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from neuron_migrate.deps import python_env, scan_source
from neuron_migrate.model import Options
from neuron_migrate.registry import Registry
from tests.conftest import cli


@pytest.mark.parametrize(("reference", "stage", "said"), [
    ("python:3.10", "", "runs Python 3.10"),
    ("python:3.11-slim-bookworm", "", "runs Python 3.11"),
    ("registry.example.com:5000/library/python:3.9@sha256:ab", "", "runs Python 3.9"),
    ("python:3.12", "", None), ("python:3.14-alpine", "", None), ("python:3", "", None),
    ("python:latest", "", None), ("pypy:3.10", "", None),
    ("ubuntu:20.04", "RUN apt-get install -y python3", "installs Python 3.8"),
    ("ubuntu:jammy", "RUN pip install x", "installs Python 3.10"),
    ("debian:bullseye-slim", "RUN pip install x", "installs Python 3.9"),
    ("debian:12", "RUN pip install x", "installs Python 3.11"),
    ("ubuntu:22.04", "RUN apt-get install -y curl", None),
    ("ubuntu:22.04", "RUN uv venv --python 3.12", None),
    ("ubuntu:24.04", "RUN apt-get install -y python3", None),
    ("debian:trixie", "RUN pip install x", None),
    ("nvidia/cuda:12.1.0-runtime-ubuntu22.04", "RUN pip install x", None),
])
def test_base_images(reference: str, stage: str, said: str | None) -> None:
    message = python_env.base_image_message(reference, stage)
    assert (message is None) == (said is None)
    if said is not None:
        assert said in message and "3.12-3.14" in message


@pytest.mark.parametrize(("constraint", "expected"), [
    ("^3.10", ">=3.10,<4"), ("~3.10", ">=3.10,<3.11"), (">=3.9,<3.12", ">=3.9,<3.12"),
    ("^3.10.4", ">=3.10,<4")])
def test_poetry_python_constraints(constraint: str, expected: str) -> None:
    assert python_env.poetry_python(constraint) == expected


@pytest.mark.parametrize(("spec", "admits"), [
    ("python=3.10", False), ("python==3.10.*", False), ("python 3.11", False),
    ("python>=3.8,<3.12", False), ("python=3.12", True), ("python>=3.9", True),
    ("conda-forge::python=3.13", True), ("python=3.1", False)])
def test_conda_match_specs(spec: str, admits: bool) -> None:
    parsed = python_env.conda_python(spec)
    assert parsed is not None and python_env.admits_supported(parsed) == admits


def test_conda_names_without_a_python_version_are_not_judged() -> None:
    assert python_env.conda_python("python") is None
    assert python_env.conda_python("python-dateutil=2.8") is None


@pytest.mark.parametrize(("spec", "admits"), [
    (">=3.8,<3.12", False), ("==3.10.*", False), ("<3.12", False), (">=3.8", True),
    (">=3.12.1", True), ("~=3.11", True), ("~=3.11.0", False), ("!=3.12.*,>=3.12", True)])
def test_requires_python_ranges(spec: str, admits: bool) -> None:
    assert python_env.admits_supported(SpecifierSet(spec)) == admits


def _rules(found) -> list[tuple[int, str]]:
    return [(f.line, f.rule_id) for f in found.findings]


def test_a_file_that_never_names_neuron_is_read_for_its_python() -> None:
    registry = Registry([])
    result = scan_source("Dockerfile", b"FROM python:3.10\nRUN pip install -r r.txt\n",
                         registry, fix=True)
    assert _rules(result) == [(1, "NM950")] and result.new_source is None


@pytest.mark.parametrize("options", [Options(ignore=frozenset({"NM95"})),
                                     Options(target="trn1"), Options(select=frozenset({"NM8"}))])
def test_not_read_when_the_rules_are_off_or_the_target_keeps_xla(options: Options) -> None:
    result = scan_source(".python-version", b"3.10\n", Registry([], options), fix=True)
    assert result.findings == ()


def test_python_version_file_reports_the_first_version_only() -> None:
    result = scan_source(".python-version", b"# comment\n\n3.12.1\n3.10\n", Registry([]),
                         fix=True)
    assert result.findings == ()
    result = scan_source(".python-version", b"system\n", Registry([]), fix=True)
    assert result.findings == ()


def test_a_ci_matrix_that_also_runs_312_is_not_reported() -> None:
    text = (b"jobs:\n  t:\n    strategy:\n      matrix:\n        python-version: ['3.10', '3.12']\n"
            b"        include:\n          - python-version: '3.11'\n")
    assert _rules(scan_source("ci.yml", text, Registry([]), fix=True)) == [(7, "NM952")]


def test_scan_discovers_python_version_and_workflows(in_tmp: Path) -> None:
    workflows = in_tmp / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "ci.yml").write_text("jobs:\n  t:\n    steps:\n      - with:\n"
                                      "          python-version: '3.10'\n")
    (in_tmp / ".python-version").write_text("3.11\n")
    done = cli("scan", ".")
    assert done.exit_code == 1
    assert ".python-version: 0 changes, 1 to review" in done.stdout
    assert ".github/workflows/ci.yml: 0 changes, 1 to review" in done.stdout
    assert "NM952" in done.stdout
