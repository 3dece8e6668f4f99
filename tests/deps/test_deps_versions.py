"""Classification of versions, ranges, images and variables, by the published XLA-era and
native lineages."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from neuron_migrate.deps.signals import xla_image, xla_variable_advice
from neuron_migrate.deps.versions import (Lineage, admits, cuda_label, is_cuda_relevant,
                                          lineage_of_spec, lineage_of_version, name_of)

XLA, BETA, NATIVE = Lineage.XLA, Lineage.BETA, Lineage.NATIVE


@pytest.mark.parametrize(("version", "lineage"), [
    ("2.9.0.2.15.32035", XLA), ("2.1.2.2.3.0", XLA), ("1.13.1.1.13.0", XLA),
    ("2.9.0.2.12.22436+0f1dac25", XLA), ("2.0.0.2.0.0b0", XLA), ("1.11.0.1.1.1", XLA),
    ("2.10.0", BETA), ("2.12.1", BETA), ("2.13.3.0", BETA),
    ("2.14.3.0", NATIVE), ("2.14.3.0+abc", NATIVE), ("2.15.3.0", NATIVE),
    # three-part versions carry no plugin generation: the torch part alone decides, on both
    # sides of each boundary
    ("1.13.1", XLA), ("2.8.0", XLA), ("2.9.0", XLA), ("2.9.1", XLA), ("2.10.0", BETA),
    ("2.13.0", BETA), ("2.13.1", BETA), ("2.14.0", NATIVE), ("2.14.1", NATIVE),
    # an XLA-era plugin generation (1 or 2 after the torch part, five parts or more) is XLA
    # whatever the torch part says; a native build's later parts are not a generation
    ("2.10.0.2.16", XLA), ("2.11.0.1.0.0", XLA), ("2.14.3.0.1", NATIVE), ("2.14.3.0.2", NATIVE),
])
def test_exact_versions(version: str, lineage: Lineage) -> None:
    assert lineage_of_version(Version(version)) is lineage
    assert lineage_of_spec(SpecifierSet(f"=={version}")) is lineage


@pytest.mark.parametrize(("spec", "lineage"), [
    ("", Lineage.UNPINNED), ("==2.9.*", XLA), ("~=2.9.0", XLA), (">=2.1,<2.10", XLA),
    ("<2.13", XLA), ("==2.1.*", XLA), (">=2.1", Lineage.AMBIGUOUS),
    ("<2.15", Lineage.AMBIGUOUS), ("!=2.9.0.2.15.32035", Lineage.AMBIGUOUS),
    ("==2.13.*", BETA), (">=2.10,<2.14", BETA),
    ("==2.14.*", NATIVE), (">=2.14", NATIVE), ("~=2.14.3", NATIVE), ("===2.14.3.0", NATIVE),
    (">=2.15", NATIVE), ("==2.15.*", NATIVE),  # past the target, admitting no beta
    ("===2.9.0", XLA),  # an arbitrary-equality pin is one version, judged as `==` is
    (">2.0,<2.1", XLA),  # admits only the 2.0 betas (2.0.0.2.0.0b0): pre-releases count
])
def test_ranges_are_judged_by_the_versions_they_admit(spec: str, lineage: Lineage) -> None:
    assert lineage_of_spec(SpecifierSet(spec)) is lineage


@pytest.mark.parametrize("spelling", ["torch_neuronx", "Torch-NeuronX", "torch.neuronx"])
def test_spellings_normalise(spelling: str) -> None:
    assert name_of(spelling) == "torch-neuronx"


@pytest.mark.parametrize(("image", "xla"), [
    ("neuron/pytorch-training-neuronx:2.1.2-neuronx-py310-sdk2.20.2-ubuntu20.04", True),
    ("x.ecr.aws/pytorch-inference-neuronx:2.9.0-neuronx-py312-sdk2.29.0-ubuntu24.04", True),
    ("neuron/pytorch-training-neuronx:2.14.0-neuronx-py314-sdk2.32.0-ubuntu26.04", True),
    ("neuron/pytorch-training-neuronx:2.14.0-neuronx-py314-sdk2.33.0-ubuntu26.04", False),
    ("neuron/pytorch-inference-vllm-neuronx:0.29.0.1.2.0-neuronx-py314-sdk2.33.0-ubuntu26.04",
     False),
    ("ubuntu:24.04", False),
])
def test_container_tags(image: str, xla: bool) -> None:
    assert (xla_image(image) is not None) is xla


@pytest.mark.parametrize(("name", "flagged"), [
    ("PJRT_DEVICE", True), ("XLA_USE_BF16", True), ("XLA_FLAGS", True),
    ("NEURON_COMPILE_CACHE_URL", True), ("NEURONCORE_NUM_DEVICES", True),
    ("NEURON_PARALLEL_COMPILE_MAX_RETRIES", True),
    ("XLA_IR_DEBUG", False), ("NEURON_RT_VISIBLE_CORES", False), ("NEURON_CC_FLAGS", False),
])
def test_xla_variables(name: str, flagged: bool) -> None:
    assert (xla_variable_advice(name) is not None) is flagged


@pytest.mark.parametrize(("spec", "version", "admitted"), [
    ("", "2.1.1.2.0.0b0", True), ("", "2.14.0", True), ("<2.1", "2.0.0.2.0.0b0", True),
    ("<2.1", "2.1.2", False), ("==2.14.*", "2.14.3.0", True), (">=2.14", "2.13.3.0", False),
])
def test_admits_counts_pre_releases_and_an_empty_range_admits_all(spec: str, version: str,
                                                                  admitted: bool) -> None:
    assert admits(SpecifierSet(spec), Version(version)) is admitted


@pytest.mark.parametrize(("spec", "label"), [
    ("==2.3.1+cu121", "cu121"), ("==2.3.1", None), (">=2.1", None), ("", None)])
def test_cuda_label_is_the_local_label_of_a_pin(spec: str, label: str | None) -> None:
    assert cuda_label(SpecifierSet(spec)) == label


@pytest.mark.parametrize(("name", "relevant"), [
    ("torchvision", True), ("torchaudio", True), ("flash-attn", True),
    ("nvidia-cublas-cu12", True), ("requests", False), ("numpy", False)])
def test_cuda_relevant_names(name: str, relevant: bool) -> None:
    assert is_cuda_relevant(name) is relevant
