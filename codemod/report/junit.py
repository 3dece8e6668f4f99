"""JUnit XML, the test report CI systems (GitLab, Jenkins, Azure Pipelines, CircleCI) show
on a merge request: one test suite a file, one failing test case a finding, a file that
could not be read or parsed an error, a file with nothing to do one passing case.

A fix this run wrote to the file passes (it is done); everything else fails, as `check`
fails on it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from neuron_migrate.model import FileResult, Finding
from neuron_migrate.printable import printable
from neuron_migrate.report.concise import concise_line
from neuron_migrate.report.renderer import RunFormat, RunReport
from neuron_migrate.report.summary import label, line_in_file, where, written

if TYPE_CHECKING:  # the runner is only a type here
    from neuron_migrate.registry import Registry
    from neuron_migrate.runner import RunResult

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
"""Characters XML 1.0 cannot hold, even escaped (a control character in a message)."""


def render_junit(result: RunResult, registry: Registry | None = None) -> str:
    root = ET.Element("testsuites", name="neuron-migrate")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for file in result.files:
        suite = _suite(file, written(file, result))
        root.append(suite)
        for key in totals:
            totals[key] += int(suite.get(key, "0"))
    if result.errors:
        suite = ET.SubElement(root, "testsuite", name="neuron-migrate",
                              tests=str(len(result.errors)), failures="0",
                              errors=str(len(result.errors)))
        for message in result.errors:
            case = ET.SubElement(suite, "testcase", name="read", classname="neuron-migrate")
            ET.SubElement(case, "error", message=_text(message)).text = _text(message)
        totals["tests"] += len(result.errors)
        totals["errors"] += len(result.errors)
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def _suite(file: FileResult, done: bool) -> ET.Element:
    suite = ET.Element("testsuite", name=_text(file.path))
    failures = errors = 0
    cases = 0
    if file.error:
        case = ET.SubElement(suite, "testcase", name="migrate", classname=_text(file.path),
                             file=_text(file.path))
        ET.SubElement(case, "error", message=_text(file.error)).text = _text(file.error)
        errors += 1
        cases += 1
    for finding in file.findings:
        suite.append(_case(finding))
        cases += 1
        if not (finding.applied and done):
            failures += 1
            _fail(suite[-1], finding)
    if cases == 0:
        ET.SubElement(suite, "testcase", name="migrate", classname=_text(file.path),
                      file=_text(file.path))
        cases = 1
    suite.set("tests", str(cases))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    return suite


def _case(finding: Finding) -> ET.Element:
    return ET.Element("testcase", name=f"{finding.rule_id} ({where(finding)})",
                      classname=_text(finding.path), file=_text(finding.path),
                      line=str(line_in_file(finding)))


def _fail(case: ET.Element, finding: Finding) -> None:
    failure = ET.SubElement(case, "failure", type=label(finding),
                            message=_text(finding.message))
    failure.text = _text(concise_line(finding))


def _text(value: str) -> str:
    """Text from the repository with its terminal controls shown as escapes (`printable`:
    a CI log or a terminal showing the XML must not act on them), what XML cannot hold
    replaced; a file name that is not UTF-8 keeps its escaped bytes out of the XML."""
    clean = _NOT_XML.sub("\ufffd", printable(value))
    return clean.encode("utf-8", "backslashreplace").decode("utf-8") \
        if any("\udc80" <= c <= "\udcff" for c in clean) else clean


def _render(report: RunReport) -> str:
    return render_junit(report.result, report.registry)


JUNIT = RunFormat(_render)
