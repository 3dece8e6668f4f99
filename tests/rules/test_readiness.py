"""The readiness rules (NM9xx) and `audit`: each fixture marks the lines it expects reported
with `# expect: NMxxx`; every other line must stay quiet."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest
from neuron_migrate.analysis.readiness import audit_source
from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.registry import Registry
from neuron_migrate.report.readiness import audit_exit
from neuron_migrate.rules import all_rules
from neuron_migrate.run_result import RunResult

from tests.conftest import FIXTURES, cli

REGISTRY = Registry(all_rules())
READINESS = sorted((FIXTURES / "python").glob("NM9*.before.py"))
_EXPECT = re.compile(r"#\s*expect:\s*(NM9\d\d(?:\s*,\s*NM9\d\d)*)")


def _expected(source: str) -> set[tuple[int, str]]:
    found: set[tuple[int, str]] = set()
    for number, line in enumerate(source.splitlines(), start=1):
        match = _EXPECT.search(line)
        if match:
            found |= {(number, rule.strip()) for rule in match.group(1).split(",")}
    return found


def _reported(findings) -> set[tuple[int, str]]:  # type: ignore[no-untyped-def]
    return {(f.line, f.rule_id) for f in findings if f.rule_id.startswith("NM9")}


MARKED = [p for p in READINESS if _EXPECT.search(p.read_text())]
"""The fixtures of review rules; the fix's (NM920) is checked by its after file."""


@pytest.mark.parametrize("before", MARKED, ids=lambda p: p.name.split(".")[0])
def test_review_rules_report_exactly_the_marked_lines(before: Path) -> None:
    source = before.read_text()
    expected = _expected(source)
    result = migrate_source(before.name, before.read_bytes(), REGISTRY)
    assert result.error is None
    assert _reported(result.findings) == expected
    audited = audit_source(before.name, before.read_bytes(), REGISTRY.readiness)
    assert _reported(audited.findings) == expected


def test_audit_reports_the_compile_fix_without_applying_it() -> None:
    before = FIXTURES / "python" / "NM920_neuron_compile.before.py"
    audited = audit_source(before.name, before.read_bytes(), REGISTRY.readiness)
    fixes = sorted(f.line for f in audited.findings if f.rule_id == "NM920")
    assert fixes == [6, 7, 8, 17]
    assert not any(f.applied for f in audited.findings)
    applied = migrate_source(before.name, before.read_bytes(), REGISTRY)
    assert sorted(f.line for f in applied.findings if f.rule_id == "NM920") == fixes


def test_readiness_rules_never_make_apply_change_a_file_otherwise_unchanged() -> None:
    """Every NM9xx fixture but the compile fix is byte-identical after apply."""
    for before in READINESS:
        if before.name.startswith("NM920"):
            continue
        result = migrate_source(before.name, before.read_bytes(), REGISTRY)
        assert not result.changed, before.name


def test_a_suppression_silences_a_readiness_rule_and_counts_as_used() -> None:
    source = (b'import torch\n\nx = torch.zeros(3, dtype=torch.float64, device="neuron")'
              b'  # neuron-migrate: ignore[NM901]\n')
    result = migrate_source("s.py", source, REGISTRY)
    assert not result.findings


def test_only_files_that_use_torch_are_audited() -> None:
    source = b"import numpy as np\n\nx = np.zeros(3).double()\n"
    assert audit_source("n.py", source, REGISTRY.readiness).findings == ()


def test_a_class_compiled_elsewhere_is_not_assumed_compiled() -> None:
    source = (b"import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
              b"        return x[x > 0].sum()\n")
    assert audit_source("m.py", source, REGISTRY.readiness).findings == ()


def test_compiling_an_instance_assigned_earlier_marks_its_class() -> None:
    source = (b"import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
              b"        return x.nonzero()\n\n\nnet = Net()\nnet = net.to('neuron')\n"
              b"fast = torch.compile(net, backend='neuron', dynamic=False)\n")
    found = audit_source("m.py", source, REGISTRY.readiness).findings
    assert [(f.line, f.rule_id) for f in found] == [(6, "NM930")]


# ------------------------------------------------------------------------------ audit CLI
SLOW = "import torch\n\nfor batch in loader:\n    loss = model(batch)\n    loss.backward()\n" \
       "    total += loss.item()\n"
BLOCKING = "import torch\n\nadjacency = torch.sparse_coo_tensor(i, v, (3, 3))\n"
NO_XLA_TOKEN = "import torch\n\nx = torch.zeros(3, dtype=torch.float64).to('cuda')\n"


def test_audit_reads_files_without_xla_tokens_that_check_skips(in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text(NO_XLA_TOKEN)
    (in_tmp / "notes.py").write_text("print('no torch here')\n")
    run = cli("audit", ".", "--format", "json")
    assert run.exit_code == 0, run.stdout + run.stderr
    report = run.json()
    assert [(f["path"], f["rule_id"]) for f in report["findings"]] == [("train.py", "NM901")]
    assert report["mode"] == "audit"
    numerics = next(g for g in report["readiness"]["limits"] if g["limit"] == "numerics")
    assert numerics["findings"] == 1 and numerics["rules"][0]["rule_id"] == "NM901"
    assert report["readiness"]["blocking"] == 0
    assert cli("check", "train.py").exit_code == 0  # check keeps its XLA-only prefilter


def test_audit_exits_1_on_blocking_findings_only(in_tmp: Path) -> None:
    (in_tmp / "slow.py").write_text(SLOW)
    assert cli("audit", "slow.py").exit_code == 0
    (in_tmp / "blocked.py").write_text(BLOCKING)
    run = cli("audit", ".")
    assert run.exit_code == 1
    assert "blocks: will not run on TorchNeuron as written: 1 finding in 1 file" in run.stdout
    # worst files first: the blocked file before the slow one
    assert run.stdout.index("blocked.py: 1 blocks") < run.stdout.index("slow.py: 1 slows")


def test_audit_exits_2_on_a_file_it_cannot_parse(in_tmp: Path) -> None:
    (in_tmp / "broken.py").write_text("import torch\n\ndef f(:\n")
    run = cli("audit", ".")
    assert run.exit_code == 2
    assert "broken.py:3" in run.stderr


@pytest.mark.parametrize(("signal_number", "status"), [(signal.SIGINT, 130),
                                                         (signal.SIGTERM, 143)])
def test_an_interrupted_audit_exits_as_a_shell_reports_the_signal(signal_number: int,
                                                                  status: int) -> None:
    """128 plus the signal, even when something blocks or a file failed: an interrupted run
    is neither a result nor an error of the files."""
    blocked = audit_source("blocked.py", BLOCKING.encode(), REGISTRY.readiness)
    assert audit_exit(RunResult((blocked,)), REGISTRY) == 1
    assert audit_exit(RunResult((blocked,), interrupted=signal_number), REGISTRY) == status
    assert audit_exit(RunResult((), errors=("x.py: cannot read",), interrupted=signal_number),
                      REGISTRY) == status


def test_ctrl_c_while_audit_finds_files_is_exit_130(in_tmp: Path, monkeypatch) -> None:
    from neuron_migrate import command

    def discover(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "discover", discover)
    (in_tmp / "blocked.py").write_text(BLOCKING)
    run = cli("audit", ".")
    assert run.exit_code == 130 and "interrupted" in run.stderr


@pytest.mark.parametrize("fmt", ["markdown", "sarif", "github", "text"])
def test_audit_speaks_every_report_format(fmt: str, in_tmp: Path) -> None:
    (in_tmp / "blocked.py").write_text(BLOCKING)
    run = cli("audit", "blocked.py", "--format", fmt)
    assert run.exit_code == 1
    if fmt == "markdown":
        assert "## Readiness for TorchNeuron" in run.stdout
        assert "| blocks: will not run on TorchNeuron as written | 1 | 1 | NM910" in run.stdout
    elif fmt == "sarif":
        results = json.loads(run.stdout)["runs"][0]["results"]
        assert [r["ruleId"] for r in results] == ["NM910"]
    elif fmt == "github":
        assert "blocked.py,line=3" in run.stdout and "NM910" in run.stdout
    else:
        assert "NM910 sparse-tensors: 1" in run.stdout


def test_audit_output_file_holds_the_readiness_summary(in_tmp: Path) -> None:
    (in_tmp / "slow.py").write_text(SLOW)
    run = cli("audit", "slow.py", "--output", "report.txt")
    assert run.exit_code == 0
    text = (in_tmp / "report.txt").read_text()
    assert "NM932 host-read-every-step: 1" in text and "nothing blocking" in text


def test_audit_select_and_ignore(in_tmp: Path) -> None:
    (in_tmp / "both.py").write_text(BLOCKING + SLOW.replace("import torch\n", ""))
    assert cli("audit", "both.py", "--ignore", "NM910").exit_code == 0
    run = cli("audit", "both.py", "--select", "NM910", "--format", "json")
    assert {f["rule_id"] for f in run.json()["findings"]} == {"NM910"}


def test_check_adds_readiness_findings_to_the_files_it_reads(in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text(
        "import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\n"
        "for batch in loader:\n    loss = model(batch.to(device))\n    loss.backward()\n"
        "    xm.optimizer_step(optimizer)\n    total += loss.item()\n")
    run = cli("check", "train.py", "--format", "json")
    assert ("NM932", 8) in {(f["rule_id"], f["line"]) for f in run.json()["findings"]}


@pytest.mark.torch
def test_the_bucketing_snippet_in_nm936_gives_a_few_fixed_shapes() -> None:
    import textwrap

    import torch
    from neuron_migrate.rules.readiness_shapes import BUCKETING
    from torch.utils.data import DataLoader

    dataset = [{"input_ids": list(range(1, n + 1))} for n in (5, 130, 300, 77, 1100, 256) * 6]
    scope = {"torch": torch, "DataLoader": DataLoader, "PAD_ID": 0, "dataset": dataset}
    exec(textwrap.dedent(BUCKETING), scope)  # noqa: S102 - our own documentation's code
    shapes = {tuple(batch["input_ids"].shape) for batch in scope["loader"]}
    assert {length for _, length in shapes} <= {128, 256, 512, 1024}
    assert {rows for rows, _ in shapes} == {32}  # drop_last: no smaller last batch
    first = next(iter(DataLoader(dataset[:2], batch_size=2, collate_fn=scope["collate"])))
    assert first["attention_mask"][0].sum() == 5 and first["input_ids"][1, 129] == 130


@pytest.mark.parametrize("compiles", [
    "self.model = torch.compile(Net().to('neuron'), backend='neuron', dynamic=False)",
    "self.model = Net()\n        self.model.compile(backend='neuron', dynamic=False)",
    "self.fast = torch.compile(self.model.forward, backend='neuron', dynamic=False)",
])
def test_a_module_compiled_through_an_attribute_is_compiled(compiles: str) -> None:
    source = (f"import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
              f"        return x.unique()\n\n\nclass Trainer:\n    def __init__(self):\n"
              f"        self.model = Net()\n        {compiles}\n").encode()
    found = audit_source("m.py", source, REGISTRY.readiness).findings
    assert [(f.line, f.rule_id) for f in found] == [(6, "NM930")]


def test_re_compile_and_keras_compile_are_not_torch_compile() -> None:
    source = (b"import re\nimport torch\n\n\nclass Net(torch.nn.Module):\n"
              b"    def forward(self, x):\n        return x.nonzero()\n\n\n"
              b"pattern = re.compile('x')\nnet = Net()\n"
              b"net.compile(optimizer='adam', loss='mse')\n")
    assert audit_source("m.py", source, REGISTRY.readiness).findings == ()


def test_audit_reads_notebooks_and_places_findings_in_their_cells(in_tmp: Path) -> None:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# Training\n"]},
             {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
              "source": ["import torch\n", "%matplotlib inline\n"]},
             {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
              "source": ["w = torch.zeros(3, dtype=torch.float64, device='neuron')\n"]}]
    notebook = {"cells": cells, "metadata": {"language_info": {"name": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    (in_tmp / "train.ipynb").write_text(json.dumps(notebook, indent=1))
    run = cli("audit", ".", "--format", "json")
    assert run.exit_code == 0, run.stdout + run.stderr
    [finding] = run.json()["findings"]
    assert (finding["rule_id"], finding["cell"], finding["line"]) == ("NM901", 2, 1)


def test_a_name_moved_in_another_function_is_not_on_the_device_here() -> None:
    source = (b"import torch\n\n\ndef place(t, device):\n    t = t.to(device)\n    return t\n\n\n"
              b"def widen(t):\n    return t.double()\n\n\n"
              b"def train(t, device):\n    t = t.to(device)\n    return t.double()\n")
    found = audit_source("m.py", source, REGISTRY.readiness).findings
    assert [(f.line, f.rule_id) for f in found] == [(15, "NM901")]


def test_an_xla_era_loader_is_reported_before_the_migration_compiles_the_model() -> None:
    source = (b"import torch_xla.core.xla_model as xm\nfrom torch.utils.data import DataLoader\n\n"
              b"loader = DataLoader(data, batch_size=16)\n")
    result = migrate_source("train.py", source, REGISTRY)
    assert _reported(result.findings) == {(4, "NM935")}


@pytest.mark.parametrize("rule", REGISTRY.readiness, ids=lambda r: r.id)
def test_a_rules_byte_prefilter_keeps_its_example_and_fixtures(rule) -> None:
    """`needs`/`also` only skip files the rule cannot report on: its example and every
    fixture it reports on pass them."""
    assert rule.wanted(rule.example.before.encode())
    for before in READINESS:
        data = before.read_bytes()
        if any(r == rule.id for _, r in _expected(data.decode())):
            assert rule.wanted(data), before.name
