"""The README and the pages under docs/ link to files and headings that exist: pages moved or
headings renamed leave no dead link behind."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@functools.cache
def anchors(page: Path) -> frozenset[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return frozenset(slug(line.lstrip("#")) for line in text.splitlines()
                     if line.startswith("#"))


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_resolves(page: Path) -> None:
    dead = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md"
                                   and anchor not in anchors(linked)):
            dead.append(target)
    assert not dead, f"{page.name}: dead links {dead}"


def test_the_link_check_sees_a_dead_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A heading: with `code`\n\n[ok](#a-heading-with-code) [dead](#nowhere)\n")
    assert anchors(page) == {"a-heading-with-code"}
    assert links(page) == ["#a-heading-with-code", "#nowhere"]
