"""NM204: a master_print call written over several lines, whose arguments are evaluated on
every rank in an `else:` branch, still compiles once they are a statement of their own."""

from __future__ import annotations

import pytest

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules

REGISTRY = Registry(all_rules())


@pytest.mark.parametrize("call", [
    'xm.master_print(f"rank {xm.get_ordinal()} "\n                    f"step {step}")',
    'xm.master_print("loss",\n                    evaluate(model,\n                             batch))',
    'xm.master_print(evaluate(model), "and",\n                    evaluate(model,\n'
    '                             batch))',
])
def test_a_multi_line_master_print_migrates_to_code_that_compiles(call: str) -> None:
    source = f"import torch_xla.core.xla_model as xm\n\n\ndef report(step):\n    {call}\n"
    result = migrate_source("train.py", source.encode(), REGISTRY)
    assert result.error is None and result.new_source is not None
    new = result.new_source.decode()
    compile(new, "train.py", "exec")
    assert "# evaluated on every rank" in new and "xm." not in new
