"""A pattern whose expression would try every split of a name among many wildcards
(`*a*a*a*a*a*b` against a long name of `a`s takes minutes) is passed over with a warning naming
where it is written, so a hostile `.gitignore` or configuration cannot stall a run. A run of
asterisks is read as git reads it (one wildcard), so a long run costs nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import cli
from neuron_migrate.files.patterns import MAX_WILDCARDS, gitignore_spec

XLA = "import torch_xla.core.xla_model as xm\nd = xm.xla_device()\n"
COSTLY = "*a" * (MAX_WILDCARDS + 1) + "b"


def test_a_pattern_with_too_many_wildcards_is_left_out_of_the_spec() -> None:
    read = gitignore_spec(["build/", COSTLY, "# *a*a*a*a*a*b is a comment"])
    assert read.too_costly == [(2, COSTLY)]
    assert [p.pattern for p in read.spec.patterns if p.include is not None] == ["build/"]


def test_as_many_wildcards_as_real_patterns_hold_are_kept() -> None:
    read = gitignore_spec(["**/build/**/*.o", "*_pb2*.py", "**/*.egg-info/**"])
    assert read.too_costly == []
    assert read.spec.match_file("a/build/x/y.o") and read.spec.match_file("m_pb2_grpc.py")


@pytest.mark.parametrize(("pattern", "matches", "misses"), [
    ("*" * 500 + "a", ["xa", "d/xa"], ["xb"]),           # one wildcard, not 500
    ("a***b", ["axyb", "ab"], ["a/b"]),                  # inside a segment: `*`
    ("***/x", ["x", "d/e/x"], ["y"]),                    # a whole segment: `**`
    ("d/***", ["d/e/f"], ["e/f"]),
    ("\\****", ["*x", "*"], ["x"]),                      # an escaped star stays literal
])
def test_a_run_of_asterisks_reads_as_git_reads_it(pattern: str, matches: list[str],
                                                  misses: list[str]) -> None:
    read = gitignore_spec([pattern])
    assert read.too_costly == []
    assert all(read.spec.match_file(path) for path in matches), pattern
    assert not any(read.spec.match_file(path) for path in misses), pattern
    regex = read.spec.patterns[0].regex.pattern
    assert regex.count("[^/]*") <= 1, regex


def test_the_warning_names_the_file_and_line_and_the_rest_applies(in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text(XLA)
    (in_tmp / "build").mkdir()
    (in_tmp / "build" / "generated.py").write_text(XLA)
    (in_tmp / ("a" * 60 + ".py")).write_text(XLA)
    (in_tmp / ".gitignore").write_text(f"build/\n{COSTLY}\n")
    run = cli("check", ".")
    assert run.exit_code == 1 and "Traceback" not in run.stderr, run.stderr
    assert f"warning: .gitignore:2: {COSTLY!r} has more than {MAX_WILDCARDS} wildcards" \
        in run.stderr
    assert "train.py" in run.stdout and "generated.py" not in run.stdout


def test_on_the_command_line_the_option_is_named(in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text(XLA)
    run = cli("check", "--exclude", COSTLY, ".")
    assert f"warning: --exclude: {COSTLY!r} has more than" in run.stderr
    assert "train.py" in run.stdout
