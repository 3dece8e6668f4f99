"""NM716, NM717: the XLA paths of training frameworks, which bring PyTorch/XLA back by another
name (Lightning's XLA and TPU classes and accelerator strings, Ray Train's XLA backend)."""

from __future__ import annotations

import ast

import libcst as cst

from neuron_migrate.ruleapi import Example, Outcome, Review, Site, code, string_value
from neuron_migrate.ruleapi.analysis import statements
from neuron_migrate.rules.framework_classes import local_subclass_of
from neuron_migrate.rules.launch import Calls, called_names
from neuron_migrate.rules.review_base import ReviewRule
from neuron_migrate.rules.unsupported import D_HOME

# Lightning's package names across its releases: the unified package, its two halves
# published alone, and the names before 2.0.
_LIGHTNING = ("lightning.fabric", "lightning.pytorch", "lightning_fabric", "pytorch_lightning",
              "lightning_lite")
# Precision plugins by every name Lightning gave them (1.x "TPU...PrecisionPlugin", 2.0
# "XLA...PrecisionPlugin", 2.1 on "XLAPrecision"), exported from `plugins` and `plugins.precision`.
_PRECISION = ("XLAPrecision", "XLAPrecisionPlugin", "XLABf16PrecisionPlugin",
              "TPUPrecisionPlugin", "TPUBf16PrecisionPlugin", "TPUHalfPrecisionPlugin")
# Each XLA class by the names Lightning exports it under, and the modules that define them:
# 2.x's XLA names and the TPU names of 1.x (strategies from 1.6, training-type plugins before).
_XLA_PARTS = ("accelerators.XLAAccelerator", "accelerators.xla",
              "accelerators.TPUAccelerator", "accelerators.tpu",
              "strategies.XLAStrategy", "strategies.XLAFSDPStrategy",
              "strategies.SingleDeviceXLAStrategy", "strategies.xla", "strategies.xla_fsdp",
              "strategies.single_xla", "strategies.launchers.xla",
              "strategies.launchers.XLALauncher",
              "strategies.TPUSpawnStrategy", "strategies.SingleTPUStrategy",
              "strategies.tpu_spawn", "strategies.single_tpu",
              "plugins.TPUSpawnPlugin", "plugins.SingleTPUPlugin",
              "plugins.training_type.TPUSpawnPlugin", "plugins.training_type.SingleTPUPlugin",
              "plugins.training_type.tpu_spawn", "plugins.training_type.single_tpu",
              *(f"plugins.{name}" for name in _PRECISION),
              *(f"plugins.precision.{name}" for name in _PRECISION),
              "plugins.precision.xla", "plugins.precision.xlabf16", "plugins.precision.tpu",
              "plugins.precision.tpu_bf16",
              "plugins.XLACheckpointIO", "plugins.io.XLACheckpointIO", "plugins.io.xla",
              "plugins.environments.XLAEnvironment", "plugins.environments.xla",
              "profilers.XLAProfiler", "profilers.xla",
              "callbacks.XLAStatsMonitor", "callbacks.xla_stats_monitor",
              "utilities.xla_device")
_ADVICE = ("Lightning's XLA accelerator, strategies and plugins run on PyTorch/XLA, which "
           "TorchNeuron does not install; whether Lightning drives the neuron device natively "
           "is unconfirmed: train with plain PyTorch on torch.device(\"neuron\") (torchrun, "
           "DDP or FSDP2), or check Lightning's release notes")

# What starts Lightning's training: its Trainer, Fabric, and LightningLite before Fabric.
_TRAINERS = frozenset({
    *(f"{package}.{path}" for package in ("pytorch_lightning", "lightning.pytorch", "lightning")
      for path in ("Trainer", "trainer.Trainer", "trainer.trainer.Trainer")),
    *(f"{package}.{path}" for package in ("lightning.fabric", "lightning_fabric", "lightning")
      for path in ("Fabric", "fabric.Fabric")),
    "pytorch_lightning.lite.LightningLite", "lightning_lite.LightningLite",
    "lightning_lite.lite.LightningLite",
})
_TRAINER_NAMES = frozenset(q.rsplit(".", 1)[1] for q in _TRAINERS)
# The strings that select the XLA accelerator or an XLA strategy, by the argument that
# takes them (Lightning's registry names, 1.x's TPU names included).
_XLA_STRINGS = {
    "accelerator": frozenset({"tpu", "xla"}),
    "strategy": frozenset({"xla", "xla_debug", "xla_fsdp", "single_xla", "tpu_spawn",
                           "tpu_spawn_debug", "single_tpu"}),
}
# Arguments that take an accelerator, strategy or plugin object (a user's XLA subclass).
_OBJECT_ARGUMENTS = frozenset({"accelerator", "strategy", "plugins", "precision"})


# What creates the process group itself when it starts: Lightning's trainers (and its CLI,
# which builds a Trainer), Accelerate, Hugging Face's Trainer and those built on it, and Ray
# Train's trainers. A script that hands its training to one gets no group of its own.
GROUP_OWNERS = frozenset({
    *_TRAINERS,
    *(f"{package}.{path}" for package in ("pytorch_lightning", "lightning.pytorch")
      for path in ("cli.LightningCLI", "utilities.cli.LightningCLI")),
    "lightning.pytorch.LightningCLI",
    "accelerate.Accelerator", "accelerate.accelerator.Accelerator", "accelerate.PartialState",
    "accelerate.state.PartialState", "accelerate.notebook_launcher",
    *(f"transformers.{name}" for name in ("Trainer", "Seq2SeqTrainer", "trainer.Trainer",
                                          "trainer_seq2seq.Seq2SeqTrainer")),
    *(f"trl.{name}" for name in ("SFTTrainer", "DPOTrainer", "PPOTrainer", "RewardTrainer")),
    *(f"optimum.neuron.{name}" for name in ("NeuronTrainer", "Seq2SeqNeuronTrainer",
                                            "NeuronSFTTrainer")),
    *(f"ray.train.{path}" for path in ("torch.TorchTrainer", "torch.torch_trainer.TorchTrainer",
                                       "lightning.LightningTrainer",
                                       "huggingface.TransformersTrainer",
                                       "data_parallel_trainer.DataParallelTrainer",
                                       "DataParallelTrainer")),
})


def group_owner(tree: ast.Module, calls: Calls | None = None) -> str | None:
    """The framework class or launcher the file calls, or imports by name (to call a subclass
    of it), that creates the process group itself; None when there is none."""
    called = called_names(tree, calls, GROUP_OWNERS)
    if called:
        return min(called)
    for node in statements(tree.body):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in GROUP_OWNERS:
                    return f"{node.module}.{alias.name}"
    return None


def lightning_xla_string(qualname: str | None, keyword: str | None, value: object) -> bool:
    """Whether `value`, passed as `keyword=` to the call of `qualname`, selects Lightning's
    XLA accelerator or strategy: NM716 reports that call, so the device-string rule leaves
    the literal to it ("xla" here names no torch device)."""
    return qualname in _TRAINERS and value in _XLA_STRINGS.get(keyword or "", ())


def _is_xla_class(qualname: str) -> bool:
    return any(qualname == p or qualname.startswith(p + ".") for p in LightningXla.guidance)


class LightningXla(ReviewRule):
    id = "NM716"
    name = "lightning-xla"
    summary = ("Lightning's XLA/TPU accelerator, strategies and plugins (and \"tpu\"/\"xla\" "
               "passed to Trainer or Fabric) need PyTorch/XLA")
    explanation = """\
What it does: reports the uses of PyTorch Lightning's and Lightning Fabric's XLA classes and
modules: `XLAAccelerator`, `XLAStrategy`, `XLAFSDPStrategy`, `SingleDeviceXLAStrategy`,
`XLAPrecision`, `XLACheckpointIO`, `XLAEnvironment`, `XLAProfiler`, and their names before
Lightning 2.0 (`TPUAccelerator`, `TPUSpawnStrategy`, `SingleTPUStrategy`, `TPUSpawnPlugin`,
`TPUPrecisionPlugin`, `TPUBf16PrecisionPlugin`, `XLAStatsMonitor`), from `lightning`,
`pytorch_lightning`, `lightning_fabric` and `lightning_lite`. A class of the file deriving from
one of them is reported where it is defined. A `Trainer`, `Fabric` or `LightningLite` given
`accelerator="tpu"` or `"xla"`, an XLA strategy by name (`strategy="xla"`, `"tpu_spawn"`,
`"xla_fsdp"`, ...), `tpu_cores=`, or an instance of such a subclass of this file, is reported
at the call.

Why: these are how Lightning ran on Trainium before TorchNeuron: each imports torch_xla when it
starts, which TorchNeuron does not install. A file that used them looks migrated once its own
torch_xla imports are gone, and fails as soon as Lightning sets the accelerator up.

What to do: whether Lightning drives the native `neuron` device is not confirmed (AWS's
TorchNeuron documentation names Hugging Face's libraries as running natively, not Lightning).
Train with plain PyTorch on `torch.device("neuron")` under torchrun (DDP, FSDP2), or check
Lightning's release notes for a Neuron accelerator before relying on one."""
    doc_url = D_HOME
    tokens = (b"XLA", b"TPUSpawn", b"TPUAccelerator", b"SingleTPU", b"TPUPrecision",
              b"TPUBf16", b"TPUHalf", b"tpu_cores", b"tpu_spawn", b"single_tpu", b'"tpu"',
              b"'tpu'")
    example = Example.unchanged(
        "import lightning as L\n"
        "from lightning.fabric.strategies import XLAFSDPStrategy\n\n"
        "fabric = L.Fabric(strategy=XLAFSDPStrategy())\n"
        "trainer = L.Trainer(accelerator=\"tpu\", devices=8)\n")
    guidance = {f"{package}.{part}": _ADVICE for package in _LIGHTNING for part in _XLA_PARTS}

    def may_act(self, node: ast.AST, names: frozenset[str]) -> bool:
        return isinstance(node, ast.Call) and bool(names & _TRAINER_NAMES)

    def on_any_call(self, node: cst.Call, site: Site) -> Outcome | None:
        func = node.func  # asked of every call the engine reads: a method call is seldom one
        if isinstance(func, cst.Attribute) and func.attr.value not in _TRAINER_NAMES or \
                site.qualname_of(func) not in _TRAINERS:
            return None
        chosen: list[str] = []
        for arg in node.args:
            name = arg.keyword.value if arg.keyword is not None else None
            if name == "tpu_cores":
                chosen.append("`tpu_cores=` (Lightning's TPU cores before 2.0)")
            elif string_value(arg.value) in _XLA_STRINGS.get(name or "", ()):
                chosen.append(f"`{name}={code(arg.value)}`")
            elif name in _OBJECT_ARGUMENTS:
                chosen.extend(self._subclasses(arg.value, site))
        if not chosen:
            return None
        return Review(f"`{code(node.func)}(...)` with {', '.join(chosen)} runs Lightning on its "
                      f"XLA accelerator: {_ADVICE}")

    def _subclasses(self, value: cst.BaseExpression, site: Site) -> list[str]:
        """The user's XLA subclasses of this file among an argument's objects: `Strategy()`,
        `Strategy`, or a list of plugins."""
        items = [e.value for e in value.elements] \
            if isinstance(value, (cst.List, cst.Tuple)) else [value]
        found: list[str] = []
        for item in items:
            target = item.func if isinstance(item, cst.Call) else item
            if not isinstance(target, cst.Name):
                continue
            derived = local_subclass_of(site, target.value, _is_xla_class)
            if derived is not None:
                line, base = derived
                found.append(f"`{target.value}` (line {line}, derived from `{base}`)")
        return found


class RayTrainXla(ReviewRule):
    id = "NM717"
    name = "ray-train-xla"
    summary = "Ray Train's TorchXLAConfig and its Neuron (XLA) backend need PyTorch/XLA"
    explanation = """\
What it does: reports the uses of Ray Train's XLA backend, `ray.train.torch.xla`:
`TorchXLAConfig` (passed to `TorchTrainer(torch_config=...)`) and the AWS Neuron XLA backend
it starts.

Why: that backend sets each Ray worker up for PyTorch/XLA: PJRT's environment, torch_xla's
`xla` process group and, on request, a `neuron_parallel_compile` pre-compilation run. None of
it exists under TorchNeuron, which does not install torch_xla; the workers stop when the
backend starts.

What to do: whether Ray Train sets up TorchNeuron's `neuron` process group is not confirmed
(neither AWS's TorchNeuron documentation nor Ray's says so). Check Ray's documentation before
passing `torch_config=TorchConfig(backend="neuron")` to `TorchTrainer`; or train with plain
PyTorch on `torch.device("neuron")` under torchrun (DDP, FSDP2)."""
    doc_url = D_HOME
    example = Example.unchanged(
        "from ray.train.torch import TorchTrainer\n"
        "from ray.train.torch.xla import TorchXLAConfig\n\n"
        "trainer = TorchTrainer(train_loop, torch_config=TorchXLAConfig())\n")
    guidance = dict.fromkeys(
        ("ray.train.torch.xla", "ray.train.torch.TorchXLAConfig"),
        "Ray Train's XLA backend starts each worker under PyTorch/XLA (PJRT, the `xla` process "
        "group, neuron_parallel_compile), which TorchNeuron does not install; whether Ray "
        "Train's TorchConfig(backend=\"neuron\") sets up the neuron process group is "
        "unconfirmed: check Ray's documentation, or train with plain PyTorch on "
        "torch.device(\"neuron\") under torchrun (DDP or FSDP2)")


RULES = (LightningXla, RayTrainXla)
