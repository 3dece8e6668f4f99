"""Which files a run sees."""

from __future__ import annotations

import os
from pathlib import Path

from neuron_migrate.files.discover import discover
from tests.conftest import cli


def _names(root: Path, **kwargs) -> list[str]:
    found = discover([root], **kwargs)
    return sorted(p.relative_to(root).as_posix() for p in found.files)


def _touch(root: Path, *paths: str) -> None:
    for path in paths:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("import torch_xla\n")


def test_skips_vcs_virtualenv_package_and_build_folders(tmp_path: Path) -> None:
    _touch(tmp_path, "train.py", "pkg/model.py", ".git/hooks/x.py", "node_modules/a/b.py",
           "env/lib/site-packages/torch_xla/core.py", "myenv/bin/tool.py", "build/lib/m.py",
           "proj.egg-info/x.py", "notes.txt")
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    assert _names(tmp_path) == ["pkg/model.py", "train.py"]


def test_honours_nested_gitignore_files_with_negation(tmp_path: Path) -> None:
    _touch(tmp_path, "a.py", "gen/out.py", "sub/keep.py", "sub/skip.py", "sub/deep/skip.py")
    (tmp_path / ".gitignore").write_text("gen/\nskip.py\n")
    (tmp_path / "sub" / ".gitignore").write_text("!deep/skip.py\n")
    assert _names(tmp_path) == ["a.py", "sub/deep/skip.py", "sub/keep.py"]


def test_gitignore_above_the_given_folder_applies_inside_a_work_tree(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("generated_*.py\n")
    _touch(tmp_path, "src/generated_a.py", "src/real.py")
    assert _names(tmp_path / "src") == ["real.py"]


def test_exclude_globs_are_relative_to_the_working_directory(in_tmp: Path) -> None:
    _touch(in_tmp, "a.py", "tests/t.py", "vendor/x/y.py", "b_pb2.py", "src/gen/g.py",
           "other/src/gen/keep.py")
    assert _names(in_tmp, excludes=["tests/", "*_pb2.py", "vendor", "src/gen"]) == \
        ["a.py", "other/src/gen/keep.py"]


def test_symlinks_never_lead_out_of_the_tree_or_loop(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    tree = tmp_path / "tree"
    _touch(outside, "secret.py")
    _touch(tree, "a.py", "sub/b.py")
    (tree / "escape.py").symlink_to(outside / "secret.py")
    (tree / "outdir").symlink_to(outside, target_is_directory=True)
    (tree / "sub" / "loop").symlink_to(tree, target_is_directory=True)
    (tree / "alias.py").symlink_to(tree / "a.py")
    found = discover([tree])
    names = sorted(p.relative_to(tree).as_posix() for p in found.files)
    assert names == ["a.py", "sub/b.py"]  # alias.py is the same file as a.py
    assert any("escape.py" in s for s in found.skipped)


def test_explicit_file_is_taken_even_if_gitignored(in_tmp: Path) -> None:
    _touch(in_tmp, "ignored.py")
    (in_tmp / ".gitignore").write_text("ignored.py\n")
    assert [p.name for p in discover([Path("ignored.py")]).files] == ["ignored.py"]
    assert discover([Path(".")]).files == []


def test_missing_path_is_a_usage_error(in_tmp: Path) -> None:
    run = cli("apply", "nope.py")
    assert run.exit_code == 2
    assert "nope.py: no such file or directory" in run.stderr


def test_output_order_is_sorted(tmp_path: Path) -> None:
    _touch(tmp_path, "b.py", "a/z.py", "a/b.py", "c.py")
    assert _names(tmp_path) == ["a/b.py", "a/z.py", "b.py", "c.py"]
    assert os.listdir(tmp_path)  # sanity: the folder is not empty


def test_a_gitignore_line_git_cannot_read_is_passed_over_with_a_note(tmp_path: Path) -> None:
    """`!` alone is no pattern: git passes over it; pathspec raised, and the run ended in a
    traceback. The other lines still apply."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("generated_*.py\n!\n")
    for name in ("generated_a.py", "kept.py"):
        (tmp_path / "sub" / name).write_text("x = 1\n")
    found = discover([tmp_path])
    assert [p.name for p in found.files] == ["kept.py"]
    assert found.skipped == [f"{tmp_path / 'sub' / '.gitignore'}:2: '!' is not a gitignore "
                             "pattern; passed over, as git does"]
    assert not found.errors


def test_an_exclude_pattern_git_cannot_read_is_an_error_naming_it(in_tmp: Path) -> None:
    (in_tmp / "a.py").write_text("import torch_xla\n")
    run = cli("check", "--exclude", "build/", "--exclude", "!", ".")
    assert run.exit_code == 2 and "--exclude: '!' is not a gitignore pattern" in run.stderr
    for table in ('exclude = ["!"]', '[tool.neuron-migrate.per-file-ignores]\n"!" = ["NM1"]'):
        header = "" if table.startswith("[") else "[tool.neuron-migrate]\n"
        (in_tmp / "pyproject.toml").write_text(header + table + "\n")
        run = cli("check", ".")
        assert run.exit_code == 2 and "'!' is not a gitignore pattern" in run.stderr
        assert "Traceback" not in run.stderr
