"""NM502's split between a training step (called as it is) and a forward (torch.compile),
checked against what Dynamo in the installed PyTorch really does with the fixture's functions."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch", reason="runs emitted code: needs the `test` extra")
pytestmark = pytest.mark.torch

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from tests.conftest import FIXTURES

BEFORE = FIXTURES / "python" / "NM502_torch_xla_compile.before.py"


def _functions() -> types.SimpleNamespace:
    """The fixture's plain functions, without its XLA lines (torch_xla is not installed)."""
    source = BEFORE.read_text()
    head = source[:source.index("def build(")].replace("import torch_xla\n", "")
    namespace: dict[str, object] = {}
    exec(compile(head, str(BEFORE), "exec"), namespace)
    return types.SimpleNamespace(**namespace)


def _model() -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    return model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(2, 4)


def test_dynamo_refuses_the_training_step_the_rule_leaves_uncompiled() -> None:
    fixture = _functions()
    model, optimizer, batch = _model()
    compiled = torch.compile(fixture.train_step, backend="eager", fullgraph=True)
    with pytest.raises(torch._dynamo.exc.Unsupported):
        compiled(model, optimizer, batch)
    torch._dynamo.reset()
    before = model.weight.detach().clone()
    fixture.train_step(model, optimizer, batch)  # what the migrated code calls
    assert not torch.equal(before, model.weight)


def test_dynamo_compiles_the_forward_the_rule_compiles() -> None:
    fixture = _functions()
    model, _, batch = _model()
    compiled = torch.compile(fixture.forward, backend="eager", fullgraph=True, dynamic=False)
    assert torch.allclose(compiled(model, batch), fixture.forward(model, batch))
    torch._dynamo.reset()


def test_the_migration_makes_exactly_that_split() -> None:
    result = migrate_source("f.py", BEFORE.read_bytes(), Registry(all_rules()))
    text = (result.new_source or b"").decode()
    assert "compiled_train = train_step\n" in text
    assert "torch.compile(forward, backend=\"neuron\", dynamic=False, fullgraph=True)" in text
    assert "self.compiled_step_fn = self.step_fn\n" in text  # the step is in a called method
    assert "torch_xla" not in text
