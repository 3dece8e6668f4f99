"""What the result being computed for a file saw of the file system besides that file.

Most of a file's result follows from its content and its configuration alone, which is what
the result cache (`neuron_migrate.cache`) keys on. A few readers look elsewhere: a launch line
(NM816) looks for the script it starts and reads it, a Dockerfile reads the requirements file
it installs from. They ask through the functions here, which answer as `os.path` does and,
while a result is being computed for the cache (`recording`), note each question with its
answer. A kept result is taken back only if every question still gets the same answer
(`unchanged`): the computation would see exactly what it saw.

Readers whose questions are too many to replay (a whole repository searched for who launches
a script, the package folders a `helpers-module` import climbs) call `unrepeatable`, and
their result is not kept at all.

One log per process: a worker computes one file at a time.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Union

Observation = list  # [question, path, answer]: JSON as it is
Answer = Union[bool, str, list, None]

_log: dict[tuple[str, str], Answer] | None = None
_unrepeatable = False


@contextlib.contextmanager
def recording() -> Iterator[list[Observation]]:
    """Notes the questions asked inside; the list is filled when the block ends, and left
    empty with `unrepeatable` set when they cannot be replayed."""
    global _log, _unrepeatable
    observed: list[Observation] = []
    _log, _unrepeatable = {}, False
    try:
        yield observed
    finally:
        log, _log = _log, None
        observed += [[question, path, answer] for (question, path), answer in log.items()]


def was_unrepeatable() -> bool:
    """Whether the last `recording` met a reader that cannot be replayed."""
    return _unrepeatable


def unrepeatable() -> None:
    """Called by a reader whose view of the file system is too wide to note."""
    global _unrepeatable
    _unrepeatable = True


def _note(question: str, path: str, answer: Answer) -> None:
    if _log is not None:
        _log[(question, path)] = answer


def _is_file(path: str) -> bool:
    return os.path.isfile(path)


def _is_dir(path: str) -> bool:
    return os.path.isdir(path)


def _resolved(path: str) -> str:
    try:
        return str(Path(path).resolve())
    except (OSError, RuntimeError):
        return ""


def _stamp(path: str) -> list[int] | None:
    """What decides whether a file read again would read the same: its size and
    modification time (as `spawner_at` keeps what it read by them)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return [status.st_mtime_ns, status.st_size]


_QUESTIONS: dict[str, Callable[[str], Answer]] = {
    "file": _is_file, "dir": _is_dir, "resolve": _resolved, "stamp": _stamp}
"""Questions this module answers again itself; the launch scanner's own ("roots", "tree")
are answered by the caller of `unchanged` (this module imports nothing above it)."""


def recording_now() -> bool:
    """Whether a result is being computed for the cache (a costly answer is then worth it)."""
    return _log is not None


def note_tree(root: str, answer: str | None) -> None:
    """The launch search of a script read every file below `root`: `answer` is a digest of
    their stamps, None when one changed too recently to tell (nothing can then be replayed)."""
    if answer is None:
        unrepeatable()
    _note("tree", root, answer)


def note_roots(folder: str, roots: list[str]) -> None:
    """The roots a launch line in `folder` is resolved from: the git work tree holding it
    (a `.git` appearing above it moves them)."""
    _note("roots", folder, roots)


def is_file(path: str | os.PathLike[str]) -> bool:
    answer = _is_file(str(path))
    _note("file", str(path), answer)
    return answer


def is_dir(path: str | os.PathLike[str]) -> bool:
    answer = _is_dir(str(path))
    _note("dir", str(path), answer)
    return answer


def resolved(path: Path) -> Path:
    """`path.resolve()`: where a symlink leads is part of what was seen."""
    answer = path.resolve()
    _note("resolve", str(path), str(answer))
    return answer


def stamp(path: str | os.PathLike[str]) -> os.stat_result:
    """`os.stat(path)`, before the file is read (raises OSError as it does)."""
    try:
        status = os.stat(path)
    except OSError:
        _note("stamp", str(path), None)
        raise
    _note("stamp", str(path), [status.st_mtime_ns, status.st_size])
    return status


def unchanged(observed: list[Observation],
              more: Mapping[str, Callable[[str], Answer]] | None = None) -> bool:
    """Whether every question noted gets the same answer now; `more` answers the questions
    of readers above this module."""
    questions = {**_QUESTIONS, **(more or {})}
    try:
        return all(questions[question](path) == answer for question, path, answer in observed)
    except (KeyError, TypeError, ValueError):  # not a list this module wrote
        return False
