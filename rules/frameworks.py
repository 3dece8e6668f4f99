"""NM716: the XLA paths of training frameworks, which bring PyTorch/XLA back by another name."""

from __future__ import annotations

from neuron_migrate.rule import Example
from neuron_migrate.rules.review_base import ReviewRule
from neuron_migrate.rules.unsupported import D_HOME

# Lightning's package names across its releases: the unified package, its two halves
# published alone, and the names before 2.0.
_LIGHTNING = ("lightning.fabric", "lightning.pytorch", "lightning_fabric", "pytorch_lightning",
              "lightning_lite")
# Each XLA class by the names Lightning exports it under, and the modules that define them.
_XLA_PARTS = ("accelerators.XLAAccelerator", "accelerators.xla",
              "strategies.XLAStrategy", "strategies.XLAFSDPStrategy",
              "strategies.SingleDeviceXLAStrategy", "strategies.xla", "strategies.xla_fsdp",
              "strategies.single_xla", "strategies.launchers.xla",
              "plugins.XLAPrecision", "plugins.precision.XLAPrecision", "plugins.precision.xla",
              "plugins.XLACheckpointIO", "plugins.io.XLACheckpointIO", "plugins.io.xla",
              "plugins.environments.XLAEnvironment", "plugins.environments.xla",
              "profilers.XLAProfiler", "profilers.xla")
_ADVICE = ("Lightning's XLA accelerator, strategies and plugins run on PyTorch/XLA, which "
           "TorchNeuron does not install; whether Lightning drives the neuron device natively "
           "is unconfirmed: train with plain PyTorch on torch.device(\"neuron\") (torchrun, "
           "DDP or FSDP2), or check Lightning's release notes")


class LightningXla(ReviewRule):
    id = "NM716"
    name = "lightning-xla"
    summary = "Lightning's XLA accelerator, strategies and plugins need PyTorch/XLA"
    explanation = """\
What it does: reports the uses of PyTorch Lightning's and Lightning Fabric's XLA classes and
modules: `XLAAccelerator`, `XLAStrategy`, `XLAFSDPStrategy`,
`SingleDeviceXLAStrategy`, `XLAPrecision`, `XLACheckpointIO`, `XLAEnvironment` and
`XLAProfiler` (from `lightning`, `pytorch_lightning`, `lightning_fabric` and `lightning_lite`).

Why: these are how Lightning ran on Trainium before TorchNeuron: each imports torch_xla when it
starts, which TorchNeuron does not install. A file that used them looks migrated once its own
torch_xla imports are gone, and fails as soon as Lightning sets the accelerator up.

What to do: whether Lightning drives the native `neuron` device is not confirmed. Train with
plain PyTorch on `torch.device("neuron")` under torchrun (DDP, FSDP2), or check Lightning's
release notes for a Neuron accelerator before relying on one."""
    doc_url = D_HOME
    tokens = (b"XLA",)
    example = Example(
        before="from lightning.fabric import Fabric\n"
               "from lightning.fabric.strategies import XLAFSDPStrategy\n\n"
               "fabric = Fabric(strategy=XLAFSDPStrategy())\n",
        after="from lightning.fabric import Fabric\n"
              "from lightning.fabric.strategies import XLAFSDPStrategy\n\n"
              "fabric = Fabric(strategy=XLAFSDPStrategy())\n")
    guidance = {f"{package}.{part}": _ADVICE for package in _LIGHTNING for part in _XLA_PARTS}


RULES = (LightningXla,)
