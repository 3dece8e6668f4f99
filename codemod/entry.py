"""The `neuron-migrate` executable: a lean way in for the invocations a hook repeats.

pre-commit runs `neuron-migrate check FILE...` on every commit, mostly on files with nothing
XLA-era in them. Through typer, every invocation imports pydantic (typer validates each
argument with it), and going through the typer application loads more before any file is
looked at. So `--version`, `rules`, and `check`, `apply` (the two hooks) and `scan`
command lines made of paths (or `-`, standard input) and the common options are recognised
here and run without typer; every other command line, including every mistake and every
`--help`, goes to the typer application (`neuron_migrate.cli`), which stays the one definition of
the interface. Both run the same `neuron_migrate.command.execute`.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from neuron_migrate import __version__

if TYPE_CHECKING:
    from neuron_migrate.command import Request

_SWITCHES = {"-q": ("quiet", True), "--quiet": ("quiet", True), "-v": ("verbose", True),
             "--verbose": ("verbose", True),
             "--force-exclude": ("force_exclude", True),
             "--no-force-exclude": ("force_exclude", False),
             "--respect-gitignore": ("respect_gitignore", True),
             "--no-respect-gitignore": ("respect_gitignore", False),
             "--no-default-excludes": ("default_excludes", False),
             "--no-cache": ("no_cache", True)}
_COMPILE = {"--compile": ("compile", True), "--no-compile": ("compile", False)}
_UNSAFE = {"--unsafe-fixes": ("unsafe", True), "--no-unsafe-fixes": ("unsafe", False)}
_COMMAND_SWITCHES = {
    "check": {"--diff": ("diff", True), **_COMPILE},
    "apply": {"--dry-run": ("dry_run", True), "--force": ("force", True), **_UNSAFE,
              "--annotate": ("annotate", True), "--no-annotate": ("annotate", False),
              **_COMPILE},
    "scan": {"--fix": ("fix", True), "--force": ("force", True), **_UNSAFE},
}
_VALUED = {"--format": "fmt", "-o": "output", "--output": "output", "--exclude": "exclude",
           "--select": "select", "--ignore": "ignore", "-j": "jobs", "--jobs": "jobs",
           "--changed-since": "changed_since", "--stdin-filename": "stdin_filename",
           "--target": "target", "--config": "config", "--extend-exclude": "extend_exclude"}
_REPEATABLE = frozenset({"exclude", "select", "ignore", "extend_exclude"})
_FILE_SELECTION = ("config", "extend_exclude", "force_exclude", "respect_gitignore",
                   "default_excludes", "no_cache")
"""Request fields every lean command takes alike (`neuron_migrate.cli._with_file_selection`)."""
"""The options the lean `check` and `apply` take; anything else is typer's to parse."""


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
    if (request := lean_request(arguments)) is not None:
        sys.exit(_run(request))
    from neuron_migrate.cli import app

    app(prog_name="neuron-migrate")


def lean_request(arguments: list[str]) -> Request | None:
    """The request of a `check`, `apply` or `scan` command line made of paths and the options
    above; None for anything else, or for a value the command would refuse (typer then parses
    the line and reports the mistake). The request is the one the typer command makes
    (tests/test_startup.py checks that)."""
    if not arguments or arguments[0] not in _COMMAND_SWITCHES:
        return None
    from neuron_migrate.stdin import STDIN, usage_problem

    switches = {**_SWITCHES, **_COMMAND_SWITCHES[arguments[0]]}
    valued = {k: v for k, v in _VALUED.items()
              if arguments[0] != "scan" or v != "changed_since"}
    given: dict[str, object] = {}
    paths: list[Path] = []
    rest = iter(arguments[1:])
    for argument in rest:
        name, equals, inline = argument.partition("=") if argument.startswith("--") else \
            (argument, "", "")
        if name in switches and not equals:
            field, value = switches[name]
            given[field] = value
        elif name in valued:
            value = inline if equals else next(rest, "")
            if not _acceptable(valued[name], value):
                return None
            _store(given, valued[name], value)
        elif (argument.startswith("-") and argument != STDIN) or not argument:
            return None
        else:
            paths.append(Path(argument))
            given["stdin"] = given.get("stdin", False) or argument == STDIN
    if not paths or usage_problem(given.get("stdin", False), len(paths),  # type: ignore[arg-type]
                                  given.get("stdin_filename"),  # type: ignore[arg-type]
                                  given.get("changed_since"),  # type: ignore[arg-type]
                                  scan=arguments[0] == "scan") is not None:
        return None
    import dataclasses

    return dataclasses.replace(_request(arguments[0], paths, given),
                               **{k: given[k] for k in _FILE_SELECTION if k in given})


def _acceptable(field: str, value: str) -> bool:
    from neuron_migrate.report import FORMATS

    if not value or value.startswith("-"):
        return False
    if field == "jobs":
        return re.fullmatch(r"[1-9][0-9]*", value) is not None
    if field == "target":
        from neuron_migrate.target import TARGETS

        return value.lower() in TARGETS
    return field != "fmt" or value in FORMATS


def _store(given: dict[str, object], field: str, value: str) -> None:
    if field in _REPEATABLE:
        given.setdefault(field, [])
        given[field].append(value)  # type: ignore[attr-defined]
    else:
        given[field] = int(value) if field == "jobs" else \
            Path(value) if field in ("output", "config") \
            else value.lower() if field == "target" else value


def _request(command: str, paths: list[Path], given: dict[str, object]) -> Request:
    """As `neuron_migrate.cli.check`, `apply` and `scan` build it."""
    from neuron_migrate.command import Request

    def value(field: str, default: object = None) -> Any:
        return given.get(field, default)

    if command == "check":
        return Request(paths, "check", value("fmt", "text"), value("output"), value("exclude"),
                       value("select"), value("ignore"), None, value("compile"), False,
                       value("jobs"), value("quiet", False), value("verbose", False),
                       show_diff=value("diff", False), changed_since=value("changed_since"),
                       stdin=value("stdin", False), stdin_filename=value("stdin_filename"),
                       target=value("target"))
    if command == "scan":
        return Request(paths, "scan --fix" if value("fix", False) else "scan",
                       value("fmt", "text"), value("output"), value("exclude"), value("select"),
                       value("ignore"), value("unsafe"), None, False, value("jobs"),
                       value("quiet", False), value("verbose", False),
                       show_diff=value("fix", False), force=value("force", False),
                       stdin=value("stdin", False), stdin_filename=value("stdin_filename"),
                       target=value("target"))
    dry_run = value("dry_run", False)
    return Request(paths, "dry-run" if dry_run else "apply", value("fmt", "text"),
                   value("output"), value("exclude"), value("select"), value("ignore"),
                   value("unsafe"), value("compile"), value("annotate"), value("jobs"),
                   value("quiet", False), value("verbose", False), show_diff=dry_run,
                   force=value("force", False), changed_since=value("changed_since"),
                   stdin=value("stdin", False), stdin_filename=value("stdin_filename"),
                   target=value("target"))


def _run(request: Request) -> int:
    from neuron_migrate.command import execute, load_rules, names_as_bytes

    names_as_bytes()
    return execute(request, load_rules)
