"""`neuron-migrate verify ORIGINAL MIGRATED`: do the two compute the same training?

The original runs under torch_xla on this CPU (the reference environment), the migrated script
under the emulated neuron device exactly as `smoke` runs it, each for K optimizer steps on N
processes, and then the migrated one again with its parameters perturbed by float32's
rounding, to measure the noise. compare.py judges, causes.py names the likely cause.

Exit status: 0 when they agree, 1 when they differ, 2 when they cannot be compared (usage,
out of scope, data that differs from run to run, an original that does not run, an
environment that cannot be made); the report always gives the reason.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer

from neuron_migrate.model import Finding
from neuron_migrate.verify import compare, reference_env, runs
from neuron_migrate.verify.causes import likely_cause
from neuron_migrate.verify.compare import CANNOT, DIFFER, Verdict
from neuron_migrate.verify.report import VERIFY_FORMATS, Outcome, render
from neuron_migrate.verify.scope import OUT_OF_SCOPE_NOTE, out_of_scope


def _say(text: str) -> None:
    typer.echo(f"verify: {text}", err=True)


def verify(
    original: Annotated[Path, typer.Argument(
        help="The script before the migration (with --original-rev: its path in the git "
        "repository, taken at REV).", show_default=False, metavar="ORIGINAL")],
    migrated: Annotated[Path, typer.Argument(help="The migrated script.", show_default=False,
                                             metavar="MIGRATED")],
    script_args: Annotated[Optional[list[str]], typer.Argument(
        help="Arguments for both scripts, after `--`.", show_default=False,
        metavar="SCRIPT_ARGS")] = None,
    nproc: Annotated[int, typer.Option(
        "--nproc", min=1, metavar="N", help="Processes (data-parallel replicas) per side, "
        "launched as torchrun does; the original's xmp.spawn / torch_xla.launch run one "
        "replica in each.")] = 1,
    steps: Annotated[int, typer.Option("--steps", min=1, metavar="K",
                                       help="Optimizer steps to compare.")] = 5,
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT",
                                     help=VERIFY_FORMATS.help())] = "text",
    original_rev: Annotated[Optional[str], typer.Option(
        "--original-rev", metavar="REV", help="Take the original from git at this revision "
        "(its repository exported, so its local modules come along).")] = None,
    reference_python: Annotated[Optional[str], typer.Option(
        "--reference-python", metavar="PATH", help="The interpreter for the original (torch "
        "and torch_xla 2.1 or near). Default: an environment made on first use in "
        "$XDG_CACHE_HOME/neuron-migrate (else ~/.cache/neuron-migrate).")] = None,
    keep_dropout: Annotated[bool, typer.Option(
        "--keep-dropout", help="Keep dropout (neutralised by default: XLA draws its masks "
        "from a generator of its own, so the two sides can never agree with it).")] = False,
    match_numerics: Annotated[bool, typer.Option(
        "--match-numerics", help="Run the original without the settings that change its "
        "numerics (XLA_USE_BF16, XLA_DOWNCAST_BF16, NEURON_RT_STOCHASTIC_ROUNDING_EN...); "
        "by default they are kept and reported as expected differences.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", min=1, metavar="S",
                                           help="Seconds each run may take.")] = 600.0,
    logs: Annotated[Optional[Path], typer.Option(
        "--logs", metavar="DIR", help="Keep each run's output in DIR/original, "
        "DIR/migrated and DIR/perturbed.")] = None,
) -> None:
    """Run the original (torch_xla on the CPU) and the migrated script (the emulated neuron
    device) side by side for K steps and say whether they compute the same losses and
    gradients; where they first part, the likely cause.

    Step 1 must agree within 1e-5 (relative); later steps within 10x the noise measured by
    running the migrated script again with its parameters perturbed by float32's rounding.
    Dropout is neutralised and random tensors made on the device come from the CPU generator
    on both sides. Data-parallel scripts (xm.optimizer_step, xm.all_reduce, MpDeviceLoader,
    xmp.spawn, torch_xla.launch, torchrun with the xla backend) run with --nproc N. Out of
    scope, said so: tensor/pipeline parallel, FSDP, ZeRO-1, SPMD, NKI, datasets fetched at
    run time.

    Exit status: 0 when they agree, 1 when they differ, 2 when they cannot be compared.
    """
    if (problem := VERIFY_FORMATS.problem(fmt)) is not None:
        raise typer.BadParameter(problem, param_hint="--format")
    if not migrated.is_file():
        raise typer.BadParameter(f"no such file: {migrated}", param_hint="MIGRATED")
    with tempfile.TemporaryDirectory(prefix="neuron-verify-rev-") as exported:
        source_path = _original_path(original, original_rev, Path(exported))
        plan = runs.Plan(source_path, migrated, tuple(script_args or ()), nproc, steps, timeout,
                         keep_dropout, match_numerics, logs)
        outcome = run_verify(plan, reference_python, display=str(original))
    typer.echo(render(outcome, fmt))
    raise typer.Exit(outcome.exit_code)


def _original_path(original: Path, rev: str | None, exported: Path) -> Path:
    if rev is None:
        if not original.is_file():
            raise typer.BadParameter(f"no such file: {original}", param_hint="ORIGINAL")
        return original
    folder = original.resolve().parent
    top = _git(folder, "rev-parse", "--show-toplevel").strip()
    inside = original.resolve().relative_to(top)
    archive = subprocess.run(["git", "-C", top, "archive", rev], capture_output=True)
    if archive.returncode != 0:
        raise typer.BadParameter(archive.stderr.decode(errors="replace").strip(),
                                 param_hint="--original-rev")
    subprocess.run(["tar", "-x", "-C", str(exported)], input=archive.stdout, check=True)
    path = exported / inside
    if not path.is_file():
        raise typer.BadParameter(f"{inside} does not exist at {rev}", param_hint="--original-rev")
    return path


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise typer.BadParameter(f"not in a git repository: {folder}", param_hint="--original-rev")
    return done.stdout


def run_verify(plan: runs.Plan, given_python: str | None, display: str | None = None) -> Outcome:
    """Everything after the command line: scope, environment, the three runs, the verdict."""
    outcome = Outcome(display or str(plan.original), str(plan.migrated), plan.nproc, plan.steps,
                      Verdict(CANNOT, ""))
    source = plan.original.read_text(encoding="utf-8", errors="replace")
    findings = _findings(plan.original, source)
    reasons = out_of_scope(source, findings)
    if reasons:
        outcome.verdict = Verdict(CANNOT, "out of scope: " + "; ".join(reasons) + ". " +
                                  OUT_OF_SCOPE_NOTE)
        return outcome
    try:
        python = reference_env.reference_python(given_python, _say)
    except reference_env.ReferenceUnavailable as error:
        outcome.verdict = Verdict(CANNOT, f"no reference environment: {error}")
        return outcome
    outcome.reference_python = python
    workers = f"{plan.nproc} process{'es' if plan.nproc != 1 else ''}"
    _say(f"running the original under torch_xla on the CPU ({workers}, {plan.steps} steps)")
    original = runs.run_original(plan, python)
    outcome.seconds["original"] = original.seconds
    if original.error:
        outcome.verdict = Verdict(CANNOT, f"the original does not run here: {original.error} "
                                  f"(a dataset fetched at run time, or an API torch_xla 2.1 "
                                  f"lacks, is out of scope)")
        return outcome
    _say("running the migrated script on the emulated neuron device")
    migrated = runs.run_migrated(plan)
    outcome.seconds["migrated"] = migrated.seconds
    if migrated.install_failed:
        outcome.verdict = Verdict(CANNOT, f"the emulator cannot be installed: "
                                  f"{migrated.install_failed}")
        return outcome
    if migrated.error and not any(r and r["steps"] for r in migrated.records):
        outcome.verdict = Verdict(DIFFER, f"the migrated script fails before its first step "
                                  f"while the original runs: {migrated.error}")
        return outcome
    _say("running it again with its parameters perturbed by 1e-7, to measure the noise")
    noise = runs.run_migrated(plan, runs.PERTURBATION)
    outcome.seconds["perturbed"] = noise.seconds
    verdict = compare.judge(original.records, migrated.records,
                            None if noise.error and not any(noise.records) else noise.records,
                            plan.steps)
    if migrated.error:
        verdict.notes.append(f"the migrated script failed after its recorded steps: "
                             f"{migrated.error}")
        if verdict.status != DIFFER:
            verdict.status, verdict.reason = DIFFER, (
                f"the migrated script fails at step {_failed_at(migrated)} while the "
                f"original runs: {migrated.error}")
    if plan.match_numerics and verdict.expected_differences:
        verdict.notes.append("--match-numerics: the original ran without "
                             + ", ".join(sorted(verdict.expected_differences)))
    if verdict.parting is not None:
        verdict.cause = likely_cause(verdict.parting, findings, plan.nproc,
                                     verdict.expected_differences, plan.match_numerics)
    outcome.verdict = verdict
    return outcome


def _failed_at(run: runs.Run) -> int:
    return 1 + min((len(r["steps"]) for r in run.records if r), default=0)


def _findings(path: Path, source: str) -> list[Finding]:
    """What the engine does to the original: the rules on each path, and the scope."""
    from neuron_migrate.engine.migrate import migrate_source
    from neuron_migrate.registry import Registry
    from neuron_migrate.rules import all_rules

    try:
        result = migrate_source(str(path), source.encode(), Registry(all_rules()))
    except Exception as error:  # noqa: BLE001 - the causes lose their rules, nothing else
        _say(f"could not migrate the original to read its findings: {error}")
        return []
    return list(result.findings)


