"""`check -`, `apply -` and `scan -`: one file's source read from standard input, the way ruff
and black read it, so that an editor can migrate a buffer it has not saved.

`--stdin-filename NAME` says which file the source is. Its suffix decides how it is read
(Python, a notebook, a requirements file, a Dockerfile...), the configuration is the one
found from NAME's folder, and the excludes and per-file-ignores apply to NAME exactly as to
NAME given as a path (here excludes always apply to named paths, as with ruff's and black's
`--force-exclude`). NAME need not exist.

`apply -` writes the whole file to standard output and nothing else: the report goes to
standard error. When nothing can be migrated (NAME is excluded, the source does not parse,
or a guard refused the result) the source goes back unchanged, as ruff's `--fix -` does: an
editor replaces its buffer with what it reads there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

from neuron_migrate.files.scope import Excludes
from neuron_migrate.model import FileResult
from neuron_migrate.registry import Registry
from neuron_migrate.runner import MAX_BYTES, Job, RunResult, accepts, migrate_bytes

STDIN = "-"
"""The path that means standard input, exactly as given: a file named `-` is `./-` (which
`Path` would make `-` again, so the command line is asked)."""


def usage_problem(stdin: bool, paths: int, stdin_filename: str | None,
                  changed_since: str | None, scan: bool = False) -> tuple[str, str] | None:
    """Why this command line cannot read standard input as it asks, and the parameter to
    blame; None when it can (or does not read it). `stdin`: whether `-` was among the
    `paths` given (how many); `scan` reads dependency files only, known by their names."""
    if not stdin:
        if stdin_filename is not None:
            return ("needs `-` as the only path: it names the source read from standard "
                    "input", "--stdin-filename")
        return None
    if paths > 1:
        return "`-` (standard input) cannot be combined with other paths", "PATH"
    if stdin_filename is not None and not stdin_filename.strip():
        return "needs a file name", "--stdin-filename"
    if changed_since is not None:
        return "cannot be used with `-` (standard input)", "--changed-since"
    if scan and stdin_filename is None:
        return ("`scan -` needs --stdin-filename NAME (requirements.txt, Dockerfile...): the "
                "name says what the file is"), "PATH"
    return None


def config_paths(stdin_filename: str | None) -> list[Path]:
    """Where the configuration is looked for: from NAME's folder, as for NAME given as a
    path; without a name, from the working directory."""
    return [Path(stdin_filename)] if stdin_filename else [Path.cwd()]


def migrate_stdin(name: str | None, data: bytes, job: Job, excludes: Excludes,
                  strict: bool = False) -> RunResult:
    """The run over one file that `data` is, as `runner.run` would report NAME given as a
    path holding `data`. Without a name it is Python code named `-`, and no exclude or
    per-file-ignore applies to it."""
    shown = name or STDIN
    path = Path(shown)

    def skipped(why: str) -> RunResult:
        return RunResult((), skipped=(f"{shown}: {why}",), written=job.write, strict=strict)

    if name is not None and excludes.match(_real(path), is_dir=False):
        return skipped("excluded")
    if not job.code and not accepts(False)(path):
        return skipped("not a file `scan` reads (use `check` for code)")
    if len(data) > MAX_BYTES:
        result = FileResult(shown, skipped=f"{shown}: larger than {MAX_BYTES // 2**20} MiB, "
                                           "not migrated")
    else:
        registry = job.registry_for(path) if name is not None else job.registry
        result = migrate_bytes(shown, data, registry, job.generate, job.code)
        result = _helpers_at_hand(result, registry)
    return RunResult((result,), written=job.write, strict=strict)


def _helpers_at_hand(result: FileResult, registry: Registry) -> FileResult:
    """Standard input's code imports its helpers from the helpers module (`helpers-module`)
    but is one file, so the run writes no module: code whose helpers the module lacks is
    an error rather than an import that fails."""
    if result.helpers_module is None:
        return result
    from neuron_migrate.helpers_module import missing

    lacking = missing(Path(result.helpers_module), result.helpers, registry.helper_table)
    if not lacking:
        return result
    return dataclasses.replace(
        result, new_source=None, modified=False,
        error=f"{result.path}: its helpers ({', '.join(lacking)}) are not in the helpers module "
              f"{result.helpers_module} yet: run `neuron-migrate apply` on the file to add them")


def _real(path: Path) -> Path:
    """Where NAME is, as discovery resolves a path it is given (NAME need not exist)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
        return path.absolute()


def execute_stdin(name: str | None, job: Job, excludes: Excludes, strict: bool,
                  report: Callable[[RunResult], bool]) -> int:
    """Read standard input, migrate it and report; with `job.write` (apply, scan --fix) the
    file goes to standard output and the report to standard error. The exit status."""
    data = sys.stdin.buffer.read()
    result = migrate_stdin(name, data, job, excludes, strict)
    if not job.write:
        return result.exit_code() if report(result) else 2
    with contextlib.redirect_stdout(sys.stderr):
        reported = report(result)
    sys.stdout.flush()
    sys.stdout.buffer.write(fixed_source(result, data))
    sys.stdout.flush()
    return result.exit_code() if reported else 2


def fixed_source(result: RunResult, data: bytes) -> bytes:
    """What `apply -` prints: the migrated file, or the input when it was not migrated."""
    for file in result.files:
        if file.changed and not file.error and file.new_source is not None:
            return file.new_source
    return data
