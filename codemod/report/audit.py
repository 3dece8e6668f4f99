"""The formats `audit` renders in its own way: text, json and markdown carry the readiness
summary (`neuron_migrate.report.readiness`) besides the usual report; its other formats are
the migration's own.

The summary's module loads the readiness rules' analysis (and LibCST with it), so it is
imported when an audit report is rendered, not when its format is chosen."""

from __future__ import annotations

import dataclasses
import json

from neuron_migrate.printable import json_safe
from neuron_migrate.report.json_report import JSON, render_json
from neuron_migrate.report.json_text import indented_json
from neuron_migrate.report.markdown import LIMIT, MARKDOWN, render_markdown
from neuron_migrate.report.renderer import RunReport
from neuron_migrate.report.text import TEXT, plain_lines


def readiness_lines(report: RunReport) -> list[str]:
    """The readiness summary as the terminal and a text file show it."""
    from neuron_migrate.report.readiness import ReadinessSummary, render_readiness_text

    return render_readiness_text(ReadinessSummary.of(report.result, report.registry))


def _text(report: RunReport) -> str:
    return "\n".join([*plain_lines(report), *readiness_lines(report)]) + "\n"


def _json(report: RunReport) -> str:
    from neuron_migrate.report.readiness import ReadinessSummary, readiness_json

    document = json.loads(render_json(report.result, report.registry, "audit"))
    document["readiness"] = readiness_json(ReadinessSummary.of(report.result, report.registry))
    return json_safe(indented_json(document))


def _markdown(report: RunReport) -> str:
    """The summary goes under the title, and the usual report gets the room it leaves."""
    from neuron_migrate.report.readiness import ReadinessSummary, render_readiness_markdown

    summary = ReadinessSummary.of(report.result, report.registry)
    readiness = "\n".join(["", *render_readiness_markdown(summary)])
    room = LIMIT - len(readiness.encode("utf-8", "surrogateescape"))
    title, _, rest = render_markdown(report.result, report.registry, limit=room).partition("\n")
    return title + "\n" + readiness + rest


AUDIT_TEXT = dataclasses.replace(TEXT, render_with=_text)
AUDIT_JSON = dataclasses.replace(JSON, render_with=_json)
AUDIT_MARKDOWN = dataclasses.replace(MARKDOWN, render_with=_markdown)
