"""Start-up stays lean: what a pre-commit hook runs on every commit imports no more than it
needs (timings are in benchmarks/startup.py; this checks the behaviour that makes them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_migrate import catalogue, entry
from neuron_migrate.command import Request
from neuron_migrate.model import Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from tests.conftest import ROOT, cli

HEAVY = ("libcst", "rich", "pydantic", "typer", "neuron_migrate.rules", "multiprocessing")
"""Modules a run over files with nothing XLA-era in them has no use for (worker processes
included: they start only once a file needs them)."""

_PROBE = """
import json, sys
sys.argv = ["neuron-migrate", *sys.argv[1:]]
{prelude}
from neuron_migrate.entry import main
try:
    main()
except SystemExit as done:
    status = done.code
sys.stdout.flush()
loaded = [name for name in {heavy!r} if name in sys.modules]
sys.stderr.write("\\n" + json.dumps({{"status": status, "loaded": loaded}}) + "\\n")
"""


_NOTEBOOK = {
    "cells": [{"cell_type": "markdown", "metadata": {}, "source": ["Moved to the native stack."]},
              {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
               "source": ["!pip install numpy\n", "import torch\n", "torch.ones(2)"]}],
    "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5,
}


def _probe(*args: str | Path, cwd: Path, source: str = "",
           heavy: tuple[str, ...] = HEAVY, prelude: str = "") -> tuple[int, list[str], str]:
    """Run the executable's entry point in a fresh interpreter (`source` on its standard
    input, `prelude` run first); its exit status, which of `heavy` it imported, and what it
    printed."""
    code = _PROBE.format(heavy=heavy, prelude=prelude)
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=120, input=source,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["status"], report["loaded"], done.stdout


@pytest.mark.parametrize("args", [["--version"], ["rules"]])
def test_version_and_rules_load_nothing_heavy(tmp_path: Path, args: list[str]) -> None:
    status, loaded, out = _probe(*args, cwd=tmp_path)
    assert status == 0 and loaded == []
    assert out.strip()


@pytest.mark.parametrize("command", ["check", "apply"])
def test_a_hook_over_files_without_xla_tokens_loads_nothing_heavy(tmp_path: Path,
                                                                 command: str) -> None:
    (tmp_path / "clean.py").write_text("import torch\nprint(torch.ones(2))\n")
    (tmp_path / "other.py").write_text("x = 1\n")
    (tmp_path / "requirements.txt").write_text("torch==2.13.0\nnumpy\n")
    (tmp_path / "notes.ipynb").write_text(json.dumps(_NOTEBOOK))
    status, loaded, out = _probe(command, "clean.py", "other.py", "requirements.txt",
                                 "notes.ipynb", cwd=tmp_path)
    assert status == 0 and loaded == []
    assert out.startswith("4 files scanned, 0 ")


@pytest.mark.parametrize("command", ["check", "apply"])
def test_an_editor_sending_a_clean_buffer_loads_nothing_heavy(tmp_path: Path,
                                                             command: str) -> None:
    source = "import torch\nprint(torch.ones(2))\n"
    status, loaded, out = _probe(command, "--stdin-filename", "src/clean.py", "-", cwd=tmp_path,
                                 source=source)
    assert status == 0 and loaded == []
    assert out == (source if command == "apply" else "1 file scanned, 0 would change, 0 "
                   "failed; 0 fixes, 0 unsafe fixes, 0 review items\n")


def test_a_file_with_an_xla_token_still_gets_the_engine(tmp_path: Path) -> None:
    """The probe above would notice the engine: here it is loaded, and the file is reported."""
    (tmp_path / "old.py").write_text("import torch_xla\ntorch_xla.sync()\n")
    status, loaded, out = _probe("check", "old.py", cwd=tmp_path)
    assert status == 1 and {"libcst", "neuron_migrate.rules"} <= set(loaded)
    assert "NM110" in out


_LONE_SCRIPT = """\
import torch
import torch_xla.core.xla_model as xm


def fit(out):
    line = torch.nn.Linear(1, 1).to(xm.xla_device())
    xm.save(line.state_dict(), out)


if __name__ == "__main__":
    fit("line.pt")
"""


def test_a_warm_re_check_loads_no_parser(tmp_path: Path) -> None:
    """Everything from the cache: a script whose launch search is replayed by the stamps of
    the files it read, a file that does not parse, kept with its error, and a report whose
    documentation links come from the catalogue's index."""
    (tmp_path / "fit.py").write_text(_LONE_SCRIPT)
    (tmp_path / "broken.py").write_text("import torch_xla\nif True:\nprint(1)\n")
    (tmp_path / "requirements.txt").write_text("torch-neuronx==2.1.2\n")
    # rich prints the summary table and the error: a report needs it, a quiet run does not
    heavy = (*(name for name in HEAVY if name != "rich"), "packaging", "tomllib", "tomli",
             "neuron_migrate.deps.launches")
    # files written this instant count as settled (else the search is not kept)
    settled = "import neuron_migrate.files.tree_walk as walk; walk.SETTLED = -1.0"
    cold = _probe("check", ".", cwd=tmp_path, heavy=heavy, prelude=settled)
    assert cold[0] == 2 and "libcst" in cold[1] and "one process" in cold[2]
    entries = [p.read_text() for p in (tmp_path / ".neuron-migrate-cache").iterdir()]
    assert any('"tree"' in entry for entry in entries)  # the launch search was kept
    warm = _probe("check", ".", cwd=tmp_path, heavy=heavy, prelude=settled)
    assert warm == (cold[0], [], cold[2])


@pytest.mark.parametrize("sources", [[], ["--from", "cuda"]], ids=["xla", "cuda"])
def test_a_warm_sarif_report_lists_the_rules_without_loading_them(tmp_path: Path,
                                                                  sources: list[str]) -> None:
    """SARIF lists every rule of the run's stacks with its explanation: from the catalogue's
    index when the results come from the cache, the same list the rules themselves give."""
    (tmp_path / "train.py").write_text("import torch_xla.core.xla_model as xm\n"
                                       "device = xm.xla_device()\nxm.mark_step()\n")
    args = ("check", ".", "--format", "sarif", *sources)
    cold = _probe(*args, cwd=tmp_path, heavy=("libcst",))
    assert "libcst" in cold[1]
    warm = _probe(*args, cwd=tmp_path, heavy=("libcst",))
    assert warm == (cold[0], [], cold[2])
    rules = json.loads(warm[2])["runs"][0]["tool"]["driver"]["rules"]
    expected = [r for r in all_rules() if r.source in ("xla", *sources[1:])]
    assert [(r["id"], r["fullDescription"]["text"]) for r in rules] == \
        [(r.id, r.explanation) for r in sorted(expected, key=lambda r: r.id)]


def test_the_index_matches_the_catalogue() -> None:
    """After adding or changing a rule: `python -m neuron_migrate.catalogue --write`."""
    assert catalogue.INDEX.read_text(encoding="utf-8") == catalogue.index_source()
    assert catalogue.tokens() == Registry(all_rules()).tokens
    assert catalogue.rule_ids() == {rule.id for rule in all_rules()}


def test_every_module_with_rules_is_a_family_and_no_other() -> None:
    """Adding a rule is adding its file: the catalogue finds the modules of `rules/` that
    define `RULES` (read here from their source), whatever their name."""
    import ast

    from neuron_migrate.rules import FAMILIES

    def names(node: ast.stmt) -> list[str]:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        return [t.id for t in targets if isinstance(t, ast.Name)]

    defining = {path.stem for path in (ROOT / "rules").glob("*.py")
                if any("RULES" in names(node)
                       for node in ast.parse(path.read_text(encoding="utf-8")).body)}
    assert {family.__name__.rsplit(".", 1)[1] for family in FAMILIES} == defining
    assert len(defining) > 40
    classes = {cls for family in FAMILIES for cls in family.RULES}
    assert {type(rule) for rule in all_rules()} == classes


def test_rules_listing_comes_from_the_index_and_shows_every_rule() -> None:
    lines = cli("rules").stdout.splitlines()
    assert [line.split()[0] for line in lines] == [rule.id for rule in all_rules()]
    for line, rule in zip(lines, all_rules()):
        assert line == f"{rule.id}  {rule.name:<26} {str(rule.kind):<11} {rule.summary}"


@pytest.mark.parametrize("args", [
    ["check", "a.py"],
    ["check", "a.py", "b", "-q"],
    ["check", "--verbose", "a.py", "--diff"],
    ["check", "-v", "-q", "a.py"],
    ["apply", "a.py"],
    ["apply", "--dry-run", "a.py", "b.py", "--quiet"],
    ["apply", "-v", "--force", "a.py"],
    ["check", "--format", "github", "--select", "NM1", "--select=NM2", "a.py", "-j", "3"],
    ["check", "--format=json", "-o", "out.json", "--exclude", "tests/", "--ignore", "NM7",
     "--no-compile", "--changed-since", "HEAD~1", "a.py"],
    ["check", "--compile", "--no-compile", "--format", "sarif", "--format", "text", "a.py"],
    ["apply", "--unsafe-fixes", "--annotate", "--jobs=12", "--output=r.md", "--format",
     "markdown", "a.py", "--no-unsafe-fixes"],
    ["apply", "--dry-run", "--no-annotate", "--compile", "--exclude=x", "--exclude", "y",
     "a.py"],
    ["scan", "requirements.txt"],
    ["scan", "--fix", "--force", "--unsafe-fixes", "-j", "2", "--format", "json", "-q", "."],
    ["scan", "--select", "NM8", "--no-unsafe-fixes", "--output", "r.txt", "-v", "."],
    ["check", "--stdin-filename", "src/a.py", "-"],
    ["apply", "-", "--stdin-filename=a.ipynb", "-q", "--format", "json"],
    ["apply", "--dry-run", "--stdin-filename", "a.py", "-"],
    ["scan", "--fix", "--stdin-filename", "requirements.txt", "-"],
    ["check", "-"], ["check", "./-"],
    ["check", "-j4", "a.py"], ["check", "-oreport.json", "--format", "json", "-j1", "a.py"],
    ["scan", "-j2", "-q", "."],
])
def test_the_lean_command_line_makes_the_request_typer_makes(args: list[str], monkeypatch) -> None:
    """The entry point parses these command lines itself; the typer application must turn
    them into the same request (if an option's default changes there, this fails)."""
    import neuron_migrate.cli

    made: list[Request] = []
    monkeypatch.setattr(neuron_migrate.cli, "_execute", made.append)
    assert cli(*args).exit_code == 0
    assert entry.lean_request(args) == made[0]


@pytest.mark.parametrize("args", [
    [], ["check"], ["check", "--", "a.py"], ["check", "-qv", "a.py"],
    ["check", "-", "a.py"], ["check", "-", "-"], ["check", "--stdin-filename", "a.py", "b.py"],
    ["check", "--stdin-filename", "a.py"], ["scan", "-"], ["check", "--changed-since", "H", "-"],
    ["check", "--stdin-filename", "", "-"], ["check", "--stdin-filename", "-", "-"],
    ["check", "a.py", "--help"], ["check", ""],
    ["check", "--dry-run", "a.py"], ["apply", "--diff", "a.py"], ["scan"],
    ["--version", "check", "a.py"], ["explain", "NM110"],
    ["check", "a.py", "--format"], ["check", "--format", "yaml", "a.py"],
    ["check", "-j", "0", "a.py"], ["check", "--jobs=x", "a.py"], ["check", "-j", "-1", "a.py"],
    ["check", "-j", "03", "a.py"], ["check", "-j04", "a.py"], ["check", "-j-1", "a.py"], ["check", "--select", "-q", "a.py"],
    ["check", "--select=", "a.py"], ["check", "-o=r.json", "a.py"], ["check", "--quiet=1", "a.py"],
    ["check", "--unsafe-fixes", "a.py"], ["check", "--annotate", "a.py"],
    ["apply", "--diff", "a.py"], ["check", "--force", "a.py"], ["scan", "--compile", "."],
    ["scan", "--changed-since", "HEAD", "."], ["scan", "--dry-run", "."], ["check", "--fix", "."],
])
def test_anything_else_is_left_to_typer(args: list[str]) -> None:
    assert entry.lean_request(args) is None


@pytest.mark.parametrize("options", [Options(), Options(select=frozenset({"NM8"})),
                                     Options(ignore=frozenset({"NM816", "NM1"}))])
def test_the_scanner_asks_whether_a_rule_is_on_without_loading_the_rules(options) -> None:
    from neuron_migrate.deps.emit import rule_enabled

    registry = Registry(all_rules(), options)
    for rule in registry.all_rules:
        assert rule_enabled(registry, rule.id) == registry.enabled(rule)
