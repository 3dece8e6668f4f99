"""Every report format rendered for a multi-file repository, checked for content."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import FIXTURES, ROOT, cli

SARIF_SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"
SOURCES = ["NM101_xla_device", "NM110_mark_step", "NM220_spawn", "no_xla"]


@pytest.fixture
def repo(in_tmp: Path) -> Path:
    for name in SOURCES:
        target = in_tmp / "src" / f"{name}.py"
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(FIXTURES / "python" / f"{name}.before.py", target)
    (in_tmp / "src" / "broken.py").write_text("import torch_xla\ndef f(:\n")
    return in_tmp


def _json(repo: Path) -> dict:
    return cli("check", "src", "--format", "json").json()


def test_text_report_has_diffs_explanations_and_a_summary_table(repo: Path) -> None:
    run = cli("apply", "--dry-run", "src")
    assert run.exit_code == 2  # broken.py
    assert "--- a/src/NM110_mark_step.py" in run.stdout
    assert "NM110 [fix]" in run.stdout and "NM220 [review]" in run.stdout
    assert "docs: https://awsdocs-neuron" in run.stdout
    assert "Summary" in run.stdout and "review items" in run.stdout
    assert "5 files scanned, 3 would change, 1 failed" in run.stdout
    assert "broken.py:2" in run.stderr


def test_markdown_report(repo: Path) -> None:
    report = cli("check", "src", "--format", "markdown").stdout
    lines = report.splitlines()
    assert lines[0] == "# neuron-migrate report"
    table = report.index("| rule | name | fixes | unsafe fixes | review items |")
    assert table < report.index("## `src/NM101_xla_device.py`")
    assert "| NM110 | [mark-step](https://" in report
    assert "<details><summary>Diff</summary>" in report and "```diff" in report
    assert "- **NM220** `review`" in report and "([docs](https://" in report
    assert "## Errors" in report and "broken.py" in report
    assert "no_xla.py" not in report


def test_json_report_counts_match_findings(repo: Path) -> None:
    report = _json(repo)
    kinds = [f["kind"] for f in report["findings"]]
    assert report["summary"]["fixes"] == kinds.count("fix")
    assert report["summary"]["reviews"] == kinds.count("review")
    assert {f["status"] for f in report["files"]} == {"changed", "unchanged", "error"}


def test_sarif_report_is_valid_sarif_2_1_0(repo: Path) -> None:
    document = json.loads(cli("check", "src", "--format", "sarif").stdout)
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.validate(document, schema)
    run = document["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    ids = [r["id"] for r in rules]
    assert "NM110" in ids and all(r["helpUri"].startswith("https://") for r in rules)
    result = next(r for r in run["results"] if r["ruleId"] == "NM220" and r["level"] == "warning")
    assert rules[result["ruleIndex"]]["id"] == "NM220"
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "src/NM220_spawn.py"
    assert location["region"]["startLine"] == 32  # `xmp.spawn(_mp_fn, **options)`
    assert run["invocations"][0]["executionSuccessful"] is False


def test_github_annotations(repo: Path) -> None:
    lines = cli("check", "src", "--format", "github").stdout.splitlines()
    spawn = [l for l in lines if "title=NM220" in l and l.startswith("::warning ")]
    assert spawn and spawn[0].startswith("::warning file=src/NM220_spawn.py,line=32,col=5,")
    assert any(l.startswith("::notice ") is False and l.startswith("::warning ") for l in lines)
    assert any(l.startswith("::error file=src/broken.py::") for l in lines)
    assert all("\n" not in l for l in lines)


def test_output_file_and_quiet(repo: Path) -> None:
    run = cli("check", "src", "--format", "sarif", "--output", "report.sarif")
    assert json.loads((repo / "report.sarif").read_text())["version"] == "2.1.0"
    assert "scanned" in run.stdout and "$schema" not in run.stdout
    quiet = cli("check", "src", "-q")
    assert quiet.stdout == "" and quiet.exit_code == 2 and "broken.py" in quiet.stderr


def test_results_do_not_depend_on_jobs(repo: Path) -> None:
    one = cli("check", "src", "--format", "json", "-j", "1").stdout
    two = cli("check", "src", "--format", "json", "-j", "2").stdout
    assert one == two


def test_configuration_from_pyproject(repo: Path) -> None:
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.neuron-migrate]\n'
                                         'ignore = ["NM110"]\nexclude = ["src/NM220*"]\n')
    report = _json(repo)
    assert "NM110" not in {f["rule_id"] for f in report["findings"]}
    assert not any("NM220" in f["path"] for f in report["files"])
    override = cli("check", "src", "--format", "json", "--ignore", "NM101").json()
    assert "NM110" in {f["rule_id"] for f in override["findings"]}


@pytest.mark.parametrize("table,message", [
    ('unknown-key = 1', "unknown key 'unknown-key'"),
    ('select = ["NM999"]', "unknown rule id or prefix 'NM999'"),
    ('compile = "yes"', "compile must be true or false"),
])
def test_bad_configuration_is_a_clear_error(repo: Path, table: str, message: str) -> None:
    (repo / "pyproject.toml").write_text(f"[tool.neuron-migrate]\n{table}\n")
    run = cli("check", "src")
    assert run.exit_code == 2
    assert "pyproject.toml" in run.stderr and message in run.stderr


def test_on_a_terminal_each_change_is_explained_under_its_hunk(in_tmp: Path) -> None:
    from neuron_migrate.model import Options
    from neuron_migrate.registry import Registry
    from neuron_migrate.report import render_text
    from neuron_migrate.runner import run
    from neuron_migrate.rules import all_rules

    filler = "".join(f"value_{i} = {i}\n" for i in range(20))
    (in_tmp / "far.py").write_text(f"import torch_xla\n{filler}torch_xla.sync()\n")
    registry = Registry(all_rules(), Options())
    result = run([in_tmp / "far.py"], registry, write=False)
    blocks = list(render_text(result, registry, show_diff=True, interleave=True))
    hunks = [i for i, (_, style) in enumerate(blocks) if style == "diff"]
    assert len(hunks) == 2  # the two changes are far apart
    first = " ".join(text for text, _ in blocks[hunks[0]:hunks[1]])
    second = " ".join(text for text, _ in blocks[hunks[1]:])
    assert "line 1:1  NM001" in first and "NM110" not in first
    assert "line 22:1  NM110" in second
