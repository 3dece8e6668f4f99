"""Every option is defined once (`neuron_migrate.options.OPTIONS`) and reaches every reader:
the typer commands, the lean parser, the configuration keys and the request. An option added
to the table but missing from one of them (or added to one of them only) fails here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import typer.main

from neuron_migrate import entry, options
from neuron_migrate.cli import app
from neuron_migrate.config import READERS, Config, ConfigError, parse_config
from neuron_migrate.options import COMMANDS, KEYS, OPTIONS, Kind, Mode, Option, taken_by
from neuron_migrate.request import Request

ON_THE_COMMAND_LINE = [option for option in OPTIONS if option.names]
SAMPLES = {str: "abc", int: "3", Path: "some/file.json"}
"""A value each type of option accepts, unlike its default."""


def _sample(option: Option) -> str:
    if option.choices:
        return next(value for value in options.choices(option.choices)
                    if value != option.default and value != "xla")
    if option.key is not None and option.key.check == "size":
        return "512KiB"
    return SAMPLES[option.type]


def _command_line(command: str, option: Option) -> list[str]:
    """`command` run with `option` given (every spelling of it, for a toggle) on a path."""
    path = ["-"] if option.field == "stdin_filename" else ["a.py"]
    if option.kind is Kind.VALUE or option.kind is Kind.LIST:
        return [command, option.names[0], _sample(option), *path]
    return [command, option.names[0], *path]


def _typer_request(args: list[str], monkeypatch: pytest.MonkeyPatch) -> Request:
    import neuron_migrate.cli
    from typer.testing import CliRunner

    made: list[Request] = []
    monkeypatch.setattr(neuron_migrate.cli, "_execute", made.append)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return made[0]


TAKEN = [(command, option) for command in COMMANDS for option in taken_by(command)
         if option.names]


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_takes_the_options_of_the_table_and_no_other(command: str) -> None:
    click_command = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    spelt = {name for param in click_command.params if param.name != "paths"
             for name in (*param.opts, *param.secondary_opts)} - {"-h", "--help"}
    expected = {name for option in taken_by(command) for name in option.spellings}
    assert spelt == expected


@pytest.mark.parametrize(("command", "option"), TAKEN,
                         ids=[f"{c}-{o.names[0]}" for c, o in TAKEN])
def test_each_option_reaches_the_lean_parser_as_typer_reads_it(
        command: str, option: Option, monkeypatch: pytest.MonkeyPatch) -> None:
    args = _command_line(command, option)
    plain = Request.of(command, args[-1:], {})
    made = _typer_request(args, monkeypatch)
    assert entry.lean_request(args) == made
    assert made != plain  # the option changed something
    if option.negation:
        negated = [command, option.negation, args[-1]]
        assert entry.lean_request(negated) == _typer_request(negated, monkeypatch)


@pytest.mark.parametrize("option", list(KEYS.values()), ids=list(KEYS))
def test_each_configuration_key_is_read_into_its_field(option: Option, tmp_path: Path) -> None:
    assert option.key is not None
    values = {"rules": ["NM1"], "patterns": ["gen/"], "bool": True, "target": "trn1",
              "sources": ["cuda"], "per-file-ignores": {"tests/*.py": ["NM7"]},
              "helpers-module": "pkg/neuron_helpers.py", "folder": ".cache", "size": "1MiB"}
    assert option.key.check in READERS
    config = parse_config(tmp_path / "neuron-migrate.toml",
                          {option.key.name: values[option.key.check]},
                          frozenset({"NM101", "NM710"}), tmp_path)
    assert getattr(config, option.field) != getattr(Config(), option.field)
    with pytest.raises(ConfigError, match=option.key.name):
        parse_config(tmp_path / "neuron-migrate.toml", {option.key.name: object()},
                     frozenset({"NM101"}), tmp_path)


def test_the_unknown_key_message_lists_the_table_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(tmp_path / "pyproject.toml", {"selct": []}, frozenset(), tmp_path)
    assert str(raised.value) == (
        f"{tmp_path / 'pyproject.toml'}: unknown key 'selct' in [tool.neuron-migrate] (known: "
        "annotate, cache-dir, compile, exclude, extend-exclude, force-exclude, from, helpers-module, "
        "ignore, max-engine-size, per-file-ignores, respect-gitignore, select, target, unsafe-fixes)")


def test_the_request_has_a_field_for_each_option_and_no_other() -> None:
    fields = {field.name for field in dataclasses.fields(Request)}
    assert fields - {"paths", "mode", "stdin"} == {
        option.field for option in ON_THE_COMMAND_LINE if option.mode is None}


def test_the_configuration_has_a_field_for_each_key() -> None:
    fields = {field.name for field in dataclasses.fields(Config)}
    assert {option.field for option in KEYS.values()} <= fields
    assert fields - {option.field for option in KEYS.values()} == {"path", "anchor", "rule_ids"}


def test_an_option_is_spelt_once_and_named_consistently() -> None:
    spellings = [name for option in OPTIONS for name in option.spellings]
    assert len(spellings) == len(set(spellings))
    for option in OPTIONS:
        assert option.names or option.key, option.field
        assert all(name.startswith("--") or len(name) == 2 for name in option.spellings)
        assert (option.kind is Kind.TOGGLE) == (option.negation is not None)
        assert option.help or not option.names


@pytest.mark.parametrize(("args", "mode", "diff"), [
    (["apply", "a.py"], Mode.APPLY, False), (["apply", "--dry-run", "a.py"], Mode.DRY_RUN, True),
    (["check", "a.py"], Mode.CHECK, False), (["check", "--diff", "a.py"], Mode.CHECK, True),
    (["scan", "."], Mode.SCAN, False), (["scan", "--fix", "."], Mode.SCAN_FIX, True),
    (["audit", "."], Mode.AUDIT, False)])
def test_the_mode_is_the_command_and_its_mode_switch(args: list[str], mode: Mode,
                                                      diff: bool) -> None:
    request = entry.lean_request(args)
    assert request is not None
    assert (request.mode, request.show_diff) == (mode, diff)
    assert request.mode.writes == (mode in (Mode.APPLY, Mode.SCAN_FIX))


def test_an_option_added_to_the_table_reaches_typer_and_the_lean_parser(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What adding an option takes: one entry (its value then needs a field of its own on the
    request, which the tests above ask for)."""
    import neuron_migrate.cli
    import neuron_migrate.request

    added = Option("verbose", ("--chatty",), "Say more.", commands=frozenset({"check"}))
    table = (*(option for option in OPTIONS if option.field != "verbose"), added)
    monkeypatch.setattr(options, "OPTIONS", table)
    monkeypatch.setattr(neuron_migrate.request, "OPTIONS", table)
    made = entry.lean_request(["check", "--chatty", "a.py"])
    assert made is not None and made.verbose

    def check(paths: list[str], **given: object) -> None:
        """A check."""

    fresh = typer.Typer()
    fresh.command(cls=neuron_migrate.cli.Command)(neuron_migrate.cli._takes_options(check))
    fresh.command("other")(lambda: None)
    from typer.testing import CliRunner

    assert "--chatty" in CliRunner().invoke(fresh, ["check", "--help"]).output


@pytest.mark.parametrize(("args", "stdin"), [
    (["check", "-"], True), (["apply", "--stdin-filename", "a.py", "-"], True),
    (["audit", "-"], False), (["check", "./-"], False)])
def test_standard_input_is_read_by_the_commands_that_can(
        args: list[str], stdin: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """`audit` sums up the files it discovers and cannot read standard input: its `-` is a
    path."""
    request = entry.lean_request(args)
    assert request == _typer_request(args, monkeypatch)
    assert request is not None and request.stdin == stdin


@pytest.mark.parametrize("command", COMMANDS)
def test_the_help_says_standard_input_only_where_it_is_read(command: str) -> None:
    """The paths' help promises `-` as standard input only to a command that reads it."""
    from typer.testing import CliRunner

    shown = " ".join(CliRunner().invoke(app, [command, "--help"], terminal_width=200)
                     .output.split())
    reads = Request.of(command, ["-"], {}).stdin
    assert ("to read one file's source from standard input" in shown) == reads
