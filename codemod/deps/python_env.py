"""The Python a project runs on: TorchNeuron ships wheels for CPython 3.12, 3.13 and
3.14 only, so an image, a `requires-python`, a conda environment, a `.python-version` or a CI
matrix that settles on an older Python cannot install it.

Read from the text of each file kind on its own, whether or not the file names Neuron: the
interpreter is chosen in files that never mention it (`.python-version`, a CI workflow).
Everything here is reported (review): moving a project to a newer Python is a decision its
tests must back, never an edit made for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from neuron_migrate.deps import ids
from neuron_migrate.deps.emit import Emitter
from neuron_migrate.deps.entries import Unparsable
from neuron_migrate.files import outside
from neuron_migrate.files.bounded import SOURCE_LIMIT, read_bounded

SUPPORTED = ((3, 12), (3, 13), (3, 14))
"""TorchNeuron's wheels (Neuron 2.33 release notes; one wheel per PyTorch x Python)."""
SUPPORTED_TEXT = "3.12-3.14"
UBUNTU = {"16.04": (3, 5), "18.04": (3, 6), "20.04": (3, 8), "22.04": (3, 10),
          "24.04": (3, 12), "xenial": (3, 5), "bionic": (3, 6), "focal": (3, 8),
          "jammy": (3, 10), "noble": (3, 12)}
"""The python3 each Ubuntu release installs from its own archive."""
DEBIAN = {"9": (3, 5), "10": (3, 7), "11": (3, 9), "12": (3, 11), "13": (3, 13),
          "stretch": (3, 5), "buster": (3, 7), "bullseye": (3, 9), "bookworm": (3, 11),
          "trixie": (3, 13)}
"""The python3 each Debian release installs from its own archive."""
COMMAND_SIGNALS = (b"venv", b"conda create", b"pyenv")
SIGNALS = {"dockerfile": (b"python", b"ubuntu", b"debian"), "pyproject": (b"python",),
           "setup.py": (b"python_requires",), "setup.cfg": (b"python_requires",),
           "conda": (b"python",),
           "yaml": (b"python-version", b"python:", b"python_version:", b"py:", *COMMAND_SIGNALS),
           "shell": COMMAND_SIGNALS, "makefile": COMMAND_SIGNALS, "pipfile": (b"python_",),
           "python-version": (b"",)}
NEWER_PYTHON = re.compile(r"python\s*[=@:]?\s*3\.1[2-4]|python3\.1[2-4]|py31[2-4]|"
                          r"--python[ =]3\.1[2-4]", re.IGNORECASE)
USES_PYTHON = re.compile(r"python|pip", re.IGNORECASE)
FROM = re.compile(r"^[ \t]*FROM[ \t]+(?:--\S+[ \t]+)*(\S+)", re.IGNORECASE | re.MULTILINE)
ARG = re.compile(r"^[ \t]*ARG[ \t]+(\w+)=(\S*)", re.IGNORECASE | re.MULTILINE)
ENV = re.compile(r"^[ \t]*ENV[ \t]+(\w+)[= \t][ \t]*(\S*)", re.IGNORECASE | re.MULTILINE)
OLD_PYTHON = re.compile(r"(?<![\w.-])python3\.(\d+)(?![\d.])", re.IGNORECASE)
TORCH_OR_NEURON = re.compile(r"torch|neuron|pjrt|\bxla", re.IGNORECASE)
"""What a Dockerfile for PyTorch or Neuron work names somewhere (a package, a variable)."""
REQUIREMENTS_FILE = re.compile(r"(?:-r|--requirement)[ \t=]+(\S+)")
STAGE = re.compile(r"[ \t]+AS[ \t]+(\S+)", re.IGNORECASE)
VARIABLE = re.compile(r"\$\{?(\w+)(?::?-[^}]*)?\}?")
VERSION = re.compile(r"^(\d+)\.(\d+)")
ENVIRONMENT_COMMAND = re.compile(
    r"\bpython(3\.\d+)\s+-m\s+(?:venv|virtualenv)\b|"
    r"\buv\s+venv\b[^\n;&|]*?--python[ =]\s*(?:cpython-)?(3\.\d+)|"
    r"\b(?:conda|mamba|micromamba)\s+create\b[^\n;&|]*?\bpython\s*=?=?\s*(3\.\d+)|"
    r"\bpyenv\s+(?:install|global|local|virtualenv)\s+(?:-\S+\s+)*(3\.\d+(?:\.\d+)?)")
"""Commands that create an environment on one Python (in scripts, RUN lines, CI steps)."""
MATRIX_KEYS = frozenset({"python", "python_version", "python-versions", "py"})


def may_pin(kind: str, data: bytes, lowered: bytes | None = None) -> bool:
    """Whether a file of this kind may choose a Python: a substring test, no parse.
    `lowered` is `data.lower()` when the caller has it."""
    signals = SIGNALS.get(kind, ())
    if not signals:
        return False
    lowered = data.lower() if lowered is None else lowered
    return any(signal in lowered for signal in signals)


def scan(kind: str, text: str, emitter: Emitter) -> None:
    """Report every place this file settles on a Python TorchNeuron has no wheel for."""
    reader = READERS.get(kind)
    if reader is not None:
        try:
            reader(text, emitter)
        except Unparsable:
            pass  # the file's own scanner says so


def supported(version: tuple[int, int]) -> bool:
    return version in SUPPORTED


def admits_supported(spec: SpecifierSet) -> bool:
    """Whether some release of 3.12, 3.13 or 3.14 satisfies the range: its first or a late
    patch release (`>=3.12.1` admits 3.12, as `!=3.12.0` does)."""
    return any(Version(f"{major}.{minor}.0") in spec or Version(f"{major}.{minor}.99") in spec
               for major, minor in SUPPORTED)


def _shown(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def _advice(what: str) -> str:
    return (f"{what}; TorchNeuron ships wheels for Python {SUPPORTED_TEXT} only, so "
            "torch-neuronx 2.14 will not install: move to Python 3.12 or later and run your "
            "tests on it")


# commands, in scripts, Dockerfiles and CI steps


def _commands(text: str, emitter: Emitter) -> None:
    """`python3.10 -m venv`, `uv venv --python 3.11`, `conda create ... python=3.10`, `pyenv
    install 3.10`: an environment made on an old Python, wherever a command line is written
    (a comment line is not a command)."""
    for offset, line in _lines(text):
        if line.lstrip().startswith("#"):
            continue
        for match in ENVIRONMENT_COMMAND.finditer(line):
            value = next(group for group in match.groups() if group)
            found = VERSION.match(value)
            if found is not None and (int(found[1]), int(found[2])) < SUPPORTED[0]:
                emitter.report(ids.PYTHON_PIN, offset + match.start(), _advice(
                    f"`{match.group().strip()}` makes an environment on Python {value}"))


# Dockerfiles


def _dockerfile(text: str, emitter: Emitter) -> None:
    """Each stage's base image (ARG defaults expanded, as FROM sees them), and its commands.
    Judged only in a Dockerfile for PyTorch or Neuron work: one that builds docs or an
    XGBoost image never meets torch-neuronx."""
    _commands(text, emitter)
    if not _for_torch(text, emitter.path):
        return
    defaults = {m[1]: m[2].strip("\"'") for m in ARG.finditer(text)}
    settings = {**defaults, **{m[1]: m[2].strip("\"'") for m in ENV.finditer(text)}}
    stages: set[str] = set()
    starts = list(FROM.finditer(text))
    for index, match in enumerate(starts):
        reference = VARIABLE.sub(lambda v: defaults.get(v[1], v[0]), match[1])
        alias = STAGE.match(text, match.end(1))
        body_end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        body = _expanded(text[text.find("\n", match.end()) + 1 or body_end:body_end],
                         settings)
        if reference.lower() not in stages:  # a stage built on an earlier one is said there
            message = _named_python(body, reference) or base_image_message(reference, body)
            if message is not None:
                emitter.report(ids.PYTHON_IMAGE, match.start(1), message)
        if alias is not None:
            stages.add(alias[1].lower())


def _expanded(body: str, settings: dict[str, str]) -> str:
    """A stage's text with the ARG and ENV values put in: `ARG PYTHON=python3.10` then
    `RUN ${PYTHON} -m pip install ...` names Python 3.10."""
    for _ in range(3):  # a value that names another variable (ENV PY=${PYTHON})
        body = VARIABLE.sub(lambda v: settings.get(v[1], v[0]), body)
    return body


def _for_torch(text: str, path: str) -> bool:
    """Whether a Dockerfile is for PyTorch or Neuron work: it names either, or installs from
    a requirements file that does (or that is not beside it to read, which may)."""
    if TORCH_OR_NEURON.search(text):
        return True
    folder = Path(path).parent
    for found in REQUIREMENTS_FILE.finditer(text):
        name = found[1].strip("\"'")
        readable = next((c for c in (folder / name, folder / Path(name).name)
                         if outside.is_file(c)), None)
        try:
            if readable is None or outside.stamp(readable) is None or TORCH_OR_NEURON.search(
                    read_bounded(readable, SOURCE_LIMIT).decode("utf-8", "replace")):
                return True
        except OSError:  # unreadable, not a regular file, too large: it may
            return True
    return False


def _named_python(stage: str, reference: str) -> str | None:
    """What to say of a stage that names an old Python itself (`apt-get install
    python3.10`, `python3.10 -m pip`, ARG values included), whatever its base; None when it
    names none, or names a supported one too."""
    if NEWER_PYTHON.search(stage):
        return None
    found = OLD_PYTHON.search(stage)
    if found is None:
        return None
    version = (3, int(found[1]))
    if supported(version) or version > SUPPORTED[-1]:
        return None
    return _advice(f"the image built on `{reference}` installs and runs `{found.group()}` "
                   "(ARG and ENV values put in)")


def base_image_message(reference: str, stage: str = "python3") -> str | None:
    """What to say of a base image whose Python is older than 3.12, or None. An Ubuntu or
    Debian image matters only when its `stage` (the instructions after FROM) uses Python and
    does not name a supported one itself (`python3.12`, `uv venv --python 3.12`)."""
    repository, _, tag = reference.split("@", 1)[0].rsplit("/", 1)[-1].lower().partition(":")
    if repository == "python":
        found = VERSION.match(tag)
        if found is None:
            return None  # `python:3`, `latest`: today's newest, 3.13 or later
        version = (int(found[1]), int(found[2]))
        if supported(version) or version > SUPPORTED[-1]:
            return None
        return _advice(f"base image `{reference}` runs Python {_shown(version)}")
    table = UBUNTU if repository == "ubuntu" else DEBIAN if repository == "debian" else None
    if table is None or NEWER_PYTHON.search(stage) or not USES_PYTHON.search(stage):
        return None
    release = tag.split("-")[0]
    version = table.get(release)
    if version is None or supported(version):
        return None
    return _advice(f"base image `{reference}` installs Python {_shown(version)} as its python3 "
                   "(the distribution's default; an assumption if the image installs another "
                   "Python some other way)")


# requires-python and friends


def _pyproject(text: str, emitter: Emitter) -> None:
    section = ""
    for offset, line in _lines(text):
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped.strip("[] ").replace('"', "").replace(" ", "")
            continue
        match = re.match(r"\s*(requires-python|python)\s*=\s*([\"'])(.*?)\2", line)
        if match is None:
            continue
        key, value = match[1], match[3]
        if key == "requires-python" and section == "project":
            _requires(value, offset + match.start(3), f"`requires-python = \"{value}\"`",
                      emitter)
        elif key == "python" and section.startswith("tool.poetry") and \
                section.endswith("dependencies"):
            spec = poetry_python(value)
            if spec is not None:
                _requires(spec, offset + match.start(3), f"Poetry's `python = \"{value}\"`",
                          emitter)


def poetry_python(constraint: str) -> str | None:
    """A Poetry Python constraint as PEP 440 (`^3.10` is `>=3.10,<4`, `~3.10` is
    `>=3.10,<3.11`); None for forms not read here."""
    parts = []
    for piece in constraint.replace(" ", "").split(","):
        found = re.fullmatch(r"([\^~])(\d+)\.(\d+)(?:\.\d+)?", piece)
        if found is None:
            parts.append(piece)
            continue
        major, minor = int(found[2]), int(found[3])
        upper = f"{major + 1}" if found[1] == "^" else f"{major}.{minor + 1}"
        parts.append(f">={major}.{minor},<{upper}")
    return ",".join(parts) or None


def _pipfile(text: str, emitter: Emitter) -> None:
    """Pipenv's `[requires] python_version = "3.10"` (or `python_full_version`)."""
    section = ""
    for offset, line in _lines(text):
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped.strip("[] ")
            continue
        match = re.match(r"\s*python_(?:full_)?version\s*=\s*([\"'])(\d+)\.(\d+)[^\"']*\1",
                         line)
        if section == "requires" and match is not None and \
                (int(match[2]), int(match[3])) < SUPPORTED[0]:
            emitter.report(ids.PYTHON_PIN, offset + match.start(2), _advice(
                f"the Pipfile's [requires] `{stripped}`"))


def _setup_py(text: str, emitter: Emitter) -> None:
    for match in re.finditer(r"python_requires\s*=\s*([\"'])(.*?)\1", text):
        _requires(match[2], match.start(2), f"`python_requires=\"{match[2]}\"`", emitter)


def _setup_cfg(text: str, emitter: Emitter) -> None:
    for offset, line in _lines(text):
        match = re.match(r"python_requires\s*[=:]\s*(\S.*?)\s*$", line)
        if match is not None:
            _requires(match[1], offset + match.start(1),
                      f"`python_requires = {match[1]}`", emitter)


def _requires(value: str, offset: int, what: str, emitter: Emitter) -> None:
    try:
        spec = SpecifierSet(value)
    except InvalidSpecifier:
        return
    if not admits_supported(spec):
        emitter.report(ids.REQUIRES_PYTHON, offset, _advice(f"{what} excludes Python 3.12+") +
                       "; widen it to admit 3.12 (e.g. `>=3.12`)")


# conda, .python-version, CI matrices


def _conda(text: str, emitter: Emitter) -> None:
    from yaml.nodes import SequenceNode

    from neuron_migrate.deps.yaml_nodes import compose, pairs, scalar

    for document in compose(text):
        for key, value in pairs(document):
            if key.value != "dependencies" or not isinstance(value, SequenceNode):
                continue
            for item in value.value:
                spec = scalar(item)
                version = conda_python(spec) if spec is not None else None
                if version is not None and not admits_supported(version):
                    emitter.report(ids.PYTHON_PIN, item.start_mark.index, _advice(
                        f"the conda environment pins `{spec}`"))


def conda_python(spec: str) -> SpecifierSet | None:
    """A conda match spec for `python` as a specifier set: `python=3.10` is `3.10.*`."""
    found = re.fullmatch(r"\s*(?:[\w-]+::)?python\s*([=<>!~][^\s#]*|\s+[\d.*]+)?\s*", spec)
    if found is None or not found[1]:
        return None
    constraint = found[1].strip()
    if re.fullmatch(r"=?\d+(\.\d+)*\.?\*?", constraint):  # `=3.10`, `3.10`, `=3.10.*`
        constraint = "==" + constraint.lstrip("=").rstrip(".*").rstrip(".") + ".*"
    try:
        return SpecifierSet(constraint.replace("|", ","))
    except InvalidSpecifier:
        return None


def _python_version(text: str, emitter: Emitter) -> None:
    """pyenv's and uv's `.python-version`: the first version listed is what `python` runs."""
    for offset, line in _lines(text):
        value = line.split("#", 1)[0].strip()
        if not value:
            continue
        found = re.match(r"(?:cpython-)?(\d+)\.(\d+)", value)
        if found is not None:
            version = (int(found[1]), int(found[2]))
            if version < SUPPORTED[0]:
                emitter.report(ids.PYTHON_PIN, offset + line.index(value), _advice(
                    f"`.python-version` selects Python {value}"))
        return


def _yaml(text: str, emitter: Emitter) -> None:
    from yaml.nodes import ScalarNode, SequenceNode

    from neuron_migrate.deps.yaml_nodes import compose, mappings, pairs

    if any(signal.decode() in text for signal in COMMAND_SIGNALS):
        _commands(text, emitter)
    for document in compose(text):
        for node in mappings(document):
            for key, value in pairs(node):
                matrix = key.value == "matrix"  # its `python-version` is met on its own
                for name, values in (pairs(value) if matrix else [(key, value)]):
                    if not (name.value in MATRIX_KEYS if matrix else
                            name.value == "python-version"):
                        continue
                    items = values.value if isinstance(values, SequenceNode) else [values]
                    versions = [v.value for v in items if isinstance(v, ScalarNode)]
                    _ci_versions(versions, values.start_mark.index, emitter)


def _ci_versions(values: list[str], offset: int, emitter: Emitter) -> None:
    """A CI job's Python: reported when no version it lists is one TorchNeuron installs on
    (a matrix that also runs 3.12 already tests the supported interpreter)."""
    parsed = [VERSION.match(v.strip()) for v in values]
    if not values or any(p is None for p in parsed):
        return  # `${{ matrix.python }}`, `3.x`, `pypy3.10`: not a version this can judge
    versions = [(int(p[1]), int(p[2])) for p in parsed if p is not None]
    if not any(v >= SUPPORTED[0] for v in versions):
        listed = ", ".join(values)
        emitter.report(ids.PYTHON_PIN, offset, _advice(f"CI runs Python {listed} only"))


def _lines(text: str) -> Iterator[tuple[int, str]]:
    offset = 0
    for line in text.splitlines(keepends=True):
        yield offset, line.rstrip("\r\n")
        offset += len(line)


READERS = {"dockerfile": _dockerfile, "pyproject": _pyproject, "setup.py": _setup_py,
           "setup.cfg": _setup_cfg, "conda": _conda, "yaml": _yaml, "shell": _commands,
           "makefile": _commands,
           "python-version": _python_version, "pipfile": _pipfile}


def no_pins(text: str, emitter: Emitter, path: str = "") -> None:
    """The pin scanner of `.python-version`: it holds versions of Python, never a package."""
