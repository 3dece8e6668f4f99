"""NM714 reads install commands inside multi-line Python strings (error messages, setup
scripts), where the command is on any line of the string."""

from __future__ import annotations

from neuron_migrate.rules.installs import install_advice
from tests.conftest import cli


def test_install_on_a_later_line_of_a_string_is_judged() -> None:
    value = ("Kernels missing.\nUpgrade the compiler.\n"
             "python3 -m pip install neuronx-cc torch-neuronx\n")
    advice = install_advice(value)
    assert advice is not None and "torch-neuronx" in advice


def test_a_multi_line_install_string_is_reported_not_an_internal_error(tmp_path) -> None:
    script = tmp_path / "kernels.py"
    script.write_text(
        "import torch_xla.core.xla_model as xm\n\n"
        "def load():\n"
        "    raise RuntimeError(\n"
        '        "Kernels missing.\\n"\n'
        '        "Upgrade the compiler.\\n"\n'
        '        "pip install neuronx-cc torch-neuronx"\n'
        "    )\n")
    result = cli("check", "--format", "json", str(script))
    assert "internal error" not in result.stdout
    assert '"NM714"' in result.stdout
