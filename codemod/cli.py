"""The `neuron-migrate` command line."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.text import Text

from codemod import __version__
from codemod.diff import split_lines
from codemod.model import Options
from codemod.registry import Registry
from codemod.report import FORMATS, render_json, render_text
from codemod.runner import RunResult, run
from rules import all_rules

app = typer.Typer(
    name="neuron-migrate",
    help="Migrate PyTorch code from the XLA-based Neuron stack (torch_xla, torch-neuronx "
         "before 2.14) to native TorchNeuron (the `neuron` device).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)

Paths = Annotated[list[Path], typer.Argument(help="Files or directories to migrate.",
                                             show_default=False, metavar="PATH...")]
Format = Annotated[str, typer.Option("--format", help=f"Report format: {', '.join(FORMATS)}.")]
Exclude = Annotated[Optional[list[str]], typer.Option(
    "--exclude", help="Skip paths matching this gitignore-style glob (repeatable).")]
Select = Annotated[Optional[list[str]], typer.Option(
    "--select", help="Only these rule ids or prefixes (repeatable, e.g. NM1).")]
Ignore = Annotated[Optional[list[str]], typer.Option(
    "--ignore", help="Skip these rule ids or prefixes (repeatable).")]
Unsafe = Annotated[bool, typer.Option(
    "--unsafe-fixes", help="Also apply fixes that may change behaviour (see `rules`).")]
Annotate = Annotated[bool, typer.Option(
    "--annotate", help="Put a `# neuron-migrate: NMxxx ...` comment above each line that "
                       "needs review.")]
NoCompile = Annotated[bool, typer.Option(
    "--no-compile", help="Do not add model.compile(backend=\"neuron\", dynamic=False) after "
                         "the training model is placed on the device (NM503).")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"neuron-migrate {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                               help="Show the version and exit.")] = False
         ) -> None:
    """neuron-migrate."""


def _registry(select: list[str] | None, ignore: list[str] | None, unsafe: bool,
              compile_models: bool = True, annotate: bool = False) -> Registry:
    rules = all_rules()
    known = {r.id for r in rules}
    for code in [*(select or []), *(ignore or [])]:
        if not any(rule_id.startswith(code.upper()) for rule_id in known):
            raise typer.BadParameter(f"unknown rule id or prefix {code!r}; "
                                     "see `neuron-migrate rules`")
    options = Options(unsafe_fixes=unsafe, compile=compile_models, annotate=annotate,
                      select=frozenset(s.upper() for s in select or ()),
                      ignore=frozenset(i.upper() for i in ignore or ()))
    return Registry(rules, options)


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise typer.BadParameter(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}",
                                 param_hint="--format")


def _report(result: RunResult, registry: Registry, fmt: str, mode: str, show_diff: bool) -> None:
    if fmt == "json":
        sys.stdout.write(render_json(result, registry, mode) + "\n")
        for error in result.errors:
            sys.stderr.write(f"error: {error}\n")
        return
    console = Console(highlight=False, soft_wrap=True)
    errors = Console(stderr=True, highlight=False, soft_wrap=True)
    for text, style in render_text(result, registry, show_diff):
        if style == "error":
            errors.print(Text(text, style="bold red"))
        elif style == "diff":
            _write_diff(text)
        else:
            console.print(Text(text, style={"heading": "bold", "dim": "dim"}.get(style, "")))


_DIFF_COLOURS = (("---", "\x1b[1m"), ("+++", "\x1b[1m"), ("+", "\x1b[32m"), ("-", "\x1b[31m"),
                 ("@@", "\x1b[36m"))


def _write_diff(diff: str) -> None:
    """Diffs go out byte for byte (tabs, carriage returns), so that `git apply` takes them;
    colour only on a terminal, and never with NO_COLOR set."""
    sys.stdout.flush()
    colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    for line in split_lines(diff + "\n"):
        prefix = next((c for p, c in _DIFF_COLOURS if line.startswith(p)), "") if colour else ""
        sys.stdout.write(f"{prefix}{line.rstrip(chr(10))}\x1b[0m\n" if prefix else line)
    sys.stdout.flush()


@app.command()
def apply(
    paths: Paths,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write nothing; show the diff and "
                                          "explain every change.")] = False,
    fmt: Format = "text",
    exclude: Exclude = None,
    select: Select = None,
    ignore: Ignore = None,
    unsafe_fixes: Unsafe = False,
    no_compile: NoCompile = False,
    annotate: Annotate = False,
) -> None:
    """Rewrite files in place (or, with --dry-run, show what would change and why).

    Exit status: 0 when everything was applied (or there was nothing to do); 1 when --dry-run
    found changes or review items; 2 on usage errors or files that could not be read or parsed.
    """
    _check_format(fmt)
    registry = _registry(select, ignore, unsafe_fixes, not no_compile, annotate)
    result = run(paths, registry, write=not dry_run, excludes=exclude or ())
    _report(result, registry, fmt, "dry-run" if dry_run else "apply", show_diff=dry_run)
    raise typer.Exit(result.exit_code())


@app.command()
def check(
    paths: Paths,
    fmt: Format = "text",
    exclude: Exclude = None,
    select: Select = None,
    ignore: Ignore = None,
    diff: Annotated[bool, typer.Option("--diff", help="Show the diff of each file too.")] = False,
    no_compile: NoCompile = False,
) -> None:
    """Report what would change, for CI and pre-commit; never writes.

    Exit status: 0 when clean, 1 when anything would change or needs review, 2 on errors.
    """
    _check_format(fmt)
    registry = _registry(select, ignore, False, not no_compile)
    result = run(paths, registry, write=False, excludes=exclude or ())
    _report(result, registry, fmt, "check", show_diff=diff)
    raise typer.Exit(result.exit_code())


@app.command("rules")
def list_rules() -> None:
    """List every rule: id, kind and what it does."""
    console = Console(highlight=False, soft_wrap=True)
    for rule in all_rules():
        console.print(f"{rule.id}  {rule.name:<22} {str(rule.kind):<11} {rule.summary}",
                      markup=False)


@app.command()
def explain(rule_id: Annotated[str, typer.Argument(help="A rule id such as NM110, or its "
                                                   "name such as mark-step.")]) -> None:
    """Show a rule's full explanation, its before/after example and its documentation link."""
    wanted = rule_id.strip()
    for rule in all_rules():
        if wanted.upper() == rule.id or wanted == rule.name:
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
