"""The XLA runtime's switches and helpers (NM114, NM115, NM212, NM405, NM603): handled calls
leave no torch_xla behind, the cases left for review are reported once, and the code written
for them does what the XLA call did."""

from __future__ import annotations

import types

import libcst as cst
import pytest

torch = pytest.importorskip("torch", reason="runs emitted code: needs the `test` extra")
pytestmark = pytest.mark.torch

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from neuron_migrate.rules.runtime import side_effect_free

REGISTRY = Registry(all_rules())


def migrate(source: str) -> tuple[str, list]:
    result = migrate_source("train.py", source.encode(), REGISTRY)
    assert result.error is None
    new = source.encode() if result.new_source is None else result.new_source
    return new.decode(), list(result.findings)


HANDLED = [
    ("NM114", "import torch_xla\n\ntorch_xla.experimental.eager_mode(True)\n"),
    ("NM114", "import torch_xla\n\ntorch_xla.experimental.eager_mode(False)\n"),
    ("NM114", "import torch_xla.experimental as exp\n\nexp.eager_mode(flags.eager)\n"),
    ("NM114", "from torch_xla.experimental.eager import eager_mode\n\neager_mode(True)\n"),
    ("NM114", "import torch_xla\n\ntorch_xla._XLAC._set_use_eager_mode(True)\n"),
    ("NM114", "import torch_xla\n\nok = torch_xla.experimental.is_eager_mode()\n"),
    ("NM114", "import torch_xla\n\nok = torch_xla._XLAC._get_use_eager_mode()\n"),
    ("NM114", "import torch_xla\n\nwith torch_xla.experimental.eager_mode_context(True):\n"
              "    run()\n"),
    ("NM115", "import torch_xla\n\ntorch_xla._XLAC._xla_sync_multi([t], devices=[])\n"),
    ("NM115", "import torch_xla.core.xla_model as xm\n\nxm.unlazy(outputs)\n"),
    ("NM212", "import torch_xla.core.xla_model as xm\n\ngrads = xm._fetch_gradients(opt)\n"),
    ("NM405", "import torch_xla\n\ntorch_xla.manual_seed(0)\n"),
    ("NM603", "import torch_xla.runtime as xr\n\nxr.initialize_cache('/tmp/c', readonly=True)\n"),
]


@pytest.mark.parametrize(("rule", "source"), HANDLED)
def test_a_handled_call_leaves_no_xla_and_no_review(rule: str, source: str) -> None:
    """Each is rewritten, not left as a review item (NM701/NM708/NM711): a review item keeps
    torch_xla imported, and the migrated file then cannot start on TorchNeuron."""
    out, findings = migrate(source)
    assert "torch_xla" not in out
    assert {f.rule_id for f in findings} == {rule, "NM001"}
    assert all(f.applied for f in findings)
    compile(out, "train.py", "exec")


REVIEWED = [
    ("NM114", "import torch_xla\n\ntorch_xla.experimental.eager_mode(read_flag())\n"),
    ("NM114", "import torch_xla\n\nwith torch_xla.experimental.eager_mode_context(True) as old:\n"
              "    run()\n"),
    ("NM115", "import torch_xla\n\ntorch_xla._XLAC._xla_sync_multi(collect(), [])\n"),
    ("NM212", "import torch_xla.core.xla_model as xm\n\ngrads = xm._fetch_gradients(*opts)\n"),
    ("NM603", "import torch_xla.runtime as xr\n\nxr.initialize_cache(make_cache_dir())\n"),
]


@pytest.mark.parametrize(("rule", "source"), REVIEWED)
def test_what_cannot_be_deleted_safely_is_reported_once(rule: str, source: str) -> None:
    """A call whose argument does something is not deleted; the review prefix rules
    (NM708 torch_xla._XLAC / torch_xla.experimental, NM711) do not report it a second time."""
    out, findings = migrate(source)
    assert out == source
    assert [(f.rule_id, f.applied) for f in findings] == [(rule, False)]


@pytest.mark.parametrize(("expression", "free"), [
    ("tensors", True), ("[t0, t1[2], self.out]", True), ('f"{root}/cache_{rank}"', True),
    ('os.path.join(root, str(rank))', True), ("a if b else -c", True), ("x == y", True),
    ("{'a': b, **c}", True), ("make_dir()", False), ("[t for t in ts]", False),
    ("os.makedirs(p)", False), ("x == f()", False), ("(yield)", False),
    ('f"{root}/{make()}"', False), ("lambda: 1", False),
])
def test_side_effect_free_means_nothing_but_reads(expression: str, free: bool) -> None:
    assert side_effect_free(cst.parse_expression(expression)) is free


def _run(code: str, **names: object) -> dict:
    namespace: dict = dict(names)
    exec(compile(code, "train.py", "exec"), namespace)  # noqa: S102 - our own migrated test code
    return namespace


class FakeNeuron(types.SimpleNamespace):
    """Stands in for TorchNeuron's `torch.neuron` device module and records its calls."""

    def __init__(self) -> None:
        super().__init__(calls=[])

    def synchronize(self) -> None:
        self.calls.append(("synchronize",))

    def manual_seed(self, seed: int) -> None:
        self.calls.append(("manual_seed", seed))


@pytest.fixture
def neuron(monkeypatch: pytest.MonkeyPatch) -> FakeNeuron:
    fake = FakeNeuron()
    monkeypatch.setattr(torch, "neuron", fake, raising=False)
    return fake


def test_fetched_gradients_are_the_optimizers_gradients_in_order() -> None:
    """What xm._fetch_gradients returned: every parameter's gradient (as `.data`, the same
    storage) in parameter-group order, skipping parameters without one."""
    first, second, frozen = (torch.nn.Parameter(torch.ones(2)) for _ in range(3))
    optimizer = torch.optim.SGD([{"params": [second, frozen]}, {"params": [first]}], lr=0.1)
    (first.sum() * 2 + second.sum() * 3).backward()
    out, _ = migrate("import torch_xla.core.xla_model as xm\n\n"
                     "grads = xm._fetch_gradients(optimizer)\nfor g in grads:\n    g.mul_(10)\n")
    grads = _run(out, optimizer=optimizer)["grads"]
    expected = [second.grad, first.grad]  # group order; `frozen` has no gradient
    assert [g.data_ptr() for g in grads] == [g.data_ptr() for g in expected]
    assert all(not g.requires_grad for g in grads)
    assert torch.equal(second.grad, torch.full((2,), 30.0))  # the in-place change reached it
    assert torch.equal(first.grad, torch.full((2,), 20.0))


def test_manual_seed_seeds_the_device_and_leaves_the_cpu_stream(neuron: FakeNeuron) -> None:
    out, _ = migrate("import torch\nimport torch_xla\n\ntorch_xla.manual_seed(1234, device)\n")
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    _run(out, device="xla:0")
    assert neuron.calls == [("manual_seed", 1234)]
    assert torch.equal(torch.rand(3), expected)  # data shuffling draws what it drew before


@pytest.mark.parametrize(("call", "waits"), [
    ("torch_xla._XLAC._xla_sync_multi(ts, devices=[])", 1),  # wait defaults to True
    ("torch_xla._XLAC._xla_sync_multi(ts, [], True, False)", 1),
    ("torch_xla._XLAC._xla_sync_multi(ts, devices=[], wait=False)", 0),
    ("xm.unlazy(ts)", 1),
])
def test_a_sync_waits_for_the_device_only_where_it_waited(call: str, waits: int,
                                                           neuron: FakeNeuron) -> None:
    source = f"import torch_xla\nimport torch_xla.core.xla_model as xm\n\n{call}\n"
    out, _ = migrate(source)
    _run(out, ts=[torch.ones(1)])
    assert neuron.calls == [("synchronize",)] * waits


def test_an_eager_branch_is_taken_and_a_used_switch_value_stays_none() -> None:
    out, _ = migrate("import torch_xla\n\n"
                     "previous = torch_xla.experimental.eager_mode(False)\n"
                     "mode = 'eager' if torch_xla.experimental.is_eager_mode() else 'lazy'\n")
    namespace = _run(out)
    assert (namespace["previous"], namespace["mode"]) == (None, "eager")
