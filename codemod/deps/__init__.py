"""The dependency and container scanner: where a repository pins or installs the
XLA-era Neuron stack, what to change it to, and (for the kinds we can edit safely) the edit.

Public API, used by discovery and the CLI:
- `is_dependency_file(path)`: whether a file is one of the kinds below;
- `scan_source(path, data, registry, fix)`: one file's bytes to a `FileResult`;
- `scan_text_lines(path, lines, registry)`: install/export lines lifted out of another file
  (notebook `!pip install`, `%env`), reported only.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from neuron_migrate.deps.ids import LAUNCH, PYTHON_IMAGE, PYTHON_PIN, REQUIRES_PYTHON
from neuron_migrate.deps.launch_paths import ContainerPaths, HostPaths
from neuron_migrate.engine.failsafe import beyond_limits, not_kept
from neuron_migrate.model import BY_POSITION, FileResult, Finding
from neuron_migrate.registry import Registry

if TYPE_CHECKING:  # the scanners (and packaging, tomlkit) load when a file needs them
    from neuron_migrate.deps.emit import Emitter

__all__ = ["LineEdit", "fix_text_lines", "is_dependency_file", "kind_of", "scan_source",
           "scan_text_lines"]

Scanner = Callable[[str, "Emitter", str], None]
REQUIREMENTS = re.compile(r"(requirements|constraints)[\w.-]*\.(txt|in|pip)$|"
                          r"[\w.-]*[-_.](requirements|constraints)\.(txt|in|pip)$")
PREFILTER = (b"neuron", b"xla", b"pjrt", b"trn1", b"inf2", b"bucket_")
PYTHON_RULES = (PYTHON_IMAGE, REQUIRES_PYTHON, PYTHON_PIN)
CUDA_PREFILTER = (b"cuda", b"+cu", b"whl/cu", b"nvidia", b"--gpus", b"--gres", b"nvcc",
                  b"pytorch/pytorch", b"flash", b"xformers", b"bitsandbytes", b"apex",
                  b"triton", b"pynvml", b"cupy")
"""With `--from cuda`: every NMC8xx finding needs one of these too."""
LAUNCHERS = frozenset({"dockerfile", "shell", "makefile", "yaml"})
"""Kinds whose commands can launch a Python script (NM816): read for `python` as well."""
# kind -> (module, function); a module is imported when a file of its kind turns up, so a run
# that meets no YAML or TOML file never loads their parsers
SCANNERS: dict[str, tuple[str, str]] = {
    "requirements": ("requirements", "scan"),
    "pyproject": ("pyproject", "scan"),
    "setup.py": ("setup_files", "scan_setup_py"),
    "setup.cfg": ("setup_files", "scan_setup_cfg"),
    "pipfile": ("pipfile", "scan"),
    "lockfile": ("lockfiles", "scan"),
    "conda": ("conda", "scan"),
    "dockerfile": ("dockerfile", "scan"),
    "shell": ("shell", "scan"),
    "makefile": ("makefile", "scan"),
    "yaml": ("yaml_files", "scan"),
    "python-version": ("python_env", "no_pins"),
}


def scanner(kind: str) -> Scanner:
    module, function = SCANNERS[kind]
    return getattr(importlib.import_module(f"neuron_migrate.deps.{module}"), function)


def kind_of(path: Path) -> str | None:
    """Which scanner reads this file, decided by its name alone."""
    name = path.name.lower()
    fixed = {"pyproject.toml": "pyproject", "setup.py": "setup.py", "setup.cfg": "setup.cfg",
             "pipfile": "pipfile", "containerfile": "dockerfile", "dockerfile": "dockerfile",
             ".python-version": "python-version", "makefile": "makefile",
             "gnumakefile": "makefile"}
    if name in fixed:
        return fixed[name]
    if name.endswith(".lock"):  # every lockfile name does; the module needs packaging
        from neuron_migrate.deps import lockfiles

        if name in lockfiles.COMMANDS:
            return "lockfile"
    if name.startswith(("dockerfile.", "dockerfile-", "dockerfile_", "containerfile.",
                        "containerfile-")) or name.endswith(".dockerfile"):
        return "dockerfile"
    if REQUIREMENTS.match(name) or (path.parent.name.lower() == "requirements"
                                    and name.endswith((".txt", ".in"))):
        return "requirements"
    if name.endswith((".sh", ".bash", ".sbatch", ".slurm")):  # SLURM batch scripts are shell
        return "shell"
    if name.endswith(".mk"):  # an included Makefile
        return "makefile"
    if name.endswith((".yml", ".yaml")):
        return "conda" if name.startswith("environment") else "yaml"
    return None


def is_dependency_file(path: Path) -> bool:
    return kind_of(path) is not None


def mentions_neuron(data: bytes, cuda: bool = False) -> bool:
    """Every NM8xx finding needs one of these words (and every NMC8xx one, with `cuda`, one
    of CUDA's); a file without them is not parsed (a large YAML data file costs a substring
    search, not a YAML parse)."""
    return _mentions(data.lower(), cuda)


def _mentions(lowered: bytes, cuda: bool) -> bool:
    """`mentions_neuron` of the lowered bytes."""
    tokens = PREFILTER + CUDA_PREFILTER if cuda else PREFILTER
    return any(token in lowered for token in tokens)


def may_launch(path: str, kind: str, data: bytes, registry: Registry) -> bool:
    """Whether a file without Neuron words still needs reading: it names a script that
    spawns its own workers (NM816)."""
    if kind not in LAUNCHERS or b"python" not in data:
        return False
    from neuron_migrate.deps.emit import rule_enabled
    from neuron_migrate.deps.launches import names_a_spawner

    return rule_enabled(registry, LAUNCH) and names_a_spawner(path, data)


def may_choose_python(kind: str, data: bytes, registry: Registry,
                      lowered: bytes | None = None) -> bool:
    """Whether a file may settle the project's Python (NM950-NM952): read even when it
    never names Neuron, as `.python-version` and CI workflows never do. Not on Trn1/Inf2,
    which stay on the XLA stack and its Pythons. `lowered` is `data.lower()` if known."""
    from neuron_migrate.deps import python_env
    from neuron_migrate.deps.emit import rule_enabled
    from neuron_migrate.target import native

    return native(registry.options.target) and python_env.may_pin(kind, data, lowered) and \
        any(rule_enabled(registry, rule) for rule in PYTHON_RULES)


def scan_source(path: str, data: bytes, registry: Registry, fix: bool) -> FileResult:
    """Scan one file; never raises for bad input (problems become `error`)."""
    kind = kind_of(Path(path))
    if kind is None:
        return FileResult(path, original=data)
    cuda = "cuda" in registry.options.sources
    lowered = data.lower()  # once for both substring tests
    pins = _mentions(lowered, cuda) or may_launch(path, kind, data, registry)
    python = may_choose_python(kind, data, registry, lowered)
    if not (pins or python):
        return FileResult(path, original=data)
    from neuron_migrate.deps.emit import Emitter, rule_enabled, tracking_marker_uses
    from neuron_migrate.deps.entries import Unparsable

    text = data.decode("utf-8", "surrogateescape")
    bom = "\ufeff" if text.startswith("\ufeff") else ""  # kept aside: no reader expects it
    text = text[len(bom):]
    paths = None
    if kind in LAUNCHERS and rule_enabled(registry, LAUNCH):
        paths = (ContainerPaths if kind == "dockerfile" else HostPaths)(Path(path))
    emitter = Emitter(path, text, registry, fix, paths=paths)
    try:
        with tracking_marker_uses():
            if python:
                from neuron_migrate.deps import python_env

                python_env.scan(kind, text, emitter)
            if pins:
                scanner(kind)(text, emitter, path)
            # the code's own markers share a setup.py's comments: the engine reports those
            unused = emitter.unused_markers() if kind != "setup.py" else []
    except Unparsable as problem:
        where = f"{path}:{problem.line}" if problem.line else path
        return FileResult(path, _ordered(emitter.findings), original=data,
                          error=f"{where}: {problem}; file left untouched")
    except RecursionError:
        not_kept()
        return FileResult(path, original=data, error=f"{path}: nested too deeply to read")
    except Exception as error:  # a bug must cost one file, never the run
        not_kept()
        return FileResult(path, original=data, error=beyond_limits(path, data, error) or
                          f"{path}: internal error ({type(error).__name__}: {error}); "
                          "file left untouched, please report this")
    new = emitter.new_text()
    if new is not None and not _still_readable(kind, new, path, registry):
        rules = ", ".join(sorted({f.rule_id for f in emitter.findings if f.applied}))
        return FileResult(path, _ordered(emitter.findings), original=data,
                          error=f"{path}: the fixes ({rules}) would leave it unreadable; "
                                "nothing written, please report this")
    new_source = (bom + new).encode("utf-8", "surrogateescape") if new is not None else None
    if new_source == data:
        new_source = None
    return FileResult(path, _ordered([*emitter.findings, *unused]), original=data,
                      new_source=new_source)


def _still_readable(kind: str, text: str, path: str, registry: Registry) -> bool:
    """The re-parse guard: a fixed file must read as its kind again, or the fix would leave a
    file its own tools (pip, docker, a YAML loader) can no longer read."""
    from neuron_migrate.deps.emit import Emitter
    from neuron_migrate.deps.entries import Unparsable

    try:
        scanner(kind)(text, Emitter(path, text, registry, fix=False), path)
    except Unparsable:
        return False
    return True


def _ordered(findings: list[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(findings, key=BY_POSITION))


def scan_text_lines(path: str, lines: list[tuple[int, str]], registry: Registry,
                    paths: HostPaths | None = None) -> list[Finding]:
    """Check free-standing shell-like lines (notebook magics); report only, never fix.
    With `paths`, launches of scripts that spawn their own workers are followed (NM816)."""
    return fix_text_lines(path, lines, registry, paths, editable=False)[0]


@dataclass(frozen=True)
class LineEdit:
    """Replace columns [start, end) (0-based) of one of the given lines."""

    line: int
    start: int
    end: int
    new: str


def fix_text_lines(path: str, lines: list[tuple[int, str]], registry: Registry,
                   paths: HostPaths | None = None, editable: bool = True,
                   fix: bool = True) -> tuple[list[Finding], list[LineEdit]]:
    """`scan_text_lines`, with the launch rewrites (NM816) as edits of the lines when they are
    `editable` (and made when `fix`): the only fixes whose text stays where the line had it (`strip_magic` keeps columns, but `%env`
    lines are rewritten, and pins are left to the files the notebook installs from)."""
    if not lines:
        return [], []
    from neuron_migrate.deps import commands, shell
    from neuron_migrate.deps.emit import Emitter, rule_enabled
    from neuron_migrate.deps.entries import Unparsable

    text = "\n".join(commands.strip_magic(line) for _, line in lines) + "\n"
    emitter = Emitter(path, text, registry, fix=fix,
                      line_numbers=[n for n, _ in lines] + [lines[-1][0] + 1],
                      can_edit=frozenset({LAUNCH}) if editable else False,
                      paths=paths if rule_enabled(registry, LAUNCH) else None)
    try:
        shell.read(text, emitter)
    except Unparsable:
        pass  # a notebook line that is not shell: nothing to say about it
    edits = []
    for edit in emitter.edits:
        (line, start), (_, end) = emitter.position(edit.start), emitter.position(edit.end)
        edits.append(LineEdit(line, start - 1, end - 1, edit.new))
    return list(_ordered(emitter.findings)), edits
