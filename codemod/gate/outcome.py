"""How the gate's options change a run's outcome: which findings are reported, what is
written, and the exit status."""

from __future__ import annotations

from collections.abc import Callable

from neuron_migrate.gate import Gate
from neuron_migrate.runner import RunResult

Say = Callable[[str], None]


def usage_problem(gate: Gate, stdin: bool) -> tuple[str, str] | None:
    """A combination of options the run cannot honour: (message, option)."""
    if gate.baseline and gate.write_baseline:
        return ("--baseline reads a baseline and --write-baseline writes one: give one "
                "(to refresh a baseline, write it again)", "--write-baseline")
    if stdin and gate.rewrites_outcome:
        option = "--add-noqa" if gate.add_noqa else "--baseline" if gate.baseline else \
            "--write-baseline"
        return f"{option} works on files, not on standard input", option
    return None


def before_report(result: RunResult, gate: Gate, say: Say, warn: Say
                  ) -> tuple[RunResult, int | None]:
    """The result to report, and the exit status when the run ends here (nothing more
    reported: a baseline was written, or markers were added, or the baseline is unusable)."""
    if gate.baseline is None and gate.write_baseline is None:
        return _before_report(result, gate, say, warn)  # nothing can raise BaselineError
    from neuron_migrate.gate.baseline import BaselineError

    try:
        return _before_report(result, gate, say, warn)
    except BaselineError as error:
        warn(f"error: {error}")
        return result, 2


def _before_report(result: RunResult, gate: Gate, say: Say, warn: Say
                   ) -> tuple[RunResult, int | None]:
    if gate.baseline is not None:
        from neuron_migrate.gate.baseline import apply_baseline, describe_stale, read_baseline

        outcome = apply_baseline(result, gate.baseline, read_baseline(gate.baseline))
        result = outcome.result
        for line in describe_stale(gate.baseline, outcome.stale):
            warn(line)
    if gate.write_baseline is not None:
        from neuron_migrate.gate.baseline import write_baseline

        count = write_baseline(gate.write_baseline, result)
        say(f"wrote {count} finding{'s' if count != 1 else ''} to the baseline "
            f"{gate.write_baseline}; with `--baseline {gate.write_baseline}` a run fails only "
            "on findings not in it")
        return result, _errors_only(result)
    if gate.add_noqa:
        from neuron_migrate.gate.add_noqa import add_noqa

        added = add_noqa(result.files)
        for message in added.skipped:
            warn(message)
        files = f" in {added.files} file{'s' if added.files != 1 else ''}" if added.files else ""
        say(f"added {added.markers} `# neuron-migrate: reviewed[...]` "
            f"acknowledgement{'s' if added.markers != 1 else ''}{files}")
        for message in added.errors:
            warn(f"error: {message}")
        return result, 2 if added.errors else _errors_only(result)
    return result, None


def _errors_only(result: RunResult) -> int:
    """Findings do not fail a run that only recorded them; errors and interruptions do."""
    if result.interrupted:
        return 128 + result.interrupted
    return 2 if result.failed else 0


def exit_status(status: int, gate: Gate) -> int:
    """--exit-zero: "findings" (1) becomes success; errors (2) and signals stay."""
    return 0 if gate.exit_zero and status == 1 else status
