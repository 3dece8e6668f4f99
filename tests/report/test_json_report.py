"""The JSON report: every mode's real output validates against the schema shipped with the
package, and the fields mean what the schema says."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import FIXTURES, ROOT, cli

SCHEMA = json.loads((ROOT / "codemod" / "report" / "json-report.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def _valid(report: dict) -> dict:
    VALIDATOR.validate(report)
    return report


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.fixture
def repo(in_tmp: Path) -> Path:
    """Code, an unsafe fix, a notebook with cell ids, a dependency file and a broken file."""
    src = in_tmp / "src"
    src.mkdir()
    for name in ("NM110_mark_step", "NM220_spawn", "NM602_bf16_environment", "no_xla"):
        shutil.copyfile(FIXTURES / "python" / f"{name}.before.py", src / f"{name}.py")
    shutil.copyfile(FIXTURES / "notebooks" / "xla_training.before.ipynb", src / "train.ipynb")
    shutil.copyfile(FIXTURES / "deps" / "requirements_xla_stack" / "before" / "requirements.txt",
                    src / "requirements.txt")
    (src / "broken.py").write_text("import torch_xla\ndef f(:\n")
    return in_tmp


def _report(*args: str) -> dict:
    run = cli(*args, "--format", "json")
    return _valid(run.json())


def _errors_are_complete(report: dict) -> None:
    file_errors = [f["error"] for f in report["files"] if f["status"] == "error"]
    assert report["errors"][:len(file_errors)] == file_errors
    assert report["summary"]["failed"] == len(report["errors"])


@pytest.mark.parametrize("mode", [("check",), ("apply", "--dry-run"), ("scan",)])
def test_modes_that_write_nothing_apply_nothing(repo: Path, mode: tuple[str, ...]) -> None:
    before = {p: p.read_bytes() for p in (repo / "src").iterdir()}
    report = _report(*mode, "src", "missing")
    assert report["mode"] == {"check": "check", "apply": "dry-run", "scan": "scan"}[mode[0]]
    assert not any(f["applied"] for f in report["findings"])
    # check and dry-run say what apply would write; scan, what scan --fix would
    assert any(f["applies"] for f in report["findings"])
    assert {p: p.read_bytes() for p in before} == before
    _errors_are_complete(report)
    assert report["errors"][-1] == "missing: no such file or directory"
    if mode[0] != "scan":
        assert "src/broken.py:2: cannot parse (invalid syntax); file skipped" in report["errors"]


def test_apply_reports_what_it_wrote(repo: Path) -> None:
    report = _report("apply", "src")
    assert report["mode"] == "apply"
    written = {f["path"] for f in report["files"] if f["status"] == "changed"}
    assert "src/NM110_mark_step.py" in written and "src/requirements.txt" in written
    for finding in report["findings"]:
        assert finding["applied"] == (finding["applies"] and finding["path"] in written)
    mark_step = [f for f in report["findings"] if f["rule_id"] == "NM110"]
    assert mark_step and all(f["applied"] for f in mark_step)
    unsafe = [f for f in report["findings"] if f["kind"] == "unsafe-fix"]
    assert unsafe and not any(f["applies"] or f["applied"] for f in unsafe)
    assert all(f["suggestion"] for f in unsafe)
    assert not any(f["applied"] for f in report["findings"] if f["kind"] == "review")
    _errors_are_complete(report)


def test_notebook_findings_name_the_cell(repo: Path) -> None:
    report = _report("check", "src/train.ipynb")
    cells = json.loads((repo / "src" / "train.ipynb").read_text())["cells"]
    findings = report["findings"]
    assert findings and all(isinstance(f["cell"], int) for f in findings)
    for finding in findings:
        assert cells[finding["cell"]]["id"] == finding["cell_id"]
        assert cells[finding["cell"]]["cell_type"] == "code"
        assert finding["line"] <= len("".join(cells[finding["cell"]]["source"]).splitlines())


def test_a_refused_write_is_an_error_and_nothing_is_applied(in_tmp: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=in_tmp, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    (in_tmp / "dirty.py").write_text("import torch_xla\ntorch_xla.sync()\n")
    git("add", ".")
    git("commit", "-qm", "start")
    (in_tmp / "dirty.py").write_text("import torch_xla\ntorch_xla.sync()\nx = 1\n")
    report = _report("apply", "dirty.py")
    assert [f["status"] for f in report["files"]] == ["error"]
    assert report["errors"] == [report["files"][0]["error"]]
    assert "has uncommitted changes" in report["errors"][0]
    assert all(f["applies"] and not f["applied"] for f in report["findings"])
    assert report["summary"]["changed"] == 0


def test_scan_fix_applies_dependency_fixes(repo: Path) -> None:
    report = _report("scan", "--fix", "src/requirements.txt")
    assert report["mode"] == "scan --fix"
    fixed = [f for f in report["findings"] if f["applies"]]
    assert fixed and all(f["applied"] for f in fixed)


def test_a_run_with_nothing_to_do(in_tmp: Path) -> None:
    (in_tmp / "plain.py").write_text("x = 1\n")
    report = _report("check", "plain.py")
    assert report["files"] == [{"path": "plain.py", "status": "unchanged", "error": None,
                                "skipped": None, "fix": None}]
    assert report["findings"] == [] and report["errors"] == []


def test_the_schema_rejects_what_the_report_must_not_contain(repo: Path) -> None:
    """The schema is strict enough to catch a drift: an undocumented field, an error list
    that is not strings, a mode it does not know."""
    report = _report("check", "src")
    for broken in (
        {**report, "extra": 1},
        {**report, "errors": [{"path": "x"}]},
        {**report, "mode": "fix"},
        {**report, "findings": [{**report["findings"][0], "cell_index": 0}]},
        {**report, "files": [{"path": "x", "status": "error", "error": None}]},
    ):
        with pytest.raises(jsonschema.ValidationError):
            VALIDATOR.validate(broken)


@pytest.mark.parametrize("mode", [("check",), ("apply",)])
def test_sarif_properties_agree_with_the_json_report(repo: Path, mode: tuple[str, ...]) -> None:
    shutil.copytree(repo / "src", repo / "copy")
    sarif = json.loads(cli(*mode, "src", "--format", "sarif").stdout)
    report = _report(*mode, "copy")
    properties = [r["properties"] for r in sarif["runs"][0]["results"]]
    assert properties == [{"kind": f["kind"], "applies": f["applies"], "applied": f["applied"]}
                          for f in report["findings"]]
    assert any(p["applied"] for p in properties) == (mode[0] == "apply")


def test_check_counts_the_unsafe_fixes_the_configuration_turns_on(in_tmp: Path) -> None:
    """check says what apply would write, so it reads `unsafe-fixes` as apply does."""
    shutil.copyfile(FIXTURES / "python" / "NM602_bf16_environment.before.py", in_tmp / "t.py")
    (in_tmp / "pyproject.toml").write_text("[tool.neuron-migrate]\nunsafe-fixes = true\n")
    check = _report("check", "t.py")["findings"]
    apply = _report("apply", "t.py")["findings"]
    unsafe = [f["applies"] for f in check if f["kind"] == "unsafe-fix"]
    assert unsafe and all(unsafe)
    assert [f["applies"] for f in check] == [f["applied"] for f in apply]


def test_a_file_not_migrated_is_skipped_with_its_reason(in_tmp: Path) -> None:
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [],
                           "execution_count": None, "source": ["library(torch_xla)\n"]}],
                "metadata": {"language_info": {"name": "R"}}, "nbformat": 4,
                "nbformat_minor": 4}
    (in_tmp / "analysis.ipynb").write_text(json.dumps(notebook))
    report = _report("check", "analysis.ipynb")
    assert report["files"] == [{"path": "analysis.ipynb", "status": "skipped", "error": None,
                                "skipped": "a R notebook, not Python", "fix": None}]
    assert report["errors"] == [] and report["findings"] == []


def test_an_interrupted_run_says_so(in_tmp: Path) -> None:
    import signal

    from neuron_migrate.model import FileResult, Options
    from neuron_migrate.registry import Registry
    from neuron_migrate.report import render_json
    from neuron_migrate.runner import RunResult
    from neuron_migrate.rules import all_rules

    done = RunResult((FileResult("a.py"),), written=True, interrupted=signal.SIGINT)
    report = _valid(json.loads(render_json(done, Registry(all_rules(), Options()), "apply")))
    assert report["interrupted"] == "SIGINT"
    (in_tmp / "plain.py").write_text("x = 1\n")
    assert _report("check", "plain.py")["interrupted"] is None


def test_the_audit_report_validates_too(in_tmp: Path) -> None:
    (in_tmp / "model.py").write_text("import torch\n\nx = torch.ones(3).to_sparse()\n"
                                     "y = torch.zeros(2, dtype=torch.float64)\n")
    report = _report("audit", "model.py")
    assert report["mode"] == "audit" and report["readiness"]["limits"]
    assert report["findings"] and all(f["fix"] is None for f in report["findings"])


def _applied(text: str, edits: list[dict]) -> str:
    """The text with a file fix's line-block edits made, last first."""
    lines = text.splitlines(keepends=True)
    for edit in reversed(edits):
        start, end = edit["location"], edit["end_location"]
        assert start["column"] == end["column"] == 1  # whole lines
        lines[start["line"] - 1:end["line"] - 1] = [edit["content"]]
    return "".join(lines)


def test_a_files_fix_holds_the_whole_rewrite_helpers_and_imports_included(tmp_path: Path) -> None:
    """A review bot applying every finding's edit would miss the helpers and imports the
    rewrite adds at no finding's line; the file's own fix has them, so applying it gives what
    `apply` writes."""
    script = tmp_path / "train.py"
    shutil.copy(ROOT / "examples" / "xla_mnist" / "train.py", script)
    original = script.read_text()
    report = _valid(cli("check", str(script), "--format", "json", "--exit-zero").json())
    fix = report["files"][0]["fix"]
    assert fix is not None and "def _neuron_" in fix["diff"]
    assert cli("apply", str(script), "-q").exit_code == 0
    assert _applied(original, fix["edits"]) == script.read_text()
    unchanged = _valid(cli("check", str(script), "--format", "json", "--exit-zero").json())
    assert unchanged["files"][0]["fix"] is None
