"""Speed and memory at repository scale, measured in one run (not a test: CI never fails on
timing). Generates the synthetic repository, then times whole processes:

  neuron-migrate check -j1 and -jN | neuron-migrate check --diff -j1, which also generates,
  verifies and diffs every new file | a naive LibCST+QualifiedNameProvider transformer doing
  the device and step rewrites over the XLA files, and check -j1 over those same files |
  ruff check --select F over the same tree | re-checks with the result cache, cold, warm and
  after one file is edited, next to ruff's with its cache (warm.py)

and prints wall times, peak memory (largest process) and the ratios docs/performance.md records.

    python -m pip install -e ".[bench]"   # ruff, for the ruff ratio
    python benchmarks/run.py [--files 5000] [--repeat 3] [--keep DIR]
    python benchmarks/run.py --profile realistic   # shaped like the public Neuron repositories
    python benchmarks/run.py --tree CHECKOUT...     # real checkouts instead of a generated tree

Profiles: `synthetic` (synthetic_repo.py: short modules, 15% XLA-era) and `realistic`
(realistic_repo.py: 17% XLA-era modules of 300-400 lines with many flagged statements,
notebooks with XLA cells, Dockerfiles and requirements with pins).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realistic_repo  # noqa: E402
import synthetic_repo  # noqa: E402
import warm  # noqa: E402

PROFILES = {"synthetic": synthetic_repo.generate, "realistic": realistic_repo.generate}

_MEASURE = ("import resource, subprocess, sys, time\n"
            "start = time.perf_counter()\n"
            "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            "print(time.perf_counter() - start, "
            "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")


NAIVE = "naive LibCST + QualifiedNameProvider (XLA files only)"
SAME_FILES = "neuron-migrate check -j1 (XLA files only)"


def measure(command: list[str], repeat: int = 1,
            env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds and peak resident MiB of the command's largest process: the fastest of
    `repeat` runs (as timeit does: on a shared machine, slower runs measure the neighbours),
    and the largest peak of them. Without `env`, neuron-migrate runs without its result
    cache: every run is a cold one (warm.py measures the cache)."""
    walls, peaks = [], []
    environment = env if env is not None else {**os.environ, "NEURON_MIGRATE_NO_CACHE": "1"}
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", _MEASURE, *command], capture_output=True,
                              text=True, check=True, env=environment)
        wall, peak_kib = done.stdout.split()
        walls.append(float(wall))
        peaks.append(int(peak_kib) / 1024)
    return min(walls), max(peaks)


def _compile_bytecode() -> None:
    """Installed packages carry their bytecode (pip compiles it); an editable install under
    PYTHONDONTWRITEBYTECODE would otherwise recompile neuron-migrate's modules on every run."""
    import neuron_migrate
    from neuron_migrate import emulator
    from neuron_migrate import rules

    folders = [str(Path(m.__file__).parent) for m in (neuron_migrate, emulator, rules)]
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], check=True,
                   env=environment, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of the two commands in the ruff ratio, the fastest counts "
                             "(default: 3)")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="synthetic",
                        help="the generated repository's shape (default: synthetic)")
    parser.add_argument("--tree", type=Path, nargs="+",
                        help="measure these folders (public checkouts, say) instead of a "
                             "generated repository")
    parser.add_argument("--command", default="neuron-migrate",
                        help="how to start neuron-migrate (default: the installed script; "
                             "from a source checkout: \"python -m neuron_migrate\")")
    args = parser.parse_args()
    command = shlex.split(args.command)
    found = shutil.which(command[0])
    tool = [found, *command[1:]] if found else None
    ruff = shutil.which("ruff")
    if tool is None:
        sys.exit("neuron-migrate is not installed in this environment")
    if ruff is None:
        print("ruff is not installed, so the ruff ratio is left out "
              "(python -m pip install -e \".[bench]\")\n", file=sys.stderr)
    root = args.keep or Path(tempfile.mkdtemp(prefix="neuron-migrate-bench-"))
    if args.tree:
        trees = [str(tree) for tree in args.tree]
        print(f"trees: {' '.join(trees)}")
    else:
        counts = PROFILES[args.profile](root / "repo", args.files)
        PROFILES[args.profile](root / "small", max(args.files // 5, 1))
        trees = [str(root / "repo")]
        print(f"profile {args.profile}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    python_files = [p for tree in trees for p in Path(tree).rglob("*.py")]
    xla_files = sorted(str(p) for p in python_files if b"torch_xla" in p.read_bytes())
    cores = len(os.sched_getaffinity(0))
    lines = sum(p.read_bytes().count(b"\n") for p in python_files)
    print(f"{len(python_files)} Python files ({lines} lines), {len(xla_files)} with "
          f"torch_xla; {cores} cores\n")
    _compile_bytecode()
    results: dict[str, tuple[float, float]] = {}
    check = [*tool, "check", *trees, "-q"]
    results["neuron-migrate check -j1"] = measure([*check, "-j", "1"])
    best = f" (best of {args.repeat})" if args.repeat > 1 else ""
    parallel = f"neuron-migrate check -j{cores}{best}"
    results[parallel] = measure([*check, "-j", str(cores)], args.repeat)
    results["neuron-migrate check --diff -j1"] = measure([*check, "--diff", "-j", "1"])
    if not args.tree:
        results["neuron-migrate check -j1 (1/5 of the files)"] = measure(
            [*tool, "check", str(root / "small"), "-q", "-j", "1"])
    # the naive transformer reads only the XLA files: timed on the same files, the check is
    # compared like for like (the whole tree's check also reads every other file)
    results[SAME_FILES] = measure([*tool, "check", *xla_files, "-q", "-j", "1"])
    naive = [sys.executable, str(Path(__file__).with_name("naive_baseline.py")), *xla_files]
    results[NAIVE] = measure(naive)
    if ruff:
        results[f"ruff check --select F{best}"] = measure(
            [ruff, "check", "--select", "F", "--no-cache", "--isolated", *trees],
            args.repeat)
    width = max(map(len, results))
    for name, (wall, peak) in results.items():
        print(f"{name:<{width}}  {wall:8.2f} s  {peak:8.1f} MiB")
    one, _ = results["neuron-migrate check -j1"]
    naive_time, _ = results[NAIVE]
    print(f"\nnaive baseline / neuron-migrate -j1 on the same (XLA) files: "
          f"{naive_time / results[SAME_FILES][0]:.1f}x (goal: >= 8x); on the whole tree: "
          f"{naive_time / one:.1f}x, with --diff: "
          f"{naive_time / results['neuron-migrate check --diff -j1'][0]:.1f}x")
    if ruff:
        print(f"neuron-migrate -j{cores} / ruff: "
              f"{results[parallel][0] / results[f'ruff check --select F{best}'][0]:.1f}x "
              "(goal: <= 10x)")
    edited = Path(xla_files[0]) if xla_files else python_files[0]
    warm.report(tool, ruff, trees, edited, args.repeat, measure)
    if not args.tree:
        small_peak = results["neuron-migrate check -j1 (1/5 of the files)"][1]
        print(f"peak memory, full tree / one fifth: "
              f"{results['neuron-migrate check -j1'][1] / small_peak:.2f}x (goal: flat)")
    if args.keep is None:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
