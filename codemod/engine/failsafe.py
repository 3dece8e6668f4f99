"""One file's problem costs that file, never the run."""

from __future__ import annotations

from collections.abc import Callable

from neuron_migrate.model import FileResult


def never_raise(path: str, data: bytes, work: Callable[[], FileResult],
                expected: tuple[type[Exception], ...] = ()) -> FileResult:
    """Run one file's work so that a problem costs that file, never the run. `expected`
    exceptions carry a message for the user; anything else is reported as a bug."""
    try:
        return work()
    except expected as error:
        return FileResult(path, original=data, error=str(error))
    except RecursionError:
        return FileResult(path, original=data,
                          error=f"{path}: nested too deeply to analyse; file skipped")
    except Exception as error:
        return FileResult(path, original=data,
                          error=f"{path}: internal error ({type(error).__name__}: {error}); "
                                "file left untouched, please report this")
