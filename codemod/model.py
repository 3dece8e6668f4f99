"""Plain data passed between the stages.

Everything here is immutable and picklable so that files can be migrated in worker processes
and merged in a stable order.
"""

from __future__ import annotations

import ast
import enum
import operator
import sys
import warnings
from dataclasses import dataclass, field

from neuron_migrate.engine_size import DEFAULT_ENGINE_SIZE
from neuron_migrate.wording import QUOTE_LIMIT, clipped


class Kind(str, enum.Enum):
    """How much a change can be trusted; decides whether `apply` writes it."""

    FIX = "fix"
    UNSAFE_FIX = "unsafe-fix"
    REVIEW = "review"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Finding:
    """One change (or one place needing review) in one file.

    `line` and `column` are 1-based and refer to the original file. `suggestion` carries the
    replacement code for unsafe fixes that were not applied, so the report can show it.
    """

    path: str
    line: int
    column: int
    rule_id: str
    kind: Kind
    message: str
    applied: bool = False
    suggestion: str | None = None
    cell: int | None = None
    """For notebooks: the 0-based index of the cell in the notebook's `cells` (markdown cells
    counted); `line` is then the line in it."""
    cell_id: str | None = None
    file_line: int | None = None
    """For notebooks: the line of the `.ipynb` file that holds this cell line, for viewers
    that open the file itself (code scanning)."""

    def __post_init__(self) -> None:
        # A repository's findings repeat a few messages thousands of times; one shared copy of
        # each keeps a large run's results small (and pickles each once per batch from -j).
        object.__setattr__(self, "message", sys.intern(clipped(self.message)))


BY_POSITION = operator.attrgetter("line", "column", "rule_id")
"""The order reports list a file's findings in: by line, column, then rule."""


@dataclass(frozen=True)
class FileResult:
    """What happened to one file.

    `new_source` is None when the file is unchanged (or could not be migrated). `error` names
    what went wrong, with a line number where there is one; such a file is never written.
    """

    path: str
    findings: tuple[Finding, ...] = ()
    original: bytes | None = None
    new_source: bytes | None = None
    encoding: str = "utf-8"
    error: str | None = None
    skipped: str | None = None
    instances: tuple[tuple[int, str], ...] = ()
    """The Neuron instance types the file names, with their lines (the detected target)."""
    modified: bool = False
    """Set when the file changes but `new_source` is absent: the sources were dropped to save
    memory, or (a plain `check`) the new file was never generated."""
    note: str | None = None
    """Something the write did that the user should know besides the change itself (a file
    with hard links became a file of its own)."""
    helpers: tuple[str, ...] = ()
    """With `helpers-module`: the helpers the new file imports from that module (with the
    ones they call), which the run writes there (`neuron_migrate.helpers_module`)."""
    helpers_module: str | None = None
    """That module's absolute path."""
    ends: tuple[tuple[int, int, int, int], ...] = ()
    """(line, column, end line, end column) of the code each finding starting at (line,
    column) spans, worked out where the file was migrated for the reports that hand fixes on
    (`neuron_migrate.report.edits`), and kept with the result in the cache: a warm run's
    report need not parse the file again. Empty when no such report was asked for."""
    changes: tuple[tuple[int, int, int, int], ...] = ()
    """(first, end, new first, new end), 0-based and end-exclusive, of each block of lines the
    rewrite replaces, deletes or inserts (a line diff of `original` and `new_source`): found
    beside `ends`, for the same reports, so a warm run's report need not align the two
    texts again. Empty when not worked out."""

    def __post_init__(self) -> None:
        for name in ("error", "skipped", "note"):  # they may quote a whole line of input
            text = getattr(self, name)
            if text is not None and len(text) > QUOTE_LIMIT:
                object.__setattr__(self, name, clipped(text))

    @property
    def changed(self) -> bool:
        return self.modified or (self.new_source is not None and self.new_source != self.original)


SOURCES = ("xla", "cuda")
"""What `from` may name: the stacks neuron-migrate migrates code from (read by the option's
table and the configuration alike, so it lives below both)."""


@dataclass(frozen=True)
class Options:
    """What the user asked for, as the per-file runner sees it."""

    unsafe_fixes: bool = False
    compile: bool = True
    annotate: bool = False
    select: frozenset[str] = field(default_factory=frozenset)
    ignore: frozenset[str] = field(default_factory=frozenset)
    sources: frozenset[str] = frozenset({"xla"})
    """The stacks migrated from: "xla" always; "cuda" only when asked (`--from cuda`), since
    many repositories keep their CUDA path on purpose."""
    target: str | None = None
    """The hardware named by --target or the configuration (trn2, trn3, trn1, inf2); None
    when not given. Trn1/Inf2 stop every rewrite toward TorchNeuron (neuron_migrate.target)."""
    helpers_module: str | None = None
    """The absolute path of the module migrated files import their helpers from
    (`helpers-module`), or None: each file defines the helpers it uses."""
    max_engine_size: int = DEFAULT_ENGINE_SIZE
    """The most bytes of code the engine takes in one file (`max-engine-size`,
    `neuron_migrate.engine_size`): past it a file with XLA-era code is refused."""

    def enabled(self, rule_id: str) -> bool:
        if self.select and not any(rule_id.startswith(s) for s in self.select):
            return False
        return not any(rule_id.startswith(i) for i in self.ignore)


def parsed(path: str, data: bytes) -> ast.Module | FileResult:
    """The file's `ast`, or the result reporting that it cannot be parsed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences are the user's business
            return ast.parse(data, filename=path)
    except (SyntaxError, ValueError) as error:  # ValueError: null bytes, before Python 3.12
        return unparsable(path, data, error)


def unparsable(path: str, data: bytes, error: SyntaxError | ValueError) -> FileResult:
    """A file `ast.parse` refused (a syntax error, or null bytes: a ValueError before Python
    3.12), worded the same on every Python."""
    line = getattr(error, "lineno", None)
    if not line and b"\0" in data:  # no Python says where the null byte is: find it
        line = data.count(b"\n", 0, data.index(b"\0")) + 1
    where = f"{path}:{line}" if line else path
    detail = error.msg if isinstance(error, SyntaxError) else str(error)
    return FileResult(path, original=data, error=f"{where}: cannot parse ({detail}); file skipped")
