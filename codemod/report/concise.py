"""One line a finding, `path:line:col: NMxxx message`, as ruff's `--output-format concise`
prints it: the form editors' problem matchers and `grep` read.

A notebook's findings read `path:cell N:line:col:`, as ruff writes them; a fix that is part of
the run's rewrite carries ruff's `[*]` after its code. File errors follow, each already
starting with its path and line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from neuron_migrate.model import Finding
from neuron_migrate.report.renderer import RunFormat, RunReport

if TYPE_CHECKING:  # the runner is only a type here
    from neuron_migrate.registry import Registry
    from neuron_migrate.runner import RunResult


def render_concise(result: RunResult, registry: Registry | None = None) -> str:
    lines = [concise_line(finding) for finding in result.findings]
    lines += [f.error for f in result.files if f.error]
    lines += list(result.errors)
    return "\n".join(_one_line(line) for line in lines)


def concise_line(finding: Finding) -> str:
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    marker = " [*]" if finding.applied else ""
    return (f"{finding.path}:{cell}{finding.line}:{finding.column}: "
            f"{finding.rule_id}{marker} {finding.message}")


def _one_line(text: str) -> str:
    """A message on several lines would read as several findings."""
    return " ".join(text.splitlines())


def _render(report: RunReport) -> str:
    return render_concise(report.result, report.registry)


CONCISE = RunFormat(_render, human=True)
