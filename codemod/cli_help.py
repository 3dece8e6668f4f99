"""Help screens in the form Unix tools print them: `Usage: neuron-migrate check [OPTIONS]
PATH...`, `-j, --jobs N`.

Recent typer versions show each parameter's Python type instead (`PATH <list[Path]>`,
`{PATH}...`, `--jobs <int range>`), older ones drop an argument's help or escape the
brackets of `[default: text]`. Options name their values with explicit metavars (in
`neuron_migrate.cli` and `neuron_migrate.smoke.run`); arguments and the usage line are rendered here, the same
under every typer the package allows.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING

from typer.core import TyperArgument, TyperCommand

if TYPE_CHECKING:  # typer 0.16 uses click, recent ones carry their own copy of it
    from click import Context, HelpFormatter, Parameter


class Command(TyperCommand):
    """A typer command whose help shows metavars, never types."""

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                pieces.append(argument_metavar(param))
        return pieces

    def format_options(self, ctx: Context, formatter: HelpFormatter) -> None:
        arguments: list[tuple[str, str]] = []
        options: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            if getattr(param, "hidden", False):
                continue
            if isinstance(param, TyperArgument):
                arguments.append((argument_metavar(param), getattr(param, "help", None)
                                  or declared_help(self.callback, param.name) or ""))
            elif (record := param.get_help_record(ctx)) is not None:
                options.append((record[0], record[1].replace("\\[", "[")))
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def argument_metavar(param: Parameter) -> str:
    """`PATH...` for one or more paths, `[ARGS]...` for any number of optional ones."""
    name = param.metavar or (param.name or "").upper()
    if not param.required:
        name = f"[{name}]"
    return name + ("..." if param.nargs != 1 else "")


def declared_help(callback: Callable[..., object] | None, name: str | None) -> str | None:
    """An argument's help as its command declares it (`Annotated[..., typer.Argument(help=)]`).
    Typer before 0.26 beside click 8.3 and later hands the help to its argument, whose click
    base class then sets it back to None; the declaration still has it."""
    if callback is None or name is None:
        return None
    try:
        # the commands' modules postpone annotations: they are strings until evaluated
        annotation = inspect.signature(callback, eval_str=True).parameters[name].annotation
    except (KeyError, NameError, TypeError, ValueError):
        return None
    return next((meta.help for meta in getattr(annotation, "__metadata__", ())
                 if isinstance(getattr(meta, "help", None), str)), None)
