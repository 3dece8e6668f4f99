"""`helpers-module`: migrated files import their helpers from one module of the repository,
which the run writes (only what they use, in a fixed order, once), and a file that could not
import it is refused."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_migrate.config import ConfigError, parse_config
from neuron_migrate.engine.shared_helpers import import_name
from neuron_migrate.helpers_module import defined, module_text, updated
from neuron_migrate.rules.emitted_helpers import HELPERS
from tests.conftest import FIXTURES, cli

REPO = FIXTURES / "helpers_module"
MODULE = Path("myproj/neuron_helpers.py")


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture
def repo(in_tmp: Path) -> Path:
    shutil.copytree(REPO, in_tmp, dirs_exist_ok=True)
    return in_tmp


def test_apply_writes_one_module_the_files_import(repo: Path) -> None:
    run = cli("apply", ".")
    assert run.exit_code == 2  # the script that cannot import the module is refused
    assert "scripts/export.py: not rewritten" in run.stdout + run.stderr
    assert "put that module in scripts/" in run.stdout + run.stderr
    assert "torch_xla" in (repo / "scripts" / "export.py").read_text()  # left as it was
    train = (repo / "train.py").read_text()
    checkpoint = (repo / "myproj" / "models" / "checkpoint.py").read_text()
    assert "from myproj.neuron_helpers import _neuron_optimizer_step\n" in train
    assert "from myproj.neuron_helpers import _neuron_save\n" in checkpoint
    assert "def _neuron" not in train + checkpoint  # no copies
    module = (repo / MODULE).read_text()
    assert defined(module) == ["_neuron_to_device", "_neuron_distributed",
                               "_neuron_average_tensors", "_neuron_reduce_gradients",
                               "_neuron_optimizer_step", "_neuron_save"]
    assert module == module_text(["_neuron_save", "_neuron_optimizer_step"], HELPERS)
    assert "neuron_migrate" not in module + train + checkpoint


def test_a_second_apply_changes_nothing(repo: Path) -> None:
    cli("apply", ".")
    (repo / "scripts" / "export.py").unlink()
    before = _tree(repo)
    run = cli("apply", ".")
    assert run.exit_code == 0, run.stdout + run.stderr
    assert _tree(repo) == before


def test_check_reports_the_module_it_would_write_and_writes_nothing(repo: Path) -> None:
    before = _tree(repo)
    run = cli("check", ".")
    assert run.exit_code == 2  # the refused script
    assert "myproj/neuron_helpers.py: 1 change" in run.stdout
    assert "NM003" in run.stdout and "write the helpers" in run.stdout
    assert _tree(repo) == before


def test_a_later_file_adds_its_helpers_and_keeps_the_others(repo: Path) -> None:
    (repo / "scripts" / "export.py").unlink()
    cli("apply", ".")
    (repo / "myproj" / "report.py").write_text(
        "import torch_xla.core.xla_model as xm\n\n\ndef total(x):\n"
        "    return xm.all_reduce(xm.REDUCE_SUM, x)\n")
    assert cli("apply", "myproj/report.py").exit_code == 0
    names = defined((repo / MODULE).read_text())
    assert names is not None and "_neuron_all_reduce" in names and "_neuron_save" in names
    assert "from myproj.neuron_helpers import _neuron_all_reduce" in \
        (repo / "myproj" / "report.py").read_text()


def test_a_module_edited_by_hand_gets_the_missing_helpers_appended() -> None:
    edited = module_text(["_neuron_save"], HELPERS) + "\n\nVERSION = 2\n"
    new = updated(edited, ["_neuron_save", "_neuron_all_reduce"], HELPERS)
    assert new is not None and new.startswith(edited.rstrip("\n"))
    assert defined(new)[-1] == "_neuron_all_reduce"  # type: ignore[index]
    assert updated(new, ["_neuron_all_reduce"], HELPERS) is None


def test_the_import_follows_the_package_layout(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").touch()
    (tmp_path / "pkg" / "sub" / "__init__.py").touch()
    (tmp_path / "tools").mkdir()
    module = str(tmp_path / "pkg" / "helpers.py")
    assert import_name(str(tmp_path / "pkg" / "sub" / "a.py"), module) == "pkg.helpers"
    assert import_name(str(tmp_path / "run.py"), module) == "pkg.helpers"
    assert import_name(str(tmp_path / "tools" / "t.py"), module) is None  # not below it
    (tmp_path / "pkg" / "sub" / "__init__.py").unlink()  # a plain folder on the way
    assert import_name(str(tmp_path / "run.py"), str(tmp_path / "pkg" / "sub" / "h.py")) is None


@pytest.mark.parametrize("value", [3, "helpers", "my-proj/helpers.py", "/abs/../x.txt"])
def test_a_helpers_module_that_cannot_be_imported_is_a_configuration_error(value: object
                                                                          ) -> None:
    with pytest.raises(ConfigError, match="helpers-module"):
        parse_config(Path("pyproject.toml"), {"helpers-module": value}, frozenset(),
                     Path("."))


@pytest.mark.torch
@pytest.mark.slow
def test_the_migrated_script_runs_with_its_imported_helpers(repo: Path) -> None:
    (repo / "scripts" / "export.py").unlink()
    assert cli("apply", ".").exit_code == 0
    run = cli("smoke", "train.py", "--", "--steps", "2")
    assert run.exit_code == 0, run.stdout + run.stderr
    assert "optimizer steps: 2" in run.stdout and (repo / "model.pt").exists()


def _stdin(source: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "neuron_migrate", "apply", "--stdin-filename",
                           "myproj/models/checkpoint.py", "-"], input=source, text=True,
                          capture_output=True, cwd=cwd, timeout=120)


def test_standard_input_imports_only_helpers_the_module_already_has(repo: Path) -> None:
    (repo / "scripts" / "export.py").unlink()
    source = (repo / "myproj" / "models" / "checkpoint.py").read_text()
    early = _stdin(source, repo)
    assert early.returncode == 2 and "run `neuron-migrate apply` on the file" in early.stderr
    assert cli("apply", ".").exit_code == 0
    late = _stdin(source, repo)
    assert late.returncode == 0, late.stderr
    assert "from myproj.neuron_helpers import _neuron_save" in late.stdout
