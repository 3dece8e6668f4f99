"""Every option of `apply`, `check`, `scan` and `audit`, and every configuration key, defined
once in `OPTIONS`.

Four readers need each option (the typer commands, the lean parser a pre-commit hook goes
through, the configuration's keys, the request a run executes), and copies kept by hand drift:
an option added to one is silently missing from another. So each reads this table:
`neuron_migrate.cli` builds the typer commands' parameters from it, `neuron_migrate.entry`
its lean parser, `neuron_migrate.config` the keys it accepts, and `Request.of` the request, so
an option is added by adding one `Option` here (and using its value).

Imported on the lean start-up path, before anything else of a `check`: nothing here imports
more than the standard library.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
import dataclasses
from dataclasses import dataclass
from pathlib import Path

COMMANDS = ("apply", "check", "scan", "audit")
"""The commands that migrate (or look at) files and take the options below."""


class Mode(str, enum.Enum):
    """What a run does with the files: the command, and for `apply` and `scan` whether they
    write. Its value is what the JSON report's `mode` says."""

    APPLY = "apply"
    DRY_RUN = "dry-run"
    CHECK = "check"
    SCAN = "scan"
    SCAN_FIX = "scan --fix"
    AUDIT = "audit"

    def __str__(self) -> str:
        return self.value

    @property
    def writes(self) -> bool:
        return self in (Mode.APPLY, Mode.SCAN_FIX)

    @property
    def scan_only(self) -> bool:
        """Dependency files only, never code."""
        return self in (Mode.SCAN, Mode.SCAN_FIX)

    @property
    def shows_diff(self) -> bool:
        return self in (Mode.DRY_RUN, Mode.SCAN_FIX)


class Kind(enum.Enum):
    """How an option is spelt on the command line."""

    SWITCH = "switch"
    """`--force`: present or not."""
    TOGGLE = "toggle"
    """`--compile` / `--no-compile`: None when neither is given (the configuration decides)."""
    VALUE = "value"
    """`--jobs N`: one value; the last one given counts."""
    LIST = "list"
    """`--select RULE`: repeatable, every value kept."""


@dataclass(frozen=True)
class Key:
    """An option's configuration key, and how its value is checked
    (`neuron_migrate.config.READERS` has one reader for each `check`)."""

    name: str
    check: str


@dataclass(frozen=True)
class Option:
    """One option: its names on the command line (none for a configuration-only key), the
    `Request` field it fills (and `Config` field, for a key), its help, the commands that
    take it and its configuration key."""

    field: str
    names: tuple[str, ...]
    help: str = ""
    kind: Kind = Kind.SWITCH
    commands: frozenset[str] = frozenset(COMMANDS)
    type: type = str
    """The value's type (VALUE and LIST): str, int or Path."""
    metavar: str | None = None
    negation: str | None = None
    """The name that turns a TOGGLE off."""
    default: object = None
    fixed: Mapping[str, object] = dataclasses.field(default_factory=dict)
    """The value a command that does not take the option runs with (else None, or False for
    a switch)."""
    sets: bool = True
    """What a SWITCH sets its field to (False for `--no-default-excludes`)."""
    mode: Mode | None = None
    """A SWITCH that chooses the mode instead of filling a field (`apply --dry-run`)."""
    choices: str | None = None
    """The values accepted, by name (see `choices`): checked before the run starts."""
    minimum: int | None = None
    """The least number an int option accepts."""
    lower: bool = False
    """Case does not matter: the value is taken in lower case (`--target TRN2`)."""
    key: Key | None = None
    split: bool = False
    """A LIST whose values may each hold several, comma-separated (`--from cuda,xla`)."""
    completes: bool = False
    """The shell completes the value from `choices`."""
    show_default: bool = False

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every name the command line may use."""
        return (*self.names, self.negation) if self.negation else self.names

    def takes(self, command: str) -> bool:
        return command in self.commands

    def value(self, command: str, given: object) -> object:
        """The value the request holds: from what was given (typed by typer, or a string
        from the lean parser; None or False when not given), or the default, or for a
        command that does not take the option, the value that command runs with."""
        if not self.takes(command):
            return self.fixed.get(command, False if self.kind is Kind.SWITCH else None)
        if self.kind is Kind.SWITCH:
            return self.sets if given else not self.sets
        if given is None:
            return self.default
        if self.kind is Kind.LIST:
            values = [str(v) for v in given]  # type: ignore[attr-defined]
            if self.split:
                return [part.strip() for v in values for part in v.split(",") if part.strip()]
            return values
        if self.lower:
            return str(given).lower()
        return self.type(given) if self.kind is Kind.VALUE else given

    def accepts(self, value: str) -> bool:
        """Whether a value given is one the run can use (one that is not is typer's to
        report)."""
        if self.type is int:
            number = value.isdigit() and not value.startswith("0") and value.isascii()
            return number and (self.minimum is None or int(value) >= self.minimum)
        if self.key is not None and self.key.check == "size":
            from neuron_migrate.engine_size import parse_size

            return parse_size(value) is not None
        if self.choices is None:
            return True
        allowed = choices(self.choices)
        if self.split:
            return all(part.strip() in allowed for part in value.split(",") if part.strip())
        return (value.lower() if self.lower else value) in allowed


def choices(name: str) -> Collection[str]:
    """The values an option with these `choices` accepts; imported when first asked."""
    if name == "formats":
        from neuron_migrate.report.formats import RUN_FORMATS

        return RUN_FORMATS
    if name == "targets":
        from neuron_migrate.target import TARGETS

        return TARGETS
    if name == "sources":
        from neuron_migrate.model import SOURCES

        return SOURCES
    raise KeyError(name)


_MIGRATING = frozenset({"apply", "check", "scan"})
_CODE = frozenset({"apply", "check"})
_GATED = frozenset({"check", "scan"})
_WRITING = frozenset({"apply", "scan"})

OPTIONS: tuple[Option, ...] = (
    Option("dry_run", ("--dry-run",), "Write nothing; show the diff and explain every change.",
           commands=frozenset({"apply"}), mode=Mode.DRY_RUN),
    Option("fix", ("--fix",), "Rewrite pins in requirements files, pyproject.toml and "
           "Dockerfile/shell pip lines to the native set (lockfiles are never edited).",
           commands=frozenset({"scan"}), mode=Mode.SCAN_FIX),
    Option("fmt", ("--format",), "Report format: {choices}.", Kind.VALUE, metavar="FORMAT",
           default="text", choices="formats", completes=True, show_default=True),
    Option("output", ("--output", "-o"), "Write the report to this file; the terminal still "
           "shows the progress and the summary.", Kind.VALUE, type=Path, metavar="FILE"),
    Option("exclude", ("--exclude",), "Skip paths matching this gitignore-style glob "
           "(repeatable); replaces the configuration's `exclude` and the default excludes (use "
           "--extend-exclude to add).", Kind.LIST, metavar="GLOB",
           key=Key("exclude", "patterns")),
    Option("extend_exclude", ("--extend-exclude",), "Also skip paths matching this "
           "gitignore-style glob (repeatable), on top of the excludes in force.", Kind.LIST,
           metavar="GLOB", key=Key("extend-exclude", "patterns")),
    Option("force_exclude", ("--force-exclude",), "Apply the excludes to paths named on the "
           "command line too (by default a file named is checked even if excluded, as with "
           "ruff); for pre-commit.", Kind.TOGGLE, negation="--no-force-exclude",
           key=Key("force-exclude", "bool")),
    Option("respect_gitignore", ("--respect-gitignore",), "Skip what .gitignore files and "
           ".git/info/exclude ignore (on by default).", Kind.TOGGLE,
           negation="--no-respect-gitignore", key=Key("respect-gitignore", "bool")),
    Option("default_excludes", ("--no-default-excludes",), "Walk build/, dist/, _build/ and "
           "buck-out/ at the project root too.", sets=False),
    Option("no_cache", ("--no-cache",), "Neither read results kept by earlier runs nor keep "
           "this run's (they live in .neuron-migrate-cache/, or cache-dir / "
           "$NEURON_MIGRATE_CACHE_DIR)."),
    Option("config", ("--config",), "Use this configuration (a pyproject.toml or a "
           "neuron-migrate.toml) for every file instead of each file's nearest one; its "
           "relative paths are read from the working directory.", Kind.VALUE, type=Path,
           metavar="FILE"),
    Option("select", ("--select",), "Only these rule ids or prefixes (comma-separated or "
           "repeated, e.g. NM1,NM2).", Kind.LIST, metavar="RULE", key=Key("select", "rules")),
    Option("ignore", ("--ignore",), "Skip these rule ids or prefixes (comma-separated or "
           "repeated).", Kind.LIST, metavar="RULE", key=Key("ignore", "rules")),
    Option("diff", ("--diff",), "Show the diff of each file too.",
           commands=frozenset({"check"})),
    # `check` takes unsafe fixes as the configuration has them: it reports what `apply` writes
    Option("unsafe_fixes", ("--unsafe-fixes",), "Also apply fixes that may change behaviour "
           "(see `rules`).", Kind.TOGGLE, commands=_WRITING, negation="--no-unsafe-fixes",
           fixed={"audit": False}, key=Key("unsafe-fixes", "bool")),
    Option("compile", ("--compile",), "Add model.compile(backend=\"neuron\", dynamic=False) "
           "after the training model is placed on the device (NM503; on by default).",
           Kind.TOGGLE, commands=_CODE, negation="--no-compile", key=Key("compile", "bool")),
    # the other commands run without review comments, whatever the configuration says
    Option("annotate", ("--annotate",), "Put a `# neuron-migrate: NMxxx ...` comment above "
           "each line that needs review.", Kind.TOGGLE, commands=frozenset({"apply"}),
           negation="--no-annotate", fixed={"check": False, "scan": False, "audit": False},
           key=Key("annotate", "bool")),
    Option("jobs", ("--jobs", "-j"), "Worker processes (default: all cores; at most four per "
           "core and one per file).", Kind.VALUE, type=int, metavar="N", minimum=1),
    Option("target", ("--target",), "The hardware the code runs on: trn2, trn3, trn1 or "
           "inf2. TorchNeuron supports Trn2/Trn3 only; for trn1 and inf2 nothing is rewritten "
           "and the run says why (default: `target` in the configuration; else Trn2/Trn3 is "
           "assumed, and the summary names the instance types the files mention).",
           Kind.VALUE, commands=_MIGRATING, metavar="HARDWARE", choices="targets", lower=True,
           key=Key("target", "target")),
    Option("force", ("--force",), "Write files that have uncommitted changes in git too.",
           commands=_WRITING),
    Option("changed_since", ("--changed-since",), "Only files changed since this git revision "
           "(and new untracked files).", Kind.VALUE, commands=frozenset(COMMANDS) - {"scan"},
           metavar="REV"),
    Option("stdin_filename", ("--stdin-filename",), "With `-` as the path: the name of the "
           "file whose source is read from standard input. It says what the file is (Python, "
           "notebook, requirements...); the configuration, excludes and per-file-ignores apply "
           "to it as to NAME given as a path.", Kind.VALUE, commands=_MIGRATING,
           metavar="NAME"),
    Option("sources", ("--from",), "Also migrate code written for this stack: `cuda` turns "
           "CUDA code (.cuda(), torch.cuda.*, nccl, autocast(\"cuda\"), ...) into neuron code "
           "(repeatable or comma-separated; XLA code is always migrated).", Kind.LIST,
           commands=_MIGRATING, metavar="STACK", choices="sources", split=True,
           key=Key("from", "sources")),
    Option("max_engine_size", ("--max-engine-size",), "Refuse (as an error naming the file) "
           "a file with XLA-era code larger than this: bytes, or with a unit (512KiB, 1MiB; "
           "default 256KiB). The engine takes about 25-30 s per MB of such code; a file "
           "without XLA-era code is never refused.", Kind.VALUE, commands=_CODE | {"audit"},
           metavar="SIZE", key=Key("max-engine-size", "size")),
    Option("baseline", ("--baseline",), "Fail only on findings not in this baseline (written "
           "by --write-baseline); findings matched by file, rule and the text of their line, "
           "not its number. Baseline entries no longer found are listed as fixed.", Kind.VALUE,
           commands=_GATED, type=Path, metavar="FILE"),
    Option("write_baseline", ("--write-baseline",), "Write every current finding to this JSON "
           "baseline and exit 0 (unless errors).", Kind.VALUE, commands=_GATED, type=Path,
           metavar="FILE"),
    Option("add_noqa", ("--add-noqa",), "Acknowledge every current review item with a "
           "`# neuron-migrate: reviewed[NMxxx]` comment where it is reported (never changing "
           "code), then exit 0; fixes are not acknowledged.", commands=frozenset({"check"})),
    Option("exit_zero", ("--exit-zero",), "Exit 0 even when findings are reported; errors "
           "still exit 2.", commands=_GATED),
    Option("quiet", ("--quiet", "-q"), "No progress, text report or summary: only errors, and "
           "the report a --format asked for (to --output, or else to standard output)."),
    Option("verbose", ("--verbose", "-v"), "Also list files with nothing to migrate and "
           "skipped paths."),
    Option("per_file_ignores", (), commands=frozenset(),
           key=Key("per-file-ignores", "per-file-ignores")),
    Option("helpers_module", (), commands=frozenset(),
           key=Key("helpers-module", "helpers-module")),
    Option("cache_dir", (), commands=frozenset(), key=Key("cache-dir", "folder")),
)
"""In the order each command's help lists them."""


def taken_by(command: str) -> tuple[Option, ...]:
    """The options `command` takes, in the order its help lists them."""
    return tuple(option for option in OPTIONS if option.takes(command))


KEYS: dict[str, Option] = {option.key.name: option for option in OPTIONS if option.key}
"""The configuration's keys."""
