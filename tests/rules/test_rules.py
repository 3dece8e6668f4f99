"""The catalogue: every rule documents itself, its example works, its fixture exists, and the
APIs its replacements use exist in PyTorch."""

from __future__ import annotations

import importlib
import re

import pytest

from neuron_migrate.analysis.readiness_audit import audit_file
from neuron_migrate.deps.signals import KEPT, OTHER_XLA_KNOBS, XLA_VARIABLES, xla_variable_advice
from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import Kind, Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from neuron_migrate.rules.environment import BF16, XLA_ONLY
from neuron_migrate.runner import migrate_bytes
from tests.conftest import PYTHON_FIXTURES, cli, migrated

RULES = all_rules()
REGISTRY = Registry(RULES)
CUDA_REGISTRY = Registry(RULES, Options(sources=frozenset({"xla", "cuda"})))
"""The CUDA rules (`--from cuda`) are only in the registry of a run that asks for them."""

# torch.neuron is registered by torch-neuronx (TorchNeuron), not by PyTorch itself; these are
# the TorchNeuron APIs replacements may use, each documented by AWS.
TORCH_NEURONX_APIS = frozenset({"torch.neuron.synchronize", "torch.neuron.device_count",
                                "torch.neuron.manual_seed", "torch.neuron.get_rng_state",
                                "torch.neuron.set_rng_state"})
# manual_seed: the device module's standard RNG entry (torch_neuronx/neuron.py), which
# torch.manual_seed itself calls for a PrivateUse1 device;
# get_rng_state / set_rng_state: the same module's state pair, the native form of
# xm.get_rng_state / xm.set_rng_state.
CUDA_COUNTERPARTS = frozenset(f"torch.neuron.{name}" for name in (
    "is_available", "current_device", "set_device", "get_device_name", "get_device_properties",
    "device", "is_bf16_supported", "manual_seed_all", "seed", "seed_all", "initial_seed",
    "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all", "empty_cache",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "memory_stats", "memory_summary", "reset_peak_memory_stats",
    "reset_accumulated_memory_stats"))
# What the CUDA rules (`--from cuda`) write in place of torch.cuda's device, RNG and memory
# functions: torch.neuron's device module, which mirrors torch.cuda (torch_neuronx/neuron.py;
# the memory statistics are in AWS's memory profiling guide). The emulator provides each.


def test_ids_and_names_are_unique_and_well_formed() -> None:
    ids = [r.id for r in RULES]
    names = [r.name for r in RULES]
    assert len(set(ids)) == len(ids) and len(set(names)) == len(names)
    for rule in RULES:
        assert re.fullmatch(r"NMC?\d{3}", rule.id)
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_documents_itself(rule) -> None:
    assert rule.summary and "\n" not in rule.summary
    assert len(rule.explanation.split()) >= 30
    assert rule.doc_url.startswith("https://")
    assert isinstance(rule.kind, Kind)


@pytest.mark.parametrize("rule", [r for r in RULES if r.example.language == "python"],
                         ids=lambda r: r.id)
def test_example_is_what_the_engine_does(rule) -> None:
    before = rule.example.before.encode()
    registry = CUDA_REGISTRY if rule.source == "cuda" else REGISTRY
    result = migrate_source("example.py", before, registry)
    assert result.error is None
    assert (result.new_source or before).decode() == rule.example.after
    assert rule.id in {f.rule_id for f in result.findings}
    if rule.kind is Kind.REVIEW:
        assert rule.example.after == rule.example.before


def test_every_rule_is_exercised_by_a_fixture() -> None:
    from tests.conftest import FIXTURES

    seen: set[str] = set()
    for expected in (FIXTURES / "deps").glob("*/findings.txt"):  # the scanner's fixtures
        seen |= {word for line in expected.read_text().splitlines()
                 for word in line.split() if re.fullmatch(r"NMC?8\d\d|NM95\d", word)}
    for before in PYTHON_FIXTURES:
        result = migrate_source(before.name, before.read_bytes(), REGISTRY)
        seen |= {f.rule_id for f in result.findings}
        prefix = before.name.split("_", 1)[0]
        if prefix.startswith("NM"):
            assert prefix in {f.rule_id for f in result.findings}, before.name
    for before in (FIXTURES / "cuda").glob("*.before.py"):  # tests/rules/test_cuda.py runs them
        seen |= {f.rule_id for f in migrate_source(before.name, before.read_bytes(),
                                                   CUDA_REGISTRY).findings}
    for path in (FIXTURES / "audit" / "project").iterdir():  # audit's own (NM960)
        seen |= {f.rule_id for f in audit_file(path.name, path.read_bytes(), REGISTRY,
                                               migrate_bytes).findings}
    report = cli("check", FIXTURES / "helpers_module", "--format", "json").json()  # NM003
    seen |= {f["rule_id"] for f in report["findings"]}
    assert {r.id for r in RULES} <= seen


def test_fixture_names_refer_to_real_rules() -> None:
    ids = {r.id for r in RULES}
    for before in PYTHON_FIXTURES:
        prefix = before.name.split("_", 1)[0]
        assert not prefix.startswith("NM") or prefix in ids, before.name


@pytest.mark.torch
@pytest.mark.parametrize("api", sorted({a for r in RULES for a in r.emits}))
def test_emitted_apis_exist(api: str) -> None:
    """What we write into users' files exists in the targeted PyTorch."""
    if api in TORCH_NEURONX_APIS | CUDA_COUNTERPARTS:
        from neuron_migrate.emulator import device_module

        assert hasattr(device_module.build(), api.removeprefix("torch.neuron.")), api
        return
    parts = api.split(".")
    for split in range(len(parts), 0, -1):  # the longest importable module, then attributes
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            assert hasattr(target, attribute), api
            target = getattr(target, attribute)
        return
    pytest.fail(f"{api}: no importable module")


def test_torch_neuronx_apis_are_only_the_documented_ones() -> None:
    emitted_neuron = {a for r in RULES for a in r.emits if a.startswith("torch.neuron.")}
    assert emitted_neuron <= TORCH_NEURONX_APIS | CUDA_COUNTERPARTS
    assert not {a for r in RULES if r.source != "cuda" for a in r.emits
                if a.startswith("torch.neuron.")} & (CUDA_COUNTERPARTS - TORCH_NEURONX_APIS)


def test_readme_table_and_rules_page_are_what_the_catalogue_generates() -> None:
    """The README's rules table and docs/rules.md are written from the rule classes; a rule
    added or reworded without regenerating them fails here."""
    from neuron_migrate.catalogue_docs import generated
    from tests.conftest import ROOT

    for path, text in generated(ROOT).items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.name} is stale: run `python -m neuron_migrate.catalogue_docs --write`")


def test_every_rules_table_link_lands_on_a_heading_of_the_rules_page() -> None:
    from neuron_migrate.catalogue_docs import readme_table, rules_page

    headings = {re.sub(r"[^a-z0-9 -]", "", line[4:].lower()).replace(" ", "-")
                for line in rules_page(RULES).splitlines() if line.startswith("### ")}
    links = re.findall(r"\(docs/rules\.md#([^)]+)\)", readme_table(RULES))
    assert len(links) == len(RULES) and set(links) == headings


def test_a_pipe_in_a_summary_does_not_split_its_table_row() -> None:
    from neuron_migrate.catalogue_docs import readme_table

    class Piped:
        id, name, kind, summary = "NM999", "piped", "review", "`a | b` is reported"

    row = readme_table([Piped()]).splitlines()[-1]  # type: ignore[list-item]
    assert row.endswith("| review | `a \\| b` is reported |")


def test_the_generated_table_needs_its_markers() -> None:
    from neuron_migrate.catalogue_docs import with_table

    with pytest.raises(ValueError, match="markers"):
        with_table("# a README without the table\n", "| id |")


ENVIRONMENT = sorted(set(XLA_VARIABLES) | OTHER_XLA_KNOBS | KEPT | XLA_ONLY | BF16 | {
    "XLA_PERSISTENT_CACHE_PATH", "NEURON_PARALLEL_COMPILE_MAX_RETRIES",  # in no list
    "NEURON_RT_NUM_CORES", "NEURON_CC_FLAGS", "MASTER_PORT"})  # not XLA settings


@pytest.mark.parametrize("name", ENVIRONMENT)
def test_python_rules_and_the_dependency_scan_agree_on_xla_variables(name: str) -> None:
    """A variable reported in a Dockerfile or shell script is reported when Python sets it."""
    source = f'import os\n\nos.environ["{name}"] = "1"\n'.encode()
    reported = {f.rule_id for f in migrate_source("env.py", source, REGISTRY).findings}
    assert bool(reported & {"NM601", "NM602"}) == (xla_variable_advice(name) is not None)


@pytest.mark.parametrize(("value", "reported"), [
    ("trn1", True), ("trn1n.32xlarge", True), ("inf2.xlarge", True), ("ml.trn1.32xlarge", True),
    ("ml.inf2.24xlarge", True), ("trn2.48xlarge", False), ("ml.trn2.48xlarge", False),
    ("trn1-notes", False),
])
def test_trn1_and_inf2_targets_are_reported_in_every_spelling(value: str, reported: bool) -> None:
    source = f'INSTANCE_TYPE = "{value}"\n'.encode()
    found = {f.rule_id for f in migrate_source("launch.py", source, REGISTRY).findings}
    assert ("NM712" in found) == reported


XLA_TAG = "pytorch-training-neuronx:2.1.2-neuronx-py310-sdk2.20.0-ubuntu20.04"


@pytest.mark.parametrize(("value", "reported"), [
    (f'"public.ecr.aws/neuron/{XLA_TAG}"', True),
    (f'f"{{registry}}/{XLA_TAG}"', True),  # the tag is not the f-string's leading text
    ('"public.ecr.aws/neuron/pytorch-training-neuronx:2.14.0-neuronx-py312-sdk2.33.0-u24"',
     False),
    ('"source /opt/aws_neuronx_venv_pytorch_2_9/bin/activate"', True),
    ('"source /opt/aws_neuronx_venv_torch_neuronx_2_14_0/bin/activate"', False),
])
def test_xla_era_containers_named_in_python_are_reported(value: str, reported: bool) -> None:
    source = f"registry = 'ecr'\nIMAGE = {value}\n".encode()
    found = [f for f in migrate_source("launch.py", source, REGISTRY).findings
             if f.rule_id == "NM713"]
    assert [f.line for f in found] == ([2] if reported else [])
    assert all(f.message.startswith(("image `pytorch-training", "`/opt/")) for f in found)


@pytest.mark.parametrize(("value", "reported"), [
    ('["pip", "install", "torch-neuronx==2.1.2.2.3.0"]', True),
    ('"pip3 install torch-neuronx torch-xla"', True),  # unpinned, and the XLA library beside
    ('"pip install torch-neuronx==2.13.*"', True),  # beta
    ('"pip install torch-neuronx==2.14.* nki neuronx-cc==2.*"', False),
    ('["torch-neuronx==2.14.*"]', False),
    ('"pip install torch-xla"', False),  # PyTorch/XLA without Neuron: TPU, not ours
    ('"torch-neuronx"', False),  # a distribution name (importlib.metadata.version) installs nothing
])
def test_xla_stack_installs_written_in_python_are_reported(value: str, reported: bool) -> None:
    source = f"import subprocess\nsubprocess.run({value})\n".encode()
    found = [f for f in migrate_source("helper.py", source, REGISTRY).findings
             if f.rule_id == "NM714"]
    assert [f.line for f in found] == ([2] if reported else [])


def test_in_setup_py_a_string_both_read_is_reported_once_by_the_scanner() -> None:
    from neuron_migrate.runner import migrate_data

    source = (b"from setuptools import setup\n"
              b"setup(install_requires=[\"torch-neuronx==2.1.2.2.3.0\"])\n")
    at = {(f.line, f.column, f.rule_id) for f in migrate_data("setup.py", source, REGISTRY).findings}
    assert (2, 25, "NM801") in at and not any(rule == "NM714" for _, _, rule in at)
    assert any(f.rule_id == "NM714" for f in migrate_data("pins.py", source, REGISTRY).findings)


@pytest.mark.parametrize(("call", "device"), [
    ("xm.xla_device()", 'torch.device("neuron")'),
    ("xm.xla_device(None)", 'torch.device("neuron")'),
    ("xm.xla_device(1)", 'torch.device("neuron", 1)'),
    ("xm.xla_device(n=rank)", 'torch.device("neuron", rank)'),
    ("xm.xla_device(index=2)", 'torch.device("neuron", 2)'),
])
def test_an_explicit_device_index_is_kept(call: str, device: str) -> None:
    """NM101 keeps the index an XLA device was asked for (and says to check it, since each
    process sees its own core as neuron:0); no index, or None, is the process's own device."""
    new, findings = migrated(f"import torch_xla.core.xla_model as xm\n\nrank = 0\nd = {call}\n")
    assert f"d = {device}\n" in new
    [finding] = [f for f in findings if f.rule_id == "NM101"]
    assert ("check the index" in finding.message) == ("," in device)
