"""The `audit` summary: readiness findings by documented limit (what blocks, what may not
run, what slows, what changes numerics), with counts, and the worst files first."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from neuron_migrate.analysis.readiness import TITLES, Limit
from neuron_migrate.printable import one_line
from neuron_migrate.registry import Registry
from neuron_migrate.report.markdown import code_span

if TYPE_CHECKING:  # the runner is only a type here
    from neuron_migrate.runner import RunResult

WORST = 10
"""How many files the summary names."""


@dataclass(frozen=True)
class LimitGroup:
    limit: Limit
    findings: int
    files: int
    rules: tuple[tuple[str, str, int], ...]
    """(rule id, rule name, findings), most findings first."""


@dataclass(frozen=True)
class FileScore:
    path: str
    counts: dict[Limit, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class ReadinessSummary:
    groups: tuple[LimitGroup, ...]
    worst: tuple[FileScore, ...]
    files: int
    """Files read."""

    @property
    def blocking(self) -> int:
        return next((g.findings for g in self.groups if g.limit is Limit.BLOCKS), 0)

    @classmethod
    def of(cls, result: RunResult, registry: Registry) -> ReadinessSummary:
        by_limit: dict[Limit, Counter[str]] = {limit: Counter() for limit in Limit}
        files: dict[Limit, set[str]] = {limit: set() for limit in Limit}
        scores: dict[str, Counter[Limit]] = {}
        for finding in result.findings:
            limit = limit_of(finding.rule_id, registry)
            if limit is None:
                continue
            by_limit[limit][finding.rule_id] += 1
            files[limit].add(finding.path)
            scores.setdefault(finding.path, Counter())[limit] += 1
        groups = []
        for limit in Limit:
            counts = by_limit[limit]
            rules = tuple((rule_id, registry.by_id[rule_id].name, count)
                          for rule_id, count in sorted(counts.items(),
                                                       key=lambda item: (-item[1], item[0])))
            groups.append(LimitGroup(limit, sum(counts.values()), len(files[limit]), rules))
        order = list(Limit)
        ranked = sorted(scores.items(), key=lambda item: (
            *(-item[1][limit] for limit in order), item[0]))
        worst = tuple(FileScore(path, dict(counts)) for path, counts in ranked[:WORST])
        return cls(tuple(groups), worst, len(result.files))


def limit_of(rule_id: str, registry: Registry) -> Limit | None:
    rule = registry.by_id.get(rule_id)
    return getattr(rule, "limit", None) if rule is not None else None


def render_readiness_text(summary: ReadinessSummary) -> list[str]:
    lines = ["Readiness for TorchNeuron"]
    for group in summary.groups:
        lines.append(f"  {_title(group)}")
        lines += [f"      {rule_id} {name}: {count}" for rule_id, name, count in group.rules]
    if summary.worst:
        lines.append("  Worst files first:")
        lines += [f"      {score.path}: {_scores(score)}" for score in summary.worst]
    lines.append(_verdict(summary))
    return lines


def render_readiness_markdown(summary: ReadinessSummary) -> list[str]:
    lines = ["## Readiness for TorchNeuron", "", f"{_verdict(summary)}", "",
             "| limit | findings | files | rules |", "|---|---:|---:|---|"]
    for group in summary.groups:
        rules = ", ".join(f"{rule_id} {name} ({count})" for rule_id, name, count in group.rules)
        lines.append(f"| {TITLES[group.limit]} | {group.findings} | {group.files} | "
                     f"{rules or '-'} |")
    lines.append("")
    if summary.worst:
        lines += ["Worst files first:", ""]
        lines += [f"- {code_span(one_line(score.path))}: {_scores(score)}"
                  for score in summary.worst]
        lines.append("")
    return lines


def readiness_json(summary: ReadinessSummary) -> dict[str, object]:
    return {
        "blocking": summary.blocking,
        "limits": [{"limit": str(g.limit), "title": TITLES[g.limit], "findings": g.findings,
                    "files": g.files,
                    "rules": [{"rule_id": r, "rule_name": n, "findings": c}
                              for r, n, c in g.rules]} for g in summary.groups],
        "worst_files": [{"path": s.path, **{str(limit): s.counts.get(limit, 0)
                                            for limit in Limit}} for s in summary.worst],
    }


def _title(group: LimitGroup) -> str:
    return (f"{TITLES[group.limit]}: {group.findings} finding{_s(group.findings)} in "
            f"{group.files} file{_s(group.files)}")


def _scores(score: FileScore) -> str:
    return ", ".join(f"{score.counts[limit]} {limit}" for limit in Limit
                     if score.counts.get(limit))


def _verdict(summary: ReadinessSummary) -> str:
    total = sum(g.findings for g in summary.groups)
    if summary.blocking:
        return (f"{summary.files} file{_s(summary.files)} read: {summary.blocking} blocking "
                f"finding{_s(summary.blocking)}, {total} in all")
    if total:
        return (f"{summary.files} file{_s(summary.files)} read: nothing blocking, "
                f"{total} finding{_s(total)} to review")
    return f"{summary.files} file{_s(summary.files)} read: nothing found"


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def audit_exit(result: RunResult, registry: Registry) -> int:
    """2 on errors, 1 when something blocks, else 0: what slows or changes numerics is
    reported without failing the run."""
    if result.interrupted:
        return 128 + result.interrupted
    if result.failed:
        return 2
    return 1 if ReadinessSummary.of(result, registry).blocking else 0
