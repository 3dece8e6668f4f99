"""A report to paste into a pull-request description or comment: summary first, then each
file's diff (collapsed) and every change explained with its documentation link.

GitHub refuses a comment over 65,536 characters, and a large migration's diffs run to
megabytes. When the whole report does not fit in `LIMIT`, it keeps the summary and lists the
files, worst first (errors, then review items, unsafe fixes, fixes), as many as fit, says how
many more there are and where the full detail is, and explains the changes of the worst files
(without their diffs) in the room left.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from neuron_migrate.model import FileResult, Finding, Kind
from neuron_migrate.printable import one_line
from neuron_migrate.registry import Registry
from neuron_migrate.report.renderer import RunFormat, RunReport
from neuron_migrate.report.summary import Summary, label, where
from neuron_migrate.report.text import diff_of

if TYPE_CHECKING:  # the runner is only a type here
    from neuron_migrate.runner import RunResult


LIMIT = 60_000
"""The most UTF-8 bytes the report takes: under GitHub's 65,536-character limit on an issue or
pull-request comment, however GitHub counts them, with room for a workflow's own heading."""

MORE = ("The full report, every diff and explanation, did not fit in a pull-request comment. "
        "Get it with `--output FILE` in another format: `--format json --output "
        "neuron-migrate.json` (kept as a CI artifact), or `apply --dry-run` for the diffs.")


def render_markdown(result: RunResult, registry: Registry, notes: Sequence[str] = (),
                    limit: int = LIMIT) -> str:
    """`notes`: what the run says of the hardware it assumed (neuron_migrate.target);
    `limit`: the bytes the report may take (see LIMIT)."""
    head = _head(result, registry, notes)
    full = "\n".join([*head, *(line for file in result.files
                               for line in _file_section(file, registry))])
    if _size(full) <= limit:
        return full
    return _summarized(result, head, registry, limit)


def _head(result: RunResult, registry: Registry, notes: Sequence[str]) -> list[str]:
    summary = Summary.of(result)
    lines = ["# neuron-migrate report", "",
             f"{summary.sentence(result.written)}.", ""]
    lines += [line for note in notes for line in (f"> {_escape(note)}", "")]
    if summary.by_rule:
        lines += ["| rule | name | fixes | unsafe fixes | review items |",
                  "|---|---|---:|---:|---:|"]
        for rule_id, fixes, unsafe, reviews in summary.by_rule:
            rule = registry.by_id.get(rule_id)
            name = f"[{rule.name}]({rule.doc_url})" if rule else ""
            lines.append(f"| {rule_id} | {name} | {fixes} | {unsafe} | {reviews} |")
        lines.append("")
    errors = [f.error for f in result.files if f.error] + list(result.errors)
    if errors:
        lines += ["## Errors", ""] + [f"- {code_span(one_line(e))}" for e in errors] + [""]
    return lines


def _file_section(file: FileResult, registry: Registry, diff: bool = True) -> list[str]:
    if not file.findings:
        return []
    lines = [f"## {code_span(one_line(file.path))}", ""]
    if diff and file.changed and file.original is not None and file.new_source is not None:
        diff = diff_of(file)
        fence = _fence(diff)
        lines += ["<details><summary>Diff</summary>", "", f"{fence}diff", diff,
                  fence, "", "</details>", ""]
    lines += [_explain(f, registry) for f in file.findings]
    lines.append("")
    return lines


def _summarized(result: RunResult, head: list[str], registry: Registry, limit: int) -> str:
    """The head, a table of files worst first, then, in the room left, each of those files'
    changes explained (without its diff); each part is dropped whole (a table row, a file's
    section, an error line), never cut in the middle."""
    ranked = sorted((f for f in result.files if f.findings or f.error), key=_badness)
    table = ["## Files, worst first", "", "| file | review items | unsafe fixes | fixes |",
             "|---|---:|---:|---:|"]
    closing = ["", f"> {MORE}", ""]
    lines = _fitting(head, limit - _size("\n".join([*table, *closing])) - 200)
    used = _size("\n".join([*lines, *table, *closing])) + 100
    rows = 0
    for file in ranked:
        row = _row(file)
        if used + _size(row) + 1 > limit:
            break
        table.append(row)
        used += _size(row) + 1
        rows += 1
    more = len(ranked) - rows
    if more:
        table += ["", f"... and {more} more file{'s' if more != 1 else ''}."]
        used += 40
    details: list[str] = []
    for file in ranked[:rows]:
        section = _file_section(file, registry, diff=False)
        if used + _size("\n".join(section)) + 1 > limit:
            break
        details += section
        used += _size("\n".join(section)) + 1
    return "\n".join([*lines, *table, "", *details, *closing[1:]])


def _fitting(lines: list[str], budget: int) -> list[str]:
    """`lines` up to the budget, the rest summed up in a line (a very long error list)."""
    kept: list[str] = []
    used = 0
    for index, line in enumerate(lines):
        if used + _size(line) + 1 > budget:
            left = len(lines) - index
            return [*kept, f"... and {left} more line{'s' if left != 1 else ''} of summary.", ""]
        kept.append(line)
        used += _size(line) + 1
    return kept


def _badness(file: FileResult) -> tuple[int, int, int, int, str]:
    kinds = Counter(f.kind for f in file.findings)
    return (-bool(file.error), -kinds[Kind.REVIEW], -kinds[Kind.UNSAFE_FIX], -kinds[Kind.FIX],
            file.path)


def _row(file: FileResult) -> str:
    kinds = Counter(f.kind for f in file.findings)
    name = code_span(one_line(file.path)) + (" (error)" if file.error else "")
    return (f"| {name.replace('|', chr(92) + '|')} | {kinds[Kind.REVIEW]} | "
            f"{kinds[Kind.UNSAFE_FIX]} | {kinds[Kind.FIX]} |")


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def _explain(finding: Finding, registry: Registry) -> str:
    rule = registry.by_id.get(finding.rule_id)
    link = f" ([docs]({rule.doc_url}))" if rule else ""
    text = (f"- **{finding.rule_id}** `{label(finding)}` {where(finding)}: "
            f"{_escape(finding.message)}{link}")
    if finding.suggestion:
        fence = _fence(finding.suggestion)
        text += (f"\n\n  {fence}python\n  {finding.suggestion.replace(chr(10), chr(10) + '  ')}"
                 f"\n  {fence}")
    return text


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def _fence(content: str) -> str:
    """A code fence no line of `content` can close (CommonMark: a closing fence is at
    least as long as the opening one), so user code never escapes into the page as HTML."""
    return "`" * max(3, _longest_backtick_run(content) + 1)


def code_span(text: str) -> str:
    """`text` as a code span, whatever backticks it holds (CommonMark: a span opened by n
    backticks closes only at a run of exactly n; spaces keep a leading backtick apart)."""
    ticks = "`" * (_longest_backtick_run(text) + 1)
    return f"{ticks} {text} {ticks}" if "`" in text else f"{ticks}{text}{ticks}"


_LINE_BREAK = re.compile(r"\r\n|[\r\n]")
_MARKUP = re.compile(r"[\\\[\]*_#!~]")


def _escape(text: str) -> str:
    """A message as one line of Markdown: its code spans kept, and outside them nothing that
    links, emphasises, starts a heading or opens HTML (code quoted from the repository could
    otherwise inject markup into the page)."""
    parts = _LINE_BREAK.sub(" ", text).split("`")
    for index in range(0, len(parts), 2):  # the text outside `code`
        parts[index] = _MARKUP.sub(lambda match: "\\" + match.group(), parts[index])
        parts[index] = parts[index].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts).replace("|", "\\|")


def _render(report: RunReport) -> str:
    return render_markdown(report.result, report.registry, report.notes)


MARKDOWN = RunFormat(_render, human=True, keeps_sources=True)
