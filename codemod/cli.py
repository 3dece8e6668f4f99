"""The `neuron-migrate` command line."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from neuron_migrate import __version__, catalogue
from neuron_migrate.cli_help import Command
from neuron_migrate.command import UsageProblem, execute, load_rules, names_as_bytes
from neuron_migrate.options import Kind, Option, choices, taken_by
from neuron_migrate.request import Request
from neuron_migrate.smoke.run import smoke
from neuron_migrate.verify.command import verify

if TYPE_CHECKING:
    from neuron_migrate.rule import Rule

app = typer.Typer(
    name="neuron-migrate",
    help="Migrate PyTorch code from the XLA-based Neuron stack (torch_xla, torch-neuronx "
         "before 2.14) to native TorchNeuron (the `neuron` device).",
    no_args_is_help=True,
    # --install-completion / --show-completion; the lean start-up path (neuron_migrate.entry)
    # never imports typer, so they cost `--version` and the hooks nothing
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)

Paths = Annotated[list[str], typer.Argument(
    help="Files or directories to migrate, or `-` to read one file's source from standard "
         "input.", show_default=False, metavar="PATH")]
AuditPaths = Annotated[list[str], typer.Argument(
    help="Files or directories to audit. `audit` sums up the files it discovers, with what "
         "lies around them, so it does not read standard input: `-` is a file of that name.",
    show_default=False, metavar="PATH")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"neuron-migrate {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                               help="Show the version and exit.")] = False
         ) -> None:
    """neuron-migrate."""
    names_as_bytes()


all_rules = load_rules
"""Replaceable (tests add a rule); `_load_rules` reads it when the catalogue is loaded."""


def _load_rules() -> tuple[Rule, ...]:
    return all_rules()  # looked up when called, so that tests can replace `all_rules`


def _execute(request: Request) -> None:
    try:
        status = execute(request, _load_rules)
    except UsageProblem as problem:
        raise typer.BadParameter(str(problem), param_hint=problem.param_hint) from None
    raise typer.Exit(status)


def _takes_options(run: Callable[..., None]) -> Callable[..., None]:
    """`run` (a command of `neuron_migrate.options.COMMANDS`, named so) as typer sees it: its
    paths, then a parameter for each of its options in the table, in the table's order (the
    order of its help). Every such command does the same (make the request, run it), so `run`
    brings only its name and its docstring, the command's help."""
    parameters = [inspect.Parameter("paths", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    annotation=AuditPaths if run.__name__ == "audit" else Paths)]
    for option in taken_by(run.__name__):
        parameters.append(inspect.Parameter(
            option.field, inspect.Parameter.KEYWORD_ONLY, default=_default(option),
            annotation=Annotated[_typer_type(option), _typer_option(option)]))

    @functools.wraps(run)
    def command(paths: list[str], **given: object) -> None:
        _execute(Request.of(run.__name__, paths, given))

    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {}
    return command


def _default(option: Option) -> object:
    return False if option.kind is Kind.SWITCH else option.default


def _typer_type(option: Option) -> object:
    if option.kind is Kind.SWITCH:
        return bool
    if option.kind is Kind.TOGGLE:
        return Optional[bool]
    if option.kind is Kind.LIST:
        return Optional[list[option.type]]  # type: ignore[name-defined]
    return option.type if option.default is not None else Optional[option.type]


def _typer_option(option: Option) -> typer.models.OptionInfo:
    names = (f"{option.names[0]}/{option.negation}", *option.names[1:]) if option.negation \
        else option.names
    help_text = option.help.replace("{choices}", ", ".join(choices(option.choices))) \
        if option.choices else option.help
    completion = None
    if option.completes and option.choices:
        allowed = choices(option.choices)
        completion = lambda incomplete: [v for v in allowed if v.startswith(incomplete)]  # noqa
    return typer.Option(*names, help=help_text, metavar=option.metavar, min=option.minimum,
                        show_default=option.show_default, autocompletion=completion)


@app.command(cls=Command)
@_takes_options
def apply(paths: list[str], **options: object) -> None:
    """Rewrite files in place (or, with --dry-run, show what would change and why).

    Inside a git work tree, files with uncommitted changes are not written unless --force.
    With `-` as the path, the migrated file goes to standard output and the report to
    standard error.

    Exit status: 0 when everything was applied (or there was nothing to do); 1 when --dry-run
    found changes or review items; 2 on usage errors or files that could not be read or parsed.
    """


@app.command(cls=Command)
@_takes_options
def check(paths: list[str], **options: object) -> None:
    """Report what would change, for CI and pre-commit; never writes (but --add-noqa's
    comments).

    Exit status: 0 when clean, 1 when anything would change or needs review, 2 on errors.
    """


@app.command(cls=Command)
@_takes_options
def scan(paths: list[str], **options: object) -> None:
    """Find XLA-era torch-neuronx pins and installs in requirements, lockfiles, pyproject,
    setup files, Pipfiles, conda environments, Dockerfiles, shell scripts, YAML and the
    install and shell lines of notebooks, and Pythons older than the 3.12 TorchNeuron needs
    (base images, requires-python, .python-version, CI workflows); never code (that is
    `check`). With `--from cuda`, also the CUDA stack: `torch==X+cuNNN` pins, the CUDA wheel
    index, `nvidia-*` packages, CUDA base images, CUDA_VISIBLE_DEVICES and GPU requests.

    apply and check include these checks. Exit status: 0 when clean, 1 when something was
    found (with --fix: something that could not be fixed), 2 on errors.
    """


@app.command(cls=Command)
@_takes_options
def audit(paths: list[str], **options: object) -> None:
    """Will this code run well on TorchNeuron? Runs the readiness rules (NM9xx) on every
    Python file that uses PyTorch, XLA-era or not, and sums them up by limit: what blocks,
    what may not run, what slows, what changes numerics, worst files first. Never writes.

    Exit status: 0 when nothing blocks, 1 when something blocks, 2 on errors.
    """


app.command(cls=Command)(smoke)
app.command(cls=Command)(verify)


CatalogueFormat = Annotated[str, typer.Option(
    "--format", metavar="FORMAT", help="text, or json: each rule's id, name, kind, summary, "
                                       "source stack and documentation link.")]


def _catalogue_format(fmt: str) -> str:
    if fmt not in ("text", "json"):
        raise typer.BadParameter(f"unknown format {fmt!r}; choose from text, json",
                                 param_hint="--format")
    return fmt


@app.command("rules", cls=Command)
def list_rules(fmt: CatalogueFormat = "text") -> None:
    """List every rule: id, kind and what it does."""
    if _catalogue_format(fmt) == "json":
        from neuron_migrate.report.catalogue_json import rules_json

        typer.echo(rules_json(sorted(all_rules(), key=lambda rule: rule.id)))
        return
    catalogue.print_rules()


@app.command(cls=Command)
def explain(rule_id: Annotated[str, typer.Argument(
        help="A rule id such as NM110, or its name such as mark-step.", metavar="RULE")],
            fmt: CatalogueFormat = "text") -> None:
    """Show a rule's full explanation, its before/after example and its documentation link."""
    wanted = rule_id.strip()
    _catalogue_format(fmt)
    for rule in all_rules():
        if wanted.upper() == rule.id or wanted == rule.name:
            if fmt == "json":
                from neuron_migrate.report.catalogue_json import rule_json

                typer.echo(rule_json(rule))
                return
            from rich.console import Console

            console = Console(highlight=False, soft_wrap=True)
            console.print(f"{rule.id} {rule.name} ({rule.kind})", style="bold", markup=False)
            console.print(rule.summary + "\n", markup=False)
            console.print(rule.explanation + "\n", markup=False)
            console.print("Before:", style="bold")
            console.print(_indent(rule.example.before), markup=False)
            console.print("After:", style="bold")
            console.print(_indent(rule.example.after), markup=False)
            console.print(f"Documentation: {rule.doc_url}", markup=False)
            return
    typer.echo(f"error: no rule {rule_id!r}; see `neuron-migrate rules`", err=True)
    raise typer.Exit(2)


def _indent(code: str) -> str:
    return "\n".join("    " + line for line in code.rstrip("\n").splitlines())
