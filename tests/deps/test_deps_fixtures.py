"""Every dependency fixture through the scanner: the findings (rule and line), the fixed file,
and a second pass that changes nothing.

A case is a folder under fixtures/deps/: `before/<file>` (named as the real file kind is;
any Python files beside it are the scripts its launch lines start, and the scan runs from
`before/`), `findings.txt` (one `LINE RULE` per expected finding; leading `# unsafe-fixes` and `# from cuda` lines
turn unsafe fixes and the CUDA migration on), and `after/<file>` for the kinds that are fixed. A case without `after/`
must come back unchanged; a case with `error.txt` must fail with that text in its error. A
`# from cuda` case must also come back without a CUDA finding, and unchanged when only CUDA
findings are expected, in a run that does not migrate from CUDA.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_migrate.deps import kind_of, scan_source
from neuron_migrate.model import FileResult, Kind, Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import readiness_environment
from neuron_migrate.rules.cuda_dependencies import RULES as CUDA_RULES
from neuron_migrate.rules.dependencies import RULES as XLA_RULES
from tests.conftest import FIXTURES

RULES = (*XLA_RULES, *readiness_environment.RULES, *CUDA_RULES)
CASES = sorted(p for p in (FIXTURES / "deps").iterdir() if p.is_dir())


@pytest.fixture(autouse=True)
def _from_before(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run where the case's files are, as a user runs the tool from their repository."""
    case = request.node.callspec.params.get("case") if hasattr(request.node, "callspec") \
        else None
    if case is not None:
        monkeypatch.chdir(case / "before")


def _scanned(case: Path) -> Path:
    """The one file of `before/` the scanner reads (relative to `before/`)."""
    (before,) = [p.relative_to(case / "before") for p in (case / "before").rglob("*")
                 if p.is_file() and kind_of(p) is not None]
    return before


def _headers(case: Path) -> set[str]:
    return {line.strip() for line in (case / "findings.txt").read_text().splitlines()
            if line.startswith("#")}


def _case(case: Path) -> tuple[Path, list[tuple[int, str]], bool]:
    before = _scanned(case)
    lines = (case / "findings.txt").read_text().splitlines()
    unsafe = "# unsafe-fixes" in _headers(case)
    expected = [(int(n), rule) for n, rule in (line.split() for line in lines
                                                if line.strip() and not line.startswith("#"))]
    return before, expected, unsafe


def _registry(unsafe: bool, cuda: bool = False) -> Registry:
    sources = frozenset({"xla", "cuda"} if cuda else {"xla"})
    return Registry([rule() for rule in RULES],
                    Options(unsafe_fixes=unsafe, sources=sources))


def _scan(case: Path, fix: bool = True) -> tuple[FileResult, Path, list[tuple[int, str]], bool]:
    before, expected, unsafe = _case(case)
    registry = _registry(unsafe, "# from cuda" in _headers(case))
    result = scan_source(str(before), before.read_bytes(), registry, fix=fix)
    return result, before, expected, unsafe


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_findings_are_the_expected_rules_and_lines(case: Path) -> None:
    result, before, expected, unsafe = _scan(case)
    assert sorted((f.line, f.rule_id) for f in result.findings) == sorted(expected)
    lines = before.read_bytes().count(b"\n") + 1
    for finding in result.findings:
        assert 1 <= finding.line <= lines and finding.column >= 1
        assert finding.message and finding.path == str(before)
        assert finding.applied == (finding.kind is not Kind.REVIEW and
                                   (finding.kind is Kind.FIX or unsafe))


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_fixed_output_is_the_after_file(case: Path) -> None:
    result, before, _, _ = _scan(case)
    error = case / "error.txt"
    if error.exists():
        assert result.error is not None and error.read_text().strip() in result.error
        assert result.new_source is None
        return
    assert result.error is None
    after = case / "after" / before
    if after.exists():
        assert result.new_source == after.read_bytes()
    else:
        assert result.new_source is None


@pytest.mark.parametrize("case", [c for c in CASES if (c / "after").exists()],
                         ids=lambda p: p.name)
def test_fixing_twice_changes_nothing(case: Path) -> None:
    before, _, unsafe = _case(case)
    after = case / "after" / before
    again = scan_source(str(before), after.read_bytes(),
                        _registry(unsafe, "# from cuda" in _headers(case)), fix=True)
    assert again.new_source is None
    assert not any(f.applied for f in again.findings)


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_without_fix_nothing_is_rewritten(case: Path) -> None:
    result, _, expected, _ = _scan(case, fix=False)
    assert result.new_source is None
    assert not any(f.applied for f in result.findings)
    assert sorted((f.line, f.rule_id) for f in result.findings) == sorted(expected)


@pytest.mark.parametrize("case", [c for c in CASES if "# from cuda" in _headers(c)],
                         ids=lambda p: p.name)
def test_without_from_cuda_nothing_of_cuda_fires(case: Path) -> None:
    before, expected, unsafe = _case(case)
    result = scan_source(str(before), before.read_bytes(), _registry(unsafe), fix=True)
    assert result.error is None
    others = [(n, rule) for n, rule in expected if not rule.startswith("NMC")]
    assert sorted((f.line, f.rule_id) for f in result.findings) == sorted(others)
    if not others:
        assert result.new_source is None
