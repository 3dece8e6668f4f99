"""One invocation's options, as the typer commands and the lean parser both make them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from neuron_migrate.gate import Gate
from neuron_migrate.options import OPTIONS, Mode
from neuron_migrate.stdin import STDIN


@dataclass(frozen=True)
class Request:
    """One invocation's flags, before the repository's configuration is merged in: a field
    for each option of `neuron_migrate.options.OPTIONS` (tests check that they match), made
    by `Request.of` only."""

    paths: list[Path]
    mode: Mode
    stdin: bool = False
    """`-` was given among the paths (its `Path` is `./-`'s too)."""
    fmt: str = "text"
    output: Path | None = None
    exclude: list[str] | None = None
    extend_exclude: list[str] | None = None
    force_exclude: bool | None = None
    respect_gitignore: bool | None = None
    default_excludes: bool = True
    no_cache: bool = False
    config: Path | None = None
    select: list[str] | None = None
    ignore: list[str] | None = None
    diff: bool = False
    unsafe_fixes: bool | None = None
    compile: bool | None = None
    annotate: bool | None = None
    jobs: int | None = None
    target: str | None = None
    force: bool = False
    changed_since: str | None = None
    stdin_filename: str | None = None
    max_engine_size: str | None = None
    sources: list[str] | None = None
    baseline: Path | None = None
    write_baseline: Path | None = None
    add_noqa: bool = False
    exit_zero: bool = False
    quiet: bool = False
    verbose: bool = False

    @classmethod
    def of(cls, command: str, paths: Sequence[str], given: Mapping[str, object]) -> Request:
        """The request of `command` run on `paths` (as given: `-` is standard input, `./-` a
        file) with the options `given` (by field; typed by typer, or strings from the lean
        parser); every option not given has its default, or for a command that does not take
        it, the value that command runs with."""
        mode = Mode(command)
        values: dict[str, object] = {}
        for option in OPTIONS:
            if not option.names:
                continue  # a configuration key only
            value = given.get(option.field) if option.takes(command) else None
            if option.mode is not None:
                mode = option.mode if value else mode
            else:
                values[option.field] = option.value(command, value)
        # `audit` sums up files it discovers and has no way to read standard input: its `-`
        # is a path like any other
        stdin = STDIN in paths and mode is not Mode.AUDIT
        return cls([Path(path) for path in paths], mode, stdin=stdin,
                   **values)  # type: ignore[arg-type]

    @property
    def show_diff(self) -> bool:
        return self.diff or self.mode.shows_diff

    @property
    def gate(self) -> Gate:
        return Gate(self.baseline, self.write_baseline, self.add_noqa, self.exit_zero)

