"""Reading markers skips tokenizing a file that cannot hold one of ours; that must never lose a
marker tokenizing would find."""

from __future__ import annotations

from pathlib import Path

import pytest

import neuron_migrate.engine.suppress as suppress
from neuron_migrate.engine.suppress import Suppressions, may_hold_markers, read_suppressions
from tests.conftest import FIXTURES, SOURCES, source_id

COMMENTS = [
    "# noqa", "# noqa: E501", "# NOQA: E501, F401", "# noqa: NM715", "# noqa: nm101",
    "# NOQA: NM101  # NoQa: NM7",
    "# noqa:E501,Nm7", "# noqa: E501  # needs nmt", "# noqa: E501 # neuron-migrate: ignore",
    "# neuron-migrate: reviewed[NM715]", "# neuron-migrate: ignore-file", "# nm101 noqa",
]
SOURCES_WITH_MARKERS = [
    *(f"import os\nx = os.sep  {comment}\n" for comment in COMMENTS),
    'x = "# noqa: NM101"\n',
    "x = 1  # noqa: E501\ry = 2  # NM101 follows on a line of its own\n",
    "x = 1  # noqa: E501\r\ny = 2  # nm\r\n",
    "# neuron-migrate: ignore-file\nimport torch_xla\n",
]


def _tokenized(data: bytes, monkeypatch: pytest.MonkeyPatch) -> Suppressions:
    """The markers read by tokenizing every file that spells `noqa` or `NOQA` (a `NoQa`
    alone is not read) or `neuron-migrate:`."""
    with monkeypatch.context() as patch:
        patch.setattr(suppress, "may_hold_markers", lambda data: any(
            word in data for word in (b"noqa", b"NOQA", b"neuron-migrate:")))
        return read_suppressions(data)


@pytest.mark.parametrize("source", SOURCES_WITH_MARKERS)
def test_markers_read_as_tokenizing_every_file_reads_them(
        source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = source.encode()
    assert read_suppressions(data) == _tokenized(data, monkeypatch)


@pytest.mark.parametrize("source", [*SOURCES, *sorted((FIXTURES / "cuda").glob("*.py"))],
                         ids=source_id)
def test_the_fixtures_markers_read_as_tokenizing_reads_them(
        source: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = source.read_bytes()
    assert read_suppressions(data) == _tokenized(data, monkeypatch)


def test_other_linters_noqa_comments_are_not_tokenized() -> None:
    assert not may_hold_markers(b"import os  # noqa: F401\nx = 1  # NOQA\n")
    assert not may_hold_markers(b"x = 1  # noqa: E501\ry = 2  # nm\n")
    assert may_hold_markers(b"x = 1  # noqa: E501, nm715\n")
    assert may_hold_markers(b"x = 1  # NoQa: E501\ny = 2  # noqa: NM1\n")
    assert may_hold_markers(b"x = 1  # neuron-migrate: ignore\n")
