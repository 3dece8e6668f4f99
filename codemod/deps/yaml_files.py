"""Any other YAML file (compose files, Kubernetes manifests, CI workflows, SageMaker configs):
`image:` keys, XLA variables set in `env` maps or `- name:/value:` lists, and shell commands
held in strings (`run: pip install ...`), all reported, never edited."""

from __future__ import annotations

from dataclasses import replace

from yaml.nodes import Node, ScalarNode

from codemod.deps import ids
from codemod.deps.emit import Emitter
from codemod.deps.signals import check_image, check_variable, scan_text_signals, xla_variable_advice
from codemod.deps.yaml_nodes import compose, pairs, scalar, walk

SHELL_HINTS = ("pip", "neuron_parallel_compile", "export ")


def scan(text: str, emitter: Emitter, path: str = "") -> None:
    scan_nodes(text, compose(text), emitter)


def scan_nodes(text: str, documents: list[Node], emitter: Emitter) -> None:
    for document in documents:
        for node in walk(document):
            _mapping(node, emitter)
    scan_text_signals(text, emitter)


def _mapping(node: Node, emitter: Emitter) -> None:
    fields = {key.value: value for key, value in pairs(node)}
    name, value = scalar(fields.get("name")), scalar(fields.get("value"))
    if name is not None and value is not None and xla_variable_advice(name) is not None:
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


def _embedded_shell(node: ScalarNode, text: str, emitter: Emitter) -> None:
    """Shell held in a string: reported at the string's lines (columns inside the string)."""
    from codemod.deps import scan_text_lines  # the package's own entry point for such lines

    block = node.style in ("|", ">")
    first = node.start_mark.line + (1 if block else 0) + 1
    lines = [(first + i, line) for i, line in enumerate(text.splitlines())]
    for finding in scan_text_lines(emitter.path, lines, emitter.registry):
        if finding.rule_id in (ids.OLD_INSTANCE, ids.XLA_IMAGE):
            continue  # whole-text signals are found once, by scan_text_signals
        emitter.findings.append(replace(finding, column=finding.column + _shift(
            emitter, node, finding.line, block)))


def _shift(emitter: Emitter, node: ScalarNode, line: int, block: bool) -> int:
    """How far the string's text sits from the start of its line in the file."""
    if not block:
        return node.start_mark.column + (1 if node.style in ("'", '"') else 0)
    start = emitter.starts[line - 1]
    end = emitter.starts[line] if line < len(emitter.starts) else len(emitter.text)
    physical = emitter.text[start:end]
    return len(physical) - len(physical.lstrip(" \t"))
