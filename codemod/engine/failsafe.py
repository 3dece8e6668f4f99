"""One file's problem costs that file, never the run."""

from __future__ import annotations

import io
import re
import sys
from collections import Counter
from collections.abc import Callable

from neuron_migrate.files import outside
from neuron_migrate.model import FileResult


def never_raise(path: str, data: bytes, work: Callable[[], FileResult],
                expected: tuple[type[Exception], ...] = ()) -> FileResult:
    """Run one file's work so that a problem costs that file, never the run. `expected`
    exceptions carry a message for the user; so do the limits of Python's own readers (an
    expression nested deeper than its parser's stack, a number longer than it converts);
    anything else is reported as a bug."""
    try:
        return work()
    except expected as error:
        return FileResult(path, original=data, error=str(error))
    except (RecursionError, MemoryError):  # the parser runs out of stack as a MemoryError
        not_kept()
        return FileResult(path, original=data, error=too_deep(path, data))
    except Exception as error:
        not_kept()
        return FileResult(path, original=data, error=beyond_limits(path, data, error) or
                          f"{path}: internal error ({type(error).__name__}: {error}); "
                          "file left untouched, please report this")


def not_kept() -> None:
    """Called where a file's work ended in an exception nobody expected: its result is not
    kept by the result cache. A syntax error follows from the file's bytes and is kept like
    any result; running out of stack or memory may follow from the machine instead (the
    depth a worker's stack starts at, what else the process holds), and a bug is better met
    again than remembered."""
    outside.unrepeatable()


def too_deep(path: str, data: bytes) -> str:
    """What a file nested too deeply to analyse reports, with the line that is the likeliest
    cause: the one holding the most operators and brackets."""
    line = _busiest_line(data)
    return f"{path}{f':{line}' if line else ''}: nested too deeply to analyse; file skipped"


def beyond_limits(path: str, data: bytes, error: Exception) -> str | None:
    """The message for a number longer than Python converts to an int (a JSON notebook or
    lock file, a TOML file: their readers raise a bare ValueError), or None for any other
    error."""
    if not isinstance(error, ValueError) or "integer string conversion" not in str(error):
        return None
    limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()  # 3.10 before 3.10.7
    match = re.search(rb"[0-9]{%d,}" % (limit + 1), data)
    if match is None:
        return f"{path}: a number longer than Python reads ({limit} digits); file skipped"
    line = data.count(b"\n", 0, match.start()) + 1
    return (f"{path}:{line}: a number of {len(match.group())} digits, longer than Python "
            f"reads ({limit}); file skipped")


def _busiest_line(data: bytes) -> int | None:
    import tokenize  # only for such a file

    operators: Counter[int] = Counter()
    try:
        for token in tokenize.tokenize(io.BytesIO(data).readline):
            if token.type == tokenize.OP or token.string in ("not", "await", "lambda"):
                operators[token.start[0]] += 1
    except (SyntaxError, tokenize.TokenError, ValueError):  # counted up to the problem
        pass
    return operators.most_common(1)[0][0] if operators else None
