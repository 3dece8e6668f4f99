"""Discovery's shortcut through gitignore patterns (`Patterns`) gives pathspec's own answer:
a path no pattern matches is answered by one joined search, every other by the spec."""

from __future__ import annotations

from pathlib import Path

import pathspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_migrate.files.patterns import Patterns, _any_pattern

LINES = [
    "*.pyc", "build/", "/dist", "!keep.pyc", "foo/**/bar", "a?b[c-d]", "**", "**/", "*",
    "*/", "docs/*.md", "!docs/index.md", "**/logs", "logs/**", "/a/b/", "[!x]y", "\\#hash",
    "trailing\\ ", "a/**/b/**/c", "*.egg-info/", "!*/", "?", "name", "dir/name", "x[(?P<ps_d>]y",
    "x(?P<q>z", "weird|name", "dots.*.txt", "", "# comment", "\\!bang",
]
SEGMENTS = ["a", "b", "c", "x", "y", "foo", "bar", "logs", "docs", "index.md", "dist", "build",
            "keep.pyc", "m.pyc", "name", "acb", "ay", "#hash", "dots.1.txt", "weird|name",
            "x(y", "x?y", "t.egg-info", "trailing ", "!bang"]
PATHS = st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=5).map("/".join)


def _expected(spec: pathspec.GitIgnoreSpec, relative: str) -> bool | None:
    return spec.check_file(relative).include


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(LINES), max_size=8), st.lists(PATHS, min_size=1, max_size=10),
       st.booleans())
def test_same_verdict_as_pathspec(lines: list[str], paths: list[str], folder: bool) -> None:
    spec = pathspec.GitIgnoreSpec.from_lines(lines)
    patterns = Patterns(Path("/base"), spec)
    for path in paths:
        relative = path + ("/" if folder else "")
        assert patterns.check(relative) == _expected(spec, relative), (lines, relative)


def test_the_shortcut_is_made_for_ordinary_files_and_refused_when_unsure() -> None:
    ordinary = pathspec.GitIgnoreSpec.from_lines(["*.pyc", "build/", "/dist", "!keep.pyc", "**"])
    assert _any_pattern(ordinary) is not None
    # a bracket holding pathspec's own group name: rewriting it could change what it matches
    assert _any_pattern(pathspec.GitIgnoreSpec.from_lines(["x[(?P<ps_d>]y"])) is None


def test_no_pattern_means_no_opinion() -> None:
    for lines in ([], ["# only a comment", ""]):
        patterns = Patterns(Path("/base"), pathspec.GitIgnoreSpec.from_lines(lines))
        assert patterns.check("a/b.py") is None


def test_relative_paths_as_pathlib_gives_them() -> None:
    patterns = Patterns(Path("/work/base"), pathspec.GitIgnoreSpec.from_lines(["x"]))
    assert patterns.relative(Path("/work/base/a/b.py")) == "a/b.py"
    assert patterns.relative(Path("/work/base")) == "."
    assert patterns.relative(Path("/work/basement/a.py")) is None
    assert patterns.relative(Path("/work")) is None
    assert Patterns(Path("/"), pathspec.GitIgnoreSpec.from_lines(["x"])).relative(
        Path("/a/b")) == "a/b"


GITIGNORES = [
    "__pycache__/\n*.py[cod]\n*.so\nbuild/\ndist/\n*.egg-info/\n.env\nvenv/\n.idea/\n",
    "# experiments\n/checkpoints/\nwandb/\nlogs/**\n!logs/keep.txt\n*.log\nnohup.out\n",
    "node_modules/\n.DS_Store\ndocs/_build/\n/lib/\nlib64/\ndata/*.csv\n!data/small.csv\n",
    "**/ckpt\nout/**/*.log\n/a/b/\n*.pt\n!best.pt\n",
]
"""Gitignore files in the shapes ML repositories use (written for this test)."""


@pytest.mark.parametrize("text", GITIGNORES)
def test_typical_gitignores_take_the_shortcut_and_give_pathspecs_verdicts(text: str) -> None:
    paths = ["a.py", "build/", "build/x.py", "dist/", "x.egg-info/", "node_modules/",
             "src/pkg/__pycache__/", "src/pkg/m.pyc", ".env", "data/train.csv",
             "data/small.csv", "logs/", "logs/keep.txt", "out/run.log", "out/a/run.log",
             "docs/_build/", "ckpt/model.pt", "best.pt", "venv/", ".idea/", "a/b/c/d.py",
             "checkpoints/", "wandb/", "nohup.out", "x.so", "lib/", "lib64/", ".DS_Store"]
    spec = pathspec.GitIgnoreSpec.from_lines(text.splitlines())
    patterns = Patterns(Path("/base"), spec)
    assert patterns._any is not None
    for path in paths:
        assert patterns.check(path) == _expected(spec, path), path
