"""NM950-NM952: the Python a project runs on. TorchNeuron ships wheels for CPython 3.12, 3.13
and 3.14 only (Neuron 2.33 release notes), so a project that settles on an older Python cannot
install it, whatever its code says.

These rules document what `neuron_migrate.deps.python_env` reports; the dependency scanner reads
the files (Dockerfiles, pyproject.toml, setup files, conda environments, `.python-version`,
CI workflows) even when they never name Neuron. All are review items: a new interpreter is a
decision the project's tests must back. Each example is checked against the scanner's output.
"""

from __future__ import annotations

from neuron_migrate.ruleapi import Example
from neuron_migrate.ruleapi.deps import ids
from neuron_migrate.ruleapi.readiness import Limit
from neuron_migrate.rules.dependencies import D_RN, DependencyRule

_WHY = """\
Why: TorchNeuron publishes one torch-neuronx wheel per PyTorch and Python version, for Python
3.12-3.14 (Neuron 2.33); pip finds no torch-neuronx 2.14 for an older interpreter and either
fails or falls back to an XLA-era release. (One AWS best-practices page says 3.10-3.14; the
release notes and the wheels say 3.12-3.14, which this rule follows.)"""


class PythonInImage(DependencyRule):
    id = ids.PYTHON_IMAGE
    name = "python-too-old-in-image"
    kind = ids.KINDS[id]
    limit = Limit.BLOCKS  # counted by `audit`, which reports these too
    summary = "a base image whose Python is older than 3.12, which TorchNeuron has no wheel for"
    explanation = f"""\
What it does: reports a Dockerfile `FROM` whose image runs a Python older than 3.12:
`python:3.10` (any variant, `python:3.11-slim-bookworm`, behind a registry or an ARG default),
and Ubuntu or Debian images whose own python3 is older: Ubuntu 20.04 (3.8) and 22.04 (3.10),
Debian 11 bullseye (3.9) and 12 bookworm (3.11). Those distribution defaults are an assumption
about what `apt-get install python3` gives; a stage that names Python 3.12-3.14 itself
(`python3.12`, `uv venv --python 3.12`, `python=3.12`) is not reported. A stage that installs
or runs an older `python3.X` itself is reported whatever its base (`apt-get install
python3.10`, `python3.10 -m pip`), with the ARG and ENV values it uses put in (`ARG
PYTHON="python3.10"` then `RUN ${{PYTHON}} -m pip install ...`). Only a Dockerfile for PyTorch
or Neuron work is judged: one that names torch or Neuron somewhere, or installs from a
requirements file that does (or is not beside it to read); an image that builds docs or runs
XGBoost is not.

{_WHY}

What differs: nothing is changed. Build on `python:3.12` (or later) or Ubuntu 24.04/26.04,
the systems TorchNeuron's release notes list, and run your tests on the new Python."""
    doc_url = D_RN
    example = Example.unchanged(
        "FROM python:3.10-slim\nRUN pip install torch-neuronx==2.14.* neuronx-cc==2.* nki\n",
        language="dockerfile")


class RequiresPython(DependencyRule):
    id = ids.REQUIRES_PYTHON
    name = "requires-python-excludes-312"
    kind = ids.KINDS[id]
    limit = Limit.BLOCKS  # counted by `audit`, which reports these too
    summary = "requires-python or python_requires admits no Python TorchNeuron supports"
    explanation = f"""\
What it does: reports a `requires-python` in pyproject.toml's [project] table, Poetry's
`python` dependency, or `python_requires` in setup.py or setup.cfg that admits none of
Python 3.12, 3.13 and 3.14 (`>=3.8,<3.12`, `==3.10.*`, `~3.10`).

{_WHY}

What differs: nothing is changed; a project whose metadata excludes the interpreter
TorchNeuron needs cannot be installed beside it. Widen the range (`>=3.12` or `>=3.9`) once
the project's tests pass on 3.12."""
    doc_url = D_RN
    example = Example.unchanged(
        "[project]\nname = \"trainer\"\nrequires-python = \">=3.8,<3.12\"\n",
        language="pyproject")


class PythonVersionPin(DependencyRule):
    id = ids.PYTHON_PIN
    name = "python-version-too-old"
    kind = ids.KINDS[id]
    limit = Limit.BLOCKS  # counted by `audit`, which reports these too
    summary = "a conda environment, .python-version, CI job or venv command uses a Python below 3.12"
    explanation = f"""\
What it does: reports `python=3.10` (or any match spec admitting no 3.12-3.14) in a conda
environment's dependencies, a `.python-version` (pyenv, uv) whose first version is older
than 3.12, a Pipfile's `[requires] python_version`, a CI job (`python-version:` in a GitHub Actions workflow, or a `python` matrix
axis) whose versions are all older than 3.12, and a command that makes an environment on an
older Python in a script, a RUN line or a CI step (`python3.10 -m venv`, `uv venv --python
3.11`, `conda create ... python=3.10`, `pyenv install 3.9`). A matrix that also runs 3.12 or later is not
reported: it already tests an interpreter TorchNeuron installs on. `${{{{ matrix... }}}}` and
`3.x` are not judged.

{_WHY}

What differs: nothing is changed; the environment a developer or CI creates from this file
cannot install torch-neuronx 2.14. Move it to 3.12 or later."""
    doc_url = D_RN
    example = Example.unchanged(
        "jobs:\n  test:\n    steps:\n      - uses: actions/setup-python@v5\n"
        "        with:\n          python-version: \"3.10\"\n", language="yaml")


RULES = (PythonInImage, RequiresPython, PythonVersionPin)
