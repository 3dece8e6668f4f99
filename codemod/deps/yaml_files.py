"""Any other YAML file (compose files, Kubernetes manifests, CI workflows, SageMaker configs):
`image:` keys, XLA variables set in `env` maps or `- name:/value:` lists, and shell commands
held in strings (`run: pip install ...`), all reported, never edited; except the launch of a
script that spawns its own workers (NM816), rewritten to torchrun in `command` lists and in
strings whose lines stand in the file as written."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from neuron_migrate.deps import cuda, ids
from neuron_migrate.deps.commands import Word
from neuron_migrate.deps.emit import Emitter
from neuron_migrate.deps.entries import Edit
from neuron_migrate.deps.launches import check_launch, item_render
from neuron_migrate.deps.signals import (
    check_image, check_variable, enumerates_families, scan_text_signals, xla_variable_advice,
)
from neuron_migrate.deps.yaml_nodes import compose, inner_span, mappings, pairs, scalar

SHELL_HINTS = ("pip", "neuron_parallel_compile", "export ", "python", "xla_dist")
ARGV_KEYS = ("command", "entrypoint")  # Kubernetes and compose: a list is the argv
WORKDIR_KEYS = ("workingDir", "working_dir")


def scan(text: str, emitter: Emitter, path: str = "") -> None:
    scan_nodes(text, compose(text), emitter)


def scan_nodes(text: str, documents: list[Node], emitter: Emitter) -> None:
    for document in documents:
        for node in mappings(document):  # nothing else has keys to read
            _mapping(node, emitter)
    seen: set[int] = set()
    scan_text_signals(text, emitter, [span for document in documents
                                      for span in _family_lists(document, seen)])


def _family_lists(node: Node, seen: set[int]) -> Iterator[tuple[int, int]]:
    """Spans of the sequences that list instance types of several families (a device
    plugin's node affinity, a form's choices): not the hardware a workload runs on. Each
    node once, as `mappings` walks them."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, SequenceNode):
        if enumerates_families(v for v in map(scalar, node.value) if v is not None):
            yield node.start_mark.index, node.end_mark.index
            return
        for item in node.value:
            yield from _family_lists(item, seen)
    elif isinstance(node, MappingNode):
        for key, value in node.value:
            yield from _family_lists(value, seen)


def _mapping(node: Node, emitter: Emitter) -> None:
    fields = {key.value: value for key, value in pairs(node)}
    _argv(fields, emitter)
    name, value = scalar(fields.get("name")), scalar(fields.get("value"))
    if name is not None and value is not None and \
            (xla_variable_advice(name) is not None or name in cuda.VARIABLES):
        check_variable(name, value, fields["name"].start_mark.index, emitter)
    for key, child in pairs(node):
        text = scalar(child)
        if text is None:
            continue
        if key.value == "image":
            check_image(text, child.start_mark.index, emitter)
        elif key.value != "name":
            check_variable(key.value, text, key.start_mark.index, emitter)
        if any(hint in text for hint in SHELL_HINTS) and isinstance(child, ScalarNode):
            _embedded_shell(child, text, emitter)
    for key in (*ARGV_KEYS, "args"):  # `command: [sh, -c]` with `args: ["python x.py"]`
        items = fields.get(key)
        if isinstance(items, SequenceNode):
            for item in items.value:
                text = scalar(item)
                if text is not None and " " in text.strip() and "python" in text:
                    assert isinstance(item, ScalarNode)
                    _embedded_shell(item, text, emitter)


def _embedded_shell(node: ScalarNode, text: str, emitter: Emitter) -> None:
    """Shell held in a string: reported at the string's lines (columns inside the string).
    A launch line (NM816) is rewritten where the string's lines are the file's, character for
    character (a plain or quoted one-line string without escapes, a `|` block)."""
    from neuron_migrate.deps import fix_text_lines  # the package's own entry point for such lines

    block = node.style in ("|", ">")
    first = node.start_mark.line + (1 if block else 0) + 1
    lines = [(first + i, line) for i, line in enumerate(text.splitlines())]
    if emitter.paths is not None:
        emitter.paths.reset()
    exact = _as_written(node, lines, emitter, block)
    findings, line_edits = fix_text_lines(emitter.path, lines, emitter.registry, emitter.paths,
                                          editable=exact, fix=emitter.fix)
    edits = [Edit(emitter.starts[e.line - 1] + _shift(emitter, node, e.line, block) + e.start,
                  emitter.starts[e.line - 1] + _shift(emitter, node, e.line, block) + e.end,
                  e.new) for e in line_edits]
    taken = not edits or emitter.take(edits)
    for finding in findings:
        if finding.rule_id in (ids.OLD_INSTANCE, ids.XLA_IMAGE):
            continue  # whole-text signals are found once, by scan_text_signals
        emitter.findings.append(replace(finding, applied=finding.applied and taken,
                                        column=finding.column + _shift(
                                            emitter, node, finding.line, block)))


def _as_written(node: ScalarNode, lines: list[tuple[int, str]], emitter: Emitter,
                block: bool) -> bool:
    """Whether each of the string's lines stands in the file as it is in the string."""
    if node.style == ">" or not lines:
        return False
    if not block:
        span = inner_span(node)
        return span is not None and emitter.text[span[0]:span[1]] == lines[0][1]
    for number, line in lines:
        start = emitter.starts[number - 1] + _shift(emitter, node, number, block)
        if emitter.text[start:start + len(line)] != line:
            return False
    return True


def _shift(emitter: Emitter, node: ScalarNode, line: int, block: bool) -> int:
    """How far the string's text sits from the start of its line in the file."""
    if not block:
        return node.start_mark.column + (1 if node.style in ("'", '"') else 0)
    start = emitter.starts[line - 1]
    end = emitter.starts[line] if line < len(emitter.starts) else len(emitter.text)
    physical = emitter.text[start:end]
    return len(physical) - len(physical.lstrip(" \t"))


def _argv(fields: dict[str, Node], emitter: Emitter) -> None:
    """`command: [python3, train.py]` (with `args:` after it, as Kubernetes joins them)."""
    if emitter.paths is None:
        return
    for key in ARGV_KEYS:
        items = _items(fields.get(key), emitter.text)
        if not items:
            continue
        if key == "command":
            items += _items(fields.get("args"), emitter.text) or []
        emitter.paths.reset()
        workdir = scalar(fields.get(WORKDIR_KEYS[0]) or fields.get(WORKDIR_KEYS[1]))
        if workdir is not None:
            emitter.paths.change_dir(workdir)
        sequence = fields[key]
        assert isinstance(sequence, SequenceNode)
        check_launch(items, {}, emitter.paths, emitter,
                     item_render(_yaml_quote, _separator(sequence, emitter.text)))


def _items(node: Node | None, text: str) -> list[Word] | None:
    if not isinstance(node, SequenceNode) or \
            not all(isinstance(n, ScalarNode) for n in node.value):
        return None
    return [Word(text[n.start_mark.index:n.end_mark.index], n.value, n.start_mark.index,
                 n.end_mark.index, n.style or "", n.start_mark.line == n.end_mark.line)
            for n in node.value]


def _yaml_quote(value: str, item: Word) -> str:
    if item.quote == '"':
        return json.dumps(value)
    if item.quote == "'":
        return "'" + value.replace("'", "''") + "'"
    return value


def _separator(sequence: SequenceNode, text: str) -> Callable[[Word], str]:
    """What goes before an added item: `, ` in `[a, b]`; a new `- ` line in a block list."""
    if sequence.flow_style:
        return lambda item: ", "
    def block(item: Word) -> str:
        line_start = text.rfind("\n", 0, item.start) + 1
        dash = text.rfind("-", line_start, item.start)
        newline = "\r\n" if text[text.find("\n", item.start) - 1:].startswith("\r") else "\n"
        return newline + " " * (dash - line_start) + "- "
    return block
