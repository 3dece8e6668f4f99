"""Every before/after fixture through the real CLI: the output, idempotence, encodings."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import PYTHON_FIXTURES, after_of, cli, copy_fixture, fixture_id
from tests.snapshots import assert_matches_snapshot

BOM = b"\xef\xbb\xbf"


def _rule_prefix(before: Path) -> str | None:
    head = fixture_id(before).split("_", 1)[0]
    return head if head.startswith("NM") else None


@pytest.mark.parametrize("before", PYTHON_FIXTURES, ids=fixture_id)
def test_apply_produces_the_after_file_and_the_pinned_findings(before: Path, in_tmp: Path) -> None:
    target = copy_fixture(before, in_tmp)
    run = cli("apply", target.name, "--format", "json")
    assert run.exit_code == 0, run.stdout + run.stderr
    expected = after_of(before).read_bytes()
    assert target.read_bytes() == expected
    compile(expected, str(target), "exec", dont_inherit=True)
    report = run.json()
    rule = _rule_prefix(before)
    if rule is not None:
        assert rule in {f["rule_id"] for f in report["findings"]}
    lines = before.read_bytes().count(b"\n") + 1
    for finding in report["findings"]:
        assert 1 <= finding["line"] <= lines and finding["column"] >= 1
        assert finding["path"] == target.name
    assert_matches_snapshot(before, f"apply {target.name}", report["findings"])


@pytest.mark.parametrize("before", PYTHON_FIXTURES, ids=fixture_id)
def test_second_apply_changes_nothing(before: Path, in_tmp: Path) -> None:
    target = copy_fixture(before, in_tmp)
    cli("apply", target.name)
    once = target.read_bytes()
    run = cli("apply", target.name, "--format", "json")
    assert target.read_bytes() == once
    assert run.json()["summary"]["changed"] == 0
    assert not any(f["applied"] for f in run.json()["findings"])


@pytest.mark.parametrize("variant", ["crlf", "bom", "crlf+bom"])
@pytest.mark.parametrize("before", PYTHON_FIXTURES, ids=fixture_id)
def test_line_endings_and_bom_survive(before: Path, variant: str, in_tmp: Path) -> None:
    def convert(data: bytes) -> bytes:
        if "crlf" in variant:
            data = data.replace(b"\n", b"\r\n")
        if "bom" in variant:
            data = BOM + data
        return data

    target = in_tmp / "f.py"
    target.write_bytes(convert(before.read_bytes()))
    assert cli("apply", target.name).exit_code == 0
    assert target.read_bytes() == convert(after_of(before).read_bytes())


def test_dry_run_writes_nothing_and_shows_every_change(in_tmp: Path) -> None:
    copies = {copy_fixture(b, in_tmp): b for b in PYTHON_FIXTURES}
    originals = {path: path.read_bytes() for path in copies}
    run = cli("apply", "--dry-run", ".")
    assert run.exit_code == 1
    for path, before in copies.items():
        assert path.read_bytes() == originals[path]
        changes = before.read_bytes() != after_of(before).read_bytes()
        assert (f"--- a/{path.name}" in run.stdout) == changes
    assert "docs: https://" in run.stdout


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("variant", ["lf", "crlf", "no-final-newline"])
def test_dry_run_diff_applies_with_git(variant: str, in_tmp: Path) -> None:
    """The printed diff is a patch git accepts, for every fixture and line ending: users pipe
    `--dry-run` into `git apply`."""
    for before in PYTHON_FIXTURES:
        data = before.read_bytes()
        if variant == "crlf":
            data = data.replace(b"\n", b"\r\n")
        elif variant == "no-final-newline":
            data = data.rstrip(b"\n")
        (in_tmp / before.name.replace(".before", "")).write_bytes(data)
    _git("init", "-q", cwd=in_tmp)
    run = cli("apply", "--dry-run", ".")
    patch = "".join(_diff_blocks(run.stdout))
    assert patch.count("--- a/") == len(PYTHON_FIXTURES) - _unchanged_count()
    (in_tmp / "change.patch").write_bytes(patch.encode())
    check = _git("apply", "--check", "change.patch", cwd=in_tmp)
    assert check.returncode == 0, check.stderr
    applied = _git("apply", "change.patch", cwd=in_tmp)
    assert applied.returncode == 0, applied.stderr
    for before in PYTHON_FIXTURES:
        patched = in_tmp / before.name.replace(".before", "")
        expected = after_of(before).read_bytes()
        if variant == "crlf":
            expected = expected.replace(b"\n", b"\r\n")
        if variant != "no-final-newline":
            assert patched.read_bytes() == expected


def _unchanged_count() -> int:
    return sum(1 for b in PYTHON_FIXTURES if b.read_bytes() == after_of(b).read_bytes())


def _diff_blocks(stdout: str):
    block: list[str] = []
    for line in stdout.splitlines(keepends=True):
        if line.startswith("--- a/"):
            block = [line]
        elif block and (line[:1] in " +-@\\" or line.startswith("+++")):
            block.append(line)
        elif block:
            yield "".join(block)
            block = []
    if block:
        yield "".join(block)
