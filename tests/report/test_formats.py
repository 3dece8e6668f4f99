"""The machine-readable and pull-request outputs: fix edits and end positions (json, sarif),
concise, junit and gitlab, the markdown report's size limit, -q with a report, notebook lines
in GitHub annotations, the catalogue as JSON, -h and shell completion."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import FIXTURES, ROOT, cli

SARIF_SCHEMA = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
REPORT_SCHEMA = json.loads((ROOT / "codemod" / "report" / "json-report.schema.json").read_text())
PYTHON = FIXTURES / "python"
REPRODUCED = ["NM101_xla_device", "NM110_mark_step", "NM102_device_strings"]
"""Fixtures whose whole rewrite happens at lines that have a finding."""


@pytest.fixture
def repo(in_tmp: Path) -> Path:
    src = in_tmp / "src"
    src.mkdir()
    for name in [*REPRODUCED, "NM220_spawn", "no_xla"]:
        shutil.copyfile(PYTHON / f"{name}.before.py", src / f"{name}.py")
    shutil.copyfile(FIXTURES / "notebooks" / "xla_training.before.ipynb", src / "train.ipynb")
    (src / "broken.py").write_text("import torch_xla\ndef f(:\n")
    return in_tmp


def _apply_edits(text: str, edits: set[tuple[int, int, int, int, str]]) -> str:
    """Each distinct edit applied once, the last first so earlier positions stay put."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column - 1 if line <= len(starts) else len(text)

    for line, column, end_line, end_column, content in sorted(edits, reverse=True):
        text = text[:offset(line, column)] + content + text[offset(end_line, end_column):]
    return text


def _edits(findings: list[dict], path: str) -> set[tuple[int, int, int, int, str]]:
    return {(e["location"]["line"], e["location"]["column"], e["end_location"]["line"],
             e["end_location"]["column"], e["content"])
            for f in findings if f["path"] == path and f["fix"] for e in f["fix"]["edits"]}


# ------------------------------------------------------------------ json: ends and fixes
def test_json_fix_edits_rebuild_what_apply_writes(repo: Path) -> None:
    report = cli("check", "src", "--format", "json").json()
    jsonschema.Draft202012Validator(REPORT_SCHEMA).validate(report)
    rebuilt = {}
    for name in REPRODUCED:
        path = f"src/{name}.py"
        edits = _edits(report["findings"], path)
        assert edits, name
        rebuilt[path] = _apply_edits((repo / path).read_text(), edits)
        assert rebuilt[path] != (repo / path).read_text()
    cli("apply", "src")
    assert {path: (repo / path).read_text() for path in rebuilt} == rebuilt


def test_json_end_positions_cover_the_call(repo: Path) -> None:
    findings = cli("check", "src", "--format", "json").json()["findings"]
    lines = (repo / "src" / "NM101_xla_device.py").read_text().splitlines()
    device = [f for f in findings if f["path"].endswith("NM101_xla_device.py")
              and f["rule_id"] == "NM101"]
    assert device
    for finding in device:
        assert finding["end_line"] == finding["line"]
        code = lines[finding["line"] - 1][finding["column"] - 1:finding["end_column"] - 1]
        assert code.startswith(("xm.", "torch_xla.")) and code.endswith(")"), code
    one = next(f for f in device if f["fix"])
    edit = one["fix"]["edits"][0]
    assert edit["content"].startswith("torch.device(")
    assert one["fix"]["diff"].startswith("@@ -") and "+" in one["fix"]["diff"]
    review = [f for f in findings if f["kind"] == "review"]
    assert review and all(f["fix"] is None for f in review)
    assert all((f["end_line"], f["end_column"]) >= (f["line"], f["column"]) for f in findings)


def test_notebook_fix_edits_are_in_the_ipynb_text(repo: Path) -> None:
    findings = cli("check", "src/train.ipynb", "--format", "json").json()["findings"]
    text = (repo / "src" / "train.ipynb").read_text()
    fixed = [f for f in findings if f["fix"]]
    assert fixed
    after = _apply_edits(text, _edits(findings, "src/train.ipynb"))
    json.loads(after)  # still a notebook: each edit replaced JSON lines with JSON lines
    assert "torch.device(\\\"neuron\\\")" in after


def test_applied_findings_keep_their_edit_and_sarif_drops_it(repo: Path) -> None:
    shutil.copytree(repo / "src", repo / "copy")
    report = cli("apply", "src", "--format", "json").json()
    assert any(f["applied"] and f["fix"] for f in report["findings"])
    sarif = cli("apply", "copy", "--format", "sarif").json()
    assert not any("fixes" in r for r in sarif["runs"][0]["results"])


# ------------------------------------------------------------------ sarif fixes
def test_sarif_fixes_are_valid_and_match_the_json_edits(repo: Path) -> None:
    document = cli("check", "src", "--format", "sarif").json()
    jsonschema.validate(document, SARIF_SCHEMA)
    results = document["runs"][0]["results"]
    findings = cli("check", "src", "--format", "json").json()["findings"]
    assert len(results) == len(findings)
    for result, finding in zip(results, findings):
        assert ("fixes" in result) == (finding["fix"] is not None)
        if finding["fix"] is None:
            continue
        change = result["fixes"][0]["artifactChanges"][0]
        assert change["artifactLocation"] == \
            result["locations"][0]["physicalLocation"]["artifactLocation"]
        replacement = change["replacements"][0]
        edit = finding["fix"]["edits"][0]
        assert replacement["insertedContent"]["text"] == edit["content"]
        assert replacement["deletedRegion"] == {
            "startLine": edit["location"]["line"], "startColumn": edit["location"]["column"],
            "endLine": edit["end_location"]["line"], "endColumn": edit["end_location"]["column"]}
    region = next(r for r in results if r["ruleId"] == "NM220")["locations"][0][
        "physicalLocation"]["region"]
    assert region["endLine"] >= region["startLine"] and "endColumn" in region


# ------------------------------------------------------------------ concise
def test_concise_is_one_line_a_finding(repo: Path) -> None:
    run = cli("check", "src", "--format", "concise")
    lines = run.stdout.splitlines()
    findings = cli("check", "src", "--format", "json").json()["findings"]
    assert len([l for l in lines if not l.startswith("src/broken.py:2: cannot")]) == \
        len(findings)
    pattern = re.compile(r"^(?P<path>[^:]+):(cell \d+:)?(?P<line>\d+):(?P<col>\d+): "
                         r"(?P<rule>NM\w+)( \[\*\])? \S")
    assert all(pattern.match(line) for line in lines[:len(findings)])
    assert "src/NM220_spawn.py:32:5: NM220 " in run.stdout
    assert re.search(r"^src/train\.ipynb:cell \d+:\d+:\d+: NM", run.stdout, re.MULTILINE)
    assert re.search(r"^src/NM110_mark_step\.py:\d+:\d+: NM110 \[\*\] ", run.stdout,
                     re.MULTILINE)
    assert "src/broken.py:2: cannot parse" in run.stdout and run.exit_code == 2


# ------------------------------------------------------------------ junit
def test_junit_has_a_suite_a_file_and_a_failure_a_finding(repo: Path) -> None:
    run = cli("check", "src", "--format", "junit")
    root = ET.fromstring(run.stdout.encode())
    findings = cli("check", "src", "--format", "json").json()["findings"]
    assert root.tag == "testsuites"
    assert int(root.get("failures")) == len(findings)
    assert int(root.get("errors")) == 1
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert suites["src/no_xla.py"].get("failures") == "0"
    assert suites["src/no_xla.py"].find("testcase") is not None
    assert suites["src/broken.py"].find("testcase/error") is not None
    spawn = suites["src/NM220_spawn.py"]
    failure = next(c for c in spawn.iter("testcase") if c.get("name") == "NM220 (line 32:5)")
    assert failure.get("line") == "32" and failure.find("failure").get("type") == "review"


def test_junit_passes_what_apply_wrote_and_survives_control_characters(in_tmp: Path) -> None:
    shutil.copyfile(PYTHON / "NM110_mark_step.before.py", in_tmp / "step.py")
    (in_tmp / "odd\x01name.py").write_text("import torch_xla\ntorch_xla.sync()\n")
    root = ET.fromstring(cli("apply", ".", "--format", "junit").stdout.encode())
    assert root.get("failures") == "0" and int(root.get("tests")) > 2


# ------------------------------------------------------------------ gitlab
def test_gitlab_code_quality_report(repo: Path) -> None:
    issues = cli("check", "src", "--format", "gitlab").json()
    findings = cli("check", "src", "--format", "json").json()["findings"]
    assert len(issues) == len(findings) + 1  # and broken.py's error
    for issue in issues:
        assert set(issue) == {"description", "check_name", "fingerprint", "severity",
                              "location"}
        assert issue["severity"] in ("info", "minor", "major", "critical", "blocker")
        assert isinstance(issue["location"]["lines"]["begin"], int)
        assert not issue["location"]["path"].startswith("/")
    assert len({i["fingerprint"] for i in issues}) == len(issues)
    error = next(i for i in issues if i["check_name"] == "neuron-migrate/error")
    assert error["location"] == {"path": "src/broken.py", "lines": {"begin": 2}}
    spawn = next(i for i in issues if i["check_name"] == "NM220"
                 and i["location"]["lines"]["begin"] == 32)
    assert spawn["location"]["path"] == "src/NM220_spawn.py"
    assert spawn["severity"] == "major"  # a review item; a safe fix is minor
    assert {i["severity"] for i in issues if i["check_name"] == "NM110"} == {"minor"}


def test_gitlab_fingerprints_survive_lines_added_above(repo: Path) -> None:
    before = cli("check", "src", "--format", "gitlab").json()
    for path in (repo / "src").glob("NM*.py"):
        path.write_text("# a new header\n\n" + path.read_text())
    after = cli("check", "src", "--format", "gitlab").json()
    assert [i["fingerprint"] for i in before] == [i["fingerprint"] for i in after]
    assert [i["location"]["lines"]["begin"] for i in before] != \
        [i["location"]["lines"]["begin"] for i in after]


# ------------------------------------------------------------------ markdown size limit
def _large_run(files: int, lines: int = 400):  # type: ignore[no-untyped-def]
    """A run over `files` files, each with a long diff and a few findings: 135 of them come to
    megabytes of markdown, as a real migration of that size did."""
    from neuron_migrate.model import FileResult, Finding, Kind
    from neuron_migrate.runner import RunResult

    results = []
    for index in range(files):
        path = f"pkg/module_{index:03}.py"
        original = "".join(f"value_{n} = xm.xla_device()  # line {n}\n" for n in range(lines))
        new = original.replace("xm.xla_device()", 'torch.device("neuron")')
        reviews = index % 7
        findings = tuple(
            [Finding(path, n + 1, 11, "NM101", Kind.FIX, "`xm.xla_device()` becomes "
                     "`torch.device(\"neuron\")`", applied=True) for n in range(min(30, lines))] +
            [Finding(path, n + 1, 1, "NM701", Kind.REVIEW, "review this") for n in
             range(reviews)])
        results.append(FileResult(path, findings, original.encode(), new.encode()))
    results.append(FileResult("pkg/broken.py", error="pkg/broken.py:3: cannot parse"))
    return RunResult(tuple(results), written=False)


def test_a_large_markdown_report_fits_a_pull_request_comment() -> None:
    from neuron_migrate.registry import Registry
    from neuron_migrate.report.markdown import LIMIT, render_markdown
    from neuron_migrate.rules import all_rules

    registry = Registry(all_rules())
    report = render_markdown(_large_run(135), registry)
    assert LIMIT <= 65_536 and len(report.encode()) <= LIMIT
    assert report.startswith("# neuron-migrate report\n")
    assert "136 files scanned" in report and "| NM101 |" in report  # the summary is whole
    files = re.findall(r"^\| `(pkg/[^`]+)`", report, re.MULTILINE)
    assert files[0] == "pkg/broken.py"  # an error first, then the most review items
    assert files[1:4] == ["pkg/module_006.py", "pkg/module_013.py", "pkg/module_020.py"]
    listed = len(files)
    assert f"and {136 - listed} more files" in report if listed < 136 else True
    assert "--output" in report and "--format json" in report
    assert "```diff" not in report
    # the room left explains the worst files' changes, in the same order
    assert report.index("## `pkg/module_006.py`") < report.index("## `pkg/module_013.py`")
    assert "- **NM701** `review` line 1:1: review this" in report


def test_a_small_markdown_report_keeps_every_diff() -> None:
    from neuron_migrate.registry import Registry
    from neuron_migrate.report.markdown import render_markdown
    from neuron_migrate.rules import all_rules

    report = render_markdown(_large_run(2, lines=40), Registry(all_rules()))
    assert report.count("```diff") == 2 and "more file" not in report


def test_the_markdown_limit_holds_for_a_long_error_list() -> None:
    from neuron_migrate.registry import Registry
    from neuron_migrate.report.markdown import LIMIT, render_markdown
    from neuron_migrate.runner import RunResult
    from neuron_migrate.rules import all_rules

    errors = tuple(f"missing/{n:05}.py: no such file or directory" for n in range(5000))
    report = render_markdown(RunResult((), errors=errors, written=False),
                             Registry(all_rules()))
    assert len(report.encode()) <= LIMIT and "more line" in report


def test_markdown_through_the_command_line_stays_under_the_limit(in_tmp: Path) -> None:
    body = "".join(f"device_{n} = xm.xla_device()\n" for n in range(300))
    for index in range(40):
        (in_tmp / f"m{index:02}.py").write_text(
            "import torch_xla.core.xla_model as xm\n" + body)
    report = cli("check", ".", "--format", "markdown").stdout
    assert len(report.encode()) <= 65_536 and "## Files, worst first" in report
    assert "```diff" not in report and report.count("| `m") == 40


# ------------------------------------------------------------------ -q and github notebooks
@pytest.mark.parametrize("fmt", ["json", "sarif", "concise", "junit", "gitlab", "github",
                                 "markdown"])
def test_quiet_keeps_the_report_asked_for(repo: Path, fmt: str) -> None:
    quiet = cli("check", "src", "--format", fmt, "-q")
    loud = cli("check", "src", "--format", fmt)
    assert quiet.stdout and quiet.stdout == loud.stdout
    assert "scanned" not in quiet.stdout or fmt == "markdown"


def test_quiet_text_still_prints_nothing_but_errors(repo: Path) -> None:
    quiet = cli("check", "src", "-q")
    assert quiet.stdout == "" and "broken.py" in quiet.stderr


def test_github_annotations_in_a_notebook_point_at_the_ipynb_line(repo: Path) -> None:
    lines = cli("check", "src/train.ipynb", "--format", "github").stdout.splitlines()
    notebook = (repo / "src" / "train.ipynb").read_text().splitlines()
    cells = json.loads((repo / "src" / "train.ipynb").read_text())["cells"]
    assert lines
    for annotation in lines:
        match = re.match(r"::\w+ file=src/train\.ipynb,line=(\d+),title=(NM\w+) \(cell (\d+)%2C "
                         r"line (\d+)\)::", annotation)
        assert match, annotation
        line, cell, cell_line = (int(match.group(i)) for i in (1, 3, 4))
        source = cells[cell]["source"]
        text = (source if isinstance(source, list) else source.splitlines(True))[cell_line - 1]
        assert json.dumps(text.rstrip("\n"), ensure_ascii=False)[1:-1] in notebook[line - 1]


# ------------------------------------------------------------------ catalogue, -h, completion
def test_rules_and_explain_as_json() -> None:
    from neuron_migrate.catalogue import rule_ids

    rules = json.loads(cli("rules", "--format", "json").stdout)
    assert {r["id"] for r in rules} == set(rule_ids())
    assert all(r["doc_url"].startswith("https://") and r["kind"] in
               ("fix", "unsafe-fix", "review") for r in rules)
    one = json.loads(cli("explain", "NM110", "--format", "json").stdout)
    assert one["id"] == "NM110" and one["name"] == "mark-step"
    assert "mark_step" in one["example"]["before"] and one["explanation"]
    assert cli("explain", "mark-step", "--format", "json").json() == one
    bad = cli("rules", "--format", "yaml")
    assert bad.exit_code == 2 and "unknown format" in bad.stderr
    assert cli("explain", "NM999", "--format", "json").exit_code == 2


@pytest.mark.parametrize("args", [["-h"], ["check", "-h"], ["apply", "-h"], ["scan", "-h"],
                                  ["audit", "-h"], ["rules", "-h"], ["explain", "-h"],
                                  ["smoke", "-h"]])
def test_h_is_help(args: list[str]) -> None:
    short = cli(*args)
    assert short.exit_code == 0 and short.stdout.startswith("Usage: ")
    assert short.stdout == cli(*args[:-1], "--help").stdout


def test_shell_completion_completes_commands_and_formats(in_tmp: Path) -> None:
    assert "--install-completion" in cli("--help").stdout

    def complete(words: str) -> list[str]:
        env = {**os.environ, "_NEURON_MIGRATE_COMPLETE": "complete_bash",
               "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1)}
        run = subprocess.run([sys.executable, "-m", "neuron_migrate"], env=env,
                             capture_output=True, text=True, check=True)
        return run.stdout.split()

    assert "check" in complete("neuron-migrate ch")
    assert complete("neuron-migrate check --format j") == ["json", "junit"]
