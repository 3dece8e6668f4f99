"""Real code as the test: migrate public XLA-era repositories with neuron-migrate and count
what breaks (not a test: it needs the public checkouts, and takes minutes).

Given checkouts of public repositories, it copies them into a scratch folder, migrates every
XLA-era file there (Python files and notebooks that mention torch_xla / torch_neuronx /
xla_device, and the dependency files that mention Neuron or XLA) with `apply --format json`,
applies a second time, and reports:

  files changed | review items by rule | outputs that gain undefined names (pyflakes' set of
  undefined names before vs after, per file) | internal errors | files that change on a second
  apply | leftover torch_xla references (imports of torch_xla and uses of the names they bind)

Then, for the training scripts listed in benchmarks/realworld_scripts.toml (repo-relative
paths with their fake-data arguments; tiny synthetic data is generated where a script needs a
data file), it runs `smoke SCRIPT --nproc 2 --steps 3 --check-replicas -- ARGS` on each
migrated script (one process for the single-device scripts the list marks) and counts how
many run.

    python -m pip install -e ".[bench]"   # pyflakes
    python benchmarks/realworld.py CHECKOUT... [--tool-root PATH] [--python PY] [--json OUT]

A repository listed with `from = ["cuda"]` (pytorch/examples) is GPU code: its files that use
CUDA are migrated with `apply --from cuda` too.

A checkout is matched to the script list by its folder name: `aws-neuron-samples` or
`aws-neuron+aws-neuron-samples` for the repository aws-neuron/aws-neuron-samples. The tool under
test is the neuron-migrate source tree at --tool-root (default: the repository this file is
in), run as `PYTHONPATH=ROOT python -m neuron_migrate`, so several branches can be measured alike.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realworld_checks import (cuda_era_files, leftover_xla, notebook_source,  # noqa: E402
                              undefined_names, xla_era_files)
from realworld_data import generate_data  # noqa: E402
import source_tree  # noqa: E402

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE / "realworld_scripts.toml"
INTERNAL_ERROR = "internal error"
Json = dict[str, Any]


@dataclass(frozen=True)
class Checkout:
    """A repository copy: `repo` is owner/name, `source` the checkout, `copy` the scratch copy."""

    repo: str
    source: Path
    copy: Path
    include: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()  # `from` in the list: ("cuda",) for a CUDA repository

    def files(self) -> list[Path]:
        """The files the migration is asked to read: the XLA-era ones, and for a CUDA
        repository those that use CUDA too."""
        found = set(xla_era_files(self.copy, self.include))
        if "cuda" in self.sources:
            found.update(cuda_era_files(self.copy, self.include))
        return sorted(found)


@dataclass
class MigrationFigures:
    """What one apply (and the second apply) did to the XLA-era files of all checkouts."""

    files: int = 0
    changed: int = 0
    failed: int = 0
    failures: list[str] = field(default_factory=list)  # inputs the tool could not read or parse
    changed_on_second_apply: list[str] = field(default_factory=list)
    reviews_by_rule: dict[str, int] = field(default_factory=dict)
    internal_errors: list[str] = field(default_factory=list)
    new_undefined_names: dict[str, list[str]] = field(default_factory=dict)
    leftover_files: dict[str, int] = field(default_factory=dict)
    leftover_modules: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class ScriptOutcome:
    """One listed training script: how smoke ran it."""

    name: str
    path: str
    args: list[str]
    data: str | None
    status: str  # passed | failed | timeout | missing | no-report | skipped
    error: str = ""
    seconds: float = 0.0
    leftover: list[str] = field(default_factory=list)  # torch_xla modules it still imports
    smoke_options: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------- checkouts
def load_script_list(path: Path) -> Json:
    import tomllib

    return tomllib.loads(path.read_text(encoding="utf-8"))


def repo_of(folder: Path, known: list[str]) -> str:
    """The owner/name a checkout folder stands for: `name`, `owner+name` or `owner/name`."""
    base = folder.resolve().name
    for repo in known:
        owner, name = repo.split("/")
        if base in (name, f"{owner}+{name}"):
            return repo
    return base.replace("+", "/", 1)


def copy_checkouts(folders: list[Path], scratch: Path, settings: Json) -> list[Checkout]:
    """Copy every checkout (without its version control) into the scratch folder: apply
    writes in place, and the originals are the 'before' side of every comparison."""
    repos = settings.get("repos", {})
    checkouts = []
    for folder in folders:
        repo = repo_of(folder, list(repos))
        copy = scratch / repo.replace("/", "+")
        shutil.copytree(folder, copy, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        include = tuple(repos.get(repo, {}).get("include", ()))
        sources = tuple(repos.get(repo, {}).get("from", ()))
        checkouts.append(Checkout(repo, folder.resolve(), copy, include, sources))
    return checkouts


# ------------------------------------------------------------------------- migration
def tool_command(tool_root: Path, *args: str) -> tuple[list[str], dict[str, str]]:
    environment = dict(os.environ, PYTHONPATH=str(tool_root))
    return [sys.executable, "-m", source_tree.module(tool_root), *args], environment


def apply(tool_root: Path, files: list[Path], scratch: Path, report: Path,
          unsafe: bool, sources: tuple[str, ...] = ()) -> Json:
    """One `apply --format json` over the files; the JSON report it wrote."""
    command, environment = tool_command(
        tool_root, "apply", "--format", "json", "-o", str(report), "--quiet",
        *(["--unsafe-fixes"] if unsafe else []),
        *(f"--from={source}" for source in sources), *(str(f) for f in files))
    subprocess.run(command, env=environment, cwd=scratch, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    if not report.exists():
        return {"summary": {}, "files": [], "findings": [],
                "errors": [f"{INTERNAL_ERROR}: apply wrote no report"]}
    return json.loads(report.read_text(encoding="utf-8"))


def internal_errors(report: Json) -> list[str]:
    texts = list(report.get("errors", []))
    texts += [f["error"] for f in report.get("files", []) if f.get("error")]
    texts += [f"{f['path']}:{f['line']}: {f['message']}" for f in report.get("findings", [])]
    return sorted({t for t in texts if INTERNAL_ERROR in t})


def reviews_by_rule(report: Json) -> dict[str, int]:
    """Findings a person must act on: review items and fixes left unapplied."""
    counts = Counter(f"{f['rule_id']} {f.get('rule_name') or ''}".strip()
                     for f in report.get("findings", [])
                     if f["kind"] == "review" or not f["applied"])
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def compare_sources(checkouts: list[Checkout], files: list[Path],
                    figures: MigrationFigures) -> None:
    """Per Python file or notebook: undefined names the migration added, torch_xla left."""
    modules: Counter[str] = Counter()
    for checkout in checkouts:
        for path in files:
            if checkout.copy not in path.parents or path.suffix not in (".py", ".ipynb"):
                continue
            inside = path.relative_to(checkout.copy)
            relative = f"{checkout.repo}/{inside.as_posix()}"
            before, after = _source(checkout.source / inside), _source(path)
            added = undefined_names(after, relative) - undefined_names(before, relative)
            if added:
                figures.new_undefined_names[relative] = sorted(added.elements())
            left = leftover_xla(after)
            if left:
                figures.leftover_files[relative] = sum(left.values())
                modules.update(left)
    figures.leftover_modules = dict(modules.most_common())


def _source(path: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    return notebook_source(text) if path.suffix == ".ipynb" else text


def migrate(checkouts: list[Checkout], tool_root: Path, scratch: Path,
            unsafe: bool) -> MigrationFigures:
    files = [f for c in checkouts for f in c.files()]
    started = time.perf_counter()
    first = _apply_each(checkouts, tool_root, scratch, "apply-1", unsafe)
    seconds = time.perf_counter() - started
    second = _apply_each(checkouts, tool_root, scratch, "apply-2", unsafe)
    summary = first.get("summary", {})
    figures = MigrationFigures(
        files=len(files), changed=summary.get("changed", 0), failed=summary.get("failed", 0),
        changed_on_second_apply=sorted(f["path"] for f in second.get("files", [])
                                       if f["status"] == "changed"),
        failures=sorted(_relative(f["error"], scratch) for f in first.get("files", [])
                        if f.get("error") and INTERNAL_ERROR not in f["error"]),
        reviews_by_rule=reviews_by_rule(first),
        internal_errors=sorted({_relative(e, scratch)
                                for e in internal_errors(first) + internal_errors(second)}),
        seconds=round(seconds, 1))
    compare_sources(checkouts, files, figures)
    return figures


def _apply_each(checkouts: list[Checkout], tool_root: Path, scratch: Path, name: str,
                unsafe: bool) -> Json:
    """One apply per `from` setting (most repositories: one for all), merged into one
    report."""
    groups: dict[tuple[str, ...], list[Path]] = {}
    for checkout in checkouts:
        groups.setdefault(checkout.sources, []).extend(checkout.files())
    merged: Json = {"summary": {}, "files": [], "findings": [], "errors": []}
    for index, (sources, files) in enumerate(sorted(groups.items())):
        report = apply(tool_root, files, scratch, scratch / f"{name}-{index}.json", unsafe,
                       sources)
        for key, value in report.get("summary", {}).items():
            if isinstance(value, (int, float)):
                merged["summary"][key] = merged["summary"].get(key, 0) + value
        for key in ("files", "findings", "errors"):
            merged[key].extend(report.get(key, []))
    return merged


def _relative(message: str, scratch: Path) -> str:
    return message.replace(f"{scratch}{os.sep}", "")


# ------------------------------------------------------------------------- smoke
def run_scripts(checkouts: list[Checkout], entries: list[Json], tool_root: Path,
                python: str, timeout: float, only: list[str] | None,
                heavy: bool = False) -> list[ScriptOutcome]:
    by_repo = {c.repo: c for c in checkouts}
    outcomes = []
    for entry in entries:
        if only and not any(part in entry["name"] for part in only):
            continue
        missing = [m for m in entry.get("needs", []) if not importable(python, m)]
        if entry.get("heavy") and not heavy:
            outcome = ScriptOutcome(entry["name"], f"{entry['repo']}/{entry['path']}", [],
                                    entry.get("data"), "skipped", f"heavy: {entry['heavy']}")
        elif missing:
            outcome = ScriptOutcome(entry["name"], f"{entry['repo']}/{entry['path']}", [],
                                    entry.get("data"), "skipped",
                                    f"{python} has no {', '.join(missing)}")
        else:
            outcome = smoke_one(entry, by_repo.get(entry["repo"]), tool_root, python, timeout)
        print(render_scripts([outcome]).split("\n", 1)[1], flush=True)
        outcomes.append(outcome)
    return outcomes


@functools.cache
def importable(python: str, module: str) -> bool:
    """Whether the smoke interpreter has a script's dependency: a script that cannot import
    torchvision says nothing about the migration."""
    done = subprocess.run([python, "-c", f"import {module}"], capture_output=True, check=False)
    return done.returncode == 0


def smoke_one(entry: Json, checkout: Checkout | None, tool_root: Path, python: str,
              timeout: float) -> ScriptOutcome:
    """Generate the script's synthetic data, run smoke from the script's folder, read its
    JSON report."""
    args = [str(a) for a in entry.get("args", [])]
    outcome = ScriptOutcome(entry["name"], f"{entry['repo']}/{entry['path']}", args,
                            entry.get("data"), "missing")
    if checkout is None or not (checkout.copy / entry["path"]).exists():
        outcome.error = "checkout not given" if checkout is None else "script not found"
        return outcome
    script = checkout.copy / entry["path"]
    outcome.leftover = sorted(leftover_xla(script.read_text(encoding="utf-8")))
    if entry.get("data"):
        generate_data(entry["data"], script.parent, entry.get("data_root", "."))
    logs = checkout.copy.parent / "logs" / entry["name"].replace("/", "_").replace(" ", "_")
    outcome.smoke_options = smoke_options(entry)
    command, environment = tool_command(
        tool_root, "smoke", str(script), *outcome.smoke_options, "--timeout", str(timeout),
        "--format", "json", "--python", python, "--logs", str(logs), "--", *args)
    started = time.perf_counter()
    try:
        done = subprocess.run(command, env=environment, cwd=script.parent, capture_output=True,
                              text=True, timeout=timeout + 60, check=False)
    except subprocess.TimeoutExpired:
        outcome.status, outcome.error = "timeout", "smoke itself did not return"
        return outcome
    outcome.seconds = round(time.perf_counter() - started, 1)
    _read_smoke(done, outcome)
    if outcome.status == "failed" and not outcome.error:
        outcome.error = f"exited without a traceback; last output: {_last_line(logs)}"
    return outcome


def smoke_options(entry: Json) -> list[str]:
    """Two replicas checked against each other after each of 3 steps, unless the list says
    the script is single-device, slow, or diverges on its own."""
    nproc = int(entry.get("nproc", 2))
    replicas = nproc > 1 and entry.get("check_replicas", True)
    return ["--nproc", str(nproc), "--steps", str(entry.get("steps", 3)),
            *(["--check-replicas"] if replicas else [])]


def _last_line(logs: Path) -> str:
    """What a worker that exited on its own (sys.exit after a message) printed last."""
    for name in ("rank0.err", "rank0.out"):
        path = logs / name
        lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
        if lines:
            return lines[-1][:160]
    return "(nothing)"


def _read_smoke(done: subprocess.CompletedProcess[str], outcome: ScriptOutcome) -> None:
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        outcome.status = "no-report"
        outcome.error = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return
    if report.get("passed"):
        outcome.status = "passed"
    elif report.get("timed_out"):
        outcome.status, outcome.error = "timeout", "the run reached the timeout"
    else:
        outcome.status = "failed"
        outcome.error = _first_error(report)


def _first_error(report: Json) -> str:
    error = report.get("error")
    if report.get("install_failed"):
        return f"emulator not installed: {report['install_failed']}"
    if not error:
        return ""
    location = error.get("location") or {}
    where = f" at {Path(location.get('file', '')).name}:{location.get('line')}" if location else ""
    return f"{error.get('type')}: {error.get('message', '').splitlines()[0][:160]}{where}"


# ------------------------------------------------------------------------- report
def render_migration(figures: MigrationFigures) -> str:
    lines = [
        f"XLA-era files migrated: {figures.files} ({figures.seconds} s)",
        f"  files changed:                 {figures.changed}",
        f"  files that failed:             {figures.failed}",
        f"  review items:                  {sum(figures.reviews_by_rule.values())}",
        f"  outputs gaining undefined names: {len(figures.new_undefined_names)}",
        f"  internal errors:               {len(figures.internal_errors)}",
        f"  changed on a second apply:     {len(figures.changed_on_second_apply)}",
        (f"  files still using torch_xla:   {len(figures.leftover_files)} "
         f"({sum(figures.leftover_files.values())} references)"),
        "", "Review items by rule:",
        *(f"  {count:5}  {rule}" for rule, count in figures.reviews_by_rule.items()),
        "", "Undefined names gained:",
        *(f"  {path}: {', '.join(names)}" for path, names in figures.new_undefined_names.items()),
        "", "Internal errors:", *(f"  {text}" for text in figures.internal_errors),
        "", "Files that failed (not internal errors):", *(f"  {text}" for text in figures.failures),
        "", "Changed on a second apply:", *(f"  {p}" for p in figures.changed_on_second_apply),
        "", "torch_xla modules still referenced (references):",
        *(f"  {count:5}  {name}" for name, count in list(figures.leftover_modules.items())[:25]),
    ]
    return "\n".join(lines)


def render_scripts(outcomes: list[ScriptOutcome]) -> str:
    ran = sum(o.status == "passed" for o in outcomes)
    left_out = Counter(o.status for o in outcomes if o.status in ("skipped", "missing"))
    notes = []
    if left_out["skipped"]:
        notes.append(f"{left_out['skipped']} skipped: heavy, or the interpreter lacks what "
                     "they need")
    if left_out["missing"]:
        notes.append(f"{left_out['missing']} missing: no checkout")
    lines = [f"Training scripts that run under smoke: {ran} of "
             f"{len(outcomes) - left_out.total()}" + (f" ({'; '.join(notes)})" if notes else "")]
    for outcome in outcomes:
        lines.append(f"  {outcome.status:9} {outcome.name}  {outcome.error}")
        if outcome.leftover:
            lines.append(f"            still imports {', '.join(outcome.leftover)}")
    return "\n".join(lines)


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkouts", nargs="+", type=Path, help="repository checkouts")
    parser.add_argument("--tool-root", type=Path, default=HERE.parent,
                        help="the neuron-migrate source tree to measure (default: this one)")
    parser.add_argument("--scripts", type=Path, default=SCRIPTS,
                        help=f"the training-script list (default: {SCRIPTS.name})")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter smoke runs the scripts with (torch 2.13 or 2.14, "
                             "with torchvision for the vision scripts)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per script")
    parser.add_argument("--unsafe-fixes", action="store_true", help="apply with --unsafe-fixes")
    parser.add_argument("--no-smoke", action="store_true", help="only migrate and count")
    parser.add_argument("--heavy", action="store_true",
                        help="also run the scripts the list marks heavy (10 GB and more)")
    parser.add_argument("--only", action="append",
                        help="run only the listed scripts whose name contains this (repeatable)")
    parser.add_argument("--keep", type=Path, help="migrate in this (new) folder and keep it")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    settings = load_script_list(args.scripts)
    if args.keep:
        args.keep.mkdir(parents=True)
    scratch = (args.keep or Path(tempfile.mkdtemp(prefix="neuron-migrate-realworld-"))).resolve()
    try:
        checkouts = copy_checkouts(args.checkouts, scratch, settings)
        tool = source_tree.pythonpath(args.tool_root, scratch / "tool")
        figures = migrate(checkouts, tool, scratch, args.unsafe_fixes)
        print(render_migration(figures), flush=True)
        outcomes = [] if args.no_smoke else run_scripts(
            checkouts, settings.get("script", []), tool, args.python,
            args.timeout, args.only, args.heavy)
        if outcomes:
            print("\n" + render_scripts(outcomes))
        if args.json:
            args.json.write_text(json.dumps({"migration": asdict(figures),
                                             "scripts": [asdict(o) for o in outcomes]}, indent=2))
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
