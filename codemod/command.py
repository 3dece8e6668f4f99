"""The body of `apply`, `check` and `scan`: one request in, reports out, an exit status back.

Kept apart from the argument parser (`neuron_migrate.cli`) so that the lean start-up path
(`neuron_migrate.entry`) runs the very same code. Everything heavy is imported where it is first
needed: the rule catalogue and LibCST only when a file has an XLA-era token (through
`DeferredRegistry`), rich only when something is printed with style or a progress bar.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from neuron_migrate import catalogue, target

from neuron_migrate.engine_size import DEFAULT_ENGINE_SIZE, parse_size
from neuron_migrate.files import gitstate, temporary
from neuron_migrate.config import (Config, ConfigError, ConfigFinder, check_patterns,
                                   check_rule_code, check_sources, folder_of, read_config)
from neuron_migrate.files.destination import (Destination, DestinationError, open_destination,
                                               refuse_inputs)
from neuron_migrate.files.discover import Discovery, discover, nothing_found
from neuron_migrate.files.scope import Overrides, Scopes
from neuron_migrate.model import Options
from neuron_migrate.printable import printable
from neuron_migrate.options import Mode
from neuron_migrate.registry import Registry
from neuron_migrate.report.formats import formats_of
from neuron_migrate.report.renderer import RunRenderer, RunReport
from neuron_migrate.report.text import render_text, summary_rows
from neuron_migrate.request import Request
from neuron_migrate.runner import Job, RunResult, accept_for, default_jobs, run
from neuron_migrate.settings import Configurations
from neuron_migrate.gate.outcome import before_report, exit_status
from neuron_migrate.gate.outcome import usage_problem as gate_problem
from neuron_migrate.stdin import config_paths, execute_stdin, usage_problem

if TYPE_CHECKING:
    from neuron_migrate.cache.results import ResultCache
    from neuron_migrate.rule import Rule
    from neuron_migrate.settings import FileSettings

MAX_JOBS_PER_CORE = 4
"""More workers than this per core only add memory (each holds LibCST and the catalogue)."""


class UsageProblem(Exception):
    """A flag with a value the run cannot use; the parser reports it as a usage error."""

    def __init__(self, message: str, param_hint: str) -> None:
        super().__init__(message)
        self.param_hint = param_hint


def names_as_bytes() -> None:
    """A file name that is not valid UTF-8 reaches Python with surrogates in it; printed,
    it would abort the run. Written back with surrogateescape, it comes out as the bytes
    the file system holds, as `ls` and git print it."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "encoding", "").lower() in ("utf-8",
                                                                                    "utf8"):
            reconfigure(errors="surrogateescape")


def load_rules() -> tuple[Rule, ...]:
    """The rule catalogue, imported when a file first needs it: it imports LibCST."""
    from neuron_migrate.rules import all_rules

    return all_rules()


def options_of(request: Request, config: Config) -> Options:
    known = catalogue.rule_ids()
    given_select, given_ignore = _codes(request.select), _codes(request.ignore)
    for code in [*(given_select or []), *(given_ignore or [])]:
        check_rule_code(code, known, where="--select/--ignore")
    select = given_select if given_select is not None else config.select
    ignore = given_ignore if given_ignore is not None else config.ignore
    sources = request.sources if request.sources is not None else config.sources
    try:
        check_sources(sources, where="--from")
    except ConfigError as error:
        raise UsageProblem(str(error), param_hint="--from") from None
    return Options(
        sources=frozenset({"xla", *sources}),
        unsafe_fixes=_first(request.unsafe_fixes, config.unsafe_fixes, False),
        compile=_first(request.compile, config.compile, True),
        annotate=_first(request.annotate, config.annotate, False),
        select=frozenset(s.upper() for s in select),
        ignore=frozenset(i.upper() for i in ignore),
        target=request.target if request.target is not None else config.target,
        helpers_module=None if config.helpers_module is None else
        str(((config.anchor or Path.cwd()) / config.helpers_module).resolve()),
        max_engine_size=_engine_size(request, config),
    )


def _engine_size(request: Request, config: Config) -> int:
    """The command line's `--max-engine-size` (checked by `_execute`), else the file's
    configuration's, else the default."""
    given = parse_size(request.max_engine_size)
    return given or config.max_engine_size or DEFAULT_ENGINE_SIZE


def _codes(given: list[str] | None) -> list[str] | None:
    """`--ignore NM710,NM709` as ruff reads it: a comma-separated list, in one value or
    several (`--ignore NM710 --ignore NM709`)."""
    if given is None:
        return None
    return [code.strip() for value in given for code in value.split(",")]


def _first(*values: bool | None) -> bool:
    return next(v for v in values if v is not None)  # type: ignore[return-value]


def execute(request: Request, load_rules: Callable[[], Iterable[Rule]]) -> int:
    """Run the request and print its reports; the exit status. `load_rules` is called only
    if some file needs the catalogue. Raises `UsageProblem` for a flag the run cannot use.

    Ctrl-C outside the migration itself (which stops in its own way) is exit 130 too, not
    click's "Aborted!" and 1, which means "findings" to `check`."""
    try:
        return _execute(request, load_rules)
    except KeyboardInterrupt:
        print_error("interrupted (Ctrl-C)")
        return 130


def _execute(request: Request, load_rules: Callable[[], Iterable[Rule]]) -> int:
    if request.target is not None and request.target not in target.TARGETS:
        raise UsageProblem(f"unknown target {request.target!r}; choose from "
                           f"{', '.join(target.TARGETS)}", param_hint="--target")
    if request.max_engine_size is not None and parse_size(request.max_engine_size) is None:
        raise UsageProblem(f"{request.max_engine_size!r} is not a size: give bytes, or a "
                           "number with a unit (512KiB, 1MiB)", param_hint="--max-engine-size")
    if (problem := formats_of(request.mode).problem(request.fmt)) is not None:
        raise UsageProblem(problem, param_hint="--format")
    if problem := usage_problem(request.stdin, len(request.paths), request.stdin_filename,
                                request.changed_since, scan=request.mode.scan_only):
        raise UsageProblem(*problem)
    if problem := gate_problem(request.gate, request.stdin):
        raise UsageProblem(*problem)
    stdin = request.stdin
    # each file's configuration is its own (neuron_migrate.config); standard input's is NAME's
    configurations = Configurations(lambda config: options_of(request, config), load_rules,
                                    target_given=request.target is not None)
    try:
        finder = _finder(request)
        default = (finder.nearest(folder_of(config_paths(request.stdin_filename)[0]))
                   if stdin else None) or Config()
        configurations.of(default)  # the command line's rule ids and --from are checked here
        check_patterns(request.exclude or [], where="--exclude")
        check_patterns(request.extend_exclude or [], where="--extend-exclude")
    except ConfigError as error:
        return _fail(f"error: {error}")
    if request.output is not None and (problem := _unwritable(request.output)):
        return _fail(f"error: --output {request.output}: {problem}")
    keep = request.show_diff or _renderer(request).keeps_sources
    scan_only = request.mode.scan_only
    writes = request.mode.writes
    scopes = Scopes(finder, _overrides(request))
    if stdin:
        settings = configurations.of(default)
        registry, where = configurations.for_report(None, default)
        _print_notices(configurations, request.quiet)
        job = Job(settings.registry, writes, keep,
                  per_file_ignores=settings.per_file_ignores, code=not scan_only)
        named = folder_of(Path(request.stdin_filename or "."))
        excludes = scopes.nearest(named, root=named).excludes
        _print_warnings(scopes.warnings, request.quiet)
        stands_for = [Path(request.stdin_filename)] if request.stdin_filename else []
        with _destination(request.output, stands_for) as destination:
            if isinstance(destination, int):
                return destination
            return exit_status(execute_stdin(
                request.stdin_filename, job, excludes, scan_only,
                lambda result: _report(result, registry, request, where, destination)),
                request.gate)
    try:
        roots = gitstate.work_trees(request.paths) if writes or request.changed_since else set()
        protected = gitstate.uncommitted(roots) if writes and not request.force else frozenset()
        only = gitstate.changed_since(roots, request.changed_since) \
            if request.changed_since else None
    except gitstate.GitError as error:
        return _fail(f"error: {error}")
    if request.changed_since and not roots:
        return _fail("error: --changed-since needs paths inside a git work tree")
    try:
        found = discover(request.paths,
                         accept=accept_for(not scan_only, request.mode is Mode.AUDIT),
                         scopes=scopes, verbose=request.verbose, not_read=_NOT_READ[scan_only])
        files = configurations.files(found, default)
        registry, where = configurations.for_report(found, default)
    except ConfigError as error:  # a configuration found below the paths given
        return _fail(f"error: {error}")
    _print_warnings([*found.warnings, *scopes.warnings], request.quiet)
    _print_notices(configurations, request.quiet)
    if request.write_baseline is not None:
        try:
            refuse_inputs(request.write_baseline, found.files, what="the baseline")
        except DestinationError as error:
            return _fail(f"error: --write-baseline {request.write_baseline}: {error}")
    with _destination(request.output, found.files) as destination:
        if isinstance(destination, int):
            return destination
        return _migrate(request, found, files, registry, where, protected, only, destination)


def _migrate(request: Request, found: Discovery, files: FileSettings, registry: Registry,
             where: str | None, protected: frozenset[Path], only: frozenset[Path] | None,
             destination: Destination | None) -> int:
    """The run over the files found, its report and its exit status. A run that writes first
    removes the temporary files a killed run left beside them."""
    renderer = _renderer(request)
    keep = request.show_diff or renderer.keeps_sources
    scan_only = request.mode.scan_only
    writes = request.mode.writes
    if writes:
        for line in temporary.remove_leftovers({path.parent for path in found.files}):
            print_warning(f"note: {line}")
    given = len(found.files)
    with _progress(request.quiet) as advance:
        result = run(request.paths, registry, write=writes,
                     jobs=min(request.jobs or default_jobs(), MAX_JOBS_PER_CORE * default_jobs()),
                     keep_sources=keep, progress=advance,
                     python=not scan_only,
                     strict=scan_only, protected=protected, only=only,
                     audit=request.mode is Mode.AUDIT, found=found, settings=files,
                     cache=_cache(request, keep, writes, renderer.ends), ends=renderer.ends)
    result, finished = before_report(result, request.gate, _say(request.quiet), print_warning)
    if finished is not None:
        return finished
    if not _report(result, registry, request, where, destination):
        return 2
    if not result.files and not result.errors and not request.quiet:
        print_warning(f"warning: {_why_nothing(found, given, request.changed_since)}")
    if result.interrupted:
        name = "Ctrl-C" if result.interrupted == signal.SIGINT else \
            signal.Signals(result.interrupted).name
        print_error(f"interrupted ({name}): the files listed above are done, no other file "
                    "was touched")
    if request.mode is Mode.AUDIT:
        from neuron_migrate.report.readiness import audit_exit

        return audit_exit(result, registry)
    return exit_status(result.exit_code(), request.gate)


def _cache(request: Request, keep: bool, writes: bool, ends: bool) -> ResultCache | None:
    """The run's result cache, in the folder of the configuration that applies where the run
    starts (`neuron_migrate.cache.location`); none for `--no-cache` or `audit` (which reads
    the environment around each file), nor when no folder can hold one."""
    from neuron_migrate.cache.location import cache_folder, turned_off

    if request.no_cache or request.mode is Mode.AUDIT or turned_off():
        return None
    from neuron_migrate.cache.results import ResultCache
    from neuron_migrate.cache.store import Store

    here = _finder(request).nearest(Path.cwd().resolve()) or Config()
    store = Store.opened(cache_folder(here.anchor, here.cache_dir))
    if store is None:
        return None
    return ResultCache(store, f"mode={request.mode.value};keep={keep};"
                       f"code={not request.mode.scan_only};ends={ends}",
                       write=writes, command="\0".join(map(str, request.paths)))


@contextmanager
def _destination(output: Path | None,
                 inputs: Iterable[Path]) -> Iterator[Destination | int | None]:
    """The report file opened for the run, None without `--output`, or the exit status 2
    (with its message printed) when the report cannot go there; closed after the run."""
    if output is None:
        yield None
        return
    try:
        refuse_inputs(output, inputs)
        destination = open_destination(output)
    except DestinationError as error:
        yield _fail(f"error: --output {output}: {error}")
        return
    try:
        yield destination
    finally:
        destination.close()


def _say(quiet: bool) -> Callable[[str], None]:
    """A line for the user on standard output, unless -q."""
    return (lambda message: None) if quiet else (lambda message: print(printable(message)))


_NOT_READ = {False: "not a file type neuron-migrate reads",
             True: "not a file `scan` reads (requirements, Dockerfiles, notebooks...)"}


def _finder(request: Request) -> ConfigFinder:
    """Configurations found per folder; with `--config FILE`, that one for every file, its
    relative paths from the working directory (as ruff reads a `--config` file)."""
    rule_ids = catalogue.rule_ids()
    if request.config is None:
        return ConfigFinder(rule_ids)
    return ConfigFinder(rule_ids, fixed=read_config(request.config, rule_ids,
                                                    anchor=Path.cwd().resolve()))


def _overrides(request: Request) -> Overrides:
    return Overrides(exclude=tuple(request.exclude) if request.exclude is not None else None,
                     extend_exclude=tuple(request.extend_exclude or ()),
                     respect_gitignore=request.respect_gitignore,
                     force_exclude=request.force_exclude,
                     default_excludes=request.default_excludes)


def _print_warnings(warnings: Iterable[str], quiet: bool) -> None:
    """What the walk met that the user should hear of before the report (a pattern that can
    match no path)."""
    if not quiet:
        for warning in warnings:
            print_warning(f"warning: {warning}")


def _print_notices(configurations: Configurations, quiet: bool) -> None:
    if not quiet:
        for notice in configurations.notices:
            print_warning(notice)


def _why_nothing(found: Discovery, given: int, changed_since: str | None) -> str:
    """What a run over paths that checked no file says besides "0 files scanned"."""
    if not given:
        return nothing_found(found)
    if changed_since is not None:
        return f"none of the {given} files found changed since {changed_since}"
    return f"none of the {given} files given is one `scan` reads (use `check` for code)"


def print_warning(message: str) -> None:
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True, highlight=False, soft_wrap=True, markup=False,
            emoji=False).print(Text(printable(message), style="yellow"))


def _fail(message: str) -> int:
    print_error(message)
    return 2


def print_error(message: str) -> None:
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True, highlight=False, soft_wrap=True, markup=False,
            emoji=False).print(Text(printable(message), style="bold red"))


@contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr for runs over many files, only on a terminal."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    bar = Progress(TextColumn("migrating"), BarColumn(), MofNCompleteColumn(),
                   console=Console(stderr=True), transient=True)
    task = None

    def advance(done: int, total: int) -> None:
        nonlocal task
        if total < 20:
            return
        if task is None:
            task = bar.add_task("files", total=total)
        bar.update(task, completed=done)

    bar.start()
    try:
        yield advance
    finally:
        bar.stop()


def _renderer(request: Request) -> RunRenderer:
    return formats_of(request.mode).choose(request.fmt)


def _report(result: RunResult, registry: Registry, request: Request,
            where: str | None = None, destination: Destination | None = None) -> bool:
    """Print (and write to `destination`, the open --output file) the reports; False when
    the report file could not be written. `where` says where the target came from, when one
    was given. The text format is printed here, with styles and a summary table; every
    format's document goes to --output, and the others' to standard output without it."""
    renderer = _renderer(request)
    notes = _hardware_notes(result, registry, where)
    report = RunReport(result, registry, request.mode.value, notes, request.show_diff,
                       request.verbose)
    document = None if renderer.styled and destination is None else \
        _document(renderer, report)
    if destination is not None:
        try:
            destination.write(document)
        except OSError as error:
            print_error(f"error: --output {request.output}: cannot write the report "
                        f"({error.strerror or error})")
            return False
    for message in [f.error for f in result.files if f.error] + list(result.errors):
        print_error(f"error: {message}")
    for note in (f.note for f in result.files if f.note):
        print_warning(f"note: {note}")
    if not renderer.styled and request.output is None:
        # the report asked for goes out with -q too: -q silences progress and summaries
        if document:
            sys.stdout.write(document + "\n")
        return True
    if request.quiet:
        return True
    screen = _Screen()
    if request.output is None:
        for text, style in render_text(result, registry, request.show_diff, request.verbose,
                                       interleave=sys.stdout.isatty()):
            if style == "diff":
                _write_diff(text)
            elif style != "error":
                screen.print(text, {"heading": "bold", "dim": "dim"}.get(style, ""))
    if request.mode is Mode.AUDIT:
        from neuron_migrate.report.audit import readiness_lines

        for line in readiness_lines(report):
            screen.print(line, "bold" if not line.startswith(" ") else "")
        return True
    _print_summary(screen, result, notes)
    return True


def _hardware_notes(result: RunResult, registry: Registry, where: str | None) -> list[str]:
    """One note on the hardware the findings assume, for the text summary."""
    chosen = registry.options.target
    if not target.native(chosen):
        return []
    mentions = [target.Mention(f.path, line, instance) for f in result.files
                for line, instance in f.instances]
    return target.notes(chosen, where, mentions, len(result.findings))


class _Screen:
    """Standard output through rich, which is imported only when it changes anything: on a
    terminal (or where rich is told to style anyway), or for the summary table. Printed to a
    pipe, a line of plain text is the same either way."""

    def __init__(self) -> None:
        self._console = None
        self._plain = _plain_stdout()  # asked once: a report prints thousands of lines

    @property
    def console(self):  # type: ignore[no-untyped-def]
        if self._console is None:
            from rich.console import Console

            self._console = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
        return self._console

    def print(self, text: str, style: str = "") -> None:
        text = printable(text)
        if self._console is None and self._plain:
            sys.stdout.write(text + "\n")
            return
        from rich.text import Text

        self.console.print(Text(text, style=style))


def _plain_stdout() -> bool:
    """Whether rich would print to stdout without any styling (and no tab expansion)."""
    forced = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS")
    return not sys.stdout.isatty() and not any(os.environ.get(name) for name in forced)


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


def _document(renderer: RunRenderer, report: RunReport) -> str:
    """The report a --format asks for; a human-readable one with its control characters
    shown as escapes (machine formats escape them in their own syntax)."""
    document = renderer.render(report)
    return printable(document) if renderer.human else document


def _print_summary(screen: _Screen, result: RunResult, notes: list[str]) -> None:
    rows, sentence = summary_rows(result)
    if rows:
        from rich.table import Table

        table = Table(title="Summary", title_justify="left")
        for column in ("rule", "fixes", "unsafe fixes", "review items"):
            table.add_column(column, justify="left" if column == "rule" else "right")
        for row in rows:
            table.add_row(*row)
        screen.console.print(table)
    screen.print(sentence, "bold")
    for note in notes:
        screen.print(note)
    if result.findings:
        screen.print("Run `neuron-migrate explain NMxxx` for the full explanation of a rule.")


_DIFF_COLOURS = (("---", "\x1b[1m"), ("+++", "\x1b[1m"), ("+", "\x1b[32m"), ("-", "\x1b[31m"),
                 ("@@", "\x1b[36m"))


def _write_diff(diff: str) -> None:
    """Diffs go out byte for byte (tabs, a CRLF line's carriage return), so that `git apply`
    takes them, but for control characters, shown as escapes (a line holding one no longer
    applies, but it cannot act on the terminal); colour only on a terminal, and never with
    NO_COLOR set."""
    from neuron_migrate.files.diff import split_lines

    sys.stdout.flush()
    colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    for line in split_lines(printable(diff + "\n")):
        prefix = next((c for p, c in _DIFF_COLOURS if line.startswith(p)), "") if colour else ""
        sys.stdout.write(f"{prefix}{line.rstrip(chr(10))}\x1b[0m\n" if prefix else line)
    sys.stdout.flush()
