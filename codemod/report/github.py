"""GitHub Actions workflow commands: one annotation per finding, shown on the PR's diff.

The commands' syntax escapes only `%`, line breaks and (in properties) `:` and `,`; a terminal
control in a file name or quoted code would reach the job's log (which renders ANSI
sequences) or the terminal of someone running the format locally as it is. Such characters
are shown as escapes (`printable`), as in the text report: an annotation on a file whose name
holds one is then shown on the run, not on the file's diff."""

from __future__ import annotations

from typing import TYPE_CHECKING

from neuron_migrate.model import Finding, Kind
from neuron_migrate.printable import printable
from neuron_migrate.report.renderer import RunFormat, RunReport
from neuron_migrate.report.summary import line_in_file

if TYPE_CHECKING:  # the runner is only a type here
    from neuron_migrate.runner import RunResult


def render_github(result: RunResult) -> str:
    lines: list[str] = []
    for finding in result.findings:
        level = "warning" if finding.kind is not Kind.FIX or not finding.applied else "notice"
        properties = (f"file={_property(finding.path)},{_where(finding)},"
                      f"title={_property(finding.rule_id + _cell(finding))}")
        lines.append(f"::{level} {properties}::{_data(finding.message)}")
    for file in result.files:
        if file.error:
            lines.append(f"::error file={_property(file.path)}::{_data(file.error)}")
    for error in result.errors:
        lines.append(f"::error ::{_data(error)}")
    return "\n".join(lines)


def _where(finding: Finding) -> str:
    """The line of the file the pull request's diff shows: in a notebook, the `.ipynb`'s line
    that holds the cell's line (a cell's own line and column mean nothing there)."""
    if finding.cell is not None:
        return f"line={line_in_file(finding)}"
    return f"line={finding.line},col={finding.column}"


def _cell(finding: Finding) -> str:
    return f" (cell {finding.cell}, line {finding.line})" if finding.cell is not None else ""


def _data(text: str) -> str:
    return printable(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def _render(report: RunReport) -> str:
    return render_github(report.result)


GITHUB = RunFormat(_render)
