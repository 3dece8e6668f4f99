"""A module that imports torch only inside its functions keeps doing so: the helpers the
migration adds import torch in their own bodies, not at the top of the file."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import migrated

LAZY = '''\
"""A command line that answers --help without loading torch."""
import argparse


def train(out):
    import torch
    import torch_xla.core.xla_model as xm

    model = torch.nn.Linear(2, 2).to(xm.xla_device())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.ones(1, 2)).sum().backward()
    xm.optimizer_step(optimizer)
    xm.save(model.state_dict(), out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="m.pt")
    return parser
'''


def _imports_torch_on_load(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.Import) and any(a.name == "torch" for a in node.names)
               for node in tree.body)


def test_helpers_import_torch_in_their_bodies() -> None:
    text, _ = migrated(LAZY)
    tree = ast.parse(text)
    assert not _imports_torch_on_load(tree)
    helpers = [n for n in tree.body if isinstance(n, ast.FunctionDef)
               and n.name.startswith("_neuron_")]
    assert {"_neuron_save", "_neuron_optimizer_step"} <= {h.name for h in helpers}
    for helper in helpers:
        if "torch" in ast.unparse(helper):
            assert any(isinstance(s, ast.Import) and s.names[0].name == "torch"
                       for s in helper.body[:2]), helper.name


def test_a_module_that_imports_torch_at_the_top_keeps_one_import_there() -> None:
    text, _ = migrated("import torch\n" + LAZY.replace("    import torch\n", ""))
    tree = ast.parse(text)
    assert _imports_torch_on_load(tree)
    assert "    import torch\n" not in text


def test_a_replacement_in_the_module_code_keeps_the_top_level_import() -> None:
    source = LAZY.replace("def main():", "import torch_xla.core.xla_model as xm\n\n"
                          "print(xm.xla_device())\n\n\ndef main():")
    text, _ = migrated(source)
    assert _imports_torch_on_load(ast.parse(text))


@pytest.mark.slow
@pytest.mark.torch
def test_the_migrated_module_loads_without_torch_and_still_trains(tmp_path: Path) -> None:
    text, _ = migrated(LAZY)
    (tmp_path / "light.py").write_text(text)
    probe = "import sys, light\nassert 'torch' not in sys.modules, 'torch loaded'\n"
    run = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                         text=True, check=False)
    assert run.returncode == 0, run.stderr
    space: dict[str, object] = {}
    exec(compile(text, "light.py", "exec"), space)
    import torch

    model = torch.nn.Linear(2, 2)
    model(torch.ones(1, 2)).sum().backward()
    space["_neuron_save"](model.state_dict(), str(tmp_path / "m.pt"))  # type: ignore[operator]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    space["_neuron_optimizer_step"](optimizer)  # type: ignore[operator]
    assert set(torch.load(tmp_path / "m.pt")) == {"weight", "bias"}
