"""Where a launch line's script is: the file `python train.py` starts, seen from the file that
says it.

A relative path is looked for from every directory the command could run in: the launching
file's own folder and the roots (the git work tree holding it, the folder the tool runs in),
moved by the `cd`s before it. A Dockerfile's paths are the container's: WORKDIR and the COPY
and ADD instructions say which folder of the build context each one comes from. An absolute
path that is not mapped (`~/samples/train.py`, a mounted volume) is matched by its longest
tail that exists under a root.

Every file found is returned; the caller decides what more than one means.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from neuron_migrate.files import outside

HERE = ("$(dirname", "`dirname", "${BASH_SOURCE%/*}", "${0%/*}")
"""How scripts say "my own folder" in `cd`."""


@functools.lru_cache(maxsize=1024)
def _git_root(folder: Path) -> Path | None:
    """The nearest folder from `folder` up holding `.git`; each folder asked once, since the
    launchers of a repository share their parents."""
    if (folder / ".git").exists():
        return folder
    parent = folder.parent
    return None if parent == folder else _git_root(parent)


def roots_of(launcher: Path) -> tuple[Path, ...]:
    """The folders a repository's commands are usually run from: the launcher's own, the git
    work tree holding it, the folder the tool runs in."""
    folder = os.path.abspath(launcher.parent)
    roots = _roots(folder, os.getcwd())
    outside.note_roots(folder, [str(root) for root in roots])
    return roots


def roots_now(folder: str) -> list[str]:
    """`roots_of` a launcher in `folder`, as the file system was at the last
    `forget_roots()` at the latest: a cached result asks whether its roots moved
    (`files.outside`), and this process may have seen them before the file system changed."""
    return [str(root) for root in _roots(os.path.abspath(folder), os.getcwd())]


def forget_roots() -> None:
    _git_root.cache_clear()
    _roots.cache_clear()


@functools.lru_cache(maxsize=256)
def _roots(folder_name: str, cwd: str) -> tuple[Path, ...]:
    folder = Path(folder_name).resolve()
    found = [folder]
    for root in (_git_root(folder), Path(cwd).resolve()):
        if root is not None and root not in found and folder.is_relative_to(root):
            found.append(root)
    return tuple(found)


class HostPaths:
    """A shell script's view: the directories it may be running in, moved by `cd`.

    With `widen`, a `cd` adds the places it names instead of moving: in a notebook each `!`
    line runs in a shell of its own while `%cd` moves the kernel for good, and the lines reach
    the reader as one text; two different scripts found then make the launch ambiguous."""

    def __init__(self, launcher: Path, written: Mapping[Path, bytes] | None = None,
                 widen: bool = False) -> None:
        self.roots = roots_of(launcher)
        self.written = dict(written or {})
        self.widen = widen
        self.cwds: tuple[Path, ...] | None = self.roots
        self.stack: list[tuple[Path, ...] | None] = []

    def reset(self) -> None:
        if not self.widen:
            self.cwds = self.roots

    def change_dir(self, target: str | None, push: bool = False) -> None:
        if push:
            self.stack.append(self.cwds)
        moved = self._moved(target)
        if self.widen and self.cwds is not None:
            moved = tuple(dict.fromkeys((*self.cwds, *(moved or ()))))
        self.cwds = moved

    def pop_dir(self) -> None:
        if not self.widen:
            self.cwds = self.stack.pop() if self.stack else None

    def _moved(self, target: str | None) -> tuple[Path, ...] | None:
        if target is None or target in ("", "-", "~"):
            return None
        if target.startswith(HERE):
            return self.roots[:1]
        if target.startswith(("/", "~")):
            return self._tail_matches(target, directory=True) or None
        if self.cwds is None:
            return None
        moved = tuple(dict.fromkeys(p for p in (outside.resolved(c / target) for c in self.cwds)
                                    if outside.is_dir(p)))
        return moved or None

    def locate(self, relative: str) -> list[Path]:
        if relative.startswith(("/", "~")):
            return self._tail_matches(relative, directory=False)
        if self.cwds is None:
            return []
        return self._existing(c / relative for c in self.cwds)

    def _existing(self, paths: Iterable[Path]) -> list[Path]:
        found: dict[Path, None] = {}
        for path in paths:
            real = Path(os.path.normpath(path))
            if real in self.written or outside.is_file(real):
                found[real] = None
        return list(found)

    def _tail_matches(self, absolute: str, directory: bool) -> list[Path]:
        """`/opt/ml/code/train.py` or `~/samples/x/train.py`: the longest tail of it found
        under a root; the path itself when it is inside one (`$SCRIPT_DIR/train.py`)."""
        itself = Path(os.path.normpath(absolute))
        if absolute.startswith("/") and any(itself.is_relative_to(r) for r in self.roots):
            found = [outside.resolved(itself)] if directory and outside.is_dir(itself) else \
                [] if directory else self._existing([itself])
            if found:
                return found
        parts = PurePosixPath(absolute).parts[1:]
        for start in range(len(parts)):
            tail = Path(*parts[start:])
            hits = [root / tail for root in self.roots]
            found = [outside.resolved(h) for h in hits if outside.is_dir(h)] if directory \
                else self._existing(hits)
            if found:
                return list(dict.fromkeys(found))
        return []


class ContainerPaths(HostPaths):
    """A Dockerfile's view: container paths, mapped back to the build context by COPY/ADD.
    The build context is taken to be the Dockerfile's folder or a root."""

    def __init__(self, launcher: Path) -> None:
        super().__init__(launcher)
        self.workdir: PurePosixPath | None = PurePosixPath("/")
        self.shell_dir: PurePosixPath | None = self.workdir
        self.copies: list[tuple[PurePosixPath, str, bool]] = []
        """(container path, context-relative source, whether it is a folder)."""

    def new_stage(self) -> None:
        self.workdir, self.copies = PurePosixPath("/"), []
        self.reset()

    def reset(self) -> None:
        self.shell_dir = self.workdir

    def set_workdir(self, target: str | None) -> None:
        self.workdir = None if target is None or self.workdir is None \
            else self.workdir / target
        self.reset()

    def copy(self, sources: list[str], destination: str) -> None:
        if self.workdir is None and not destination.startswith("/"):
            return
        base = PurePosixPath(destination) if destination.startswith("/") \
            else (self.workdir or PurePosixPath("/")) / destination
        into = destination.endswith("/") or destination in (".", "./") or len(sources) > 1
        for source in sources:
            folder = source.rstrip("/") in ("", ".") or source.endswith("/") or \
                any(outside.is_dir(root / source) for root in self.roots)
            if folder:
                self.copies.append((base, source, True))
            else:
                name = PurePosixPath(source).name
                self.copies.append((base / name if into else base, source, False))

    def change_dir(self, target: str | None, push: bool = False) -> None:
        if target is None or self.shell_dir is None or target.startswith(("~", "$")):
            self.shell_dir = None
        elif target.startswith(HERE):
            self.shell_dir = None
        else:
            self.shell_dir = self.shell_dir / target

    def pop_dir(self) -> None:
        self.shell_dir = None

    def locate(self, relative: str) -> list[Path]:
        if self.shell_dir is None and not relative.startswith("/"):
            return []
        container = PurePosixPath(relative) if relative.startswith("/") \
            else self.shell_dir / relative  # type: ignore[operator]
        mapped = self._mapped(PurePosixPath(os.path.normpath(container)))
        if mapped:
            return mapped
        if relative.startswith("/"):
            return self._tail_matches(relative, directory=False)
        return self._existing(root / relative for root in self.roots)

    def _mapped(self, container: PurePosixPath) -> list[Path]:
        for base, source, folder in reversed(self.copies):  # a later COPY wins
            if folder and container.is_relative_to(base):
                inside = container.relative_to(base)
                found = self._existing(root / source / inside for root in self.roots)
            elif not folder and container == base:
                found = self._existing(root / source for root in self.roots)
            else:
                continue
            if found:
                return found
        return []
