"""NM718: XLA code inside strings (a script a program writes out, a `python -c` probe) is
reported once per string at its line, naming the XLA APIs in it, and never rewritten; prose that
names an API is not code."""

from __future__ import annotations

import textwrap

import pytest

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import FileResult, Kind
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from neuron_migrate.rules.generated_code import xla_apis

REGISTRY = Registry(all_rules())


def _migrate(source: str) -> FileResult:
    result = migrate_source("gen.py", textwrap.dedent(source).encode(), REGISTRY)
    assert result.error is None, result.error
    return result


def _reported(result: FileResult) -> list[tuple[int, str]]:
    found = [f for f in result.findings if f.rule_id == "NM718"]
    assert all(f.kind is Kind.REVIEW and not f.applied for f in found)
    return [(f.line, f.message) for f in found]


def test_a_dedented_template_is_reported_at_its_line_and_left_as_it_is() -> None:
    result = _migrate('''\
        import textwrap

        SCRIPT = textwrap.dedent("""\\
            import torch_xla.core.xla_model as xm
            import torch_xla.distributed.xla_multiprocessing as xmp

            def _mp_fn(index):
                xm.mark_step()

            xmp.spawn(_mp_fn, args=())
        """)
        open("train.py", "w").write(SCRIPT)
    ''')
    found = _reported(result)
    assert [line for line, _ in found] == [3]
    for api in ("`import torch_xla.core.xla_model`",
                "`import torch_xla.distributed.xla_multiprocessing`", "`xm.mark_step()`",
                "`xmp.spawn()`"):
        assert api in found[0][1]
    assert result.new_source is None  # nothing inside the string is rewritten


def test_each_string_is_one_finding_and_a_written_literal_counts() -> None:
    result = _migrate('''\
        import subprocess

        open("worker.py", "w").write("""
        import torch_xla
        device = torch_xla.device()
        torch_xla.sync()
        """)
        subprocess.run(["python", "-c", "import torch_xla.runtime as xr; print(xr.world_size())"])
    ''')
    found = _reported(result)
    assert [line for line, _ in found] == [3, 8]
    assert "`import torch_xla`, `torch_xla.device()`, `torch_xla.sync()`" in found[0][1]
    assert "`xr.world_size()`" in found[1][1]


def test_a_string_beside_migrated_code_stays_while_the_code_around_it_is_migrated() -> None:
    result = _migrate('''\
        import torch
        import torch_xla.core.xla_model as xm

        TEMPLATE = "import torch_xla.core.xla_model as xm\\nxm.mark_step()\\n"
        device = xm.xla_device()
    ''')
    assert [line for line, _ in _reported(result)] == [4]
    new = (result.new_source or b"").decode()
    assert 'device = torch.device("neuron")' in new
    assert 'TEMPLATE = "import torch_xla.core.xla_model as xm\\nxm.mark_step()\\n"' in new


@pytest.mark.parametrize("text", [
    "call xm.mark_step() after every step",  # prose naming an API
    "import torch_xla failed: install torch-xla first",  # an error message
    "torch_xla.core.xla_model",  # a module name (NM715's)
    "import pytorch_lightning as pl\ntrainer = pl.Trainer(max_epochs=1)\n",  # Lightning's `pl`
    "import torch\nx = torch.ones(2)\n",  # code without XLA
])
def test_strings_that_are_not_xla_code_are_not_reported(text: str) -> None:
    assert xla_apis(text) == []
    result = _migrate(f"import torch_xla  # parses the file\n\nVALUE = {text!r}\n")
    assert _reported(result) == []


def test_a_docstring_showing_xla_code_is_not_reported() -> None:
    result = _migrate('''\
        import torch_xla


        def step():
            """Ends the step, like:

                import torch_xla.core.xla_model as xm
                xm.mark_step()
            """
    ''')
    assert _reported(result) == []


def test_pl_counts_only_as_torch_xlas_parallel_loader() -> None:
    assert xla_apis("loader = pl.MpDeviceLoader(data, device)\n") == \
        ["pl.MpDeviceLoader()"]
    assert xla_apis("model = pl.LightningModule()\n") == []
