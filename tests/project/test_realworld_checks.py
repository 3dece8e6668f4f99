"""The counting behind benchmarks/realworld.py (the benchmark itself needs public checkouts and
is never run here): XLA-era file selection, undefined names, leftover torch_xla references."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from realworld_checks import (cuda_era_files, leftover_xla, notebook_source,  # noqa: E402
                              undefined_names, xla_era_files)
from realworld_data import generate_data  # noqa: E402


def test_xla_era_files_takes_xla_sources_and_neuron_dependency_files(tmp_path: Path) -> None:
    files = {
        "train.py": "import torch_xla.core.xla_model as xm\n",
        "plain.py": "import torch\n",
        "nb.ipynb": json.dumps({"cells": [{"cell_type": "code", "source": "xm.xla_device()"}]}),
        "requirements.txt": "torch-neuronx==2.1.2\n",
        "requirements-dev.txt": "pytest\n",
        "docker/Dockerfile-train": "RUN pip install torch-neuronx\n",
        "docs/Dockerfile-train.rst": "RUN pip install torch-neuronx\n",
        "sub/.git/hooks/x.py": "import torch_xla\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = [p.relative_to(tmp_path).as_posix() for p in xla_era_files(tmp_path)]
    assert found == ["docker/Dockerfile-train", "nb.ipynb", "requirements.txt", "train.py"]
    assert xla_era_files(tmp_path, ("docker",)) == [tmp_path / "docker/Dockerfile-train"]


def test_cuda_era_files_takes_code_that_uses_cuda(tmp_path: Path) -> None:
    files = {"ddp.py": "dist.init_process_group('nccl')\n", "gpu.py": "x = t.cuda()\n",
             "dev.py": "d = torch.device(\"cuda:0\")\n", "plain.py": "import torch\n",
             "words.py": "# runs on cuda or the CPU\n", "requirements.txt": "torch\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    found = [p.name for p in cuda_era_files(tmp_path)]
    assert found == ["ddp.py", "dev.py", "gpu.py"]


def test_undefined_names_counts_loads_and_exports_by_name() -> None:
    source = "__all__ = ['gone']\nprint(met.report(), met)\ndef f():\n    return x\n"
    assert undefined_names(source) == {"gone": 1, "met": 2, "x": 1}
    assert undefined_names("import met\nprint(met)\n") == {}
    assert undefined_names("def (:\n") == {"<syntax error>": 1}


def test_a_removed_import_shows_as_a_gained_name() -> None:
    before = "import torch_xla.debug.metrics as met\nprint(met.metrics_report())\n"
    after = "print(met.metrics_report())\n"
    assert undefined_names(after) - undefined_names(before) == {"met": 1}


def test_notebook_source_joins_code_cells_and_neutralises_magics() -> None:
    notebook = {"cells": [
        {"cell_type": "markdown", "source": ["# title"]},
        {"cell_type": "code", "source": ["!pip install torch-neuronx\n", "import torch"]},
        {"cell_type": "code", "source": "  %time x = 1"},
    ]}
    assert notebook_source(json.dumps(notebook)) == "pass\nimport torch\n\n  pass\n"
    assert notebook_source("not json") == ""


def test_leftover_xla_counts_imports_and_the_uses_of_their_names() -> None:
    source = ("import torch_xla.core.xla_model as xm\n"
              "from torch_xla.debug import metrics\n"
              "import torch_xla\n"
              "import os\n"
              "xm.mark_step(); xm.mark_step(); print(metrics, os.sep)\n"
              "torch_xla.sync()\n")
    assert leftover_xla(source) == {"torch_xla.core.xla_model": 3,
                                    "torch_xla.debug.metrics": 2, "torch_xla": 2}
    assert leftover_xla("import torch\ntorch.xla = 1\n") == {}


def test_mnist_data_has_the_idx_layout_torchvision_reads(tmp_path: Path) -> None:
    root = generate_data("mnist", tmp_path, "data")
    images = (root / "MNIST/raw/train-images-idx3-ubyte").read_bytes()
    labels = (root / "MNIST/raw/t10k-labels-idx1-ubyte").read_bytes()
    magic, count, rows, columns = struct.unpack(">IIII", images[:16])
    assert (magic, rows, columns) == (0x803, 28, 28) and len(images) == 16 + count * 28 * 28
    assert struct.unpack(">II", labels[:8])[0] == 0x801 and max(labels[8:]) < 10


def test_smoke_options_follow_the_script_list() -> None:
    from realworld import smoke_options

    assert smoke_options({}) == ["--nproc", "2", "--steps", "3", "--check-replicas"]
    assert smoke_options({"nproc": 1, "steps": 1}) == ["--nproc", "1", "--steps", "1"]
    assert smoke_options({"check_replicas": False}) == ["--nproc", "2", "--steps", "3"]


def test_the_script_list_names_known_repositories_and_data_sets() -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    from realworld import SCRIPTS
    from realworld_data import GENERATORS

    settings = tomllib.loads(SCRIPTS.read_text(encoding="utf-8"))
    names = [entry["name"] for entry in settings["script"]]
    assert len(names) == len(set(names)) >= 20
    for entry in settings["script"]:
        assert entry["repo"] in settings["repos"] and not Path(entry["path"]).is_absolute()
        assert entry.get("data") is None or entry["data"] in GENERATORS
        assert set(entry) <= {"name", "repo", "path", "args", "data", "data_root", "needs",
                              "steps", "nproc", "check_replicas", "heavy"}


def test_scripts_the_run_could_not_try_are_not_counted() -> None:
    from realworld import ScriptOutcome, render_scripts

    outcomes = [ScriptOutcome("a", "r/a.py", [], None, "passed"),
                ScriptOutcome("b", "r/b.py", [], None, "failed", "NameError: x"),
                ScriptOutcome("c", "r/c.py", [], None, "skipped", "no torchvision"),
                ScriptOutcome("d", "r/d.py", [], None, "missing", "checkout not given")]
    first = render_scripts(outcomes).splitlines()[0]
    assert first == ("Training scripts that run under smoke: 1 of 2 (1 skipped: heavy, or the "
                     "interpreter lacks what they need; 1 missing: no checkout)")
