"""The name of a file's cache entry: a digest of everything its result is computed from.

Nothing is trusted to stay the same unless it is in the digest: the tool (its own files, and
the libraries that parse for it), the Python running it, the working directory (launch
lines and messages are resolved from it), the path as given (it is in every message), the
file's bytes, its effective options and what the run asks for. Any one of them changing is a
miss.

The tool's files are taken by their stamp (path, size, modification time, inode) rather than
their content: hashing the package would cost more than a warm run's whole budget, and an
edit, a reinstall or a checkout changes a stamp as surely as a content. Installed libraries
are taken by the names of their metadata folders, which carry their versions.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import sys
from collections.abc import Iterable

from neuron_migrate import __version__
from neuron_migrate.files.digests import blake2b
from neuron_migrate.model import Options

LIBRARIES = ("libcst", "packaging", "tomlkit", "yaml", "pathspec")
"""Libraries whose version can change a result (parsers and version comparisons)."""
OWN_PACKAGES = ("neuron_migrate", "neuron_migrate.rules")
"""The import package and the subpackage mapped from a folder of its own (the catalogue)."""


@functools.lru_cache(maxsize=1)
def tool_fingerprint() -> str:
    """The tool as installed: a different build of it is a different fingerprint."""
    digest = blake2b(digest_size=16)
    digest.update(f"{__version__}\0{sys.version}\0{sys.implementation.cache_tag}\0".encode())
    for folder in _own_folders():
        for line in _stamps(folder):
            digest.update(line)
    for name in _library_metadata():
        digest.update(name.encode() + b"\0")
    return digest.hexdigest()


def _own_folders() -> list[str]:
    folders: list[str] = []
    for package in OWN_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            folders += [os.path.abspath(f) for f in spec.submodule_search_locations]
    return sorted(set(folders))


def _stamps(folder: str) -> Iterable[bytes]:
    """Every source file below `folder` (its subpackages too), by stamp, in a stable order."""
    for root, subfolders, names in os.walk(folder):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        for name in sorted(names):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(root, name)
            try:
                status = os.stat(path)
            except OSError:
                continue
            yield (f"{path}\0{status.st_size}\0{status.st_mtime_ns}\0{status.st_ino}\0"
                   .encode())


def _library_metadata() -> list[str]:
    """The metadata folders (`libcst-1.4.0.dist-info`) beside each library, found without
    importing it."""
    found: set[str] = set()
    for library in LIBRARIES:
        spec = importlib.util.find_spec(library)
        if spec is None or spec.origin is None:
            found.add(f"{library}: absent")
            continue
        site = os.path.dirname(os.path.dirname(spec.origin))
        found.add(f"{library}: {os.path.dirname(spec.origin)}")
        found.update(_metadata_in(site))
    return sorted(found)


@functools.lru_cache(maxsize=8)
def _metadata_in(site: str) -> tuple[str, ...]:
    try:
        names = os.listdir(site)
    except OSError:
        return ()
    return tuple(n for n in names if n.endswith((".dist-info", ".egg-info")) and
                 n.split("-")[0].lower().replace("_", "-") in _DISTRIBUTIONS)


_DISTRIBUTIONS = frozenset({"libcst", "packaging", "tomlkit", "pyyaml", "pathspec"})


@functools.lru_cache(maxsize=256)
def options_text(options: Options) -> str:
    """The options in a stable spelling: sets sorted (their order varies between runs)."""
    parts = []
    for field in dataclasses.fields(Options):
        value = getattr(options, field.name)
        if isinstance(value, frozenset):
            value = sorted(value)
        parts.append(f"{field.name}={value!r}")
    return ";".join(parts)


def entry_name(path: str, content: str, options: Options, request: str) -> str:
    """The entry of the file at `path` (as the run names it) whose bytes have the digest
    `content` (`stamps.digest`), migrated with `options` for `request` (what the run asks
    for, spelt by the caller)."""
    digest = blake2b(digest_size=20)
    for part in (tool_fingerprint(), os.getcwd(), path, options_text(options), request,
                 content):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()
