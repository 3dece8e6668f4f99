"""Turning decisions into `Finding`s and accepted edits, honouring --select/--ignore and
--unsafe-fixes, and applying the accepted edits to the text."""

from __future__ import annotations

import bisect
import contextlib
import re
from collections.abc import Iterator, Sequence
from contextvars import ContextVar

from neuron_migrate.deps import ids
from neuron_migrate.deps.entries import Edit
from neuron_migrate.deps.launch_paths import HostPaths
from neuron_migrate.engine.suppress import unused_finding
from neuron_migrate.gate.lines import LineMarkers
from neuron_migrate.model import Finding, Kind
from neuron_migrate.registry import UNUSED_SUPPRESSION, Registry

_NEWLINE = re.compile("\n")


def rule_enabled(registry: Registry, rule_id: str) -> bool:
    """What `registry.enabled` says of the rule, asked of the options alone: the registry
    loads the rule catalogue (and LibCST) when its rules are first asked for."""
    return registry.options.enabled(rule_id)


def from_cuda(registry: Registry) -> bool:
    """Whether the run migrates CUDA code too (`--from cuda`): the NMC8xx checks run only then,
    since many repositories keep their CUDA setup beside the Neuron one on purpose."""
    return ids.CUDA in registry.options.sources


_MARKER_USES: ContextVar[set[int] | None] = ContextVar("marker_uses", default=None)


@contextlib.contextmanager
def tracking_marker_uses() -> Iterator[None]:
    """Around one file's scan: the lines whose markers the emitters of lifted-out lines
    used."""
    token = _MARKER_USES.set(set())
    try:
        yield
    finally:
        _MARKER_USES.reset(token)


class Emitter:
    """Collects the findings for one text; knows where each offset is.

    `line_numbers` maps the text's lines to the caller's numbering (notebook lines handed to
    `scan_text_lines`); by default line i of the text is line i. `can_edit` may name the only
    rules whose edits can be made. `paths` finds the scripts that launch lines start (None:
    launch lines are not followed).
    """

    def __init__(self, path: str, text: str, registry: Registry, fix: bool,
                 line_numbers: Sequence[int] | None = None,
                 can_edit: bool | frozenset[str] = True,
                 paths: HostPaths | None = None) -> None:
        self.path = path
        self.paths = paths
        self.text = text
        self.registry = registry
        self.fix = fix
        self.can_edit = can_edit
        self.line_numbers = line_numbers
        self.starts = [0] + [found.end() for found in _NEWLINE.finditer(text)]
        self.findings: list[Finding] = []
        self.edits: list[Edit] = []
        self._taken = _Spans()
        # every scanner reports through here, so here the `#` markers of every kind of file
        # are honoured: an ignored finding makes no edit either
        self.markers = LineMarkers.of(text)

    def position(self, offset: int) -> tuple[int, int]:
        index = bisect.bisect_right(self.starts, offset) - 1
        line = index + 1 if self.line_numbers is None else self.line_numbers[index]
        return line, offset - self.starts[index] + 1

    def report(self, rule_id: str, offset: int, message: str,
               edits: Sequence[Edit | None] = (), suggestion: str | None = None) -> None:
        if not rule_enabled(self.registry, rule_id) or \
                (rule_id in ids.CUDA_KINDS and not from_cuda(self.registry)):
            return
        text_line = bisect.bisect_right(self.starts, offset)
        if self.markers.ignores(rule_id, text_line):
            self._used_marker(text_line)
            return
        editable = self.can_edit if isinstance(self.can_edit, bool) else \
            rule_id in self.can_edit
        usable = editable and bool(edits) and all(e is not None for e in edits)
        kind = ids.ALL_KINDS[rule_id] if usable else Kind.REVIEW
        applied = usable and self._accept(kind, [e for e in edits if e is not None])
        if kind is not Kind.FIX and not applied and self.markers.acknowledges(rule_id, text_line):
            self._used_marker(text_line)
            return  # `reviewed`: nothing `apply` would write
        line, column = self.position(offset)
        if kind is Kind.UNSAFE_FIX and not applied and suggestion is None:
            suggestion = "; ".join(e.new.strip() for e in edits if e is not None and e.new.strip())
        self.findings.append(Finding(self.path, line, column, rule_id, kind, message,
                                     applied=applied, suggestion=suggestion))

    def _used_marker(self, text_line: int) -> None:
        """Lines lifted out of the file (a YAML string's shell) are read by an emitter of
        their own: the file's emitter learns that their markers were used."""
        uses = _MARKER_USES.get()
        if self.line_numbers is not None and uses is not None:
            uses.add(self.line_numbers[text_line - 1])

    def unused_markers(self) -> list[Finding]:
        """NM002 for the markers that silenced nothing (once every scanner has reported)."""
        if not rule_enabled(self.registry, UNUSED_SUPPRESSION):
            return []
        elsewhere = _MARKER_USES.get() or set()
        return [unused_finding(self.path, self.position(self.starts[line - 1])[0], written)
                for line, written in self.markers.unused() if line not in elsewhere]

    def _accept(self, kind: Kind, edits: list[Edit]) -> bool:
        wanted = kind is Kind.FIX or (kind is Kind.UNSAFE_FIX
                                      and self.registry.options.unsafe_fixes)
        if not (self.fix and wanted):
            return False
        return self.take(edits)

    def take(self, edits: Sequence[Edit]) -> bool:
        """Add edits made elsewhere (a string's shell, read on its own), unless they clash."""
        new = [e for e in edits if e not in self._taken]  # one ARG default serves many pins
        if any(self._taken.clashes(e) for e in new):
            return False
        self.edits.extend(new)
        for edit in new:
            self._taken.add(edit)
        return True

    def new_text(self) -> str | None:
        if not self.edits:
            return None
        return apply_edits(self.text, self.edits)


class _Spans:
    """The edits taken so far, sorted, so that whether a new one clashes is two bisections:
    a Dockerfile RUN of thousands of pins makes thousands of edits, and comparing each with
    every other took minutes. Replaced spans never overlap one another, so sorted by start
    they are sorted by end too; an insertion clashes only inside a replaced span."""

    def __init__(self) -> None:
        self._all: set[Edit] = set()
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._points: list[int] = []

    def __contains__(self, edit: Edit) -> bool:
        return edit in self._all

    def clashes(self, edit: Edit) -> bool:
        before = bisect.bisect_left(self._starts, edit.start if edit.start == edit.end
                                    else edit.end) - 1
        if edit.start == edit.end:  # inside the replaced span that starts last before it
            return before >= 0 and edit.start < self._ends[before]
        if before >= 0 and self._ends[before] > edit.start:
            return True
        first = bisect.bisect_right(self._points, edit.start)
        return first < len(self._points) and self._points[first] < edit.end

    def add(self, edit: Edit) -> None:
        self._all.add(edit)
        if edit.start == edit.end:
            bisect.insort(self._points, edit.start)
            return
        index = bisect.bisect_left(self._starts, edit.start)
        self._starts.insert(index, edit.start)
        self._ends.insert(index, edit.end)


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """Splice the edits in; insertions at one point keep the order they were made in."""
    ordered = sorted(enumerate(edits),
                     key=lambda pair: (pair[1].start, pair[1].end != pair[1].start, pair[0]))
    out: list[str] = []
    cursor = 0
    for _, edit in ordered:
        out.append(text[cursor:edit.start])
        out.append(edit.new)
        cursor = max(cursor, edit.end)
    out.append(text[cursor:])
    return "".join(out)
