"""The `neuron-migrate` command line."""

from __future__ import annotations

import dataclasses
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from neuron_migrate import __version__, catalogue
from neuron_migrate.cli_help import Command
from neuron_migrate.command import Request, UsageProblem, execute, load_rules, names_as_bytes
from neuron_migrate.gate import Gate
from neuron_migrate.report import FORMATS
from neuron_migrate.smoke.run import smoke
from neuron_migrate.stdin import STDIN
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


def _formats(incomplete: str) -> list[str]:
    """What the shell completes after `--format`."""
    return [name for name in FORMATS if name.startswith(incomplete)]


Format = Annotated[str, typer.Option("--format", metavar="FORMAT", autocompletion=_formats,
                                     help=f"Report format: {', '.join(FORMATS)}.")]
Output = Annotated[Optional[Path], typer.Option(
    "--output", "-o", metavar="FILE", help="Write the report to this file; the terminal still "
                                           "shows the progress and the summary.")]
Exclude = Annotated[Optional[list[str]], typer.Option(
    "--exclude", metavar="GLOB",
    help="Skip paths matching this gitignore-style glob (repeatable); replaces the "
         "configuration's `exclude` and the default excludes (use --extend-exclude to add).")]
ExtendExclude = Annotated[Optional[list[str]], typer.Option(
    "--extend-exclude", metavar="GLOB",
    help="Also skip paths matching this gitignore-style glob (repeatable), on top of the "
         "excludes in force.", show_default=False)]
ForceExclude = Annotated[Optional[bool], typer.Option(
    "--force-exclude/--no-force-exclude",
    help="Apply the excludes to paths named on the command line too (by default a file "
         "named is checked even if excluded, as with ruff); for pre-commit.",
    show_default=False)]
RespectGitignore = Annotated[Optional[bool], typer.Option(
    "--respect-gitignore/--no-respect-gitignore",
    help="Skip what .gitignore files and .git/info/exclude ignore (on by default).",
    show_default=False)]
NoCache = Annotated[bool, typer.Option(
    "--no-cache", help="Neither read results kept by earlier runs nor keep this run's (they "
    "live in .neuron-migrate-cache/, or cache-dir / $NEURON_MIGRATE_CACHE_DIR).")]
NoDefaultExcludes = Annotated[bool, typer.Option(
    "--no-default-excludes",
    help="Walk build/, dist/, _build/ and buck-out/ at the project root too.")]
ConfigFile = Annotated[Optional[Path], typer.Option(
    "--config", metavar="FILE",
    help="Use this configuration (a pyproject.toml or a neuron-migrate.toml) for every file "
         "instead of each file's nearest one; its relative paths are read from the working "
         "directory.", show_default=False)]
Select = Annotated[Optional[list[str]], typer.Option(
    "--select", metavar="RULE", help="Only these rule ids or prefixes (comma-separated or repeated, e.g. NM1,NM2).")]
Ignore = Annotated[Optional[list[str]], typer.Option(
    "--ignore", metavar="RULE", help="Skip these rule ids or prefixes (comma-separated or repeated).")]
StdinFilename = Annotated[Optional[str], typer.Option(
    "--stdin-filename", metavar="NAME",
    help="With `-` as the path: the name of the file whose source is read from standard "
         "input. It says what the file is (Python, notebook, requirements...); the "
         "configuration, excludes and per-file-ignores apply to it as to NAME given as a "
         "path.", show_default=False)]
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
Target = Annotated[Optional[str], typer.Option(
    "--target", metavar="HARDWARE",
    help="The hardware the code runs on: trn2, trn3, trn1 or inf2. TorchNeuron supports "
         "Trn2/Trn3 only; for trn1 and inf2 nothing is rewritten and the run says why "
         "(default: `target` in the configuration; else Trn2/Trn3 is assumed, and the summary "
         "names the instance types the files mention).",
    show_default=False)]
Jobs = Annotated[Optional[int], typer.Option(
    "--jobs", "-j", min=1, metavar="N", help="Worker processes (default: all cores; at most "
    "four per core and one per file).", show_default=False)]
Force = Annotated[bool, typer.Option(
    "--force", help="Write files that have uncommitted changes in git too.")]
ChangedSince = Annotated[Optional[str], typer.Option(
    "--changed-since", metavar="REV", help="Only files changed since this git revision "
                                           "(and new untracked files).", show_default=False)]
From = Annotated[Optional[list[str]], typer.Option(
    "--from", metavar="STACK", help="Also migrate code written for this stack: `cuda` turns "
    "CUDA code (.cuda(), torch.cuda.*, nccl, autocast(\"cuda\"), ...) into neuron code "
    "(repeatable or comma-separated; XLA code is always migrated).", show_default=False)]
Baseline = Annotated[Optional[Path], typer.Option(
    "--baseline", metavar="FILE", help="Fail only on findings not in this baseline (written by "
    "--write-baseline); findings matched by file, rule and the text of their line, not its "
    "number. Baseline entries no longer found are listed as fixed.", show_default=False)]
WriteBaseline = Annotated[Optional[Path], typer.Option(
    "--write-baseline", metavar="FILE", help="Write every current finding to this JSON "
    "baseline and exit 0 (unless errors).", show_default=False)]
ExitZero = Annotated[bool, typer.Option(
    "--exit-zero", help="Exit 0 even when findings are reported; errors still exit 2.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress, text report or "
                                     "summary: only errors, and the report a --format asked "
                                     "for (to --output, or else to standard output).")]
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
    names_as_bytes()


all_rules = load_rules
"""Replaceable (tests add a rule); `_load_rules` reads it when the catalogue is loaded."""


def _load_rules() -> tuple[Rule, ...]:
    return all_rules()  # looked up when called, so that tests can replace `all_rules`


def _paths(given: list[str]) -> list[Path]:
    """Taken as strings, so that `-` (standard input) and `./-` (a file) stay apart."""
    return [Path(path) for path in given]


def _sources(values: list[str] | None) -> list[str] | None:
    """`--from cuda --from xla` and `--from cuda,xla` alike."""
    if values is None:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _target(given: str | None) -> str | None:
    return given.lower() if given is not None else None


def _execute(request: Request) -> None:
    try:
        status = execute(_with_file_selection(request), _load_rules)
    except UsageProblem as problem:
        raise typer.BadParameter(str(problem), param_hint=problem.param_hint) from None
    raise typer.Exit(status)


_FILE_SELECTION: ContextVar[dict[str, object]] = ContextVar("file_selection", default={})


def _select_files(config: Path | None, extend_exclude: list[str] | None,
                  force_exclude: bool | None, respect_gitignore: bool | None,
                  no_default_excludes: bool, no_cache: bool = False) -> None:
    """The file-selection options every command that walks paths takes alike, for the
    request `_execute` runs next."""
    _FILE_SELECTION.set({"config": config, "extend_exclude": extend_exclude,
                         "force_exclude": force_exclude, "respect_gitignore": respect_gitignore,
                         "default_excludes": not no_default_excludes, "no_cache": no_cache})


def _with_file_selection(request: Request) -> Request:
    return dataclasses.replace(request, **_FILE_SELECTION.get())  # type: ignore[arg-type]


@app.command(cls=Command)
def apply(
    paths: Paths,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write nothing; show the diff and "
                                          "explain every change.")] = False,
    fmt: Format = "text",
    output: Output = None,
    exclude: Exclude = None,
    extend_exclude: ExtendExclude = None,
    force_exclude: ForceExclude = None,
    respect_gitignore: RespectGitignore = None,
    no_default_excludes: NoDefaultExcludes = False,
    no_cache: NoCache = False,
    config: ConfigFile = None,
    select: Select = None,
    ignore: Ignore = None,
    unsafe_fixes: Unsafe = None,
    compile_models: Compile = None,
    annotate: Annotate = None,
    jobs: Jobs = None,
    target: Target = None,
    force: Force = False,
    changed_since: ChangedSince = None,
    stdin_filename: StdinFilename = None,
    sources: From = None,
    quiet: Quiet = False,
    verbose: Verbose = False,
) -> None:
    """Rewrite files in place (or, with --dry-run, show what would change and why).

    Inside a git work tree, files with uncommitted changes are not written unless --force.
    With `-` as the path, the migrated file goes to standard output and the report to
    standard error.

    Exit status: 0 when everything was applied (or there was nothing to do); 1 when --dry-run
    found changes or review items; 2 on usage errors or files that could not be read or parsed.
    """
    _select_files(config, extend_exclude, force_exclude, respect_gitignore,
                  no_default_excludes, no_cache)
    _execute(Request(_paths(paths), "dry-run" if dry_run else "apply", fmt, output, exclude,
                      select, ignore, unsafe_fixes, compile_models, annotate, jobs, quiet, verbose,
                      show_diff=dry_run, force=force, changed_since=changed_since,
                      stdin=STDIN in paths, stdin_filename=stdin_filename,
                      sources=_sources(sources), target=_target(target)))


@app.command(cls=Command)
def check(
    paths: Paths,
    fmt: Format = "text",
    output: Output = None,
    exclude: Exclude = None,
    extend_exclude: ExtendExclude = None,
    force_exclude: ForceExclude = None,
    respect_gitignore: RespectGitignore = None,
    no_default_excludes: NoDefaultExcludes = False,
    no_cache: NoCache = False,
    config: ConfigFile = None,
    select: Select = None,
    ignore: Ignore = None,
    diff: Annotated[bool, typer.Option("--diff", help="Show the diff of each file too.")] = False,
    compile_models: Compile = None,
    jobs: Jobs = None,
    target: Target = None,
    changed_since: ChangedSince = None,
    stdin_filename: StdinFilename = None,
    sources: From = None,
    baseline: Baseline = None,
    write_baseline: WriteBaseline = None,
    add_noqa: Annotated[bool, typer.Option(
        "--add-noqa", help="Acknowledge every current review item with a "
        "`# neuron-migrate: reviewed[NMxxx]` comment where it is reported (never changing "
        "code), then exit 0; fixes are not acknowledged.")] = False,
    exit_zero: ExitZero = False,
    quiet: Quiet = False,
    verbose: Verbose = False,
) -> None:
    """Report what would change, for CI and pre-commit; never writes (but --add-noqa's
    comments).

    Exit status: 0 when clean, 1 when anything would change or needs review, 2 on errors.
    """
    # unsafe fixes as the configuration has them: check reports what apply would write
    _select_files(config, extend_exclude, force_exclude, respect_gitignore,
                  no_default_excludes, no_cache)
    _execute(Request(_paths(paths), "check", fmt, output, exclude, select, ignore, None,
                      compile_models, False, jobs, quiet, verbose, show_diff=diff,
                      changed_since=changed_since, stdin=STDIN in paths,
                      stdin_filename=stdin_filename, sources=_sources(sources),
                      target=_target(target),
                      gate=Gate(baseline, write_baseline, add_noqa, exit_zero)))


@app.command(cls=Command)
def scan(
    paths: Paths,
    fix: Annotated[bool, typer.Option("--fix", help="Rewrite pins in requirements files, "
                                      "pyproject.toml and Dockerfile/shell pip lines to the "
                                      "native set (lockfiles are never edited).")] = False,
    fmt: Format = "text",
    output: Output = None,
    exclude: Exclude = None,
    extend_exclude: ExtendExclude = None,
    force_exclude: ForceExclude = None,
    respect_gitignore: RespectGitignore = None,
    no_default_excludes: NoDefaultExcludes = False,
    no_cache: NoCache = False,
    config: ConfigFile = None,
    select: Select = None,
    ignore: Ignore = None,
    unsafe_fixes: Unsafe = None,
    jobs: Jobs = None,
    target: Target = None,
    force: Force = False,
    stdin_filename: StdinFilename = None,
    sources: From = None,
    baseline: Baseline = None,
    write_baseline: WriteBaseline = None,
    exit_zero: ExitZero = False,
    quiet: Quiet = False,
    verbose: Verbose = False,
) -> None:
    """Find XLA-era torch-neuronx pins and installs in requirements, lockfiles, pyproject,
    setup files, Pipfiles, conda environments, Dockerfiles, shell scripts, YAML and the
    install and shell lines of notebooks, and Pythons older than the 3.12 TorchNeuron needs
    (base images, requires-python, .python-version, CI workflows); never code (that is
    `check`). With `--from cuda`, also the CUDA stack: `torch==X+cuNNN` pins, the CUDA wheel
    index, `nvidia-*` packages, CUDA base images, CUDA_VISIBLE_DEVICES and GPU requests.

    apply and check include these checks. Exit status: 0 when clean, 1 when something was
    found (with --fix: something that could not be fixed), 2 on errors.
    """
    _select_files(config, extend_exclude, force_exclude, respect_gitignore,
                  no_default_excludes, no_cache)
    _execute(Request(_paths(paths), "scan --fix" if fix else "scan", fmt, output, exclude,
                      select, ignore, unsafe_fixes, None, False, jobs, quiet, verbose,
                      show_diff=fix, force=force, stdin=STDIN in paths,
                      stdin_filename=stdin_filename, target=_target(target),
                      sources=_sources(sources),
                      gate=Gate(baseline, write_baseline, exit_zero=exit_zero)))


@app.command(cls=Command)
def audit(
    paths: Paths,
    fmt: Format = "text",
    output: Output = None,
    exclude: Exclude = None,
    extend_exclude: ExtendExclude = None,
    force_exclude: ForceExclude = None,
    respect_gitignore: RespectGitignore = None,
    no_default_excludes: NoDefaultExcludes = False,
    no_cache: NoCache = False,
    config: ConfigFile = None,
    select: Select = None,
    ignore: Ignore = None,
    jobs: Jobs = None,
    changed_since: ChangedSince = None,
    quiet: Quiet = False,
    verbose: Verbose = False,
) -> None:
    """Will this code run well on TorchNeuron? Runs the readiness rules (NM9xx) on every
    Python file that uses PyTorch, XLA-era or not, and sums them up by limit: what blocks,
    what may not run, what slows, what changes numerics, worst files first. Never writes.

    Exit status: 0 when nothing blocks, 1 when something blocks, 2 on errors.
    """
    _select_files(config, extend_exclude, force_exclude, respect_gitignore,
                  no_default_excludes, no_cache)
    _execute(Request(_paths(paths), "audit", fmt, output, exclude, select, ignore, False, None,
                      False, jobs, quiet, verbose, show_diff=False,
                      changed_since=changed_since))


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
