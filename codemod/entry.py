"""The `neuron-migrate` executable: a lean way in for the invocations a hook repeats.

pre-commit runs `neuron-migrate check FILE...` on every commit, mostly on files with nothing
XLA-era in them. Through typer, every invocation imports pydantic (typer validates each
argument with it) and used to import LibCST, rich and the whole rule catalogue before looking
at a file. So `--version`, `rules`, `check PATH... [-q] [-v] [--diff]` and
`apply PATH... [-q] [-v] [--dry-run] [--force]` (the two hooks) are recognised here and run
without typer; every other command line, including every mistake and every `--help`, goes to
the typer application (`codemod.cli`), which stays the one definition of the interface. Both
run the same `codemod.command.execute`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from codemod import __version__

if TYPE_CHECKING:
    from codemod.command import Request

_FLAGS = {"-q": "quiet", "--quiet": "quiet", "-v": "verbose", "--verbose": "verbose"}
_COMMAND_FLAGS = {"check": {"--diff": "diff"},
                  "apply": {"--dry-run": "dry_run", "--force": "force"}}
"""The only flags the lean `check` and `apply` take; anything else is typer's to parse."""


def main() -> None:
    arguments = sys.argv[1:]
    if arguments == ["--version"]:
        sys.stdout.write(f"neuron-migrate {__version__}\n")
        sys.exit(0)
    if arguments == ["rules"]:
        from codemod.catalogue import print_rules

        print_rules()
        sys.exit(0)
    if (request := lean_request(arguments)) is not None:
        sys.exit(_run(request))
    from codemod.cli import app

    app(prog_name="neuron-migrate")


def lean_request(arguments: list[str]) -> Request | None:
    """The request of a `check` or `apply` command line that holds only paths and the flags
    above; None for anything else (typer then parses it, and reports any mistake). The
    request is the one the typer command would make (tests/test_startup.py checks that)."""
    from codemod.command import Request

    if not arguments or arguments[0] not in _COMMAND_FLAGS:
        return None
    known = {**_FLAGS, **_COMMAND_FLAGS[arguments[0]]}
    flags = dict.fromkeys(["quiet", "verbose", "diff", "dry_run", "force"], False)
    paths: list[Path] = []
    for argument in arguments[1:]:
        if argument in known:
            flags[known[argument]] = True
        elif argument.startswith("-") or not argument:
            return None
        else:
            paths.append(Path(argument))
    if not paths:
        return None
    if arguments[0] == "check":
        return Request(paths, "check", "text", None, None, None, None, False, None, False,
                       None, flags["quiet"], flags["verbose"], show_diff=flags["diff"])
    return Request(paths, "dry-run" if flags["dry_run"] else "apply", "text", None, None, None,
                   None, None, None, None, None, flags["quiet"], flags["verbose"],
                   show_diff=flags["dry_run"], force=flags["force"])


def _run(request: Request) -> int:
    from codemod.command import execute, load_rules, names_as_bytes

    names_as_bytes()
    return execute(request, load_rules)
