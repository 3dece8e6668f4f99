"""The engine's promises: untouched files stay untouched, bad input is reported, writes are
safe, and a rewrite that would break a file is never written."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import ClassVar

import libcst as cst
import pytest

import neuron_migrate.cli
import neuron_migrate.engine.migrate
import neuron_migrate.migrate_file
from neuron_migrate.model import Kind
from neuron_migrate.rule import Example, Replace, Rule
from neuron_migrate.rules import all_rules
from tests.conftest import FIXTURES, cli
from tests.snapshots import assert_matches_snapshot

ENCODING = FIXTURES / "encoding"


def test_file_without_xla_tokens_is_never_parsed(in_tmp: Path, monkeypatch) -> None:
    source = b"import torch\r\n\r\nx = torch.ones(2)  # nothing to do\r\n"
    (in_tmp / "plain.py").write_bytes(source)

    def refuse(*args, **kwargs):
        raise AssertionError("parsed a file with no XLA token")

    monkeypatch.setattr(neuron_migrate.engine.migrate.ast, "parse", refuse)
    monkeypatch.setattr(neuron_migrate.engine.migrate.cst, "parse_module", refuse)
    run = cli("apply", ".")
    assert run.exit_code == 0
    assert (in_tmp / "plain.py").read_bytes() == source


def test_file_mentioning_xla_only_in_prose_is_not_rewritten(in_tmp: Path, monkeypatch) -> None:
    source = (FIXTURES / "python" / "no_xla.before.py").read_bytes()
    (in_tmp / "prose.py").write_bytes(source)
    monkeypatch.setattr(neuron_migrate.engine.migrate.cst, "parse_module",
                        lambda *a, **k: pytest.fail("LibCST parse of a file with nothing to do"))
    run = cli("apply", "prose.py", "--format", "json")
    assert run.exit_code == 0
    assert (in_tmp / "prose.py").read_bytes() == source
    assert run.json()["findings"] == []


def test_syntax_error_is_reported_and_other_files_still_migrate(in_tmp: Path) -> None:
    (in_tmp / "broken.py").write_text("import torch_xla\n\ndef f(:\n    pass\n")
    (in_tmp / "good.py").write_text("import torch_xla\n\ntorch_xla.sync()\nx = 1\n")
    run = cli("apply", ".")
    assert run.exit_code == 2
    assert "broken.py:3" in run.stderr
    assert (in_tmp / "broken.py").read_text().startswith("import torch_xla\n")
    assert (in_tmp / "good.py").read_text() == "x = 1\n"


def test_latin1_coding_cookie_round_trips(in_tmp: Path) -> None:
    before = ENCODING / "latin1_cookie.before.py"
    target = in_tmp / "latin.py"
    target.write_bytes(before.read_bytes())
    run = cli("apply", "latin.py", "--format", "json")
    assert run.exit_code == 0
    assert target.read_bytes() == (ENCODING / "latin1_cookie.after.py").read_bytes()
    assert_matches_snapshot(before, "apply latin.py", run.json()["findings"])
    assert b"d\xe9j\xe0 vu" in target.read_bytes()  # still latin-1, not re-encoded


def test_undecodable_file_is_skipped_not_mangled(in_tmp: Path) -> None:
    data = b"import torch_xla\nname = '\xff\xfe'\n"
    (in_tmp / "bad.py").write_bytes(data)
    run = cli("apply", ".")
    assert run.exit_code == 2
    assert "bad.py" in run.stderr
    assert (in_tmp / "bad.py").read_bytes() == data


def test_empty_and_comment_only_files(in_tmp: Path) -> None:
    (in_tmp / "empty.py").write_bytes(b"")
    (in_tmp / "comments.py").write_bytes(b"# uses torch_xla one day\n# xm.mark_step()\n")
    run = cli("apply", ".")
    assert run.exit_code == 0
    assert (in_tmp / "empty.py").read_bytes() == b""
    assert (in_tmp / "comments.py").read_bytes() == b"# uses torch_xla one day\n# xm.mark_step()\n"


def test_write_keeps_mode_bits_and_leaves_no_temporary_file(in_tmp: Path) -> None:
    target = in_tmp / "script.py"
    target.write_text("import torch_xla\ntorch_xla.sync()\nprint('done')\n")
    os.chmod(target, 0o751)
    assert cli("apply", "script.py").exit_code == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert target.read_text() == "print('done')\n"
    assert sorted(p.name for p in in_tmp.iterdir()) == ["script.py"]


def test_symlinked_file_is_written_through(in_tmp: Path) -> None:
    real = in_tmp / "real.py"
    real.write_text("import torch_xla\ntorch_xla.sync()\nx = 1\n")
    (in_tmp / "link.py").symlink_to(real)
    assert cli("apply", "link.py").exit_code == 0
    assert (in_tmp / "link.py").is_symlink()
    assert real.read_text() == "x = 1\n"


def test_file_changed_between_read_and_write_is_not_overwritten(in_tmp: Path,
                                                                 monkeypatch) -> None:
    target = in_tmp / "busy.py"
    target.write_text("import torch_xla\ntorch_xla.sync()\n")
    original = neuron_migrate.migrate_file.migrate_python

    def edit_meanwhile(path, data, registry, **kwargs):
        result = original(path, data, registry, **kwargs)
        target.write_text("# the user saved this meanwhile\n")
        return result

    monkeypatch.setattr(neuron_migrate.migrate_file, "migrate_python", edit_meanwhile)
    run = cli("apply", "busy.py")
    assert run.exit_code == 2
    assert "changed on disk" in run.stderr
    assert target.read_text() == "# the user saved this meanwhile\n"


class _Breaks(Rule):
    """A deliberately broken rule: its replacement does not compile at module level."""

    id = "NM999"
    name = "breaks-things"
    kind = Kind.FIX
    summary = "test only"
    explanation = "test only"
    doc_url = "https://example.invalid"
    example = Example("", "")
    calls: ClassVar[frozenset[str]] = frozenset({"torch_xla.core.xla_model.get_ordinal"})

    def on_call(self, node, site):
        return Replace(cst.parse_expression("await rank()"), "bad")


def test_reparse_guard_refuses_to_write_broken_output(in_tmp: Path, monkeypatch) -> None:
    monkeypatch.setattr(neuron_migrate.cli, "all_rules", lambda: (*all_rules(), _Breaks()))
    source = "import torch_xla.core.xla_model as xm\n\nrank = xm.get_ordinal()\n"
    (in_tmp / "train.py").write_text(source)
    run = cli("apply", "train.py")
    assert run.exit_code == 2
    assert "NM999" in run.stderr and "does not compile" in run.stderr
    assert (in_tmp / "train.py").read_text() == source


def test_unreadable_file_is_reported(in_tmp: Path, monkeypatch) -> None:
    target = in_tmp / "secret.py"
    target.write_text("import torch_xla\n")
    (in_tmp / "other.py").write_text("import torch_xla\ntorch_xla.sync()\n")
    real_read, real_open = Path.read_bytes, os.open

    def read_bytes(self: Path) -> bytes:  # what a file without read permission does
        if self.name == "secret.py":
            raise PermissionError(13, "Permission denied", str(self))
        return real_read(self)

    def os_open(path, flags, *args, **kwargs):  # the bounded reader's way in, refused alike
        if Path(path).name == "secret.py":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    monkeypatch.setattr(os, "open", os_open)
    run = cli("apply", ".")
    assert run.exit_code == 2
    assert "secret.py: cannot read (permission denied)" in run.stderr
    assert (in_tmp / "other.py").read_text() == ""


def test_very_deep_nesting_is_skipped_with_a_message(in_tmp: Path) -> None:
    source = "import torch_xla\nx = " + "+".join(["a"] * 20000) + "\ntorch_xla.sync()\n"
    (in_tmp / "deep.py").write_text(source)
    (in_tmp / "fine.py").write_text("import torch_xla\ntorch_xla.sync()\ny = 2\n")
    run = cli("apply", ".")
    assert run.exit_code == 2
    assert "deep.py:2: nested too deeply to analyse; file skipped" in run.stderr
    assert (in_tmp / "deep.py").read_text() == source
    assert (in_tmp / "fine.py").read_text() == "y = 2\n"


STDLIB_SAMPLE = ["argparse", "dataclasses", "inspect", "pathlib", "subprocess", "typing",
                 "tarfile", "shutil", "tempfile", "zipfile", "logging.__init__", "json.decoder",
                 "email._header_value_parser", "asyncio.base_events", "unittest.mock"]


@pytest.mark.parametrize("module", STDLIB_SAMPLE)
def test_engine_round_trips_real_code(module: str, stdlib_as_xla: None) -> None:
    """Treat `os`, `sys` and `re` as if they were torch_xla over real, varied modules: every
    statement that uses them is paired, rewritten (by no rule) and rebuilt, so the only
    changes allowed are removed imports. This exercises the statement pairing on every
    construct the standard library uses."""
    import difflib
    import sysconfig

    from neuron_migrate.engine.migrate import migrate_source
    from neuron_migrate.registry import Registry

    path = Path(sysconfig.get_paths()["stdlib"], *module.split(".")).with_suffix(".py")
    if not path.exists():  # a package since (zipfile in 3.12)
        path = path.with_suffix("") / "__init__.py"
    data = path.read_bytes()
    result = migrate_source(str(path), data, Registry(all_rules()))
    assert result.error is None
    new = result.new_source or data
    for line in difflib.unified_diff(data.decode().splitlines(), new.decode().splitlines(),
                                     lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        text = line[1:].strip()
        assert text.startswith(("import ", "from ")) or text in ("", "pass") or \
            line.startswith("-") and text.endswith((",", ")")), line


def test_findings_share_one_copy_of_each_message() -> None:
    """Large runs hold thousands of findings with the same few messages."""
    from neuron_migrate.model import Finding, Kind

    built = ["".join(["removed `xm.mark_step()`", suffix]) for suffix in ("", "")]
    assert built[0] is not built[1]
    first, second = (Finding("a.py", 1, 1, "NM110", Kind.FIX, message) for message in built)
    assert first.message is second.message


def test_parsing_without_node_checks_gives_libcsts_tree_and_restores_the_checks() -> None:
    import sysconfig

    import libcst as cst

    from neuron_migrate.engine import migrate

    data = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_bytes()
    assert migrate.parse_module(data).deep_equals(cst.parse_module(data))
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")  # nodes the rules build are still checked
    with pytest.raises(cst.ParserSyntaxError):
        migrate.parse_module(b"def (:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")  # also after a parse error


class _StepTwice(Rule):
    """A statement-level rewrite: the call becomes two statements (arguments kept)."""

    id = "NM998"
    name = "step-twice"
    kind = Kind.FIX
    summary = "test only"
    explanation = "test only"
    doc_url = "https://example.invalid"
    example = Example("", "")
    calls: ClassVar[frozenset[str]] = frozenset({"torch_xla.core.xla_model.optimizer_step"})

    def on_call(self, node, site):
        from neuron_migrate.rule import ReplaceStatement

        optimizer = cst.Module([]).code_for_node(node.args[0].value)
        return ReplaceStatement((cst.parse_statement(f"sync({optimizer})\n"),
                                 cst.parse_statement(f"{optimizer}.step()\n")), "two")


def test_comments_inside_replaced_code_move_above_the_statement(monkeypatch) -> None:
    from neuron_migrate.engine.migrate import migrate_source
    from neuron_migrate.registry import Registry

    source = ("import torch_xla.core.xla_model as xm\n\n\ndef train(opt):\n"
              "    xm.optimizer_step(opt,  # the optimizer\n"
              "                      barrier=True)  # after the call\n"
              "    xm.mark_step(  # cut the graph\n    )\n"
              "    return xm.xla_device(\n        # the device\n    )\n")
    result = migrate_source("t.py", source.encode(), Registry((*all_rules(), _StepTwice())))
    assert result.error is None
    assert result.new_source.decode() == (
        "import torch\n\n\ndef train(opt):\n"
        "    # the optimizer\n    sync(opt)\n    opt.step()  # after the call\n"
        "    # the device\n    return torch.device(\"neuron\")\n")


def test_annotate_puts_a_note_about_a_rewritten_statements_arguments_where_a_rerun_would(
        in_tmp: Path) -> None:
    source = ("import torch_xla.core.xla_model as xm\nimport torch_xla.debug.metrics as met\n\n\n"
              "def report(debug):\n    if debug:\n        xm.master_print(met.counter_value(\"ExecuteTime\"))\n")
    (in_tmp / "train.py").write_text(source)
    assert cli("apply", "--annotate", "train.py").exit_code == 0
    annotated = (in_tmp / "train.py").read_text()
    note = annotated.index("# neuron-migrate: NM707")
    assert annotated.index("if (torch.distributed.get_rank()") < note < annotated.index("print(met.")
    cli("apply", "--annotate", "train.py")
    assert (in_tmp / "train.py").read_text() == annotated


def test_annotate_a_files_first_statement_once(in_tmp: Path) -> None:
    source = "# kept until upstream moves\nfrom torch_xla.core.xla_model import *"
    (in_tmp / "compat.py").write_text(source)
    cli("apply", "--annotate", "compat.py")
    annotated = (in_tmp / "compat.py").read_text()
    assert annotated.count("# neuron-migrate: NM703") == 1
    cli("apply", "--annotate", "compat.py")
    assert (in_tmp / "compat.py").read_text() == annotated


def test_one_unsafe_run_reaches_the_fixed_point_when_the_engine_adds_an_import(
        in_tmp: Path) -> None:
    """`os` is bound only by the import the first run adds: the first run already judges
    `os.environ[...] = ...` as the assignment it is (NM602), as the second would."""
    (in_tmp / "train.py").write_text("import torch_xla.core.xla_model as xm\n"
                                     "if xm.is_master_ordinal(): print(1)\n"
                                     "os.environ['XLA_USE_BF16'] = '1'\n")
    first = cli("apply", "--unsafe-fixes", "--format", "json", "train.py").json()
    assert "is read here" not in json.dumps(first)
    once = (in_tmp / "train.py").read_text()
    assert "XLA_USE_BF16" not in once
    cli("apply", "--unsafe-fixes", "train.py")
    assert (in_tmp / "train.py").read_text() == once


def test_a_replacement_that_cannot_be_quoted_in_nested_f_strings_is_reported_alone(
        in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text("import torch_xla.core.xla_model as xm\n"
                                     "x = f\"{f'{xm.xla_device()}'}\"\n"
                                     "xm.mark_step()\n")
    run = cli("apply", "--format", "json", "train.py")
    findings = {(f["rule_id"], f["line"], f["kind"]) for f in run.json()["findings"]}
    assert ("NM101", 2, "review") in findings and ("NM110", 3, "fix") in findings
    assert (in_tmp / "train.py").read_text() == ("import torch_xla.core.xla_model as xm\n"
                                                 "x = f\"{f'{xm.xla_device()}'}\"\n")
