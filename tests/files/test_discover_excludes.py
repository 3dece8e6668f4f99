"""Which folders a walk skips, and the reason `-v` gives for each: default excludes at the
project root only, .gitignore and .git/info/exclude, `exclude` replacing the defaults and
`extend-exclude` adding to them (ruff's semantics), named files checked unless
`--force-exclude`, and never a bare "0 files scanned"."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_migrate import catalogue
from neuron_migrate.config import ConfigFinder
from neuron_migrate.files.discover import discover
from neuron_migrate.files.scope import Overrides, Scopes
from tests.conftest import cli

CODE = "import torch_xla\n"


def _touch(root: Path, *names: str, text: str = CODE) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _found(root: Path, *paths: str, **overrides: object) -> list[str]:
    """The files found under `paths` (relative to `root`, the working directory)."""
    scopes = Scopes(ConfigFinder(catalogue.rule_ids()),
                    Overrides(cwd=root.resolve(), **overrides))  # type: ignore[arg-type]
    found = discover([root / p for p in paths or (".",)], scopes=scopes)
    return sorted((root / f).resolve().relative_to(root.resolve()).as_posix()
                  for f in found.files)


def test_build_and_dist_are_skipped_at_the_project_root_only(in_tmp: Path) -> None:
    _touch(in_tmp, "build/b.py", "dist/d.py", "src/build/m.py", "src/dist/n.py", "keep.py")
    assert _found(in_tmp) == ["keep.py", "src/build/m.py", "src/dist/n.py"]
    assert _found(in_tmp, "src") == ["src/build/m.py", "src/dist/n.py"]  # cwd is the root
    # a configuration's folder is a project root of its own
    _touch(in_tmp, "pkg/pyproject.toml", text="[tool.neuron-migrate]\n")
    _touch(in_tmp, "pkg/build/x.py", "pkg/src/build/y.py")
    assert "pkg/build/x.py" not in _found(in_tmp) and "pkg/src/build/y.py" in _found(in_tmp)
    assert "build/b.py" in _found(in_tmp, default_excludes=False)


def test_always_skipped_folders_are_skipped_at_any_depth_whatever_the_options(
        in_tmp: Path) -> None:
    _touch(in_tmp, "a.py", "src/.venv/x.py", "src/node_modules/p/y.py", "src/__pycache__/z.py",
           "deep/er/.git/hooks/h.py", "lib/site-packages/s.py", "env/bin/e.py", "p.egg-info/i.py")
    (in_tmp / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    _touch(in_tmp, "pyproject.toml", text="[tool.neuron-migrate]\nexclude = []\n")
    assert _found(in_tmp, default_excludes=False, respect_gitignore=False) == ["a.py"]


def test_gitignore_nested_files_and_info_exclude_skip_folders_at_any_depth(
        in_tmp: Path) -> None:
    (in_tmp / ".git" / "info").mkdir(parents=True)
    (in_tmp / ".git" / "info" / "exclude").write_text("scratch/\n")
    (in_tmp / ".gitignore").write_text("build/\n")
    _touch(in_tmp, "src/build/m.py", "src/scratch/s.py", "src/sub/gen.py", "src/sub/ok.py",
           "src/a.py")
    (in_tmp / "src" / "sub" / ".gitignore").write_text("gen.py\n")
    assert _found(in_tmp) == ["src/a.py", "src/sub/ok.py"]
    assert _found(in_tmp, "src") == ["src/a.py", "src/sub/ok.py"]  # from above the folder too
    assert _found(in_tmp, respect_gitignore=False) == [
        "src/a.py", "src/build/m.py", "src/scratch/s.py", "src/sub/gen.py", "src/sub/ok.py"]


def test_info_exclude_of_a_linked_work_tree_is_the_main_one(tmp_path: Path) -> None:
    main_git = tmp_path / "main" / ".git"
    (main_git / "info").mkdir(parents=True)
    (main_git / "info" / "exclude").write_text("local/\n")
    linked = main_git / "worktrees" / "wt"
    linked.mkdir(parents=True)
    (linked / "commondir").write_text("../..\n")
    _touch(tmp_path, "wt/local/x.py", "wt/y.py")
    (tmp_path / "wt" / ".git").write_text(f"gitdir: {linked}\n")
    assert _found(tmp_path / "wt") == ["y.py"]


@pytest.mark.parametrize(("table", "overrides", "expected"), [
    ('exclude = ["other/"]', {}, ["build/b.py", "keep.py"]),  # exclude replaces the defaults
    ('extend-exclude = ["other/"]', {}, ["keep.py"]),  # extend-exclude adds to them
    ('exclude = ["other/"]', {"exclude": ("keep.py",)}, ["build/b.py", "other/o.py"]),
    ('extend-exclude = ["other/"]', {"extend_exclude": ("keep.py",)}, []),
    ("", {"extend_exclude": ("other",)}, ["keep.py"]),
])
def test_exclude_replaces_the_defaults_and_extend_exclude_adds(
        in_tmp: Path, table: str, overrides: dict[str, object], expected: list[str]) -> None:
    _touch(in_tmp, "build/b.py", "other/o.py", "keep.py")
    _touch(in_tmp, "pyproject.toml", text=f"[tool.neuron-migrate]\n{table}\n")
    assert _found(in_tmp, **overrides) == expected


def test_a_named_file_is_checked_even_if_excluded_unless_force_exclude(in_tmp: Path) -> None:
    _touch(in_tmp, "build/b.py", "vendor/v.py", ".venv/lib/x.py")
    _touch(in_tmp, "pyproject.toml", text='[tool.neuron-migrate]\nextend-exclude = ["vendor/"]\n')
    named = ["build/b.py", "vendor/v.py", ".venv/lib/x.py"]
    assert _found(in_tmp, *named) == sorted(named)
    assert _found(in_tmp, *named, force_exclude=True) == []
    run = cli("check", "-v", "--force-exclude", *named)
    assert run.exit_code == 0
    for line in ("skipped: build/b.py: default exclude 'build/' at the project root",
                 "skipped: vendor/v.py: extend-exclude in", "'vendor/'",
                 "skipped: .venv/lib/x.py: always skipped (virtualenvs or Python installs)"):
        assert line in run.stdout, run.stdout
    _touch(in_tmp, "pyproject.toml", text="[tool.neuron-migrate]\nforce-exclude = true\n")
    assert _found(in_tmp, "build/b.py") == []


def test_verbose_names_every_path_skipped_and_why(in_tmp: Path) -> None:
    (in_tmp / ".git").mkdir()
    (in_tmp / ".gitignore").write_text("gen/\n")
    _touch(in_tmp, "a.py", "build/b.py", "gen/g.py", "tests/t.py", "notes.txt", "x/.tox/y.py")
    run = cli("check", "-v", "--extend-exclude", "tests/", ".")
    shown = [line for line in run.stdout.splitlines() if line.startswith("skipped: ")]
    root = in_tmp.resolve()
    assert shown == [
        "skipped: .git/: always skipped (version control)",
        "skipped: .gitignore: not a file type neuron-migrate reads",
        f"skipped: build/: default exclude 'build/' at the project root {root}",
        f"skipped: gen/: ignored by {Path('.gitignore')} 'gen/'",
        "skipped: notes.txt: not a file type neuron-migrate reads",
        "skipped: tests/: --extend-exclude 'tests/'",
        "skipped: x/.tox/: always skipped (virtualenvs or Python installs)",
    ]


def test_no_file_found_says_why_instead_of_a_bare_count(in_tmp: Path) -> None:
    _touch(in_tmp, "build/b.py", "dist/d.py", "README.md")
    run = cli("check", ".")
    assert run.exit_code == 0 and "0 files scanned" in run.stdout
    assert "warning: no file to check: " in run.stderr
    assert "1 path excluded by default exclude 'build/' at the project root" in run.stderr
    assert "1 path excluded by default exclude 'dist/'" in run.stderr
    assert "1 path not a file type neuron-migrate reads" in run.stderr
    assert "-v lists every path and why" in run.stderr
    (in_tmp / "empty").mkdir()
    assert "nothing but empty folders" in cli("check", "empty").stderr
    assert "no file to check" not in cli("check", "-q", ".").stderr
