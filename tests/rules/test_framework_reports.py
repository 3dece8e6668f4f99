"""NM716, NM717 and NM221 beside training frameworks: Lightning's TPU-era and XLA classes under
every package name, the accelerator and strategy strings given to its trainers, a file's own
subclasses of its XLA strategies, Ray Train's XLA backend; and no process group created ahead
of a framework that creates its own."""

from __future__ import annotations

import textwrap

import pytest

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import FileResult, Kind
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules

REGISTRY = Registry(all_rules())


def _migrate(source: str) -> FileResult:
    data = textwrap.dedent(source).encode()
    assert REGISTRY.prefilter(data)
    result = migrate_source("t.py", data, REGISTRY)
    assert result.error is None, result.error
    return result


def _found(result: FileResult, rule_id: str) -> list[tuple[int, str]]:
    found = [f for f in result.findings if f.rule_id == rule_id]
    assert all(f.kind is Kind.REVIEW for f in found)
    return [(f.line, f.message) for f in found]


@pytest.mark.parametrize("imports, use, qualname", [
    ("from pytorch_lightning.strategies import TPUSpawnStrategy", "TPUSpawnStrategy()",
     "pytorch_lightning.strategies.TPUSpawnStrategy"),
    ("from pytorch_lightning.accelerators.tpu import TPUAccelerator", "TPUAccelerator()",
     "pytorch_lightning.accelerators.tpu.TPUAccelerator"),
    ("import pytorch_lightning as pl", "pl.plugins.training_type.TPUSpawnPlugin()",
     "pytorch_lightning.plugins.training_type.TPUSpawnPlugin"),
    ("from pytorch_lightning.plugins import TPUBf16PrecisionPlugin", "TPUBf16PrecisionPlugin()",
     "pytorch_lightning.plugins.TPUBf16PrecisionPlugin"),
    ("from lightning.pytorch.strategies import XLAStrategy", "XLAStrategy()",
     "lightning.pytorch.strategies.XLAStrategy"),
    ("from lightning.fabric.strategies import XLAFSDPStrategy", "XLAFSDPStrategy()",
     "lightning.fabric.strategies.XLAFSDPStrategy"),
    ("from lightning.pytorch.accelerators import TPUAccelerator", "TPUAccelerator()",
     "lightning.pytorch.accelerators.TPUAccelerator"),
    ("from lightning.fabric.plugins import XLAPrecision", "XLAPrecision('bf16-true')",
     "lightning.fabric.plugins.XLAPrecision"),
    ("from lightning.pytorch.plugins.io import XLACheckpointIO", "XLACheckpointIO()",
     "lightning.pytorch.plugins.io.XLACheckpointIO"),
])
def test_tpu_era_and_xla_classes_are_reported_under_each_package(imports: str, use: str,
                                                                  qualname: str) -> None:
    result = _migrate(f"{imports}\n\nthing = {use}\n")
    assert [(line, message.split("`")[1]) for line, message in _found(result, "NM716")] == \
        [(3, qualname)]
    assert result.new_source is None


@pytest.mark.parametrize("call, chosen", [
    ('pl.Trainer(accelerator="tpu", devices=8)', '`accelerator="tpu"`'),
    ('pl.Trainer(tpu_cores=8)', "`tpu_cores=`"),
    ('L.Fabric(accelerator="xla", devices=8)', '`accelerator="xla"`'),
    ('L.Trainer(strategy="xla_fsdp")', '`strategy="xla_fsdp"`'),
    ('Trainer(accelerator="auto", strategy="tpu_spawn")', '`strategy="tpu_spawn"`'),
    ('Fabric(accelerator="tpu")', '`accelerator="tpu"`'),
])
def test_xla_strings_given_to_a_trainer_are_reported_once_at_the_call(call: str,
                                                                      chosen: str) -> None:
    result = _migrate(f"""\
        import lightning as L
        import pytorch_lightning as pl
        from lightning.fabric import Fabric
        from lightning.pytorch import Trainer

        runner = {call}
    """)
    found = _found(result, "NM716")
    assert len(found) == 1 and found[0][0] == 6 and chosen in found[0][1]
    assert "unconfirmed" in found[0][1]
    # the device-string rule leaves Lightning's "xla" to NM716: it names no torch device
    assert [f for f in result.findings if f.rule_id == "NM102"] == []
    assert result.new_source is None


def test_other_accelerators_and_other_calls_are_not_reported() -> None:
    result = _migrate("""\
        import lightning as L
        import torch_xla  # noqa: F401  (parses the file)

        trainer = L.Trainer(accelerator="gpu", strategy="ddp", devices=8)
        fabric = L.Fabric(accelerator="auto")
        choose(accelerator="tpu")
    """)
    assert _found(result, "NM716") == []


def test_a_strategy_of_the_files_own_deriving_from_tpu_spawn_is_reported() -> None:
    result = _migrate("""\
        import pytorch_lightning as pl
        from pytorch_lightning.strategies import TPUSpawnStrategy


        class HostStrategy(TPUSpawnStrategy):
            pass


        class QuietStrategy(HostStrategy):
            pass


        class Plain:
            pass


        trainer = pl.Trainer(strategy=QuietStrategy(), plugins=[Plain()])
        other = pl.Trainer(strategy=Plain())
    """)
    found = _found(result, "NM716")
    assert [line for line, _ in found] == [5, 17]
    assert "HostStrategy" not in found[0][1]
    assert "`QuietStrategy` (line 9, derived from " \
           "`pytorch_lightning.strategies.TPUSpawnStrategy`)" in found[1][1]
    assert "Plain" not in found[1][1]


@pytest.mark.parametrize("imports, use", [
    ("from ray.train.torch.xla import TorchXLAConfig", "TorchXLAConfig()"),
    ("import ray.train.torch.xla as xla_backend", "xla_backend.TorchXLAConfig()"),
    ("from ray.train.torch.xla.config import TorchXLAConfig", "TorchXLAConfig()"),
])
def test_ray_trains_xla_backend_is_reported(imports: str, use: str) -> None:
    result = _migrate(f"""\
        from ray.train.torch import TorchTrainer
        {imports}

        trainer = TorchTrainer(loop, torch_config={use})
    """)
    found = _found(result, "NM717")
    assert [line for line, _ in found] == [4]
    assert "ray.train.torch.xla" in found[0][1] and "unconfirmed" in found[0][1]


def test_ray_trains_own_torch_backend_is_not_reported() -> None:
    result = _migrate("""\
        import torch_xla  # noqa: F401  (parses the file)
        from ray.train.torch import TorchConfig, TorchTrainer

        trainer = TorchTrainer(loop, torch_config=TorchConfig(backend="gloo"))
    """)
    assert _found(result, "NM717") == []


_SCRIPT = """\
    import torch_xla.core.xla_model as xm
    {imports}


    def train(model):
        {start}
        if xm.is_master_ordinal(local=False):
            print("trained")


    if __name__ == "__main__":
        train(None)
"""


@pytest.mark.parametrize("imports, start, owner", [
    ("import pytorch_lightning as pl", "pl.Trainer(max_epochs=1).fit(model)",
     "pytorch_lightning.Trainer"),
    ("import lightning as L", "L.Fabric(devices=2).launch()", "lightning.Fabric"),
    ("from accelerate import Accelerator", "Accelerator().prepare(model)",
     "accelerate.Accelerator"),
    ("from transformers import Trainer", "Trainer(model=model).train()", "transformers.Trainer"),
    ("from ray.train.torch import TorchTrainer", "TorchTrainer(model).fit()",
     "ray.train.torch.TorchTrainer"),
    ("from transformers import Trainer\n\n\nclass MyTrainer(Trainer):\n    pass",
     "MyTrainer(model=model).train()", "transformers.Trainer"),
])
def test_no_process_group_is_created_ahead_of_a_framework_that_creates_its_own(
        imports: str, start: str, owner: str) -> None:
    result = _migrate(_SCRIPT.format(imports=textwrap.indent(imports, "    ").lstrip(),
                                     start=start))
    assert b"init_process_group" not in (result.new_source or b"")
    found = _found(result, "NM221")
    assert len(found) == 1 and f"`{owner}` creates the process group itself" in found[0][1]
    assert "`is_master_ordinal`" in found[0][1]


def test_a_script_without_a_framework_still_gets_its_process_group() -> None:
    result = _migrate(_SCRIPT.format(imports="import torch", start="model = torch.nn.Linear(2, 2)"))
    assert b'init_process_group("neuron")' in (result.new_source or b"")
    assert [f.kind for f in result.findings if f.rule_id == "NM221"] == [Kind.FIX]
