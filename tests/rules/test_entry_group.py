"""NM221: a script torchrun started under PJRT used XLA collectives and ordinals without a
process group. After `apply` it creates one at its entry, and runs as a data-parallel job."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

from neuron_migrate.analysis.script_entry import entry_statement
from neuron_migrate.smoke.run import SmokeOptions, run_smoke
from tests.conftest import cli

TORCHRUN_SCRIPT = '''\
import torch
import torch_xla.core.xla_model as xm


def train(steps):
    device = xm.xla_device()
    torch.manual_seed(xm.get_ordinal())  # replicas start apart: only averaging joins them
    model = torch.nn.Linear(4, 1).to(device)
    xm.broadcast_master_param(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        optimizer.zero_grad()
        data = torch.full((2, 4), float(xm.get_ordinal() + step), device=device)
        model(data).sum().backward()
        xm.optimizer_step(optimizer)


if __name__ == "__main__":
    train(3)
'''

GROUP = 'torch.distributed.init_process_group("neuron")'


def _apply(folder: Path, source: str, name: str = "train.py", *options: str
           ) -> tuple[str, list[dict]]:
    (folder / name).write_text(source)
    run = cli("apply", name, "--format", "json", *options)
    assert run.exit_code == 0, run.stdout + run.stderr
    return (folder / name).read_text(), run.json()["findings"]


def _rules(findings: list[dict]) -> set[str]:
    return {f["rule_id"] for f in findings}


@pytest.mark.slow
@pytest.mark.torch
def test_a_torchrun_script_without_spawn_trains_as_one_job(in_tmp: Path) -> None:
    """Without the group the migrated helpers stop the job (WORLD_SIZE 2, no group); with
    it the two replicas average their gradients and end equal."""
    text, findings = _apply(in_tmp, TORCHRUN_SCRIPT)
    entry = next(f for f in findings if f["rule_id"] == "NM221")
    assert entry["kind"] == "fix" and entry["applied"] and entry["line"] == 19
    assert "optimizer_step" in entry["message"] and "init_process_group" in entry["message"]
    assert text.index(GROUP) < text.index("    train(3)")
    result = run_smoke(SmokeOptions(script=in_tmp / "train.py", nproc=2, steps=3,
                                    check_replicas=True, timeout=300, python=sys.executable))
    assert result.passed, (result.error, [w.stderr_tail for w in result.workers])
    assert result.optimizer_steps == 3


@pytest.mark.parametrize("launch", [
    "import torch.distributed as dist\n\ndist.init_process_group('xla', init_method='xla://')\n",
    "import torch.distributed as dist\n\ndist.init_process_group(backend='gloo')\n",
    "import torch_xla.distributed.xla_multiprocessing as xmp\n\nxmp.spawn(train, args=(3,))\n",
])
def test_a_script_with_its_own_group_or_launch_gets_none_added(in_tmp: Path,
                                                               launch: str) -> None:
    head, main = TORCHRUN_SCRIPT.split('if __name__ == "__main__":\n')
    source = head + launch.split("\n\n")[0] + "\n\n\nif __name__ == \"__main__\":\n    " \
        + launch.split("\n\n")[1] + main
    text, findings = _apply(in_tmp, source)
    assert "NM221" not in _rules(findings)
    # the script's own, or NM220's (the helpers' error message names the call too)
    assert len(re.findall(r"^ *[\w.]+\.init_process_group\(", text, re.MULTILINE)) == 1


def test_a_module_without_a_main_block_is_left_to_its_caller(in_tmp: Path) -> None:
    library = TORCHRUN_SCRIPT.split('if __name__')[0].rstrip() + "\n"
    text, findings = _apply(in_tmp, library, "steps.py")
    assert "NM221" not in _rules(findings) and GROUP not in text


@pytest.mark.slow
@pytest.mark.torch
def test_the_launcher_that_imports_a_module_creates_the_group_in_its_main_block(
        in_tmp: Path) -> None:
    """A module a launcher imports never runs its own `__main__` block: the launcher's
    entry creates the group (here its ordinals make it a worker), the module's stays inert."""
    (in_tmp / "steps.py").write_text(TORCHRUN_SCRIPT.replace("train(3)", "train(1)"))
    launcher = ("import torch_xla.core.xla_model as xm\nfrom steps import train\n\n"
                "if __name__ == '__main__':\n    train(xm.xrt_world_size() + 1)\n")
    text, findings = _apply(in_tmp, launcher, "launch.py")
    assert "NM221" in _rules(findings) and GROUP in text
    assert cli("apply", "steps.py").exit_code == 0
    result = run_smoke(SmokeOptions(script=in_tmp / "launch.py", nproc=2, steps=3,
                                    check_replicas=True, timeout=300, python=sys.executable))
    assert result.passed, (result.error, [w.stderr_tail for w in result.workers])


@pytest.mark.slow
@pytest.mark.torch
def test_a_group_a_called_library_function_creates_is_created_once(in_tmp: Path) -> None:
    """The script's entry gets a group (NM221: it calls collectives and creates none in this
    file), and the function of another module it calls created one under XLA: that call now
    runs only if no group exists, rather than raise on the second `init_process_group`."""
    (in_tmp / "cluster.py").write_text(
        "import torch.distributed as dist\nimport torch_xla.distributed.xla_backend\n\n\n"
        "def join():\n    dist.init_process_group('xla', init_method='xla://')\n")
    script = TORCHRUN_SCRIPT.replace("import torch\n", "import torch\nfrom cluster import join\n")
    script = script.replace("def train(steps):\n", "def train(steps):\n    join()\n")
    (in_tmp / "train.py").write_text(script)
    run = cli("apply", ".", "--format", "json")
    assert run.exit_code == 0, run.stdout + run.stderr
    assert "NM221" in _rules(run.json()["findings"])
    assert "if not dist.is_initialized():" in (in_tmp / "cluster.py").read_text()
    result = run_smoke(SmokeOptions(script=in_tmp / "train.py", nproc=2, steps=3,
                                    check_replicas=True, timeout=300, python=sys.executable))
    assert result.passed, (result.error, [w.stderr_tail for w in result.workers])


def test_a_suppression_or_ignore_keeps_the_script_as_it_was(in_tmp: Path) -> None:
    silenced = TORCHRUN_SCRIPT.replace("    train(3)\n",
                                       "    train(3)  # neuron-migrate: ignore[NM221]\n")
    text, findings = _apply(in_tmp, silenced)
    assert "NM221" not in _rules(findings) and GROUP not in text
    assert "NM002" not in _rules(findings)  # the suppression was used
    text, findings = _apply(in_tmp, TORCHRUN_SCRIPT, "other.py", "--ignore", "NM221")
    assert "NM221" not in _rules(findings) and GROUP not in text


def test_torch_meaning_something_else_at_the_entry_is_reported(in_tmp: Path) -> None:
    source = "torch = None\n" + TORCHRUN_SCRIPT.replace("import torch\n", "")
    text, findings = _apply(in_tmp, source)
    entry = next(f for f in findings if f["rule_id"] == "NM221")
    assert entry["kind"] == "review" and not entry["applied"] and GROUP not in text


def test_a_notebook_is_one_process(in_tmp: Path) -> None:
    cell = TORCHRUN_SCRIPT.splitlines(keepends=True)
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                           "outputs": [], "source": cell}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (in_tmp / "train.ipynb").write_text(json.dumps(notebook))
    run = cli("apply", "train.ipynb", "--format", "json")
    assert "NM221" not in _rules(run.json()["findings"])
    assert GROUP.replace('"', '\\"') not in (in_tmp / "train.ipynb").read_text()


def _entry(source: str) -> str | None:
    """The entry, where the functions named `xla_*` stand for code a rule rewrites."""
    tree = ast.parse(source)
    found = entry_statement(tree, lambda statement: "xla_" in ast.unparse(statement))
    return None if found is None else ast.unparse(found)


def test_the_entry_is_where_the_module_s_own_work_starts() -> None:
    source = ("def main(args):\n    train(args)\n\n"
              "def train(args):\n    xla_step(args)\n\n"
              "def build_args():\n    return []\n\n"
              "if __name__ == '__main__':\n"
              "    '''Run it.'''\n"
              "    import sys\n"
              "    args = build_args() + sys.argv[1:]\n"
              "    os.environ['NEURON_RT_LOG_LEVEL'] = 'INFO'\n"
              "    if args:\n        print('bf16')\n        os.putenv('XLA_USE_BF16', '1')\n"
              "    elif os.environ.get('B'):\n        os.environ.update(B='1')\n"
              "    main(args)\n")
    assert _entry(source) == "main(args)"
    # device placement counts as work; environment settings never do
    assert _entry("if '__main__' == __name__:\n    os.environ.setdefault('A', '1')\n"
                  "    model = make().to(device)\n    run(model)\n") == "model = make().to(device)"
    # nothing of the module's own: the first statement after the imports
    assert _entry("import unittest\nif __name__ == '__main__':\n    import sys\n"
                  "    unittest.main()\n") == "unittest.main()"
    assert _entry("def main(): ...\nmain()\n") is None
    assert _entry("if __name__ == '__main__':\n    import runpy\n") is None
