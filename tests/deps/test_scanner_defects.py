"""The dependency scanner on shapes met in public repositories: installs that are not
TorchNeuron's (no CPU index for them), the Python an image names through an ARG, images with
no PyTorch at all, instance types that are lists or documents rather than targets, shell
scripts held in Python strings, Makefile recipes and the XLA knobs a script exports."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_migrate.deps import kind_of, scan_source
from neuron_migrate.deps.makefile import shell_view
from neuron_migrate.model import Kind, Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from neuron_migrate.runner import migrate_path
from tests.conftest import FIXTURES

DEPS = FIXTURES / "deps"
DEFECTS = FIXTURES / "scanner_defects"


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry(all_rules())


def _scan(case: str, name: str, registry: Registry, fix: bool = True,
          monkeypatch: pytest.MonkeyPatch | None = None):
    folder = DEPS / case / "before"
    if monkeypatch is not None:
        monkeypatch.chdir(folder)  # files the scanner looks beside (a requirements file)
        return scan_source(name, (folder / name).read_bytes(), registry, fix=fix)
    return scan_source(str(folder / name), (folder / name).read_bytes(), registry, fix=fix)


def _rules(result) -> list[tuple[int, str]]:
    return sorted((f.line, f.rule_id) for f in result.findings)


# NM810: the CPU index only where TorchNeuron is installed

def test_inf1_mxnet_and_tensorflow_installs_get_no_cpu_index(registry: Registry) -> None:
    result = _scan("inf1_frameworks_index", "Dockerfile", registry)
    assert _rules(result) == [(6, "NM808")] and result.new_source is None


def test_an_inf1_notebook_gets_no_cpu_index_beside_its_torch_neuron(registry: Registry) -> None:
    result = migrate_path(DEFECTS / "inf1_install.ipynb", registry, code=False)
    assert "NM810" not in {f.rule_id for f in result.findings}
    assert "NM808" in {f.rule_id for f in result.findings}


def test_a_torchneuron_install_still_gets_the_cpu_index(registry: Registry) -> None:
    text = b"pip install --extra-index-url https://pip.repos.neuron.amazonaws.com " \
           b"torch-neuronx==2.14.* neuronx-cc==2.* nki\n"
    result = scan_source("setup.sh", text, registry, fix=True)
    assert [f.rule_id for f in result.findings] == ["NM810"]
    assert b"--extra-index-url https://download.pytorch.org/whl/cpu" in result.new_source


# NM950: the Python an image names, and only images for PyTorch or Neuron work

def test_an_arg_that_names_python_310_is_the_images_python(registry: Registry) -> None:
    result = _scan("python_arg_indirection", "Dockerfile", registry)
    assert _rules(result) == [(2, "NM950"), (8, "NM801")]
    (image,) = [f for f in result.findings if f.rule_id == "NM950"]
    assert "`python3.10`" in image.message
    assert b'"torch-neuronx==2.14.*"' in result.new_source  # what apply moves it to


def test_python_through_a_variable_runs_pip(registry: Registry) -> None:
    text = b"PY=python3.12\n$PY -m pip install torch-neuronx\n"
    result = scan_source("setup.sh", text, registry, fix=False)
    assert "NM802" in {f.rule_id for f in result.findings}


@pytest.mark.parametrize("case", ["python_no_torch_xgboost", "python_no_torch_docs"])
def test_images_without_torch_or_neuron_are_not_judged(case: str, registry: Registry,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    assert _scan(case, "Dockerfile", registry, monkeypatch=monkeypatch).findings == ()


def test_an_unreadable_requirements_file_may_install_torch(registry: Registry) -> None:
    text = b"FROM python:3.10\nRUN pip install -r nowhere/requirements-gpu.txt\n"
    assert _rules(scan_source("Dockerfile", text, registry, fix=True)) == [(1, "NM950")]


# NM814: instance types where a workload is set to run, not lists and documents

@pytest.mark.parametrize(("case", "name"), [
    ("instance_device_plugin", "neuron-device-plugin.yml"),
    ("instance_issue_template", ".github/ISSUE_TEMPLATE/bug_report.yml"),
    ("instance_model_card", "card.yaml"),
])
def test_instance_lists_and_documents_are_not_targets(case: str, name: str,
                                                      registry: Registry,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert _scan(case, name, registry, monkeypatch=monkeypatch).findings == ()


def test_a_node_selector_for_trn1_is_still_a_target(registry: Registry) -> None:
    result = _scan("instance_node_selector", "train-job.yml", registry)
    assert _rules(result) == [(9, "NM814"), (18, "NM814"), (19, "NM814")]


# NM601 / NM714: a shell script in a Python string reports every finding in it

def test_a_script_in_a_string_reports_each_of_its_findings(registry: Registry) -> None:
    result = migrate_path(DEFECTS / "launcher_script.py", registry)
    assert result.new_source is None  # nothing in a script string is rewritten
    (finding,) = [f for f in result.findings if f.line == 4]
    assert finding.rule_id == "NM714" and finding.kind is Kind.REVIEW
    for said in ("[NM601] NEURON_CC_FLAGS", "model-type", "[NM812] `XLA_USE_BF16`",
                 "[NM802] `torch-neuronx` is unpinned", "line 4 of the string"):
        assert said in finding.message


def test_a_compiler_flag_string_alone_is_still_nm601(registry: Registry, tmp_path: Path) -> None:
    path = tmp_path / "flags.py"
    path.write_text('import os\nos.environ["NEURON_CC_FLAGS"] = "--model-type=transformer"\n')
    assert [f.rule_id for f in migrate_path(path, registry).findings] == ["NM601"]


# Makefiles

@pytest.mark.parametrize("name", ["Makefile", "GNUmakefile", "makefile", "neuron.mk"])
def test_makefiles_are_scanned(name: str) -> None:
    assert kind_of(Path(name)) == "makefile"


def test_makefile_recipes_are_read_as_shell(registry: Registry) -> None:
    result = _scan("makefile_install", "Makefile", registry)
    assert _rules(result) == [(3, "NM812"), (9, "NM810"), (10, "NM802"), (10, "NM805"),
                              (13, "NM813"), (16, "NM814")]
    assert result.new_source == (DEPS / "makefile_install" / "after" / "Makefile").read_bytes()


def test_the_shell_view_keeps_offsets_and_drops_make_syntax() -> None:
    text = "X := 1\nall:\n\t@-$(PY) -m pip install $$HOME \\\n\t\t--pre x\n"
    view, variables = shell_view(text)
    assert len(view) == len(text) and view.count("\n") == text.count("\n")
    assert view.splitlines()[2] == "   ${PY} -m pip install  $HOME \\"  # tab, @, - gone
    assert view.splitlines()[3] == "\t\t--pre x" and variables["X"].value == "1"


def test_scan_of_a_makefile_reads_it(registry: Registry, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "Makefile").write_text("install-neuron:\n\tpip install torch-neuronx\n")
    done = cli("scan", "Makefile")
    assert "0 files scanned" not in done.stdout and "NM802" in done.stdout


# NM812: an exported XLA-only knob is removed from a script as from Python

def test_an_export_line_of_an_xla_only_knob_is_removed(registry: Registry) -> None:
    result = _scan("shell_fuse_softmax", "train_env.sh", registry)
    applied = sorted(f.line for f in result.findings if f.applied)
    assert applied == [3, 4]  # NEURON_FUSE_SOFTMAX and PJRT_DEVICE, on lines of their own
    after = DEPS / "shell_fuse_softmax" / "after" / "train_env.sh"
    assert result.new_source == after.read_bytes()


def test_without_fix_an_export_line_is_reported_only(registry: Registry) -> None:
    result = _scan("shell_fuse_softmax", "train_env.sh", registry, fix=False)
    assert result.new_source is None and not any(f.applied for f in result.findings)


def test_the_removal_follows_select_and_ignore() -> None:
    ignoring = Registry(all_rules(), Options(ignore=frozenset({"NM812"})))
    result = _scan("shell_fuse_softmax", "train_env.sh", ignoring)
    assert result.new_source is None and result.findings == ()


def test_a_long_script_string_lists_ten_findings_and_counts_the_rest() -> None:
    from neuron_migrate.rules.installs import script_advice

    knobs = "\n".join(f"export XLA_KNOB_{i}=1" for i in range(14))
    script = knobs + "\npip install torch-neuronx\n"
    message = script_advice(script)
    assert message.startswith("a shell script in a string, with 15 findings")
    assert message.count("[NM812]") == 10 and message.endswith("; and 5 more")
