"""A baseline: the findings a team has accepted for now, so that `check` fails only on new ones.

A finding is known by its file (relative to the baseline file's folder), its rule and the
text of its line with the whitespace normalised, never by its line number: code added above
it, or re-indented around it, does not make it new. Findings alike in all three are counted,
so a second identical call on another line is new while the first is accepted. A baseline
entry no current finding matches is reported as fixed (or stale), and never fails the run.

The file is JSON, sorted, with paths relative to it and `/`-separated, so that it diffs well
and means the same from any working directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import stat
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from neuron_migrate.gate.lines import lines_of
from neuron_migrate.model import BY_POSITION, FileResult, Finding

if TYPE_CHECKING:
    from neuron_migrate.runner import RunResult

VERSION = 1
LIMIT = 256 * 1024 * 1024
"""The largest baseline read: far above any team's (a finding is a line of about 150 bytes),
and a name that is a pipe or `/dev/zero` is refused rather than waited on or read forever."""


class BaselineError(Exception):
    """A baseline file that cannot be read or written; the message names it."""


@dataclass(frozen=True, order=True)
class Key:
    path: str
    rule_id: str
    source: str


@dataclass(frozen=True)
class Outcome:
    result: RunResult
    accepted: int
    """Findings the baseline matched, dropped from the result."""
    stale: tuple[tuple[Key, int], ...]
    """Baseline entries (with how many of each) that no current finding matched."""


def normalised(line: str) -> str:
    return " ".join(line.split())


class _Sources:
    """The text of each finding's line: from the result's own copy of the file, else read
    again (a notebook's finding from its cell)."""

    def __init__(self) -> None:
        self._lines: dict[tuple[str, int | None], list[str]] = {}

    def line(self, file: FileResult, finding: Finding) -> str:
        key = (file.path, finding.cell)
        if key not in self._lines:
            self._lines[key] = self._read(file, finding.cell)
        lines = self._lines[key]
        return normalised(lines[finding.line - 1]) if 0 < finding.line <= len(lines) else ""

    @staticmethod
    def _read(file: FileResult, cell: int | None) -> list[str]:
        data = file.original
        if data is None:
            try:
                data = Path(file.path).read_bytes()
            except OSError:
                return []
        if cell is not None:
            from neuron_migrate.notebooks.json_file import NotebookError, read_notebook

            try:
                cells = read_notebook(file.path, data).cells
            except NotebookError:
                return []
            return lines_of(cells[cell].text, python=True) if cell < len(cells) else []
        text = data.decode("utf-8", "replace").removeprefix("\ufeff")
        return lines_of(text, python=file.path.endswith((".py", ".pyi")))


def _relative(path: str, base: Path) -> str:
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to(base).as_posix()
    except ValueError:
        return Path(path).as_posix()


def keyed(result: RunResult, base: Path) -> Iterator[tuple[FileResult, Finding, Key]]:
    """Every finding of the run with its key, file by file in the report's order."""
    sources = _Sources()
    for file in result.files:
        relative = _relative(file.path, base)
        for finding in sorted(file.findings, key=BY_POSITION):
            yield file, finding, Key(relative, finding.rule_id, sources.line(file, finding))


def write_baseline(path: Path, result: RunResult) -> int:
    """Write every current finding to `path`; how many."""
    counts = Counter(key for _, _, key in keyed(result, path.resolve().parent))
    entries = [{"path": k.path, "rule_id": k.rule_id, "source": k.source, "count": n}
               for k, n in sorted(counts.items())]
    document = {"version": VERSION, "tool": "neuron-migrate", "findings": entries}
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    try:
        _replace(path, text.encode("utf-8"))
    except OSError as error:
        raise BaselineError(f"{path}: cannot write the baseline "
                            f"({error.strerror or error})") from None
    return sum(counts.values())


def _replace(path: Path, data: bytes) -> None:
    """Write the baseline through a temporary file and a rename: a team's accepted findings
    are never left half-written by a full disk or a kill (the previous baseline stays). A
    symlink is written through, as an editor would."""
    from neuron_migrate.files import temporary
    from neuron_migrate.files.fileio import write_all

    target = path.resolve()
    fd, name = temporary.create(target.parent)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
            os.fchmod(fd, _mode(target))
        finally:
            os.close(fd)
        os.replace(name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise


def _mode(target: Path) -> int:
    """The baseline's permissions: those it had, else what a new file gets."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def read_baseline(path: Path) -> Counter[Key]:
    from neuron_migrate.files.bounded import Refused, read_bounded

    try:
        document = json.loads(read_bounded(path, LIMIT).decode("utf-8"))
    except Refused as error:
        raise BaselineError(f"{error}; not read as a baseline") from None
    except OSError as error:
        raise BaselineError(f"{path}: cannot read the baseline "
                            f"({error.strerror or error})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        where = f":{error.lineno}" if isinstance(error, json.JSONDecodeError) else ""
        raise BaselineError(f"{path}{where}: not a baseline (invalid JSON: {error}); write "
                            "one with `check --write-baseline`") from None
    if not isinstance(document, dict) or document.get("version") != VERSION or \
            not isinstance(document.get("findings"), list):
        raise BaselineError(f"{path}: not a version-{VERSION} neuron-migrate baseline; write "
                            "one with `check --write-baseline`")
    counts: Counter[Key] = Counter()
    for index, entry in enumerate(document["findings"]):
        try:
            counts[Key(str(entry["path"]), str(entry["rule_id"]), str(entry["source"]))] += \
                int(entry.get("count", 1))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise BaselineError(f"{path}: entry {index} of `findings` needs `path`, "
                                "`rule_id`, `source` and a whole `count`") from None
    return counts


def apply_baseline(result: RunResult, path: Path, accepted: Counter[Key]) -> Outcome:
    """The run without the findings the baseline accepts. A file whose every change is
    accepted no longer counts as one that would change."""
    remaining = Counter(accepted)
    kept: dict[str, list[Finding]] = {}
    dropped = 0
    for file, finding, key in keyed(result, path.resolve().parent):
        if remaining[key] > 0:
            remaining[key] -= 1
            dropped += 1
        else:
            kept.setdefault(file.path, []).append(finding)
    files = tuple(_without(file, kept.get(file.path, [])) for file in result.files)
    stale = tuple((key, n) for key, n in sorted(remaining.items()) if n > 0)
    return Outcome(dataclasses.replace(result, files=files), dropped, stale)


def _without(file: FileResult, findings: list[Finding]) -> FileResult:
    if len(findings) == len(file.findings):
        return file
    still_changes = any(f.applied for f in findings)
    return dataclasses.replace(
        file, findings=tuple(findings),
        new_source=file.new_source if still_changes else None,
        modified=file.modified and still_changes)


def describe_stale(path: Path, stale: Iterable[tuple[Key, int]], limit: int = 10) -> list[str]:
    """Lines saying which baseline entries were not found (fixed, or changed beyond
    recognition), for the report."""
    stale = list(stale)
    total = sum(n for _, n in stale)
    if not total:
        return []
    lines = [f"{path}: {total} baseline finding{'s' if total != 1 else ''} no longer found "
             "(fixed, or the line changed); `--write-baseline` drops them"]
    for key, n in stale[:limit]:
        times = f" (x{n})" if n > 1 else ""
        lines.append(f"  {key.path}: {key.rule_id}{times}: {key.source}")
    if len(stale) > limit:
        lines.append(f"  ... and {len(stale) - limit} more")
    return lines
