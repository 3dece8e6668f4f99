"""NM101 reports only a `try` that tests for the device; any other `try` around
`xm.xla_device()` keeps the rewrite (left alone, the call keeps `import torch_xla` and the
file fails at import on TorchNeuron)."""

from __future__ import annotations

import textwrap

import pytest

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import Kind
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules

REGISTRY = Registry(all_rules())


def _migrate(body: str) -> tuple[list[Kind], str]:
    source = "import logging\nimport torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n\n" + \
        textwrap.dedent(body)
    result = migrate_source("t.py", source.encode(), REGISTRY)
    assert result.error is None, result.error
    text = result.new_source.decode() if result.new_source is not None else source
    return [f.kind for f in result.findings if f.rule_id == "NM101"], text


@pytest.mark.parametrize("body", [
    pytest.param("""\
    def main():
        try:
            device = xm.xla_device()
            model = torch.nn.Linear(2, 2).to(device)
            x = torch.ones(2, 2, device=device)
            loss = model(x).sum()
            loss.backward()
        except Exception:
            logging.exception("training failed")
            raise
    """, id="logger-that-re-raises"),
    pytest.param("""\
    def main(batches):
        try:
            device = xm.xla_device()
            for batch in batches:
                print(batch.to(device).sum())
        except Exception as error:
            logging.error("failed: %s", error)
    """, id="logger-around-a-loop"),
    pytest.param("""\
    def main():
        try:
            device = xm.xla_device()
            a = torch.ones(2, device=device)
            b = a * 2
            c = b + a
            print(c)
        except RuntimeError:
            logging.warning("step failed")
    """, id="runtime-error-around-work"),
    pytest.param("""\
    try:
        device = xm.xla_device()
    except RuntimeError:
        raise SystemExit("this script needs a Neuron device")
    """, id="handler-that-stops"),
])
def test_a_try_that_is_no_test_for_the_device_keeps_the_rewrite(body: str) -> None:
    kinds, text = _migrate(body)
    assert kinds == [Kind.FIX]
    assert "torch_xla" not in text  # nothing keeps the file from importing on TorchNeuron


@pytest.mark.parametrize("body", [
    pytest.param("""\
    try:
        device = xm.xla_device()
    except Exception:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    """, id="falls-back-to-cuda-or-cpu"),
    pytest.param("""\
    def has_xla():
        try:
            _ = xm.xla_device()
            print("XLA device found")
            return True
        except:
            return False
    """, id="flag"),
    pytest.param("""\
    try:
        import torch_xla.core.xla_model as xm2
        device = xm2.xla_device()
        model = torch.nn.Linear(2, 2).to(device)
        x = torch.ones(2, device=device)
        y = model(x)
    except (ImportError, RuntimeError):
        raise SystemExit("no XLA")
    """, id="import-and-runtime-error"),
])
def test_a_test_for_the_device_is_reported(body: str) -> None:
    kinds, _ = _migrate(body)
    assert kinds == [Kind.REVIEW]
