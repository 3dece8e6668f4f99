"""The reference environment: the interpreter that runs the original script, torch_xla on CPU.

XLA-era Neuron code was written for the torch_xla 2.1 API generation (`xm.xrt_world_size` and
`xm.get_ordinal` still exist; 2.9 removed them), which installs from the package index with
torch 2.1 on Python 3.11 or older (about 5 GB, a few minutes). It is never a dependency of
neuron-migrate: it is made on first use in a cache folder and reused, or given with
--reference-python. Failing to make it is not the scripts' fault: exit status 2.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

TORCH = "torch==2.1.0"
TORCH_XLA = "torch_xla==2.1.0"
NUMPY = "numpy<2"  # torch_xla imports it; torch 2.1 was built against numpy 1
FOLDER = "verify-xla-2.1"
PYTHONS = ("python3.11", "python3.10", "python3.9")
PROBE = "import torch, torch_xla, numpy; print(torch.__version__, torch_xla.__version__)"


class ReferenceUnavailable(Exception):
    """The reference interpreter cannot be found, made or used; the message says why and what
    to do."""


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "neuron-migrate" / FOLDER


def reference_python(given: str | None, say: Callable[[str], None]) -> str:
    """The interpreter to run originals with: the one given (checked), else the cached
    environment's, made now if it does not exist yet."""
    if given is not None:
        found = shutil.which(given)
        if found is None:
            raise ReferenceUnavailable(f"no such interpreter: {given}")
        probe(found)
        return found
    folder = cache_folder()
    python = folder / "bin" / "python"
    if python.exists():
        try:
            probe(str(python))
            return str(python)
        except ReferenceUnavailable:
            say(f"the reference environment in {folder} is incomplete; making it again")
    create(folder, say)
    return str(python)


def probe(python: str) -> str:
    """The torch and torch_xla versions the interpreter imports; ReferenceUnavailable if not."""
    try:
        done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True,
                              timeout=300, env=_without_verify(os.environ))
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ReferenceUnavailable(f"{python} does not run: {error}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ReferenceUnavailable(f"{python} cannot import torch and torch_xla: {last}")
    return done.stdout.strip()


def base_python() -> str:
    """A Python old enough for torch_xla 2.1 (3.11 at most): this one, or one on PATH."""
    if sys.version_info[:2] <= (3, 11):
        return sys.executable
    for name in PYTHONS:
        found = shutil.which(name) or (f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None)
        if found:
            return found
    raise ReferenceUnavailable(
        "the reference environment needs Python 3.11 or older (torch_xla 2.1 has no wheels for "
        "newer ones) and none was found on PATH (python3.11, python3.10, python3.9); install "
        "one, or give an interpreter with torch 2.1 and torch_xla 2.1 by --reference-python")


def create(folder: Path, say: Callable[[str], None]) -> None:
    """python -m venv, then pip install torch, torch_xla and numpy; a half-made folder is
    removed so the next run starts afresh."""
    base = base_python()
    say(f"making the reference environment (torch 2.1 and torch_xla 2.1 on CPU, about 5 GB, "
        f"a few minutes, once) in {folder}")
    folder.parent.mkdir(parents=True, exist_ok=True)
    steps = [[base, "-m", "venv", "--clear", str(folder)],
             [str(folder / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
              "--progress-bar", "off", TORCH, TORCH_XLA, NUMPY]]
    for command in steps:
        say("  " + " ".join(command))
        done = subprocess.run(command, capture_output=True, text=True, env=_without_verify(os.environ))
        if done.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            tail = "\n".join(done.stderr.strip().splitlines()[-5:]) or done.stdout[-500:]
            raise ReferenceUnavailable(
                f"could not make the reference environment in {folder} ({command[2]} failed; "
                f"no network to the package index?):\n{tail}")
    probe(str(folder / "bin" / "python"))


def _without_verify(environ: os._Environ[str] | dict[str, str]) -> dict[str, str]:
    """The environment minus our recorder and the emulator, for pip and the probe."""
    return {k: v for k, v in environ.items()
            if not k.startswith(("NEURON_VERIFY_", "NEURON_EMU")) and k != "PYTHONPATH"}
