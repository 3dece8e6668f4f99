"""The `neuron-migrate` executable: a lean way in for the invocations a hook repeats.

pre-commit runs `neuron-migrate check FILE...` on every commit, mostly on files with nothing
XLA-era in them. Through typer, every invocation imports pydantic (typer validates each
argument with it), and going through the typer application loads more before any file is
looked at. So `--version`, `rules`, and `check`, `apply` (the two hooks), `scan` and `audit`
command lines made of paths (or `-`, standard input) and options spelt in full are recognised
here and run without typer; every other command line, including every mistake and every
`--help`, goes to the typer application (`neuron_migrate.cli`). Both read their options from
one table (`neuron_migrate.options`) and run the same `neuron_migrate.command.execute`.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, NoReturn

from neuron_migrate import __version__

if TYPE_CHECKING:
    from neuron_migrate.request import Request


def main() -> None:
    """Every command; one whose standard output is closed before it is done (`rules | head
    -1`) exits quietly with status 1, as Python's documentation recommends (the note on
    SIGPIPE in the `signal` module). An unexpected exception prints its traceback and exits
    with INTERNAL_ERROR."""
    try:
        try:
            _main()
        finally:
            sys.stdout.flush()  # what is still buffered fails here, not at the exit
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            os.dup2(devnull, stream.fileno())  # nothing more to say, and nowhere to say it
        sys.exit(1)
    except Exception:  # a bug; exit 1 would read as "findings" to `check` and CI
        _internal_error()


INTERNAL_ERROR = 2
"""The exit status of a bug, as of a file that could not be read: never 1, the status of
findings."""


def _internal_error() -> NoReturn:
    import traceback

    from neuron_migrate.printable import printable

    sys.stderr.write(printable(traceback.format_exc()))
    sys.stderr.write(f"error: internal error in neuron-migrate {__version__}; please report "
                     "it with the traceback above\n")
    sys.exit(INTERNAL_ERROR)


def _main() -> None:
    arguments = sys.argv[1:]
    if arguments == ["--version"]:
        sys.stdout.write(f"neuron-migrate {__version__}\n")
        sys.exit(0)
    if arguments == ["rules"]:
        from neuron_migrate.catalogue import print_rules

        print_rules()
        sys.exit(0)
    from neuron_migrate.kept_code import install

    install()  # before anything of a run defines a dataclass or compiles a pattern
    if (request := lean_request(arguments)) is not None:
        sys.exit(_run(request))
    from neuron_migrate.cli import app

    app(prog_name="neuron-migrate")


def lean_request(arguments: list[str]) -> Request | None:
    """The request of an `apply`, `check`, `scan` or `audit` command line made of paths and
    the command's options (`neuron_migrate.options`), each spelt in full and separately; None
    for anything else, or for a value the command would refuse (typer then parses the line
    and reports the mistake). The request is the one the typer command makes
    (tests/cli/test_startup.py checks that)."""
    from neuron_migrate.options import COMMANDS, Kind, taken_by

    if not arguments or arguments[0] not in COMMANDS:
        return None
    from neuron_migrate.request import Request
    from neuron_migrate.stdin import STDIN, usage_problem

    command = arguments[0]
    by_name = {name: option for option in taken_by(command) for name in option.spellings}
    given: dict[str, object] = {}
    paths: list[str] = []
    rest = iter(arguments[1:])
    for argument in rest:
        name, equals, inline = argument.partition("=") if argument.startswith("--") else \
            _attached(argument)
        option = by_name.get(name)
        if option is not None and option.kind in (Kind.SWITCH, Kind.TOGGLE):
            if equals:
                return None
            given[option.field] = name != option.negation
        elif option is not None:
            value = inline if equals else next(rest, "")
            if not value or value.startswith("-") or not option.accepts(value):
                return None
            if option.kind is Kind.LIST:
                given.setdefault(option.field, [])
                given[option.field].append(value)  # type: ignore[attr-defined]
            else:
                given[option.field] = value
        elif (argument.startswith("-") and argument != STDIN) or not argument:
            return None
        else:
            paths.append(argument)
    if not paths:
        return None
    request = Request.of(command, paths, given)
    if usage_problem(request.stdin, len(paths), request.stdin_filename, request.changed_since,
                     scan=request.mode.scan_only) is not None:
        return None
    from neuron_migrate.gate.outcome import usage_problem as gate_problem

    return None if gate_problem(request.gate, request.stdin) is not None else request


def _attached(argument: str) -> tuple[str, str, str]:
    """A short option and the value written against it (`-j4`, `-oreport.json`), split as
    click splits it; anything else whole. Only a value option's letter may carry one: `-qv`
    (two switches) stays whole and so goes to typer, and so does `-o=r.json`, whose value
    click reads as `=r.json`."""
    if len(argument) > 2 and argument[0] == "-" and argument[1] != "-" and argument[2] != "=":
        return argument[:2], "=", argument[2:]
    return argument, "", ""


def _run(request: Request) -> int:
    from neuron_migrate.command import execute, load_rules, names_as_bytes

    names_as_bytes()
    return execute(request, load_rules)
