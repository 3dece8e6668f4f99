"""The `neuron-migrate` command line."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

from codemod import __version__, gitstate
from codemod.config import Config, ConfigError, check_rule_code, load_config
from codemod.diff import split_lines
from codemod.discover import Excludes
from codemod.model import Options
from codemod.registry import Registry
from codemod.report import (FORMATS, render_github, render_json, render_markdown, render_sarif,
                            render_text, summary_rows)
from codemod.runner import PerFileIgnores, RunResult, default_jobs, run
from codemod.smoke import smoke
from rules import all_rules

MAX_JOBS_PER_CORE = 4
"""More workers than this per core only add memory (each holds LibCST and the catalogue)."""

app = typer.Typer(
    name="neuron-migrate",
    help="Migrate PyTorch code from the XLA-based Neuron stack (torch_xla, torch-neuronx "
         "before 2.14) to native TorchNeuron (the `neuron` device).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)

Paths = Annotated[list[Path], typer.Argument(help="Files or directories to migrate.",
                                             show_default=False, metavar="PATH")]
Format = Annotated[str, typer.Option("--format", help=f"Report format: {', '.join(FORMATS)}.")]
Output = Annotated[Optional[Path], typer.Option(
    "--output", "-o", help="Write the report to this file; the terminal still shows the "
                           "progress and the summary.")]
Exclude = Annotated[Optional[list[str]], typer.Option(
    "--exclude", help="Skip paths matching this gitignore-style glob (repeatable).")]
Select = Annotated[Optional[list[str]], typer.Option(
    "--select", help="Only these rule ids or prefixes (repeatable, e.g. NM1).")]
Ignore = Annotated[Optional[list[str]], typer.Option(
    "--ignore", help="Skip these rule ids or prefixes (repeatable).")]
Unsafe = Annotated[Optional[bool], typer.Option(
    "--unsafe-fixes/--no-unsafe-fixes",
    help="Also apply fixes that may change behaviour (see `rules`).", show_default=False)]
Compile = Annotated[Optional[bool], typer.Option(
    "--compile/--no-compile",
    help="Add model.compile(backend=\"neuron\", dynamic=False) after the training model is "
         "placed on the device (NM503; on by default).", show_default=False)]
Annotate = Annotated[Optional[bool], typer.Option(
    "--annotate/--no-annotate",
    help="Put a `# neuron-migrate: NMxxx ...` comment above each line that needs review.",
    show_default=False)]
Jobs = Annotated[Optional[int], typer.Option(
    "--jobs", "-j", min=1, help="Worker processes (default: all cores; at most four per core "
    "and one per file).", show_default=False)]
Force = Annotated[bool, typer.Option(
    "--force", help="Write files that have uncommitted changes in git too.")]
ChangedSince = Annotated[Optional[str], typer.Option(
    "--changed-since", metavar="REV", help="Only files changed since this git revision "
                                           "(and new untracked files).", show_default=False)]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print only errors and the exit "
                                     "status; reports still go to --output.")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Also list files with nothing "
                                       "to migrate and skipped paths.")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"neuron-migrate {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                               help="Show the version and exit.")] = False
         ) -> None:
    """neuron-migrate."""
    _names_as_bytes()


def _names_as_bytes() -> None:
    """A file name that is not valid UTF-8 reaches Python with surrogates in it; printed,
    it would abort the run. Written back with surrogateescape, it comes out as the bytes
    the file system holds, as `ls` and git print it."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "encoding", "").lower() in ("utf-8",
                                                                                    "utf8"):
            reconfigure(errors="surrogateescape")


@dataclass(frozen=True)
class _Request:
    """One invocation's flags, before the repository's configuration is merged in."""

    paths: list[Path]
    mode: str
    fmt: str
    output: Path | None
    exclude: list[str] | None
    select: list[str] | None
    ignore: list[str] | None
    unsafe: bool | None
    compile_models: bool | None
    annotate: bool | None
    jobs: int | None
    quiet: bool
    verbose: bool
    show_diff: bool
    force: bool = False
    changed_since: str | None = None


def _options(request: _Request, config: Config) -> Options:
    known = frozenset(r.id for r in all_rules())
    for code in [*(request.select or []), *(request.ignore or [])]:
        check_rule_code(code, known, where="--select/--ignore")
    select = request.select if request.select is not None else config.select
    ignore = request.ignore if request.ignore is not None else config.ignore
    return Options(
        unsafe_fixes=_first(request.unsafe, config.unsafe_fixes, False),
        compile=_first(request.compile_models, config.compile, True),
        annotate=_first(request.annotate, config.annotate, False),
        select=frozenset(s.upper() for s in select),
        ignore=frozenset(i.upper() for i in ignore),
    )


def _first(*values: bool | None) -> bool:
    return next(v for v in values if v is not None)  # type: ignore[return-value]


def _execute(request: _Request) -> None:
    if request.fmt not in FORMATS:
        raise typer.BadParameter(f"unknown format {request.fmt!r}; choose from "
                                 f"{', '.join(FORMATS)}", param_hint="--format")
    errors = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        config = load_config(request.paths, frozenset(r.id for r in all_rules()))
        options = _options(request, config)
    except ConfigError as error:
        errors.print(Text(f"error: {error}", style="bold red"))
        raise typer.Exit(2) from None
    if request.output is not None and (problem := _unwritable(request.output)):
        errors.print(Text(f"error: --output {request.output}: {problem}", style="bold red"))
        raise typer.Exit(2)
    registry = Registry(all_rules(), options)
    keep = request.show_diff or request.fmt == "markdown"
    scan_only = request.mode.startswith("scan")
    writes = request.mode in ("apply", "scan --fix")
    try:
        roots = gitstate.work_trees(request.paths) if writes or request.changed_since else set()
        protected = gitstate.uncommitted(roots) if writes and not request.force else frozenset()
        only = gitstate.changed_since(roots, request.changed_since) \
            if request.changed_since else None
    except gitstate.GitError as error:
        errors.print(Text(f"error: {error}", style="bold red"))
        raise typer.Exit(2) from None
    if request.changed_since and not roots:
        errors.print(Text("error: --changed-since needs paths inside a git work tree",
                          style="bold red"))
        raise typer.Exit(2)
    with _progress(request.quiet) as advance:
        result = run(request.paths, registry, write=writes,
                     excludes=_excludes(config, request),
                     jobs=min(request.jobs or default_jobs(), MAX_JOBS_PER_CORE * default_jobs()),
                     keep_sources=keep, progress=advance,
                     python=not scan_only, fix_pins=request.mode != "scan",
                     strict=scan_only, per_file_ignores=_per_file(config),
                     protected=protected, only=only)
    _report(result, registry, request)
    raise typer.Exit(result.exit_code())


def _excludes(config: Config, request: _Request) -> Excludes:
    groups: list[tuple[Path, list[str]]] = [(Path.cwd(), list(request.exclude or []))]
    if config.path is not None:
        groups.append((config.path.parent, list(config.exclude)))
    return Excludes.of(*groups)


def _per_file(config: Config) -> PerFileIgnores | None:
    if config.path is None or not config.per_file_ignores:
        return None
    return PerFileIgnores.of(config.path.parent.resolve(), config.per_file_ignores)


class _progress:
    """A progress bar on stderr for runs over many files, only on a terminal."""

    def __init__(self, quiet: bool) -> None:
        self.enabled = not quiet and sys.stderr.isatty()
        self.bar: Progress | None = None
        self.task = None

    def __enter__(self):  # type: ignore[no-untyped-def]
        if not self.enabled:
            return None
        self.bar = Progress(TextColumn("migrating"), BarColumn(), MofNCompleteColumn(),
                            console=Console(stderr=True), transient=True)
        self.bar.start()
        return self.advance

    def advance(self, done: int, total: int) -> None:
        if self.bar is None or total < 20:
            return
        if self.task is None:
            self.task = self.bar.add_task("files", total=total)
        self.bar.update(self.task, completed=done)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def _report(result: RunResult, registry: Registry, request: _Request) -> None:
    errors = Console(stderr=True, highlight=False, soft_wrap=True)
    document = _document(result, registry, request)
    if request.output is not None:
        try:
            request.output.write_text(document if document is not None else
                                      _plain_text(result, registry, request), encoding="utf-8")
        except OSError as error:
            errors.print(Text(f"error: --output {request.output}: cannot write the report "
                              f"({error.strerror or error})", style="bold red"))
            raise typer.Exit(2) from None
    for message in [f.error for f in result.files if f.error] + list(result.errors):
        errors.print(Text(f"error: {message}", style="bold red"))
    if request.quiet:
        return
    if document is not None and request.output is None:
        sys.stdout.write(document + "\n")
        return
    console = Console(highlight=False, soft_wrap=True)
    if request.output is None:
        for text, style in render_text(result, registry, request.show_diff, request.verbose,
                                       interleave=sys.stdout.isatty()):
            if style == "diff":
                _write_diff(text)
            elif style != "error":
                console.print(Text(text, style={"heading": "bold", "dim": "dim"}.get(style, "")))
    _print_summary(console, result)


def _unwritable(output: Path) -> str | None:
    """Why the report could not be written there, asked before any file is migrated (an
    `apply` would otherwise write the files and then fail on its report)."""
    if output.is_dir():
        return "is a folder"
    folder = output.parent if str(output.parent) else Path(".")
    if not folder.is_dir():
        return f"the folder {folder} does not exist"
    if not os.access(folder, os.W_OK) or (output.exists() and not os.access(output, os.W_OK)):
        return "permission denied"
    return None


def _document(result: RunResult, registry: Registry, request: _Request) -> str | None:
    if request.fmt == "json":
        return render_json(result, registry, request.mode)
    if request.fmt == "markdown":
        return render_markdown(result, registry)
    if request.fmt == "sarif":
        return render_sarif(result, registry)
    if request.fmt == "github":
        return render_github(result)
    return None


def _plain_text(result: RunResult, registry: Registry, request: _Request) -> str:
    lines = [text for text, _ in render_text(result, registry, request.show_diff,
                                             request.verbose)]
    rows, sentence = summary_rows(result)
    lines += [f"{rule}: {f} fixes, {u} unsafe fixes, {r} review items" for rule, f, u, r in rows]
    return "\n".join([*lines, sentence]) + "\n"


def _print_summary(console: Console, result: RunResult) -> None:
    rows, sentence = summary_rows(result)
    if rows:
        table = Table(title="Summary", title_justify="left")
        for column in ("rule", "fixes", "unsafe fixes", "review items"):
            table.add_column(column, justify="left" if column == "rule" else "right")
        for row in rows:
            table.add_row(*row)
        console.print(table)
    console.print(Text(sentence, style="bold"))
    if result.findings:
        console.print("Run `neuron-migrate explain NMxxx` for the full explanation of a rule.")


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
    output: Output = None,
    exclude: Exclude = None,
    select: Select = None,
    ignore: Ignore = None,
    unsafe_fixes: Unsafe = None,
    compile_models: Compile = None,
    annotate: Annotate = None,
    jobs: Jobs = None,
    force: Force = False,
    changed_since: ChangedSince = None,
    quiet: Quiet = False,
    verbose: Verbose = False,
) -> None:
    """Rewrite files in place (or, with --dry-run, show what would change and why).

    Inside a git work tree, files with uncommitted changes are not written unless --force.

    Exit status: 0 when everything was applied (or there was nothing to do); 1 when --dry-run
    found changes or review items; 2 on usage errors or files that could not be read or parsed.
    """
    _execute(_Request(paths, "dry-run" if dry_run else "apply", fmt, output, exclude, select,
                      ignore, unsafe_fixes, compile_models, annotate, jobs, quiet, verbose,
                      show_diff=dry_run, force=force, changed_since=changed_since))


@app.command()
def check(
    paths: Paths,
    fmt: Format = "text",
    output: Output = None,
    exclude: Exclude = None,
    select: Select = None,
    ignore: Ignore = None,
    diff: Annotated[bool, typer.Option("--diff", help="Show the diff of each file too.")] = False,
    compile_models: Compile = None,
    jobs: Jobs = None,
    changed_since: ChangedSince = None,
    quiet: Quiet = False,
    verbose: Verbose = False,
) -> None:
    """Report what would change, for CI and pre-commit; never writes.

    Exit status: 0 when clean, 1 when anything would change or needs review, 2 on errors.
    """
    _execute(_Request(paths, "check", fmt, output, exclude, select, ignore, False,
                      compile_models, False, jobs, quiet, verbose, show_diff=diff,
                      changed_since=changed_since))


@app.command()
def scan(
    paths: Paths,
    fix: Annotated[bool, typer.Option("--fix", help="Rewrite pins in requirements files, "
                                      "pyproject.toml and Dockerfile/shell pip lines to the "
                                      "native set (lockfiles are never edited).")] = False,
    fmt: Format = "text",
    output: Output = None,
    exclude: Exclude = None,
    select: Select = None,
    ignore: Ignore = None,
    unsafe_fixes: Unsafe = None,
    jobs: Jobs = None,
    force: Force = False,
    quiet: Quiet = False,
    verbose: Verbose = False,
) -> None:
    """Find XLA-era torch-neuronx pins and installs in requirements, lockfiles, pyproject,
    setup files, Pipfiles, conda environments, Dockerfiles, shell scripts and YAML images.

    apply and check include these checks. Exit status: 0 when clean, 1 when something was
    found (with --fix: something that could not be fixed), 2 on errors.
    """
    _execute(_Request(paths, "scan --fix" if fix else "scan", fmt, output, exclude, select,
                      ignore, unsafe_fixes, None, False, jobs, quiet, verbose,
                      show_diff=fix, force=force))


app.command()(smoke)


@app.command("rules")
def list_rules() -> None:
    """List every rule: id, kind and what it does."""
    console = Console(highlight=False, soft_wrap=True)
    for rule in all_rules():
        console.print(f"{rule.id}  {rule.name:<26} {str(rule.kind):<11} {rule.summary}",
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
