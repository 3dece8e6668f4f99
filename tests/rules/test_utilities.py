"""The training-loop utilities (NM104, NM302-NM305): their helpers behave as PyTorch/XLA's
originals did, and migrated code that uses them runs."""

from __future__ import annotations

import importlib.util
import re
import sys
import types
from pathlib import Path

import libcst as cst
import pytest

torch = pytest.importorskip("torch", reason="runs emitted code: needs the `test` extra")
pytestmark = pytest.mark.torch

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from tests.rules.test_helpers import H

REGISTRY = Registry(all_rules())
TIME = r"\d\d:\d\d:\d\d"


class FakeWriter:
    """Records what a SummaryWriter was asked to do."""

    def __init__(self, log_dir: str | None = None) -> None:
        self.log_dir = log_dir
        self.scalars: list[tuple[str, object, object]] = []
        self.calls: list[str] = []

    def add_scalar(self, name: str, value: object, step: object = None) -> None:
        self.scalars.append((name, value, step))

    def flush(self) -> None:
        self.calls.append("flush")

    def close(self) -> None:
        self.calls.append("close")


# ------------------------------------------------------------------ SampleGenerator (NM302)
def test_sample_generator_serves_the_same_data_count_times_per_pass() -> None:
    batch = (torch.zeros(2, 3), torch.ones(2))
    generator = H["_NeuronSampleGenerator"](data=batch, sample_count=3)
    assert len(generator) == 3
    for _ in range(2):  # one pass per epoch, each from the start
        served = list(generator)
        assert len(served) == 3 and all(item is batch for item in served)
    assert next(generator) is batch  # an iterator itself, as the original was
    assert [next(generator), next(generator)] == [batch, batch]
    with pytest.raises(StopIteration):
        next(generator)
    assert list(H["_NeuronSampleGenerator"](batch, 0)) == []


# --------------------------------------------------------------------- RateTracker (NM303)
class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_tracker_smooths_like_xla(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr("time.time", clock)
    monkeypatch.delenv("RATE_TRACKER_SMOOTHING", raising=False)
    tracker = H["_NeuronRateTracker"]()
    assert tracker.rate() == 0.0 and tracker.global_rate() == 0.0  # no time has passed
    tracker.add(10)
    clock.now += 2
    assert tracker.rate() == pytest.approx(5.0)  # the first rate is not smoothed
    tracker.add(30)
    clock.now += 2
    assert tracker.global_rate() == pytest.approx(10.0)  # 40 samples in 4 seconds
    assert tracker.rate() == pytest.approx(0.6 * 15.0 + 0.4 * 5.0)  # default factor 0.4
    assert tracker.global_rate() == pytest.approx(10.0)


def test_rate_tracker_reads_its_smoothing_from_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr("time.time", clock)
    monkeypatch.setenv("RATE_TRACKER_SMOOTHING", "0")
    tracker = H["_NeuronRateTracker"]()
    for count in (10, 30):
        tracker.add(count)
        clock.now += 1
        last = tracker.rate()
    assert last == pytest.approx(30.0)
    explicit = H["_NeuronRateTracker"](smooth_factor=1.0)
    explicit.add(10)
    clock.now += 1
    explicit.rate()
    explicit.add(1000)
    clock.now += 1
    assert explicit.rate() == pytest.approx(10.0)  # the argument beats the environment


# ----------------------------------------------------------------------- test_utils (NM304)
def test_now_formats_the_local_time() -> None:
    assert re.fullmatch(TIME, H["_neuron_now"]())
    assert H["_neuron_now"](format="%Y") == str(__import__("datetime").date.today().year)


def test_training_update_prints_xlas_line(capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "3")  # torchrun's rank, before any process group exists
    H["_neuron_print_training_update"](torch.device("cpu"), 5, torch.tensor(0.123456), 3.0,
                                       2.5, epoch=1)
    H["_neuron_print_training_update"]("neuron", 6, 1.0, 3.0, 2.5)
    first, second = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"\| Training Device=cpu/3 Epoch=1 Step=5 Loss=0\.12346 Rate=3\.00 "
                        rf"GlobalRate=2\.50 Time={TIME}", first)
    assert re.fullmatch(r"\| Training Device=neuron/3 Step=6 Loss=1\.00000 Rate=3\.00 "
                        rf"GlobalRate=2\.50 Time={TIME}", second)


def test_training_update_names_the_process_group_rank_and_writes_the_rates(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 1)
    writer = FakeWriter()
    H["_neuron_print_training_update"]("neuron", 0, 2.0, 8.0, 4.0, 2, summary_writer=writer)
    assert "Device=neuron/1 Epoch=2" in capsys.readouterr().out
    assert writer.scalars == [("examples/sec", 8.0, None), ("average_examples/sec", 4.0, None)]


def test_test_update_prints_xlas_line(capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANK", raising=False)
    H["_neuron_print_test_update"]("neuron", 98.5, epoch=1, step=2)
    H["_neuron_print_test_update"]("neuron", None, 3)
    first, second = capsys.readouterr().out.splitlines()
    assert re.fullmatch(rf"\| Test Device=neuron/0 Step=2 Epoch=1 Accuracy=98\.50 Time={TIME}",
                        first)
    assert re.fullmatch(rf"\| Test Device=neuron/0 Epoch=3 Time={TIME}", second)


def test_without_a_logdir_there_is_no_writer_and_no_tensorboard_import() -> None:
    tensorboard_loaded = "torch.utils.tensorboard" in sys.modules
    assert H["_neuron_get_summary_writer"](None) is None
    assert H["_neuron_get_summary_writer"]("") is None
    assert ("torch.utils.tensorboard" in sys.modules) == tensorboard_loaded
    H["_neuron_write_to_summary"](None, 1, {"loss": 1.0}, write_xla_metrics=True)
    H["_neuron_close_summary_writer"](None)


def test_a_logdir_gives_a_tensorboard_writer_stamped_at_step_0(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = types.ModuleType("torch.utils.tensorboard")
    fake.SummaryWriter = FakeWriter  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", fake)
    writer = H["_neuron_get_summary_writer"](str(tmp_path))
    assert isinstance(writer, FakeWriter) and writer.log_dir == str(tmp_path)
    [(name, stamp, step)] = writer.scalars
    assert name == "TensorboardStartTimestamp" and step == 0 and stamp > 1e9
    H["_neuron_write_to_summary"](writer, 7, dict_to_write={"acc": 0.5, "loss": 2.0},
                                  write_xla_metrics=True)  # no XLA metrics to add
    assert writer.scalars[1:] == [("acc", 0.5, 7), ("loss", 2.0, 7)]
    H["_neuron_close_summary_writer"](writer)
    assert writer.calls == ["flush", "close"]


def test_the_summary_writer_the_helper_imports_ships_with_torch() -> None:
    """torch.utils.tensorboard needs the tensorboard package to import, so the emitted-API
    check cannot import it; its source is part of torch all the same."""
    spec = importlib.util.find_spec("torch.utils.tensorboard")
    assert spec is not None and spec.origin is not None
    assert "SummaryWriter" in Path(spec.origin).read_text()


# ----------------------------------------------------------- environment flags (NM307)
def test_getenv_as_converts_like_xla(monkeypatch: pytest.MonkeyPatch) -> None:
    getenv_as = H["_neuron_getenv_as"]
    monkeypatch.delenv("NM_FLAG", raising=False)
    assert getenv_as("NM_FLAG", int) is None and getenv_as("NM_FLAG", int, defval=7) == 7
    monkeypatch.setenv("NM_FLAG", "0")
    assert getenv_as("NM_FLAG", bool, True) is False  # "0" is False: read as an integer
    assert getenv_as("NM_FLAG", str) == "0" and getenv_as("NM_FLAG", float) == 0.0


@pytest.mark.parametrize(("value", "expected"), [
    (None, False), ("true", True), ("1", True), ("2", True), ("0", False), ("TRUE", False),
    ("yes", False)])
def test_check_env_flag_accepts_what_xla_accepted(monkeypatch: pytest.MonkeyPatch,
                                                  value: str | None, expected: bool) -> None:
    if value is None:
        monkeypatch.delenv("NM_FLAG", raising=False)
    else:
        monkeypatch.setenv("NM_FLAG", value)
    assert H["_neuron_check_env_flag"]("NM_FLAG") is expected
    assert H["_neuron_check_env_flag"]("NM_UNSET_FLAG", default="true") is True


# ------------------------------------------------------------- tensor transfers (NM105)
def test_send_cpu_data_to_device_returns_a_lone_tensor_in_a_list() -> None:
    meta = torch.device("meta")
    [lone] = H["_neuron_send_cpu_data_to_device"](torch.ones(2), meta)
    assert lone.device == meta
    moved = H["_neuron_send_cpu_data_to_device"]({"w": torch.ones(1), "n": 3}, meta)
    assert moved["w"].device == meta and moved["n"] == 3


# ------------------------------------------------------------ migrated code runs (all)
def _migrate(source: str) -> tuple[str, set[str]]:
    result = migrate_source("train.py", source.encode(), REGISTRY)
    assert result.error is None and result.new_source is not None
    return result.new_source.decode(), {f.rule_id for f in result.findings}


def test_helpers_work_in_a_file_that_binds_time_and_datetime_to_other_things(
        capsys: pytest.CaptureFixture[str]) -> None:
    source = (
        "from datetime import datetime\n"
        "from time import time\n"
        "import torch_xla.core.xla_model as xm\n"
        "import torch_xla.test.test_utils as test_utils\n"
        "import torch_xla.utils.utils as xu\n"
        "\n"
        "def run():\n"
        "    start = time()\n"
        "    tracker = xm.RateTracker()\n"
        "    for batch in xu.SampleGenerator(data=1, sample_count=4):\n"
        "        tracker.add(batch)\n"
        "    test_utils.print_training_update('cpu', 4, 0.5, tracker.rate(),\n"
        "                                     tracker.global_rate())\n"
        "    return time() >= start, datetime.now().year, test_utils.now('%Y')\n"
    )
    migrated, rules = _migrate(source)
    assert {"NM302", "NM303", "NM304"} <= rules
    assert "torch_xla" not in migrated  # not even in the helpers' docstrings
    namespace: dict = {}
    exec(compile(migrated, "train.py", "exec"), namespace)  # noqa: S102
    later, year, text = namespace["run"]()
    assert later and text == str(year)
    assert capsys.readouterr().out.startswith("| Training Device=cpu/0 Step=4 Loss=0.50000")


def test_a_metrics_report_that_decides_something_is_reviewed_and_its_import_kept() -> None:
    source = ("import torch_xla.debug.metrics as met\n\n"
              "if 'CompileTime' in met.metrics_report():\n    print(met.metrics_report())\n")
    migrated, _ = _migrate(source)
    findings = migrate_source("t.py", source.encode(), REGISTRY).findings
    assert [(f.rule_id, f.line, f.applied) for f in findings] == [
        ("NM305", 3, False), ("NM305", 4, True)]
    assert migrated.startswith("import torch_xla.debug.metrics as met\n")
    assert "if 'CompileTime' in met.metrics_report():" in migrated


def test_xla_device_hw_gives_what_it_gave_on_trainium() -> None:
    source = ("import torch_xla.core.xla_model as xm\n\n"
              "def kinds(device):\n"
              "    return xm.xla_device_hw(device), xm.xla_device_hw(device=device)\n")
    migrated, rules = _migrate(source)
    assert "NM104" in rules
    namespace: dict = {}
    exec(compile(migrated, "t.py", "exec"), namespace)  # noqa: S102
    assert namespace["kinds"](torch.device("cpu")) == ("CPU", "CPU")
    assert namespace["kinds"]("meta") == ("META", "META")


def test_device_type_names_the_accelerator_or_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    source = "import torch_xla.runtime as xr\n\ndef kind():\n    return xr.device_type()\n"
    migrated, rules = _migrate(source)
    assert "NM104" in rules and "torch_xla" not in migrated
    namespace: dict = {}
    exec(compile(migrated, "t.py", "exec"), namespace)  # noqa: S102
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda: None)
    assert namespace["kind"]() == "CPU"  # what PJRT_DEVICE=CPU reported
    neuron = types.SimpleNamespace(type="neuron")  # torch.device("neuron") needs TorchNeuron
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda: neuron)
    assert namespace["kind"]() == "NEURON"  # what Trainium reported


def test_a_report_is_only_rewritten_where_it_is_shown() -> None:
    source = ("import logging\nimport torch_xla.debug.metrics as met\n\n"
              "def f(test):\n"
              "    logging.info(met.metrics_report())\n"  # shown: rewritten
              "    test.assertIn('CompileTime', met.metrics_report())\n"  # checked: reviewed
              "    parse(met.metrics_report())\n")  # unknown: reviewed
    findings = migrate_source("t.py", source.encode(), REGISTRY).findings
    assert [(f.line, f.applied) for f in findings if f.rule_id == "NM305"] == [
        (5, True), (6, False), (7, False)]


def test_without_the_engines_node_stack_no_report_counts_as_shown() -> None:
    from neuron_migrate.rules.utilities import _shown

    site = types.SimpleNamespace(parent=cst.Arg(cst.Name("x")), qualname_of=lambda e: None)
    assert _shown(site) is False  # type: ignore[arg-type]


def test_a_patched_utility_is_reviewed_not_renamed() -> None:
    """`test_utils.now = f` renamed to `_neuron_now = f` would rebind the helper, and inside a
    function make it a local name."""
    source = ("import torch_xla.test.test_utils as test_utils\n\n"
              "def patch():\n    test_utils.now = lambda: 't'\n    return test_utils.now()\n")
    findings = migrate_source("t.py", source.encode(), REGISTRY).findings
    assert [(f.line, f.rule_id, f.applied) for f in findings] == [
        (4, "NM304", False), (5, "NM304", True)]
