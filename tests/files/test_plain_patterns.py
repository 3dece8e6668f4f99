"""Plain gitignore patterns read without pathspec (`patterns.anchored`): for every line and
path, the answer is pathspec's, and pathspec is not imported while no path can match."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_migrate.files import patterns
from neuron_migrate.files.patterns import Patterns, anchored, gitignore_spec

BASE = Path("/repo")
PIECES = ["a", "b", "ab", "x.py", "*", "**", "?", "[ab]", "*.py", "a*", ".", "..", "x-1"]
NAMES = ["a", "b", "ab", "ba", "x.py", "y.py", "a.py", "bb", "x-1", ".", "aa.py"]


def _line(rng: random.Random) -> str:
    parts = [rng.choice(PIECES) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
    line = "/".join(parts)
    if rng.random() < 0.2:
        line = "/" + line
    if rng.random() < 0.3:
        line += "/"
    if rng.random() < 0.2:
        line = "!" + line
    return line


def _paths(rng: random.Random) -> list[str]:
    paths = []
    for _ in range(60):
        names = [rng.choice(NAMES) for _ in range(rng.choice([1, 2, 3, 4]))]
        paths.append("/".join(names) + ("/" if rng.random() < 0.4 else ""))
    return paths


@pytest.mark.parametrize("seed", range(120))
def test_plain_lines_decide_as_pathspec_does(seed: int) -> None:
    """Random lines, each set read plain when all its lines are (most of them are made so)
    and by pathspec otherwise: the same verdict, and the same pattern deciding, for every
    path."""
    rng = random.Random(seed)
    lines = [_line(rng) for _ in range(rng.choice([1, 3, 8]))]
    if seed % 4:
        lines = [line for line in lines if patterns._plain_test([line]) is not None]
    lazy = anchored(BASE, lines, "label")
    eager = Patterns(BASE, gitignore_spec(lines).spec, "label")
    assert (lazy.bad, lazy.matching_nothing) == (gitignore_spec(lines).bad,
                                                 gitignore_spec(lines).matching_nothing)
    for path in _paths(rng):
        assert lazy.patterns.deciding(path) == eager.deciding(path), (lines, path)
        assert lazy.patterns.check(path) == eager.check(path), (lines, path)


def test_the_usual_gitignore_is_plain_and_its_test_lets_few_paths_through() -> None:
    lines = ["# Byte-compiled", "__pycache__/", "*.py[cod]", "*$py.class", "*.so", "build/",
             "*.egg-info/", ".coverage.*", "docs/_build/", "/site", "!keep.so", "wandb/**",
             "", "outputs-*/", "*.ckpt"]
    assert patterns._plain_test(lines) is not None
    read = anchored(BASE, lines, "ignored by .gitignore")
    assert read.patterns._spec is None  # nothing compiled yet
    for path in ("src/model.py", "src/", "tests/test_x.py", "README.md", "docs/index.md"):
        assert read.patterns.deciding(path) is None
    assert read.patterns._spec is None  # still nothing: no path could match
    assert read.patterns.deciding("pkg/x.so") == (True, "*.so")
    assert read.patterns.deciding("keep.so") == (False, "!keep.so")
    assert read.patterns.deciding("docs/_build/") == (True, "docs/_build/")


@pytest.mark.parametrize("line", ["!", "a\\ b", "[z-a]", "[!a]", "a b", " a", "a**b", "**",
                                  "*/**", "./a", "a/../b", "/", "a\\#"])
def test_lines_outside_the_plain_subset_go_to_pathspec_at_once(line: str) -> None:
    assert patterns._plain_test([line]) is None
    read = anchored(BASE, [line], "label")
    assert read.patterns._spec is not None
    spec = gitignore_spec([line])
    assert (read.bad, read.matching_nothing) == (spec.bad, spec.matching_nothing)


def test_a_walk_that_no_pattern_matches_never_imports_pathspec(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("build/\n*.so\n/site\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text("x = 1\n")
    script = ("import sys\nfrom pathlib import Path\n"
              "from neuron_migrate.files.discover import discover\n"
              f"found = discover([Path({str(tmp_path)!r})])\n"
              "assert [p.name for p in found.files] == ['model.py'], found.files\n"
              "print('pathspec' in sys.modules)\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.stdout.strip() == "False", run.stderr
