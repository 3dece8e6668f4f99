"""`--from cuda`: CUDA scripts become neuron scripts, only when asked, with the XLA migration's
guarantees (fixtures, idempotence, line endings, dry-run diffs git applies), and the migrated
scripts run on the emulated neuron device."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from tests.conftest import FIXTURES, after_of, cli, copy_fixture, fixture_id
from tests.snapshots import assert_matches_snapshot

CUDA_FIXTURES = sorted((FIXTURES / "cuda").glob("*.before.py"))
CUDA = Options(sources=frozenset({"xla", "cuda"}))


def _prefix(before: Path) -> str | None:
    head = fixture_id(before).split("_", 1)[0]
    return head if head.startswith("NMC") else None


@pytest.mark.parametrize("before", CUDA_FIXTURES, ids=fixture_id)
def test_apply_from_cuda_produces_the_after_file(before: Path, in_tmp: Path) -> None:
    target = copy_fixture(before, in_tmp)
    run = cli("apply", "--from", "cuda", target.name, "--format", "json")
    assert run.exit_code == 0, run.stdout + run.stderr
    assert target.read_bytes() == after_of(before).read_bytes()
    rule = _prefix(before)
    if rule is not None:
        assert rule in {f["rule_id"] for f in run.json()["findings"]}
    assert_matches_snapshot(before, f"apply --from cuda {target.name}", run.json()["findings"])
    again = cli("apply", "--from", "cuda", target.name, "--format", "json")
    assert target.read_bytes() == after_of(before).read_bytes()
    assert not any(f["applied"] for f in again.json()["findings"])


@pytest.mark.parametrize("before", CUDA_FIXTURES, ids=fixture_id)
def test_without_from_cuda_cuda_code_is_left_alone(before: Path, in_tmp: Path) -> None:
    """Many repositories keep their CUDA path on purpose: the default run changes nothing
    and reports nothing of it."""
    target = copy_fixture(before, in_tmp)
    run = cli("apply", target.name, "--format", "json")
    assert run.exit_code == 0, run.stdout + run.stderr
    assert target.read_bytes() == before.read_bytes()
    assert not [f for f in run.json()["findings"] if f["rule_id"].startswith("NMC")]


@pytest.mark.parametrize("variant", ["crlf", "bom"])
@pytest.mark.parametrize("before", CUDA_FIXTURES, ids=fixture_id)
def test_line_endings_and_bom_survive(before: Path, variant: str) -> None:
    def convert(data: bytes) -> bytes:
        return data.replace(b"\n", b"\r\n") if variant == "crlf" else b"\xef\xbb\xbf" + data

    registry = Registry(all_rules(), CUDA)
    result = migrate_source("f.py", convert(before.read_bytes()), registry)
    assert result.error is None
    new = result.new_source or convert(before.read_bytes())
    assert new == convert(after_of(before).read_bytes())


def test_dry_run_diff_applies_with_git(in_tmp: Path) -> None:
    for before in CUDA_FIXTURES:
        copy_fixture(before, in_tmp)
    subprocess.run(["git", "init", "-q"], cwd=in_tmp, check=True)
    run = cli("apply", "--dry-run", "--from", "cuda", ".")
    assert run.exit_code == 1
    patch = "".join(re.findall(r"^(?:---|\+\+\+|@@| |\+|-).*\n", run.stdout, re.MULTILINE))
    (in_tmp / "change.patch").write_text(patch)
    applied = subprocess.run(["git", "apply", "change.patch"], cwd=in_tmp, capture_output=True,
                             text=True, check=False)
    assert applied.returncode == 0, applied.stderr
    for before in CUDA_FIXTURES:
        assert (in_tmp / before.name.replace(".before", "")).read_bytes() == \
            after_of(before).read_bytes()


def test_configuration_asks_for_cuda(in_tmp: Path) -> None:
    before = FIXTURES / "cuda" / "NMC401_ddp_torchrun.before.py"
    target = copy_fixture(before, in_tmp)
    (in_tmp / "pyproject.toml").write_text('[tool.neuron-migrate]\nfrom = ["xla", "cuda"]\n')
    assert cli("apply", target.name).exit_code == 0
    assert target.read_bytes() == after_of(before).read_bytes()


def test_comma_separated_from_and_check(in_tmp: Path) -> None:
    target = copy_fixture(FIXTURES / "cuda" / "NMC101_mnist_example.before.py", in_tmp)
    run = cli("check", "--from", "xla,cuda", target.name, "--format", "json")
    assert run.exit_code == 1
    assert {"NMC101", "NMC102", "NMC103"} <= {f["rule_id"] for f in run.json()["findings"]}
    assert cli("check", target.name).exit_code == 0


@pytest.mark.parametrize("config", ['from = ["rocm"]', 'from = "cuda"'])
def test_an_unknown_source_in_the_configuration_is_an_error(config: str, in_tmp: Path) -> None:
    (in_tmp / "pyproject.toml").write_text(f"[tool.neuron-migrate]\n{config}\n")
    (in_tmp / "a.py").write_text("x = 1\n")
    run = cli("check", "a.py")
    assert run.exit_code == 2 and "from" in run.stderr


def test_an_unknown_source_on_the_command_line_is_a_usage_error(in_tmp: Path) -> None:
    (in_tmp / "a.py").write_text("x = 1\n")
    run = cli("check", "--from", "rocm", "a.py")
    assert run.exit_code == 2 and "rocm" in run.stderr


def test_every_cuda_rule_is_exercised_by_a_cuda_fixture() -> None:
    registry = Registry(all_rules(), CUDA)
    seen: set[str] = set()
    for before in CUDA_FIXTURES:
        seen |= {f.rule_id for f in migrate_source(before.name, before.read_bytes(),
                                                   registry).findings}
    for expected in FIXTURES.glob("deps/cuda_*/findings.txt"):  # the scanner's (NMC8xx)
        seen |= set(re.findall(r"NMC8\d\d", expected.read_text()))
    assert {r.id for r in all_rules() if r.source == "cuda"} <= seen


@pytest.mark.parametrize(("source", "expected"), [
    ("x = t.cuda(0)\n", 'x = t.to("neuron:0")\n'),
    ("x = t.cuda('cuda:1')\n", "x = t.to('neuron:1')\n"),
    ("x = t.cuda(device)\n", "x = t.to(device)\n"),
    ("import torch\nx = t.cuda(args.gpu)\n", 'import torch\nx = t.to(torch.device("neuron", args.gpu))\n'),
    ("ok = t.is_cuda and flag\n", 'ok = t.device.type == "neuron" and flag\n'),
    ("import torch\ntorch.compile(m, backend='inductor', dynamic=True)\n",
     "import torch\ntorch.compile(m, backend='neuron', dynamic=False)\n"),
    ("import torch\ntorch.compile(m, backend='eager')\n", "import torch\ntorch.compile(m, backend='eager')\n"),
    ("import torch.distributed as dist\nb = dist.Backend.NCCL\n",
     'import torch.distributed as dist\nb = "neuron"\n'),
    ("import torch\nwith torch.amp.autocast('cuda', enabled=amp):\n    pass\n",
     "import torch\nwith torch.amp.autocast('neuron', enabled=amp, dtype=torch.bfloat16):\n    pass\n"),
    ("import torch\n\n@torch.cuda.amp.autocast(enabled=False)\ndef f(x):\n    pass\n",
     "import torch\n\n@torch.autocast(\"neuron\", enabled=False)\ndef f(x):\n    pass\n"),
    ("import torch\nwith torch.autocast('cpu'):\n    pass\n",
     "import torch\nwith torch.autocast('cpu'):\n    pass\n"),
    ("from torch.cuda.amp import autocast\nwith autocast(enabled=False):\n    pass\n",
     "import torch\n\nwith torch.autocast(\"neuron\", enabled=False):\n    pass\n"),
    ("from torch.cuda.amp import autocast\nwith autocast():\n    pass\n",
     "import torch\n\nwith torch.autocast(\"neuron\", dtype=torch.bfloat16):\n    pass\n"),
    # the import still has a user, so it stays
    ("from torch.cuda.amp import autocast\nwith autocast():\n    pass\nctx = autocast\n",
     "import torch\nfrom torch.cuda.amp import autocast\nwith torch.autocast(\"neuron\", "
     "dtype=torch.bfloat16):\n    pass\nctx = autocast\n"),
    ("import torch.cuda\ntorch.cuda.synchronize()\nx = torch.ones(1)\n",
     "import torch.cuda\ntorch.neuron.synchronize()\nx = torch.ones(1)\n"),
])
def test_cuda_rewrites(source: str, expected: str) -> None:
    result = migrate_source("f.py", source.encode(), Registry(all_rules(), CUDA))
    assert result.error is None
    assert (result.new_source or source.encode()).decode() == expected


def test_a_cuda_attribute_that_is_not_called_is_left_alone() -> None:
    """`cfg.cuda`, `self.cuda`: in real code (NeMo) such attributes hold settings (a GPU
    index, a flag) far more often than the bound method."""
    source = b"if cfg.cuda is None:\n    cfg.cuda = 0\nmodel.cuda()\n"
    result = migrate_source("f.py", source, Registry(all_rules(), CUDA))
    assert result.new_source == b"if cfg.cuda is None:\n    cfg.cuda = 0\nmodel.to(\"neuron\")\n"
    assert [(f.line, f.rule_id) for f in result.findings] == [(3, "NMC101")]


def test_a_cuda_string_that_leaves_the_file_is_reported_not_renamed() -> None:
    source = b'import os\n\nos.environ["DEVICE"] = "cuda"\n'
    result = migrate_source("f.py", source, Registry(all_rules(), CUDA))
    assert result.new_source in (None, source)
    assert [f.rule_id for f in result.findings] == ["NMC102"]


# ------------------------------------------------------------------ end to end, on the emulator
def _migrate(name: str, directory: Path) -> Path:
    script = directory / "train.py"
    shutil.copyfile(FIXTURES / "cuda" / f"{name}.before.py", script)
    report = cli("apply", "--from", "cuda", "train.py", "--format", "json").json()
    assert not [f for f in report["findings"] if f["kind"] == "review"]
    assert "cuda" not in re.sub(r"use_cuda|no_cuda|no-cuda|CUDA", "", script.read_text())
    return script


@pytest.mark.slow
@pytest.mark.torch
def test_migrated_single_process_cuda_script_trains_on_the_emulated_device(in_tmp: Path) -> None:
    _migrate("NMC101_mnist_example", in_tmp)
    run = cli("smoke", "train.py", "--steps", "3", "--logs", "logs")
    assert run.exit_code == 0, run.stdout + run.stderr
    assert "PASSED" in run.stdout and "optimizer steps: 3" in run.stdout
    log = (in_tmp / "logs" / "rank0.out").read_text()
    assert "Loss:" in log


@pytest.mark.slow
@pytest.mark.torch
def test_migrated_torchrun_ddp_script_keeps_its_replicas_in_step(in_tmp: Path) -> None:
    _migrate("NMC401_ddp_torchrun", in_tmp)
    run = cli("smoke", "train.py", "--nproc", "2", "--steps", "3", "--check-replicas")
    assert run.exit_code == 0, run.stdout + run.stderr
    assert "PASSED" in run.stdout and "optimizer steps: 3" in run.stdout
    assert "c10d::allreduce_" in run.stdout  # DDP averaged the gradients


@pytest.mark.slow
@pytest.mark.torch
def test_unmigrated_cuda_script_fails_in_smoke_with_a_cuda_diagnosis(in_tmp: Path) -> None:
    shutil.copyfile(FIXTURES / "cuda" / "NMC401_ddp_torchrun.before.py", in_tmp / "train.py")
    run = cli("smoke", "train.py", "--nproc", "2", "--steps", "3")
    assert run.exit_code != 0
    assert "leftover CUDA call" in run.stdout
    # the rule that rewrites the failing line (torch.cuda.set_device at line 17) is named
    assert "would fix: `neuron-migrate apply --from cuda` rewrites train.py:17: " \
        "NMC103 (cuda-device-module)" in run.stdout


@pytest.mark.torch
def test_a_cuda_device_left_in_a_migrated_script_names_the_rules_of_the_file(
        in_tmp: Path) -> None:
    """The run fails where the "cuda" string is used, not where it is written: with no
    finding on the failing line, the file's CUDA findings are listed."""
    script = in_tmp / "train.py"
    script.write_text('import torch\n\ndevice = "cuda"\nx = torch.ones(2).to(device)\n'
                      "model = torch.nn.Linear(2, 1).cuda()\nprint(model(x))\n")
    run = cli("smoke", "train.py")
    assert run.exit_code != 0
    assert "leftover CUDA call" in run.stdout
    assert "rewrites 2 CUDA use(s) in train.py: NMC102 (cuda-device-string) at line 3, " \
        "NMC101 (cuda-method) at line 5" in run.stdout


def test_notebooks_are_migrated_from_cuda_too(in_tmp: Path) -> None:
    import json

    cell = {"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {},
            "outputs": [], "source": ["import torch\n", "model = model.cuda()\n",
                                      "torch.cuda.synchronize()"]}
    notebook = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (in_tmp / "nb.ipynb").write_text(json.dumps(notebook, indent=1))
    assert cli("apply", "nb.ipynb").exit_code == 0
    assert "cuda" in (in_tmp / "nb.ipynb").read_text()  # not asked: left alone
    assert cli("apply", "--from", "cuda", "nb.ipynb").exit_code == 0
    source = json.loads((in_tmp / "nb.ipynb").read_text())["cells"][0]["source"]
    assert source == ["import torch\n", "model = model.to(\"neuron\")\n",
                      "torch.neuron.synchronize()"]


def test_the_executable_takes_from_cuda(in_tmp: Path) -> None:
    """`--from` is not one of the lean entry's options: the line goes to the typer app."""
    import sys

    from tests.conftest import ROOT

    (in_tmp / "t.py").write_text("import torch\n\ntorch.cuda.synchronize()\n")
    done = subprocess.run([sys.executable, "-m", "neuron_migrate", "apply", "--from", "cuda", "t.py"],
                          cwd=in_tmp, capture_output=True, text=True, check=False,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert (in_tmp / "t.py").read_text() == "import torch\n\ntorch.neuron.synchronize()\n"


def test_multi_line_calls_keep_one_argument_a_line() -> None:
    source = ("import torch\n\nm = model.cuda(\n    device=rank,\n    non_blocking=True,\n)\n"
              "c = torch.compile(\n    model,\n    mode=\"reduce-overhead\",\n)\n")
    expected = ("import torch\n\nm = model.to(\n    torch.device(\"neuron\", rank),\n"
                "    non_blocking=True,\n)\n"
                "c = torch.compile(\n    model,\n    backend=\"neuron\",\n    dynamic=False,\n)\n")
    result = migrate_source("f.py", source.encode(), Registry(all_rules(), CUDA))
    assert (result.new_source or b"").decode() == expected


def test_catalogue_tokens_match_the_cuda_registry() -> None:
    from neuron_migrate import catalogue

    assert catalogue.tokens(CUDA.sources) == Registry(all_rules(), CUDA).tokens
    assert b"cuda" not in catalogue.tokens()


def test_a_cuda_model_placement_is_not_compiled_on_a_second_run() -> None:
    """CUDA code ran eagerly: NM503 (which compiles what XLA always compiled) does not take
    the `.to("neuron")` the CUDA rules wrote for an XLA placement on the next run."""
    source = (b"import torch\n\nmodel = torch.nn.DataParallel(model).cuda()\n"
              b"optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n")
    registry = Registry(all_rules(), CUDA)
    once = migrate_source("f.py", source, registry).new_source
    assert once is not None and b'.to("neuron")' in once and b"compile" not in once
    assert migrate_source("f.py", once, registry).new_source in (None, once)
