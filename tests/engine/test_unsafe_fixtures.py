"""Fixtures whose rewrite differs under --unsafe-fixes: `NAME.unsafe.py` next to
`NAME.before.py` is what `apply --unsafe-fixes` makes of it (the `.after.py` stays the
default-mode result, checked by test_fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES, cli, copy_fixture
from tests.snapshots import assert_matches_snapshot

UNSAFE = sorted((FIXTURES / "python").glob("*.unsafe.py"))


def _before(unsafe: Path) -> Path:
    return unsafe.with_name(unsafe.name.replace(".unsafe.py", ".before.py"))


@pytest.mark.parametrize("expected", UNSAFE, ids=lambda p: p.name.removesuffix(".unsafe.py"))
def test_unsafe_apply_produces_the_unsafe_file_and_the_pinned_findings(expected: Path, in_tmp: Path) -> None:
    target = copy_fixture(_before(expected), in_tmp)
    run = cli("apply", "--unsafe-fixes", target.name, "--format", "json")
    assert run.exit_code == 0, run.stdout + run.stderr
    assert target.read_text() == expected.read_text()
    assert_matches_snapshot(_before(expected), f"apply --unsafe-fixes {target.name}",
                            run.json()["findings"], variant="unsafe")
    again = cli("apply", "--unsafe-fixes", target.name, "--format", "json")
    assert target.read_text() == expected.read_text()
    assert again.json()["summary"]["changed"] == 0


def test_every_unsafe_file_has_its_before_and_after() -> None:
    for expected in UNSAFE:
        before = _before(expected)
        assert before.exists()
        assert before.with_name(before.name.replace(".before.py", ".after.py")).exists()
