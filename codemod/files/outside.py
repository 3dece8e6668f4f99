"""Whether the result being computed for a file read anything besides that file's own bytes.

Most of a file's result follows from its content and its configuration alone, which is what
the result cache (`neuron_migrate.cache`) keys on. A few readers look elsewhere: a launch line
(NM816) reads the script it starts, a script that may drop its distributed machinery asks the
whole repository who launches it, a `helpers-module` import depends on which folders are
packages, a Dockerfile reads the requirements file it installs from. Such a result can change
while the file does not, so each of those readers says so here, and the cache does not keep
what it computed.

One flag per process: a worker computes one file at a time.
"""

from __future__ import annotations

_consulted = False


def consulted() -> None:
    """Called by a reader about to look at the file system beyond the file it migrates."""
    global _consulted
    _consulted = True


def reset() -> None:
    """Called before a file's result is computed."""
    global _consulted
    _consulted = False


def was_consulted() -> bool:
    """Whether anything outside the file was looked at since `reset`."""
    return _consulted
