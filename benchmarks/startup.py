"""Start-up time: what a pre-commit hook pays on every commit (not a test: CI never fails on
timing). Times whole processes of the `neuron-migrate` executable, as its console script
starts it, against `python -c pass` in the same interpreter, and prints the ratios.

  --version | rules | check on one small clean file | check on five clean files and a
  requirements file | check of a clean editor buffer on stdin (`check --stdin-filename NAME
  -`) | check on one XLA-era file (for scale: that one needs the engine) | check of a small
  repository: 20 Python files, 3 of them XLA-era modules, 3 notebooks (2 with XLA cells) and a
  requirements file (`realistic_repo`; the goal: at most 10x `python -c pass`)

Runs are interleaved (one of each command per round) so that a busy neighbour slows all of
them alike; the fastest run of each is compared, as timeit does.

    python benchmarks/startup.py [--rounds 20] [--pythonpath CHECKOUT]

`--pythonpath` measures another checkout (an older commit, say) with the same interpreter.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import realistic_repo  # noqa: E402
import source_tree  # noqa: E402

CONSOLE_SCRIPT = "import sys\nfrom neuron_migrate.entry import main\nsys.exit(main())\n"
"""What pip's generated `neuron-migrate` script does (pyproject: neuron_migrate.entry:main)."""
OLDER_CONSOLE_SCRIPTS = {
    "codemod/entry.py": "import sys\nfrom codemod.entry import main\nsys.exit(main())\n",
    "codemod/cli.py": "import sys\nfrom codemod.cli import app\nsys.exit(app())\n",
}
"""The same, for checkouts from before the one import package (and before codemod/entry.py)."""

CLEAN = '''"""A small training module: no token of the old stack anywhere in it."""

import argparse
import os

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=int(os.environ.get("STEPS", "3")))
    args = parser.parse_args()
    model = Net()
    for _ in range(args.steps):
        model(torch.ones(4, 8)).sum().backward()


if __name__ == "__main__":
    main()
'''

STDIN = "check a clean buffer on stdin"

OLD = ("import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\n"
       "for step in range(3):\n    xm.mark_step()\n")


def _commands(folder: Path, script: Path) -> dict[str, list[str]]:
    tool = [sys.executable, str(script)]
    clean = [str(folder / f"clean{i}.py") for i in range(5)]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "--version": [*tool, "--version"],
        "rules": [*tool, "rules"],
        "check one clean file": [*tool, "check", clean[0]],
        "check 5 clean files + requirements": [*tool, "check", *clean,
                                               str(folder / "requirements.txt")],
        STDIN: [*tool, "check", "--stdin-filename", clean[0], "-"],
        "check one XLA-era file": [*tool, "check", str(folder / "old.py")],
        # cold: no results kept from the rounds before
        SMALL_REPOSITORY: [*tool, "check", "--no-cache", str(folder / "repository")],
    }


SMALL_REPOSITORY = "check a 20-file repository"


def _small_repository(root: Path) -> None:
    """Shaped like the public checkouts (`realistic_repo`), at the size of a small project."""
    realistic_repo.generate(root, 20)
    rng = random.Random(3)
    for index, xla in enumerate((True, False, True)):
        (root / f"pkg{index}" / f"walkthrough_{index}.ipynb").write_text(
            realistic_repo.notebook(rng, xla))
    (root / "requirements.txt").write_text(realistic_repo.requirements(rng))


def _write_inputs(folder: Path, checkout: Path) -> Path:
    for i in range(5):
        (folder / f"clean{i}.py").write_text(CLEAN)
    (folder / "requirements.txt").write_text("torch==2.13.0\nnumpy\n")
    (folder / "old.py").write_text(OLD)
    _small_repository(folder / "repository")
    script = folder / "neuron-migrate"
    older = [text for path, text in OLDER_CONSOLE_SCRIPTS.items() if (checkout / path).exists()]
    new = (checkout / "codemod" / "engine").is_dir()  # the layout `source_tree` maps
    script.write_text(CONSOLE_SCRIPT if new else older[0])
    return script


def _environment(pythonpath: Path) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPROFILEIMPORTTIME")}
    environment["PYTHONPATH"] = str(pythonpath)
    return environment


def _time(command: list[str], environment: dict[str, str], cwd: Path) -> float:
    with open(cwd / "clean0.py", "rb") as source:  # what `-` reads; the others, nothing
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=environment, cwd=cwd, stdin=source)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--pythonpath", type=Path, default=ROOT,
                        help="the checkout to measure (default: this one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        environment = _environment(source_tree.pythonpath(args.pythonpath, folder / "tool"))
        commands = _commands(folder, _write_inputs(folder, args.pythonpath))
        # the package's folders only: bytecode beside the fixtures would become fixtures
        code = [str(args.pythonpath / folder) for folder in ("codemod", "rules", "emulator")
                if (args.pythonpath / folder).is_dir()]
        subprocess.run([sys.executable, "-m", "compileall", "-q", *code],
                       env=environment, stdout=subprocess.DEVNULL, check=False)
        for command in commands.values():  # warm the file cache and the bytecode
            _time(command, environment, folder)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, command in commands.items():
                times[name].append(_time(command, environment, folder))
    base = min(times["python -c pass"])
    print(f"{'command':<36} {'fastest s':>9} {'median s':>9} {'x python':>9}")
    for name, runs in times.items():
        print(f"{name:<36} {min(runs):>9.3f} {statistics.median(runs):>9.3f} "
              f"{min(runs) / base:>9.1f}")
    print(f"goal: --version, rules and checks of clean files at most 5x `python -c pass`, the "
          f"small repository at most 10x ({args.rounds} rounds, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
