"""The `neuron-migrate` executable: a lean way in for the invocations a hook repeats.

pre-commit runs `neuron-migrate check FILE...` on every commit, mostly on files with nothing
XLA-era in them. Through typer, every invocation imports pydantic (typer validates each
argument with it) and used to import LibCST, rich and the whole rule catalogue before looking
at a file. So `--version`, `rules` and a plain `check PATH... [-q] [-v] [--diff]` are
recognised here and run without typer; every other command line, including every mistake and
every `--help`, goes to the typer application (`codemod.cli`), which stays the one
definition of the interface. Both run the same `codemod.command.execute`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from codemod import __version__

if TYPE_CHECKING:
    from codemod.command import Request

_CHECK_FLAGS = {"-q": "quiet", "--quiet": "quiet", "-v": "verbose", "--verbose": "verbose",
                "--diff": "diff"}
"""The only flags the lean `check` takes; anything else is typer's to parse."""


def main() -> None:
    arguments = sys.argv[1:]
    if arguments == ["--version"]:
        sys.stdout.write(f"neuron-migrate {__version__}\n")
        sys.exit(0)
    if arguments == ["rules"]:
        from codemod.catalogue import print_rules

        print_rules()
        sys.exit(0)
    if arguments[:1] == ["check"] and (request := check_request(arguments[1:])) is not None:
        sys.exit(_check(request))
    from codemod.cli import app

    app(prog_name="neuron-migrate")


def check_request(arguments: list[str]) -> Request | None:
    """The `check` request these arguments make, when they are only paths and the flags
    above; None for anything else (typer then parses them, and reports any mistake)."""
    from codemod.command import Request

    flags = {"quiet": False, "verbose": False, "diff": False}
    paths: list[Path] = []
    for argument in arguments:
        if argument in _CHECK_FLAGS:
            flags[_CHECK_FLAGS[argument]] = True
        elif argument.startswith("-") or not argument:
            return None
        else:
            paths.append(Path(argument))
    if not paths:
        return None
    return Request(paths, "check", "text", None, None, None, None, False, None, False, None,
                   flags["quiet"], flags["verbose"], show_diff=flags["diff"])


def _check(request: Request) -> int:
    from codemod.command import execute, load_rules, names_as_bytes

    names_as_bytes()
    return execute(request, load_rules)
