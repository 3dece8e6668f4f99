"""NM503 compiles the model that the code placing it trains, with the device followed through
a helper function of the file; a model placed for inference is left alone. The tutorial-style
scripts in fixtures/smoke/xla_tutorial_*.py, migrated, run compiled on the emulated device."""

from __future__ import annotations

import shutil
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from neuron_migrate.smoke.run import SmokeOptions, run_smoke
from tests.conftest import FIXTURES, cli

REGISTRY = Registry(all_rules())
TUTORIALS = sorted((FIXTURES / "smoke").glob("xla_tutorial_*.py"))
HEAD = "import torch\nimport torch_xla.core.xla_model as xm\n\n\n"
COMPILE = '.compile(backend="neuron", dynamic=False)'


def _migrated(body: str) -> str:
    source = HEAD + textwrap.dedent(body)
    result = migrate_source("t.py", source.encode(), REGISTRY)
    assert result.error is None, result.error
    return result.new_source.decode() if result.new_source is not None else source


def _compiled(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if COMPILE in line]


def test_the_device_is_followed_through_a_helper_function() -> None:
    text = _migrated("""\
    def get_device():
        device = xm.xla_device()
        return device


    def main(batches):
        device = get_device()
        model = torch.nn.Linear(2, 1).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in batches:
            optimizer.zero_grad()
            model(x.to(device)).sum().backward()
            optimizer.step()
    """)
    assert _compiled(text) == [f"model{COMPILE}"]


def test_a_helper_that_may_return_another_device_is_not_followed() -> None:
    text = _migrated("""\
    def get_device(cpu):
        if cpu:
            return torch.device("cpu")
        return xm.xla_device()


    def main(x):
        device = get_device(False)
        model = torch.nn.Linear(2, 1).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(x).sum().backward()
        optimizer.step()
    """)
    assert _compiled(text) == []


def test_a_model_placed_for_inference_is_not_compiled_where_another_is_trained() -> None:
    text = _migrated("""\
    def train(x):
        device = xm.xla_device()
        model = torch.nn.Linear(2, 1).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(x).sum().backward()
        optimizer.step()


    def infer(x):
        device = xm.xla_device()
        model = torch.nn.Linear(2, 1).to(device)
        print(sum(p.numel() for p in model.parameters()))
        model.eval()
        return model(x)
    """)
    assert _compiled(text) == [f"model{COMPILE}"]
    assert text.index(COMPILE) < text.index("def infer")


@pytest.mark.parametrize("body", [
    pytest.param("""\
    def fit(net, batches):
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        for x in batches:
            net(x).sum().backward()
            optimizer.step()


    def main(batches):
        device = xm.xla_device()
        model = torch.nn.Linear(2, 1).to(device)
        fit(model, batches)
    """, id="passed-to-a-training-function"),
    pytest.param("""\
    class Loop:
        def __init__(self, net):
            self.net = net

        def run(self, x):
            self.net(x).sum().backward()


    def main(x):
        device = xm.xla_device()
        model = torch.nn.Linear(2, 1).to(device)
        Loop(model).run(x)
    """, id="passed-to-a-training-class"),
    pytest.param("""\
    device = xm.xla_device()
    model = torch.nn.Linear(2, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


    def step(x):
        model(x).sum().backward()
        optimizer.step()


    if __name__ == "__main__":
        step(torch.ones(1, 2))
    """, id="module-level"),
])
def test_the_model_the_placing_code_trains_is_compiled(body: str) -> None:
    assert len(_compiled(_migrated(body))) == 1


@pytest.mark.torch
def test_tutorial_scripts_run_compiled_after_migration(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(TUTORIALS) == 4
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.chdir(tmp_path)
    for script in TUTORIALS:
        shutil.copy(script, tmp_path / script.name)
        run = cli("apply", script.name)
        assert run.exit_code == 0, run.stdout + run.stderr
        assert COMPILE in (tmp_path / script.name).read_text()
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda s: run_smoke(SmokeOptions(
            script=tmp_path / s.name, timeout=300)), TUTORIALS))
    for script, result in zip(TUTORIALS, results):
        assert result.passed, (script.name, result)
        assert result.graphs_compiled > 0, script.name
