"""A report to paste into a pull-request description: summary first, then each file's diff
(collapsed) and every change explained with its documentation link."""

from __future__ import annotations

from codemod.model import Finding
from codemod.registry import Registry
from codemod.report.summary import Summary, label, where
from codemod.report.text import diff_of
from codemod.runner import RunResult


def render_markdown(result: RunResult, registry: Registry) -> str:
    summary = Summary.of(result)
    lines = ["# neuron-migrate report", "",
             f"{summary.sentence(result.written)}.", ""]
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
        lines += [f"## `{file.path}`", ""]
        if file.changed:
            fence = "````" if "```" in diff_of(file) else "```"
            lines += ["<details><summary>Diff</summary>", "", f"{fence}diff", diff_of(file),
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
        text += f"\n\n  ```python\n  {finding.suggestion.replace(chr(10), chr(10) + '  ')}\n  ```"
    return text


def _escape(text: str) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
