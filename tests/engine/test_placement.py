"""Where added code goes: imports into their isort section, helpers after the whole import
block and before their first use, comments kept where they were."""

from __future__ import annotations

from tests.conftest import migrated


def _migrate(source: str) -> str:
    return migrated(source)[0]


def test_helpers_go_after_imports_that_follow_a_sys_path_block() -> None:
    new = _migrate("import sys\n\nsys.path.insert(0, '.')\nLIMIT = 3\n\n"
                   "import torch\nimport torch_xla.core.xla_model as xm\nimport utils\n\n\n"
                   "def step(opt):\n    xm.optimizer_step(opt)\n")
    lines = new.splitlines()
    helper = lines.index("def _neuron_distributed():")
    assert lines.index("import utils") < helper < lines.index("def step(opt):")
    assert lines.index("sys.path.insert(0, '.')") < lines.index("import torch")


def test_a_helper_used_at_the_top_level_is_defined_before_that_use() -> None:
    new = _migrate("import torch\nimport torch_xla.distributed.parallel_loader as pl\n\n"
                   "loader = pl.MpDeviceLoader(data, torch.device('cpu'))\n"
                   "import late_module\n\n\nprint(loader)\n")
    assert new.index("class _NeuronDeviceLoader") < new.index("loader = _NeuronDeviceLoader(")
    assert new.index("import torch") < new.index("class _NeuronDeviceLoader")


def test_an_added_stdlib_import_joins_the_standard_library_section_in_order() -> None:
    new = _migrate("import argparse\nimport sys\n\nimport torch\n"
                   "import torch_xla.core.xla_model as xm\n\n\n"
                   "def main():\n    print(xm.get_ordinal())\n")
    assert new.startswith("import argparse\nimport os\nimport sys\n\nimport torch\n")


def test_a_new_section_is_set_apart_by_a_blank_line() -> None:
    new = _migrate("import torch\nimport torch_xla.core.xla_model as xm\n\n\n"
                   "def main():\n    print(xm.get_ordinal())\n")
    assert new.startswith("import os\n\nimport torch\n")


def test_a_heading_comment_stays_above_the_block_it_heads() -> None:
    new = _migrate('"""Doc."""\n# third-party\nimport torch\n'
                   "import torch_xla.core.xla_model as xm\n\n\n"
                   "def main():\n    print(xm.get_ordinal())\n")
    assert new.startswith('"""Doc."""\n# third-party\nimport os\n\nimport torch\n')


def test_an_import_under_a_try_is_part_of_the_import_block() -> None:
    new = _migrate("import torch\nimport torch_xla.core.xla_model as xm\n"
                   "try:\n    import wandb\nexcept ImportError:\n    wandb = None\n\n\n"
                   "def step(opt):\n    xm.optimizer_step(opt)\n")
    assert new.index("wandb = None") < new.index("def _neuron_distributed")
