"""`check --baseline` / `--write-baseline`, and `--exit-zero`."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from tests.conftest import cli

PROBE = 'HAS = importlib.util.find_spec("torch_xla")\n'


def _repository(root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "a.py").write_text("import importlib.util\n\n" + PROBE + PROBE)
    (root / "requirements.txt").write_text("transformers-neuronx\n")


def test_write_then_check_against_the_baseline(in_tmp: Path) -> None:
    _repository(in_tmp)
    assert cli("check", ".").exit_code == 1
    written = cli("check", "--write-baseline", "baseline.json", ".")
    assert written.exit_code == 0 and "wrote 3 findings" in written.stdout
    document = json.loads((in_tmp / "baseline.json").read_text())
    assert document["findings"] == [
        {"path": "pkg/a.py", "rule_id": "NM715",
         "source": 'HAS = importlib.util.find_spec("torch_xla")', "count": 2},
        {"path": "requirements.txt", "rule_id": "NM807", "source": "transformers-neuronx",
         "count": 1}]
    assert cli("check", "--baseline", "baseline.json", ".").exit_code == 0
    # the same from another folder: paths are the baseline file's, not the working folder's
    assert cli("check", "--baseline", str(in_tmp / "baseline.json"),
               str(in_tmp / "pkg")).exit_code == 0


def test_lines_that_move_still_match_and_a_third_copy_is_new(in_tmp: Path) -> None:
    _repository(in_tmp)
    cli("check", "--write-baseline", "baseline.json", ".")
    code = in_tmp / "pkg" / "a.py"
    code.write_text("import os\n\n\n" + code.read_text().replace("HAS =", "HAS  ="))
    assert cli("check", "--baseline", "baseline.json", ".").exit_code == 0
    code.write_text(code.read_text() + "\n\ndef f():\n    " + PROBE)
    run = cli("check", "--baseline", "baseline.json", ".", "--format", "json")
    assert run.exit_code == 1
    assert [(f["rule_id"], f["line"]) for f in run.json()["findings"]] == [("NM715", 11)]


def test_fixed_findings_are_listed_as_stale_and_do_not_fail(in_tmp: Path) -> None:
    _repository(in_tmp)
    cli("check", "--write-baseline", "baseline.json", ".")
    (in_tmp / "requirements.txt").write_text("numpy\n")
    run = cli("check", "--baseline", "baseline.json", ".")
    assert run.exit_code == 0
    assert "1 baseline finding no longer found" in run.stderr
    assert "requirements.txt: NM807: transformers-neuronx" in run.stderr


def test_a_fix_in_the_baseline_does_not_fail_the_check(in_tmp: Path) -> None:
    (in_tmp / "requirements.txt").write_text("torch-neuronx==2.1.0\n")
    assert cli("check", ".").exit_code == 1
    cli("check", "--write-baseline", "b.json", ".")
    assert cli("check", "--baseline", "b.json", ".").exit_code == 0


def test_a_bad_baseline_is_an_error_naming_the_file(in_tmp: Path) -> None:
    _repository(in_tmp)
    (in_tmp / "b.json").write_text("{not json")
    run = cli("check", "--baseline", "b.json", ".")
    assert run.exit_code == 2 and "b.json:1: not a baseline" in run.stderr
    (in_tmp / "b.json").write_text('{"version": 1, "findings": [{"path": "x"}]}')
    run = cli("check", "--baseline", "b.json", ".")
    assert run.exit_code == 2 and "entry 0" in run.stderr
    run = cli("check", "--baseline", "missing.json", ".")
    assert run.exit_code == 2 and "missing.json" in run.stderr
    assert cli("check", "--baseline", "b.json", "--write-baseline", "c.json", ".").exit_code == 2


def test_exit_zero_reports_but_succeeds(in_tmp: Path) -> None:
    _repository(in_tmp)
    run = cli("check", "--exit-zero", ".")
    assert run.exit_code == 0 and "NM715" in run.stdout
    assert cli("scan", "--exit-zero", ".").exit_code == 0
    assert cli("scan", ".").exit_code == 1
    (in_tmp / "bad.py").write_text("import torch_xla\ndef (:\n")
    assert cli("check", "--exit-zero", ".").exit_code == 2  # errors still fail


def test_a_baseline_naming_a_file_of_the_run_is_refused_before_anything_is_written(
        in_tmp: Path) -> None:
    _repository(in_tmp)
    code = in_tmp / "pkg" / "a.py"
    before = code.read_bytes()
    (in_tmp / "link.py").symlink_to(code)
    os.link(code, in_tmp / "hard.py")
    for name in ("pkg/a.py", "link.py", "hard.py"):
        run = cli("check", "--write-baseline", name, "pkg")
        assert run.exit_code == 2, name
        assert f"--write-baseline {name}: is " in run.stderr
        assert "the baseline would replace it" in run.stderr
        assert code.read_bytes() == before


def test_a_baseline_that_is_not_a_regular_file_is_refused_not_read(in_tmp: Path) -> None:
    """A pipe would wait for a writer forever and `/dev/zero` never ends: neither is read."""
    _repository(in_tmp)
    (in_tmp / "b.json").symlink_to(os.devnull)
    run = cli("check", "--baseline", "b.json", ".")
    assert run.exit_code == 2
    assert "b.json: not a regular file (a character device); not read as a baseline" in run.stderr


def test_the_baseline_is_replaced_whole_keeping_its_mode_and_link(in_tmp: Path) -> None:
    _repository(in_tmp)
    (in_tmp / "real.json").write_text("{}")
    (in_tmp / "real.json").chmod(0o640)
    (in_tmp / "b.json").symlink_to("real.json")
    assert cli("check", "--write-baseline", "b.json", ".").exit_code == 0
    assert (in_tmp / "b.json").is_symlink()
    assert json.loads((in_tmp / "real.json").read_text())["findings"]
    assert stat.S_IMODE((in_tmp / "real.json").stat().st_mode) == 0o640


def test_a_baseline_write_that_fails_leaves_the_old_baseline(in_tmp: Path,
                                                              monkeypatch) -> None:
    _repository(in_tmp)
    (in_tmp / "b.json").write_text("the accepted findings")

    def full(fd: int, data: bytes) -> None:
        os.write(fd, data[:10])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("neuron_migrate.files.fileio.write_all", full)
    run = cli("check", "--write-baseline", "b.json", ".")
    assert run.exit_code == 2
    assert "b.json: cannot write the baseline (No space left on device)" in run.stderr
    assert (in_tmp / "b.json").read_text() == "the accepted findings"
    assert sorted(p.name for p in in_tmp.iterdir()) == ["b.json", "pkg", "requirements.txt"]
