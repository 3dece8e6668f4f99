"""`--from cuda` in the dependency scanner (NMC8xx): each rule documents itself, its
example is what the scanner does when the run migrates from CUDA, and nothing of it fires (or
changes a byte) when it does not."""

from __future__ import annotations

import re

import pytest

from neuron_migrate.deps import ids, scan_source
from neuron_migrate.model import Kind, Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from neuron_migrate.rules.cuda_dependencies import RULES
from tests.conftest import FIXTURES
from tests.deps.test_deps_rules import EXAMPLE_FILES

CUDA = Registry(all_rules(), Options(sources=frozenset({"xla", "cuda"})))
XLA = Registry(all_rules())


def _scan(name: str, text: str, registry: Registry = CUDA, fix: bool = True):
    result = scan_source(name, text.encode(), registry, fix=fix)
    assert result.error is None
    return result


def test_ids_are_their_own_block() -> None:
    found = [rule.id for rule in RULES]
    assert found == sorted(ids.CUDA_KINDS) and len(set(found)) == len(found)
    assert all(re.fullmatch(r"NMC8\d\d", i) for i in found)
    assert not set(ids.CUDA_KINDS) & set(ids.KINDS)
    assert all(rule.source == "cuda" for rule in RULES)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_documents_itself(rule) -> None:
    assert rule.summary and "\n" not in rule.summary
    assert len(rule.explanation.split()) >= 30
    for section in ("What it does:", "Why:", "What differs:"):
        assert section in rule.explanation
    assert "--from cuda" in rule.explanation
    assert rule.doc_url.startswith("https://")
    assert rule.kind is ids.CUDA_KINDS[rule.id]
    assert rule.example.language in EXAMPLE_FILES


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_example_is_what_the_scanner_does(rule) -> None:
    name = EXAMPLE_FILES[rule.example.language]
    result = _scan(name, rule.example.before)
    assert (result.new_source or rule.example.before.encode()).decode() == rule.example.after
    assert rule.id in {f.rule_id for f in result.findings}
    if rule.kind is not Kind.FIX:
        assert rule.example.after == rule.example.before


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_example_is_left_alone_without_from_cuda(rule) -> None:
    name = EXAMPLE_FILES[rule.example.language]
    result = _scan(name, rule.example.before, XLA)
    assert result.new_source is None
    assert not [f for f in result.findings if f.rule_id.startswith("NMC")]


def test_every_rule_is_exercised_by_a_fixture() -> None:
    expected = "".join(p.read_text() for p in (FIXTURES / "deps").glob("*/findings.txt"))
    assert {rule.id for rule in RULES} <= set(re.findall(r"NMC8\d\d", expected))


REPOSITORY = {
    "requirements.txt": "--index-url https://download.pytorch.org/whl/cu118\ntorch==2.1.2+cu118\n"
                        "nvidia-nccl-cu11==2.19.3\n",
    "Dockerfile": "FROM nvidia/cuda:12.1.0-devel-ubuntu22.04\nENV CUDA_VISIBLE_DEVICES=0\n",
    "k8s/job.yaml": "spec:\n  containers:\n    - name: t\n      resources:\n"
                    "        limits:\n          nvidia.com/gpu: 1\n",
    "clean.txt": "numpy\n",  # not a dependency file
    "requirements-dev.txt": "pytest\nruff\n",  # nothing to migrate
}


def _repository(tmp_path) -> None:
    for name, text in REPOSITORY.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(text.encode())


def _files(tmp_path) -> dict[str, bytes]:
    return {name: (tmp_path / name).read_bytes() for name in REPOSITORY}


def test_scan_fix_over_a_repository(tmp_path) -> None:
    from neuron_migrate.runner import run

    _repository(tmp_path)
    result = run([tmp_path], CUDA, write=True, python=False, strict=True)
    assert not result.errors and not any(f.error for f in result.files)
    after = _files(tmp_path)
    assert after["requirements.txt"].decode() == (
        "--index-url https://download.pytorch.org/whl/cpu\n"
        "--extra-index-url https://pip.repos.neuron.amazonaws.com\n"
        "torch==2.14.0\ntorch-neuronx==2.14.*\nneuronx-cc==2.*\nnki\n")
    for name in ("Dockerfile", "k8s/job.yaml", "clean.txt", "requirements-dev.txt"):
        assert after[name] == REPOSITORY[name].encode(), name  # reviewed or nothing to do
    rules = {f.rule_id for f in result.findings}
    assert rules == {"NMC801", "NMC802", "NMC803", "NMC804", "NMC805", "NMC806"}
    again = run([tmp_path], CUDA, write=True, python=False, strict=True)
    assert _files(tmp_path) == after
    assert not any(f.applied for f in again.findings)


def test_without_from_cuda_a_repository_is_untouched(tmp_path) -> None:
    from neuron_migrate.runner import run

    _repository(tmp_path)
    result = run([tmp_path], XLA, write=True, python=False, strict=True)
    assert _files(tmp_path) == {n: t.encode() for n, t in REPOSITORY.items()}
    assert not result.findings


def test_select_and_ignore_apply_to_the_cuda_rules() -> None:
    text = REPOSITORY["requirements.txt"]
    only_index = Registry(all_rules(), Options(sources=frozenset({"xla", "cuda"}),
                                               select=frozenset({"NMC802"})))
    result = _scan("requirements.txt", text, only_index)
    assert {f.rule_id for f in result.findings} == {"NMC802"}
    assert result.new_source is not None and b"torch==2.1.2+cu118" in result.new_source
    ignoring = Registry(all_rules(), Options(sources=frozenset({"xla", "cuda"}),
                                             ignore=frozenset({"NMC8"})))
    assert _scan("requirements.txt", text, ignoring).findings == ()


def test_a_torch_without_a_cuda_mark_is_left_alone() -> None:
    """A plain `torch` with no CUDA index in the file may be any build: nothing to say."""
    result = _scan("requirements.txt", "torch>=2.1\ntransformers\n")
    assert result.findings == () and result.new_source is None


def test_torch_beside_torch_neuronx_is_left_to_the_xla_rules() -> None:
    text = ("--extra-index-url https://pip.repos.neuron.amazonaws.com\n"
            "--extra-index-url https://download.pytorch.org/whl/cpu\n"
            "torch==2.3.1+cu121\ntorch-neuronx==2.14.*\nneuronx-cc==2.*\nnki\n")
    result = _scan("requirements.txt", text)
    assert [f.rule_id for f in result.findings] == ["NM804"]
    assert result.new_source is not None and b"torch==2.14.0\n" in result.new_source


def test_an_index_in_a_variable_is_reviewed() -> None:
    text = ('TORCH_INDEX=https://download.pytorch.org/whl/cu121\n'
            'pip install torch==2.3.1+cu121 --index-url "$TORCH_INDEX"\n')
    result = _scan("setup.sh", text)
    assert {(f.rule_id, f.kind) for f in result.findings} == {
        ("NMC802", Kind.REVIEW), ("NMC801", Kind.REVIEW)}
    assert result.new_source is None


def test_a_lockfile_reports_torch_once_for_regeneration() -> None:
    lock = ('version = 1\n\n[[package]]\nname = "nvidia-cudnn-cu12"\nversion = "9.1.0.70"\n\n'
            '[[package]]\nname = "torch"\nversion = "2.4.1+cu121"\n')
    result = _scan("uv.lock", lock)
    assert [(f.line, f.rule_id) for f in result.findings] == [(8, "NM815")]
    assert "uv lock" in result.findings[0].message and "torch==2.14.0" in \
        result.findings[0].message
    assert result.new_source is None


def test_notebook_install_lines_are_reported_only() -> None:
    import json

    from neuron_migrate.notebooks.migrate import _migrate

    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": ["!pip install torch --index-url https://download.pytorch.org/whl/cu121\n",
                       "%env CUDA_VISIBLE_DEVICES=0\n", "import torch\n"]}
    data = json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                       "nbformat_minor": 5}).encode()
    found = _migrate("nb.ipynb", data, CUDA, None)
    assert {(f.line, f.rule_id) for f in found.findings} == {
        (1, "NMC801"), (1, "NMC802"), (2, "NMC805")}
    assert found.new_source is None and not any(f.applied for f in found.findings)
    assert not _migrate("nb.ipynb", data, XLA, None).findings


@pytest.mark.parametrize("text, rule", [
    ("#!/bin/bash\n#SBATCH --gres=gpu:4\nsrun python train.py\n", "NMC806"),
    ("ENV CUDA_VISIBLE_DEVICES=0\n", "NMC805"),
    ("RUN conda install -y pytorch-cuda=12.1\n", "NMC801"),
    ("RUN pip install torch==2.3.1+cu121\n", "NMC801"),
    ("RUN pip install flash-attn --no-build-isolation\n", "NMC803"),
    ("RUN pip install bitsandbytes pynvml\n", "NMC803"),
    ("FROM pytorch/pytorch:latest\n", "NMC804"),
])
def test_a_file_whose_only_signal_is_cuda_is_read(text: str, rule: str) -> None:
    name = "job.sbatch" if text.startswith("#!") else "Dockerfile"
    assert rule in {f.rule_id for f in _scan(name, text).findings}
    assert not _scan(name, text, XLA).findings


def test_a_pip_command_uses_its_own_index_options() -> None:
    """The CUDA index of one command does not make another command's torch installable from
    the Neuron index: that one is reviewed, not given packages it could not find."""
    text = ("pip install torch==2.2.2+cu118 -f https://download.pytorch.org/whl/torch_stable.html\n"
            "pip install numpy --index-url https://download.pytorch.org/whl/cu121\n")
    result = _scan("setup.sh", text)
    torch = next(f for f in result.findings if f.rule_id == "NMC801")
    assert torch.kind is Kind.REVIEW and "configure both indexes" in torch.message
    assert result.new_source is not None
    assert result.new_source.decode().splitlines()[0] == text.splitlines()[0]


def test_neighbouring_words_removed_at_once() -> None:
    """Two removals side by side (a word and the last one) must not claim the same blank,
    or one of them would wait for a second run."""
    text = ("pip install --index-url https://download.pytorch.org/whl/cu121 torch "
            "nvidia-cudnn-cu12 nvidia-nccl-cu12\n")
    result = _scan("setup.sh", text)
    assert all(f.applied for f in result.findings if f.rule_id == "NMC803")
    assert result.new_source is not None and b"nvidia" not in result.new_source
    assert _scan("setup.sh", result.new_source.decode()).new_source is None


@pytest.mark.parametrize("image, cuda", [
    ("nvidia/cuda:12.1.0-runtime-ubuntu22.04", True), ("docker.io/nvidia/cuda@sha256:0f1e", True),
    ("nvcr.io/nvidia/pytorch:24.05-py3", True), ("pytorch/pytorch:latest", True),
    ("mycorp/base:py311-cuda12.1", True), ("python:3.11-slim", False), ("ubuntu:22.04", False),
    ("public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.29.0-ubuntu24.04",
     False),
])
def test_cuda_base_images(image: str, cuda: bool) -> None:
    found = {f.rule_id for f in _scan("Dockerfile", f"FROM {image}\n").findings}
    assert ("NMC804" in found) is cuda


CUDA_PINS = "--extra-index-url https://download.pytorch.org/whl/cu121\ntorch==2.3.1+cu121\n"


def test_scan_from_cuda_on_the_command_line(in_tmp) -> None:
    from tests.conftest import cli

    (in_tmp / "requirements.txt").write_text(CUDA_PINS)
    assert cli("scan", ".").exit_code == 0  # the CUDA stack is left alone unless asked
    assert cli("scan", "--from", "cuda", ".").exit_code == 1
    assert (in_tmp / "requirements.txt").read_text() == CUDA_PINS
    assert cli("scan", "--from", "cuda", "--fix", ".").exit_code == 0
    assert "torch-neuronx==2.14.*" in (in_tmp / "requirements.txt").read_text()
    assert cli("scan", "--from", "cuda", ".").exit_code == 0


def test_scan_from_cuda_in_the_configuration(in_tmp) -> None:
    from tests.conftest import cli

    (in_tmp / "pyproject.toml").write_text('[tool.neuron-migrate]\nfrom = ["xla", "cuda"]\n')
    (in_tmp / "requirements.txt").write_text(CUDA_PINS)
    run = cli("scan", ".")
    assert run.exit_code == 1 and "NMC801" in run.stdout and "NMC802" in run.stdout


def test_a_cuda_wheel_url_outside_an_index_option_is_reported_once_a_line() -> None:
    text = ("jobs:\n  test:\n    env:\n      PIP_INSTALL_ARGS: '--pre -f "
            "https://download.pytorch.org/whl/nightly/cu118/torch_nightly.html'\n"
            "    steps:\n      - run: pip install torch --index-url "
            "https://download.pytorch.org/whl/cu121\n")
    found = [(f.line, f.rule_id) for f in _scan("ci.yml", text).findings]
    assert sorted(found) == [(4, "NMC802"), (6, "NMC801"), (6, "NMC802")]
    assert not _scan("ci.yml", text, XLA).findings


def test_a_setup_py_name_is_not_a_requirement() -> None:
    text = 'from setuptools import setup\nsetup(name="apex", install_requires=["triton"])\n'
    found = [(f.rule_id, f.message.split("`")[1]) for f in _scan("setup.py", text).findings]
    assert found == [("NMC803", "triton")]
