"""NM816: what a script's spawn call says, where a launch line's script is, and the rewrite
through the CLI (scan --fix and apply), notebooks included."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from neuron_migrate import runner, schedule
from neuron_migrate.deps import scan_source
from neuron_migrate.deps.spawners import spawner_at, spawner_of
from neuron_migrate.model import Kind, Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from neuron_migrate.rules.launch import Spawn
from tests.conftest import cli

SPAWNS = ("import torch_xla.distributed.xla_multiprocessing as xmp\n\n"
          "def _mp_fn(index):\n    pass\n\n"
          "if __name__ == '__main__':\n    xmp.spawn(_mp_fn, nprocs={n})\n")


@pytest.fixture(autouse=True)
def _spawn_is_rewritten(monkeypatch: pytest.MonkeyPatch) -> None:
    """NM816 rewrites a launch line only where NM220 rewrites the script's spawn call."""
    monkeypatch.setattr(Spawn, "kind", Kind.FIX)


def _registry(**options: object) -> Registry:
    return Registry(all_rules(), Options(**options))  # type: ignore[arg-type]


@pytest.mark.parametrize(("source", "count", "why"), [
    ("import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(f, args=(), nprocs=4)",
     4, "nprocs=4"),
    ("from torch_xla.distributed import xla_multiprocessing as m\nm.spawn(f, (1,), 2)", 2,
     "nprocs=2"),
    ("import torch_xla.distributed.xla_multiprocessing\n"
     "torch_xla.distributed.xla_multiprocessing.spawn(f)", None, "nprocs was omitted"),
    ("import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(f, nprocs=None)",
     None, "nprocs was omitted"),
    ("import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(f, nprocs=a.n)", None,
     "`a.n`"),
    ("import torch_xla\ntorch_xla.launch(f, args=())", None, "torch_xla.launch"),
    ("import torch_xla\ntorch_xla.launch(f, debug_single_process=True)", 1, "debug_single"),
    ("def main():\n    import torch_xla.distributed.xla_multiprocessing as xmp\n"
     "    xmp.spawn(f, nprocs=1)\n    xmp.spawn(g, nprocs=8)\n", None, "different numbers"),
])
def test_the_spawn_call_and_its_count(source: str, count: int | None, why: str) -> None:
    spawner = spawner_of(source.encode())
    assert spawner is not None and spawner.count == count and why in spawner.why


@pytest.mark.parametrize("source", [
    "import torch_xla\n# we used to call xmp.spawn here\n",
    "import torch.multiprocessing as mp\nmp.spawn(f, nprocs=8)  # not torch_xla\n",
    "import torch_xla\ndef spawn(): pass\nspawn()\n",
    "import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(\n",  # unparsable
    "print('no xla at all')\n",
])
def test_scripts_that_do_not_spawn(source: str) -> None:
    assert spawner_of(source.encode()) is None


@pytest.mark.parametrize(("source", "held"), [
    ("xmp.spawn(f, *rest, nprocs=2)", "unpacked or unknown"),
    ("xmp.spawn(f, nprocs=2, timeout=3)", "unpacked or unknown"),
    ("class T:\n    def test(self):\n        xmp.spawn(f, nprocs=2)", "not in the script's entry"),
    ("def unused():\n    xmp.spawn(f, nprocs=2)", "not in the script's entry"),
    ("xmp.spawn(f, nprocs=2, join=False)", "join=False"),
    ("ctx = xmp.spawn(f, nprocs=2)", "result is used"),
    ("def main():\n    xmp.spawn(f, nprocs=2)\n\ndef go():\n    main()\n\n"
     "if __name__ == '__main__':\n    go()", None),
    ("if __name__ == '__main__':\n    xmp.spawn(f, (1,), 2, True)", None),
])
def test_calls_the_python_migration_leaves_for_review(source: str, held: str | None) -> None:
    spawner = spawner_of(b"import torch_xla.distributed.xla_multiprocessing as xmp\n" +
                         source.encode())
    assert spawner is not None
    assert (spawner.held is None) if held is None else (held in (spawner.held or ""))


def test_a_launch_of_a_script_kept_for_review_is_only_reported(in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text("import torch_xla.distributed.xla_multiprocessing as xmp\n"
                                     "ctx = xmp.spawn(f, nprocs=2, join=False)\n")
    result = scan_source("run.sh", b"python train.py\n", _registry(), fix=True)
    (finding,) = result.findings
    assert finding.kind is Kind.REVIEW and "NM220 leaves the spawn call" in finding.message
    assert result.new_source is None


def test_a_changed_script_is_read_again(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SPAWNS.format(n=8))
    assert spawner_at(script).count == 8  # type: ignore[union-attr]
    script.write_text(SPAWNS.format(n=16))
    os.utime(script, ns=(1, 1))  # a new stamp even within the clock's resolution
    assert spawner_at(script).count == 16  # type: ignore[union-attr]


def test_scripts_are_found_from_the_launcher_and_the_root(in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text(SPAWNS.format(n=8))
    (in_tmp / "scripts").mkdir()
    (in_tmp / "scripts" / "run.sh").write_text("python train.py\n")
    result = scan_source("scripts/run.sh", b"python train.py\n", _registry(), fix=True)
    assert result.new_source == b"torchrun --nproc-per-node=8 train.py\n"


def test_two_candidates_that_disagree_are_only_reported(in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text("print('evaluate')\n")
    (in_tmp / "scripts").mkdir()
    (in_tmp / "scripts" / "train.py").write_text(SPAWNS.format(n=8))
    result = scan_source("scripts/run.sh", b"python train.py\n", _registry(), fix=True)
    (finding,) = result.findings
    assert finding.kind is Kind.REVIEW and "may be any of" in finding.message
    assert result.new_source is None


def test_a_line_continuation_inside_the_replaced_words_is_only_reported(in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text(SPAWNS.format(n=8))
    data = b"python3 -u \\\n  train.py --x 1\npython3 \\\n  -u train.py\n"
    result = scan_source("run.sh", data, _registry(), fix=True)
    assert [(f.line, f.kind) for f in result.findings] == [(1, Kind.FIX), (3, Kind.REVIEW)]
    assert result.new_source == (b"torchrun --nproc-per-node=8 \\\n  train.py --x 1\n"
                                 b"python3 \\\n  -u train.py\n")


def test_with_the_spawn_rule_off_the_line_is_only_reported(in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text(SPAWNS.format(n=8))
    result = scan_source("run.sh", b"python train.py\n", _registry(ignore=frozenset({"NM220"})),
                         fix=True)
    (finding,) = result.findings
    assert finding.kind is Kind.REVIEW and "NM220 is not enabled" in finding.message
    assert result.new_source is None


def test_while_nm220_only_reports_the_line_is_only_reported(
        in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Spawn, "kind", Kind.REVIEW)
    (in_tmp / "train.py").write_text(SPAWNS.format(n=8))
    result = scan_source("run.sh", b"python train.py\n", _registry(), fix=True)
    (finding,) = result.findings
    assert finding.kind is Kind.REVIEW and "NM220 only reports" in finding.message
    assert result.new_source is None


def test_ignoring_the_rule_leaves_launch_lines_unread(in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text(SPAWNS.format(n=8))
    result = scan_source("run.sh", b"python train.py\n", _registry(ignore=frozenset({"NM816"})),
                         fix=True)
    assert not result.findings and result.new_source is None


def test_scan_fix_rewrites_the_launch_and_leaves_the_script(in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text(SPAWNS.format(n=2))
    (in_tmp / "run.sh").write_text("#!/bin/sh\nexec python3 -u train.py \"$@\"\n")
    assert cli("scan", ".").exit_code == 1
    fixed = cli("scan", "--fix", ".")
    assert fixed.exit_code == 0, fixed.stdout
    assert (in_tmp / "run.sh").read_text() == \
        "#!/bin/sh\nexec torchrun --nproc-per-node=2 train.py \"$@\"\n"
    assert (in_tmp / "train.py").read_text() == SPAWNS.format(n=2)
    assert cli("scan", ".").exit_code == 0


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_apply_rewrites_the_launch_with_the_script(in_tmp: Path, jobs: str) -> None:
    (in_tmp / "a_train.py").write_text(SPAWNS.format(n=4))  # before the launchers by name
    (in_tmp / "run.sh").write_text("python a_train.py\n")
    (in_tmp / "Dockerfile").write_text('FROM python:3.11\nCOPY . /app\nWORKDIR /app\n'
                                       'CMD ["python", "a_train.py"]\n')
    assert cli("apply", "-j", jobs, ".").exit_code in (0, 1)
    assert (in_tmp / "run.sh").read_text() == "torchrun --nproc-per-node=4 a_train.py\n"
    assert (in_tmp / "Dockerfile").read_text().endswith(
        'CMD ["torchrun", "--nproc-per-node=4", "a_train.py"]\n')
    again = cli("apply", "-j", jobs, ".")
    assert "NM816" not in again.stdout


def test_apply_reads_launchers_before_it_writes_python(in_tmp: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch line must see the script as it was, not as this run rewrote it."""
    for name in ("b.py", "run.sh", "a.py", "job.yaml"):
        (in_tmp / name).write_text("x = 1\n" if name.endswith(".py") else "echo\n")
    seen: list[str] = []
    monkeypatch.setattr(schedule, "process_data", lambda path, data, job: seen.append(path.name)
                        or runner.FileResult(str(path)))
    runner.run([Path(".")], _registry(), write=True)
    assert seen == ["job.yaml", "run.sh", "a.py", "b.py"]
    seen.clear()
    runner.run([Path(".")], _registry(), write=False)
    assert seen == ["a.py", "b.py", "job.yaml", "run.sh"]


def test_a_notebook_line_launching_its_written_script_is_rewritten(in_tmp: Path) -> None:
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
              "source": "%%writefile train_nb.py\n" + SPAWNS.format(n=2)},
             {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
              "source": "!python3 train_nb.py --epochs 1\n!torchrun --nproc-per-node=2 x.py"}]
    notebook = {"cells": cells, "metadata": {"language_info": {"name": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    (in_tmp / "t.ipynb").write_text(json.dumps(notebook))
    report = cli("check", "t.ipynb", "--format", "json").json()
    (launch,) = [f for f in report["findings"] if f["rule_id"] == "NM816"]
    assert launch["cell"] == 1 and launch["line"] == 1 and launch["kind"] == "fix"
    assert "torchrun --nproc-per-node=2" in launch["message"]
    cli("apply", "t.ipynb")
    cells = json.loads((in_tmp / "t.ipynb").read_text())["cells"]
    assert cells[1]["source"] == ("!torchrun --nproc-per-node=2 train_nb.py --epochs 1\n"
                                  "!torchrun --nproc-per-node=2 x.py")
    again = cli("check", "t.ipynb", "--format", "json").json()
    assert not [f for f in again["findings"] if f["rule_id"] == "NM816"]


def test_a_notebook_line_is_rewritten_beside_python_the_cell_migrates(in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text(SPAWNS.format(n=4))
    source = ("import torch_xla.core.xla_model as xm\n"
              "device = xm.xla_device()\n"
              "!python train.py  # four workers\n")
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [],
                           "execution_count": None, "source": source}],
                "metadata": {"language_info": {"name": "python"}}, "nbformat": 4,
                "nbformat_minor": 5}
    (in_tmp / "t.ipynb").write_text(json.dumps(notebook))
    cli("apply", "t.ipynb")
    (cell,) = json.loads((in_tmp / "t.ipynb").read_text())["cells"]
    assert "!torchrun --nproc-per-node=4 train.py  # four workers\n" in cell["source"]
    assert "xla_device" not in cell["source"]


def test_a_tree_without_spawning_scripts_gets_no_launch_findings(in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text("import torch\nprint(torch.ones(1))\n")
    (in_tmp / "run.sh").write_text("python train.py\npython missing.py\n")
    (in_tmp / "ci.yaml").write_text("jobs:\n  t:\n    steps:\n      - run: python train.py\n")
    assert cli("scan", "--fix", ".").exit_code == 0
    assert (in_tmp / "run.sh").read_text() == "python train.py\npython missing.py\n"


@pytest.mark.parametrize(("dockerfile", "fixed"), [
    # a later COPY of the same folder wins; WORKDIR relative to the one before
    ("FROM a\nCOPY old/ /app/\nCOPY src/ /app/\nWORKDIR /\nWORKDIR app\nCMD python train.py\n",
     True),
    # one file copied into a folder, by its name
    ("FROM a\nCOPY --chown=1000 src/train.py /opt/\nCMD [\"python\", \"/opt/train.py\"]\n", True),
    # another stage's files are not the build context's
    ("FROM a\nCOPY --from=builder /out /app\nWORKDIR /app\nCMD python train.py\n", False),
    # a new stage forgets the last one's WORKDIR and copies
    ("FROM a\nCOPY src/ /app/\nWORKDIR /app\nFROM b\nCMD python train.py\n", False),
])
def test_container_paths_follow_copy_and_workdir(in_tmp: Path, dockerfile: str,
                                                 fixed: bool) -> None:
    (in_tmp / "src").mkdir()
    (in_tmp / "src" / "train.py").write_text(SPAWNS.format(n=8))
    (in_tmp / "old").mkdir()
    (in_tmp / "old" / "train.py").write_text("print('old')\n")
    result = scan_source("Dockerfile", dockerfile.encode(), _registry(), fix=True)
    assert (result.new_source is not None) == fixed
    assert any(f.rule_id == "NM816" for f in result.findings) == fixed


@pytest.mark.parametrize(("script", "fixed"), [
    ("pushd src\npython train.py\npopd\n", True),
    ("pushd src\npopd\npython train.py\n", False),  # back where it started: no train.py
    ("cd ~/checkouts/project/src && python train.py\n", True),  # a tail found under a root
    ("cd /somewhere/else && python train.py\n", False),
    ("cd \"$UNKNOWN\" && python train.py\n", False),
    ("python src/train.py\n", True),
    ("python -m src\n", True),  # a package's __main__.py
])
def test_host_paths_follow_the_directory_changes(in_tmp: Path, script: str,
                                                 fixed: bool) -> None:
    (in_tmp / "src").mkdir()
    (in_tmp / "src" / "train.py").write_text(SPAWNS.format(n=8))
    (in_tmp / "src" / "__main__.py").write_text(SPAWNS.format(n=8))
    result = scan_source("run.sh", script.encode(), _registry(), fix=True)
    assert (result.new_source is not None) == fixed, result.findings


def test_a_notebook_cd_makes_a_launch_ambiguous_rather_than_moving_it(in_tmp: Path) -> None:
    """`!cd sub` does not move the next `!` line (each runs in its own shell), `%cd sub` does:
    both places are looked in, and two different scripts are only reported."""
    (in_tmp / "sub").mkdir()
    (in_tmp / "sub" / "train.py").write_text(SPAWNS.format(n=2))
    (in_tmp / "train.py").write_text("print('evaluate')\n")
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [],
                           "execution_count": None, "source": "!cd sub\n!python train.py\n"}],
                "metadata": {"language_info": {"name": "python"}}, "nbformat": 4,
                "nbformat_minor": 5}
    (in_tmp / "t.ipynb").write_text(json.dumps(notebook))
    report = cli("check", "t.ipynb", "--format", "json").json()
    (launch,) = [f for f in report["findings"] if f["rule_id"] == "NM816"]
    assert launch["kind"] == "review" and "may be any of" in launch["message"]
