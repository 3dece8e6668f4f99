"""The engine's own size cap: a lower limit than the one on reading a file, for files that
need the engine.

A file without XLA-era code is settled by a token search at any size; one with it costs
the engine about 25-30 s per MB of dense code (linear, but minutes for a generated
multi-megabyte file), while real XLA-era training scripts and libraries stay under ~130 KB.
So such a file over `max-engine-size` is refused with an error that names the setting,
rather than holding a run (or a pre-commit hook) for minutes.

Imported on the lean start-up path: nothing here imports more than the standard library.
"""

from __future__ import annotations

import re

KiB = 1024
DEFAULT_ENGINE_SIZE = 256 * KiB

_UNITS = {"": 1, "b": 1, "k": KiB, "kb": KiB, "kib": KiB, "m": KiB ** 2, "mb": KiB ** 2,
          "mib": KiB ** 2}
_SIZE = re.compile(r"([0-9]{1,15})\s*([a-z]*)")


def parse_size(value: object) -> int | None:
    """A size given as a number of bytes (`262144`, or an integer in the configuration) or
    with a binary unit (`512KiB`, `2MiB`; `KB`/`K` are taken as KiB, as in most tools'
    size options); None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if not isinstance(value, str):
        return None
    match = _SIZE.fullmatch(value.strip().lower())
    if match is None or match.group(2) not in _UNITS or not match.group(1).isascii():
        return None
    size = int(match.group(1)) * _UNITS[match.group(2)]
    return size if size > 0 else None


def shown(size: int) -> str:
    """A size as people read it: `256 KiB`, `1.5 MiB`, or bytes below a KiB."""
    if size >= KiB ** 2:
        return f"{size / KiB ** 2:.3g} MiB"
    if size >= KiB:
        return f"{size / KiB:.4g} KiB"
    return f"{size} bytes"


def over_engine_limit(name: str, size: int, limit: int) -> str | None:
    """The error for a file whose XLA-era code is `size` bytes, if that is over `limit`."""
    if size <= limit:
        return None
    return (f"{name}: {shown(size)} ({size} bytes) of code with XLA-era tokens is over the "
            f"engine's limit of {shown(limit)} ({limit} bytes); file not migrated{RAISE_IT}")


RAISE_IT = " (raise the limit with --max-engine-size or `max-engine-size` in the configuration)"
"""How every refusal ends: `audit`, which passes over other errors of the migration of a file
it has read, tells this one by it."""
