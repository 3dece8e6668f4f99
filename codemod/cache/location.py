"""Where a run's cache is, and whether it has one.

By default `.neuron-migrate-cache/` in the project root (the folder of the configuration
that applies where the run starts, else the working directory), as ruff keeps
`.ruff_cache/` beside its configuration: the cache of a repository stays with it, and
discovery always skips a folder of that name. `cache-dir` in the configuration (relative
to its folder) or the environment variable below move it (CI restores it between jobs);
`--no-cache` (or the environment variable `OFF`) turns it off.
"""

from __future__ import annotations

import os
from pathlib import Path

ENVIRONMENT = "NEURON_MIGRATE_CACHE_DIR"
OFF = "NEURON_MIGRATE_NO_CACHE"
"""Set (to anything but "" or "0"), the same as `--no-cache`: for CI jobs and test suites
that must not share results between runs."""
DEFAULT_NAME = ".neuron-migrate-cache"


def turned_off() -> bool:
    return os.environ.get(OFF, "") not in ("", "0")


def cache_folder(root: Path | None, configured: str | None) -> Path:
    """The folder: the environment's, else the configuration's (relative to `root`, the
    configuration's folder), else the default in `root` (the working directory if None)."""
    base = root if root is not None else Path.cwd()
    given = os.environ.get(ENVIRONMENT)
    if given:
        return Path(given).expanduser().absolute()
    if configured:
        return (base / Path(configured).expanduser()).absolute()
    return (base / DEFAULT_NAME).absolute()
