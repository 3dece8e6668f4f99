"""A report to paste into a pull-request description: summary first, then each file's diff
(collapsed) and every change explained with its documentation link."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from neuron_migrate.model import Finding
from neuron_migrate.registry import Registry
from neuron_migrate.report.summary import Summary, label, where
from neuron_migrate.report.text import diff_of

if TYPE_CHECKING:  # the runner is only a type here
    from neuron_migrate.runner import RunResult


def render_markdown(result: RunResult, registry: Registry, notes: Sequence[str] = ()) -> str:
    """`notes`: what the run says of the hardware it assumed (neuron_migrate.target)."""
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
        lines += ["## Errors", ""] + [f"- {_escape(e)}" for e in errors] + [""]
    for file in result.files:
        if not file.findings:
            continue
        lines += [f"## {_code_span(file.path)}", ""]
        if file.changed:
            diff = diff_of(file)
            fence = _fence(diff)
            lines += ["<details><summary>Diff</summary>", "", f"{fence}diff", diff,
                      fence, "", "</details>", ""]
        lines += [_explain(f, registry) for f in file.findings]
        lines.append("")
    return "\n".join(lines)


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


def _code_span(text: str) -> str:
    """`text` as a code span, whatever backticks it holds (CommonMark: a span opened by n
    backticks closes only at a run of exactly n; spaces keep a leading backtick apart)."""
    ticks = "`" * (_longest_backtick_run(text) + 1)
    return f"{ticks} {text} {ticks}" if "`" in text else f"{ticks}{text}{ticks}"


def _escape(text: str) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
