"""The command line as a user meets it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_migrate.rules import all_rules
from tests.conftest import ROOT, cli

EXAMPLE = ROOT / "examples" / "xla_mnist" / "train.py"


def test_rules_lists_every_rule_with_its_kind() -> None:
    run = cli("rules")
    assert run.exit_code == 0
    for rule in all_rules():
        line = next(l for l in run.stdout.splitlines() if l.startswith(rule.id))
        assert rule.name in line and str(rule.kind) in line


def test_explain_prints_the_full_text() -> None:
    run = cli("explain", "NM110")
    assert run.exit_code == 0
    assert "Eager" in run.stdout or "eager" in run.stdout
    assert "Before:" in run.stdout and "xm.mark_step()" in run.stdout
    assert "https://awsdocs-neuron" in run.stdout
    assert cli("explain", "mark-step").stdout == run.stdout


def test_explain_unknown_rule() -> None:
    run = cli("explain", "NM000")
    assert run.exit_code == 2 and "no rule" in run.stderr


def test_json_report_is_one_object_with_positions(in_tmp: Path) -> None:
    shutil.copyfile(EXAMPLE, in_tmp / "train.py")
    run = cli("apply", "--dry-run", "--format", "json", "train.py")
    assert run.exit_code == 1
    report = run.json()
    assert report["schema_version"] == 2 and report["mode"] == "dry-run"
    assert report["summary"]["changed"] == 1
    device = next(f for f in report["findings"] if f["rule_id"] == "NM101")
    line = (in_tmp / "train.py").read_text().splitlines()[device["line"] - 1]
    assert line[device["column"] - 1:].startswith("xm.xla_device()")
    assert set(device) >= {"path", "line", "column", "rule_id", "kind", "message"}
    assert (in_tmp / "train.py").read_bytes() == EXAMPLE.read_bytes()


def test_check_exit_codes(in_tmp: Path) -> None:
    (in_tmp / "clean.py").write_text("import torch\n")
    assert cli("check", "clean.py").exit_code == 0
    (in_tmp / "old.py").write_text("import torch_xla\ntorch_xla.sync()\n")
    run = cli("check", ".")
    assert run.exit_code == 1 and "NM110" in run.stdout
    assert (in_tmp / "old.py").read_text() == "import torch_xla\ntorch_xla.sync()\n"
    (in_tmp / "broken.py").write_text("import torch_xla\ndef (:\n")
    assert cli("check", ".").exit_code == 2


def test_review_items_alone_make_dry_run_exit_1(in_tmp: Path) -> None:
    (in_tmp / "review.py").write_text("import torch_xla.runtime as xr\n"
                                      "devices = xr.global_runtime_device_count()\n")
    run = cli("apply", "--dry-run", "review.py")
    assert run.exit_code == 1 and "NM701" in run.stdout


_BF16 = 'import os\nos.environ["XLA_USE_BF16"] = "1"\n'
_BETA = "torch-neuronx==2.12.0\nneuronx-cc==2.*\nnki\n"


@pytest.mark.parametrize(("command", "name", "source"), [
    (["check"], "bf16.py", _BF16), (["apply", "--dry-run"], "bf16.py", _BF16),
    (["check"], "requirements.txt", _BETA), (["scan"], "requirements.txt", _BETA),
    (["apply", "--dry-run"], "requirements.txt", _BETA),
])
def test_an_unapplied_unsafe_fix_alone_fails_check(in_tmp: Path, command: list[str],
                                                    name: str, source: str) -> None:
    """An unsafe fix a run does not apply is left for a person ("1 to review"): check fails
    on it as on a review item, though nothing would change without --unsafe-fixes."""
    (in_tmp / name).write_text(source)
    run = cli(*command, "--format", "json", name)
    findings = run.json()["findings"]
    assert [f["kind"] for f in findings] == ["unsafe-fix"], findings
    assert not findings[0]["applied"]
    assert run.exit_code == 1
    assert (in_tmp / name).read_text() == source


def test_select_and_ignore(in_tmp: Path) -> None:
    source = "import torch_xla.core.xla_model as xm\nd = xm.xla_device()\nxm.mark_step()\n"
    (in_tmp / "a.py").write_text(source)
    run = cli("apply", "--dry-run", "--format", "json", "--ignore", "NM110", "a.py")
    ids = {f["rule_id"] for f in run.json()["findings"]}
    assert "NM101" in ids and "NM110" not in ids and "NM701" not in ids
    run = cli("apply", "--dry-run", "--format", "json", "--select", "NM11", "a.py")
    ids = {f["rule_id"] for f in run.json()["findings"]}
    assert "NM110" in ids and "NM101" not in ids
    bad = cli("apply", "--select", "NM999", "a.py")
    assert bad.exit_code == 2 and "unknown rule" in bad.stderr


@pytest.mark.parametrize("flags", [["--ignore", "NM110,NM101"], ["--ignore=NM110, NM101"],
                                   ["--ignore", "NM110", "--ignore", "NM101"]])
def test_rule_lists_are_comma_separated_as_in_ruff(in_tmp: Path, flags: list[str]) -> None:
    (in_tmp / "a.py").write_text("import torch_xla.core.xla_model as xm\n"
                                 "d = xm.xla_device()\nxm.mark_step()\nxm.master_print(d)\n")
    run = cli("check", "--format", "json", *flags, "a.py")
    ids = {f["rule_id"] for f in run.json()["findings"]}
    assert "NM204" in ids and not ids & {"NM110", "NM101"}
    run = cli("check", "--format", "json", "--select", "NM110,NM101", "a.py")
    assert {f["rule_id"] for f in run.json()["findings"]} == {"NM110", "NM101"}
    bad = cli("check", "--select", "NM110,NM999", "a.py")
    assert bad.exit_code == 2 and "'NM999'" in bad.stderr


def test_unknown_format_is_a_usage_error(in_tmp: Path) -> None:
    (in_tmp / "a.py").write_text("x = 1\n")
    run = cli("apply", "--format", "xml", "a.py")
    assert run.exit_code == 2


def test_installed_console_script_runs() -> None:
    script = shutil.which("neuron-migrate", path=str(Path(sys.executable).parent))
    assert script is not None, "the neuron-migrate console script is not installed"
    done = subprocess.run([script, "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.startswith("neuron-migrate ")


def test_readme_example_command(in_tmp: Path) -> None:
    run = cli("apply", "--dry-run", EXAMPLE)
    assert run.exit_code == 1
    for rule_id in ("NM101", "NM110", "NM201", "NM202"):
        assert rule_id in run.stdout
    assert "+    device = torch.device(\"neuron\")" in run.stdout


def test_annotate_marks_review_lines_once(in_tmp: Path) -> None:
    source = ("import torch_xla.distributed.xla_multiprocessing as xmp\n\n\n"
              "def main():\n    xmp.spawn(run, args=())\n")
    (in_tmp / "launch.py").write_text(source)
    assert cli("apply", "--annotate", "launch.py").exit_code == 0
    annotated = (in_tmp / "launch.py").read_text()
    assert "    # neuron-migrate: NM220 " in annotated
    assert annotated.index("# neuron-migrate: NM220") < annotated.index("xmp.spawn")
    cli("apply", "--annotate", "launch.py")
    assert (in_tmp / "launch.py").read_text() == annotated
    (in_tmp / "plain.py").write_text(source)
    cli("apply", "plain.py")
    assert "neuron-migrate:" not in (in_tmp / "plain.py").read_text()


def test_no_compile_leaves_the_model_uncompiled(in_tmp: Path) -> None:
    source = ("import torch\nimport torch_xla.core.xla_model as xm\n\n"
              "model = torch.nn.Linear(2, 2).to(xm.xla_device())\n"
              "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n")
    (in_tmp / "a.py").write_text(source)
    (in_tmp / "b.py").write_text(source)
    cli("apply", "--no-compile", "a.py")
    cli("apply", "b.py")
    assert ".compile(" not in (in_tmp / "a.py").read_text()
    assert "model.compile(backend=\"neuron\", dynamic=False)" in (in_tmp / "b.py").read_text()


def test_unsafe_fixes_flag_applies_them(in_tmp: Path) -> None:
    source = ("import torch\nimport torch_xla.core.xla_model as xm\nfrom torch.nn.parallel import "
              "DistributedDataParallel as DDP\n\nmodel = DDP(model)\n"
              "opt = torch.optim.SGD(model.parameters())\nxm.optimizer_step(opt)\n")
    (in_tmp / "a.py").write_text(source)
    (in_tmp / "b.py").write_text(source)
    cli("apply", "a.py")
    assert (in_tmp / "a.py").read_text().endswith("\n_neuron_optimizer_step(opt)\n")
    cli("apply", "--unsafe-fixes", "b.py")
    assert (in_tmp / "b.py").read_text().endswith("model = DDP(model)\n"
                                                  "opt = torch.optim.SGD(model.parameters())\n"
                                                  "opt.step()\n")
    assert "torch_xla" not in (in_tmp / "a.py").read_text()
    assert "torch_xla" not in (in_tmp / "a.py").read_text()
