"""Conda environment files: the `pip:` list under `dependencies`, edited in place like a
requirements file (one item per line, same indentation)."""

from __future__ import annotations

from collections.abc import Sequence

from yaml.nodes import ScalarNode, SequenceNode

from neuron_migrate.deps import check
from neuron_migrate.deps.emit import Emitter
from neuron_migrate.deps.entries import Edit, Index, Manifest, entry_from, parse_requirement, written_head
from neuron_migrate.deps.lines import newline_of
from neuron_migrate.deps.yaml_nodes import compose, inner_span, pairs, scalar
from neuron_migrate.deps.yaml_files import scan_nodes


def scan(text: str, emitter: Emitter, path: str = "") -> None:
    documents = compose(text)
    manifest = Manifest()
    for document in documents:
        for key, value in pairs(document):
            if key.value == "dependencies" and isinstance(value, SequenceNode):
                for item in value.value:
                    for pip_key, pip_list in pairs(item):
                        if pip_key.value == "pip" and isinstance(pip_list, SequenceNode):
                            _pip_list(text, pip_list, manifest)
    check.emit(manifest, emitter)
    scan_nodes(text, documents, emitter)


def _pip_list(text: str, items: SequenceNode, manifest: Manifest) -> None:
    for node in items.value:
        value = scalar(node)
        if value is None or not isinstance(node, ScalarNode):
            continue
        span = inner_span(node)
        if value.startswith("-"):
            option, _, url = value.replace("=", " ", 1).partition(" ")
            if option in ("--extra-index-url", "--index-url", "-i") and span is not None:
                manifest.indexes.append(Index(url.strip(), span[0],
                                              add_after=_adder(text, span, "--extra-index-url "),
                                              replace=_url_replacer(text, span, url.strip())))
            continue
        requirement = parse_requirement(value)
        if requirement is not None and span is not None:
            manifest.entries.append(entry_from(requirement, value, span[0],
                                               **_edits(text, span, value)))


def _url_replacer(text: str, span: tuple[int, int], url: str):
    """The URL written in place, when the item ends with it as the file has it."""
    if not url or not text[span[0]:span[1]].endswith(url):
        return None

    def replace(new: str) -> Edit:
        return Edit(span[1] - len(url), span[1], new)
    return replace


def _line(text: str, position: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    return start, len(text) if end < 0 else end


def _adder(text: str, span: tuple[int, int], prefix: str = ""):
    start, end = _line(text, span[0])
    lead = text[start:span[0]]
    content_end = start + len(text[start:end].rstrip("\r"))
    newline = newline_of(text)

    def add(values: Sequence[str]) -> Edit:
        return Edit(content_end, content_end,
                    "".join(f"{newline}{lead}{prefix}{v}" for v in values))
    return add


def _edits(text: str, span: tuple[int, int], value: str) -> dict[str, object]:
    name, extras = written_head(value)
    head = value.split(";")[0].rstrip()
    start, end = _line(text, span[0])
    quote = text[span[0] - 1] if text[span[0] - 1] in "'\"" else ""
    lead = text[start:span[0] - len(quote)]
    alone = lead.strip() == "-"

    def rewrite(spec: str) -> Edit:
        return Edit(span[0], span[0] + len(head), f"{name}{extras}{spec}")

    return {"rewrite": rewrite,
            "insert": _adder(text, (span[0] - len(quote), span[1])) if alone else None,
            "remove": Edit(start, min(end + 1, len(text)), "") if alone else None}
