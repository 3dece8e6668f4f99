"""From the words of a `pip install` command to entries and indexes with their edits.

A requirement word is edited inside its quotes; a bare word that gains a `*` is quoted so the
shell cannot glob it. A version held in a variable (`torch-neuronx==${NEURONX_VERSION}`) is
edited where the variable gets its default, when the pip line is its only use. A word alone on
a continuation line is removed with that line, keeping the continuation intact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from neuron_migrate.deps.commands import Variable, Word, expand, split_pip_arguments
from neuron_migrate.deps.entries import Edit, Index, Manifest, entry_from, parse_requirement, written_head
from neuron_migrate.deps.versions import name_of

REMOVABLE = frozenset({"torch-xla", "libneuronxla"})
HELD = re.compile(r"(?P<head>[\w.\-\[\],]+)==\$\{?(?P<name>\w+)\}?")


def read_pip_install(arguments: list[Word], text: str, variables: dict[str, Variable],
                     group: str, manifest: Manifest) -> None:
    words, indexes = split_pip_arguments(arguments)
    parsed = [(w, _requirement(w, variables)) for w in words]
    found = [(w, r) for w, r in parsed if r is not None]
    removable_only = all(name_of(r.name) in REMOVABLE for _, r in found)
    command = arguments[0].start if arguments else None
    for word, requirement in found:
        value = expand(word.value, variables) or word.value
        manifest.entries.append(entry_from(
            requirement, value, word.start, group,
            rewrite=_rewriter(word, text, variables),
            remove=None if removable_only else remove_word(word, text),
            insert=_inserter(word), command=command))
    for word, url in indexes:  # a computed URL (`$NEURON_INDEX`) is judged by its value
        manifest.indexes.append(Index(expand(url, variables) or url, word.start, group,
                                      add_after=_index_adder(word),
                                      replace=_url_replacer(word, url), command=command))


def _requirement(word: Word, variables: dict[str, Variable]):
    value = expand(word.value, variables)
    if value is None or not value or value.startswith((".", "/", "-")):
        return None
    return parse_requirement(value)


def quoted(word: Word, new: str) -> str:
    if word.quote:
        return f"{word.quote}{new}{word.quote}"
    return f'"{new}"' if "*" in new or ";" in new or "<" in new or ">" in new else new


def _rewriter(word: Word, text: str, variables: dict[str, Variable]):
    held = HELD.fullmatch(word.value)
    if held is not None:
        return _variable_rewriter(held["name"], name_of(written_head(held["head"])[0]),
                                  text, variables)
    if "$" in word.value or not word.contiguous:
        return None
    name, extras = written_head(word.value)
    rest = word.value[len(word.value.split(";")[0].rstrip()):]

    def rewrite(spec: str) -> Edit:
        return Edit(word.start, word.end, quoted(word, f"{name}{extras}{spec}{rest}"))
    return rewrite


def _variable_rewriter(name: str, package: str, text: str, variables: dict[str, Variable]):
    """Edit the variable's default, if every use of it pins this package."""
    variable = variables.get(name)
    uses = len(re.findall(rf"\$\{{?{re.escape(name)}\b", text))
    pinned = rf"(?<![\w.\-])([\w.\-]+)(?:\[[^\]]*\])?==\$\{{?{re.escape(name)}\b"
    pins = [m[1] for m in re.finditer(pinned, text)]
    if variable is None or variable.span is None or \
            uses != len(pins) or any(name_of(p) != package for p in pins):
        return None
    start, end = variable.span

    def rewrite(spec: str) -> Edit | None:
        return Edit(start, end, spec[2:]) if spec.startswith("==") else None
    return rewrite


def _inserter(word: Word):
    def insert(requirements: Sequence[str]) -> Edit:
        return Edit(word.end, word.end, "".join(" " + quoted(word, r) for r in requirements))
    return insert


def _index_adder(word: Word):
    joiner = "=" if word.value.startswith("--") and "=" in word.value else " "

    def add_after(urls: Sequence[str]) -> Edit:
        return Edit(word.end, word.end, "".join(f" --extra-index-url{joiner}{u}" for u in urls))
    return add_after


def _url_replacer(word: Word, url: str):
    """The URL written in place, when the word ends with it as written (`--index-url=URL` or
    the URL word itself, in one piece, perhaps quoted whole)."""
    closing = len(word.quote) if word.quote and word.raw.endswith(word.quote) else 0
    written = word.raw[:len(word.raw) - closing]
    if "$" in url or not url or not word.contiguous or not written.endswith(url):
        return None
    end = word.end - closing

    def replace(new: str) -> Edit:
        return Edit(end - len(url), end, new)
    return replace


def remove_word(word: Word, text: str) -> Edit | None:
    """Delete a word and one run of the blanks around it, or its whole continuation line."""
    if not word.contiguous:
        return None
    line_start = text.rfind("\n", 0, word.start) + 1
    line_end = text.find("\n", word.end)
    line_end = len(text) if line_end < 0 else line_end
    line = text[line_start:line_end].rstrip("\r")
    alone = line.strip() in (word.raw, word.raw + " \\", word.raw + "\\")
    if alone and line.rstrip().endswith("\\"):
        return Edit(line_start, min(line_end + 1, len(text)), "")
    if alone:  # the last piece of a continued line: take the previous backslash with it
        previous = text[:line_start].rstrip("\r\n")
        if previous.endswith("\\"):
            cut = len(previous[:-1].rstrip(" \t"))
            return Edit(cut, line_start + len(line), "")
    before = len(text[line_start:word.start]) - len(text[line_start:word.start].rstrip(" \t"))
    if before and text[line_start:word.start - before].strip():
        # the blanks before it: two neighbours removed at once then never share one
        return Edit(word.start - before, word.end, "")
    after = len(text[word.end:line_end]) - len(text[word.end:line_end].lstrip(" \t"))
    return Edit(word.start, word.end + after, "")
