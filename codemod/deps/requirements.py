"""requirements*.txt, constraints*.txt and *.in files, read the way pip reads them.

pip joins backslash continuations, strips ` #` comments, and splits a requirement from its
per-requirement options at the first word that starts with a dash. Includes (`-r`, `-c`) are
scanned as files of their own. A file with `--hash` options (or a pip-compile header) is
generated: it is reported like a lockfile, since a new pin needs new hashes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from neuron_migrate.deps import check
from neuron_migrate.deps.emit import Emitter
from neuron_migrate.deps.entries import (
    Edit, Entry, Index, Manifest, Unparsable, entry_from, is_relevant, line_at, parse_requirement,
    written_head,
)
from neuron_migrate.deps.lines import LogicalLine, logical_lines, newline_of

COMMENT = re.compile(r"(?:^|(?<=\s))#")
"""Where a comment starts: a `#` that begins the line or follows whitespace. (Matching the
whitespace before it too retried the whole run of spaces at each of its characters.)"""
INDEX_OPTIONS = ("-i", "--index-url", "--extra-index-url")
LOCATION = re.compile(r"^(\.|/|~|[a-z+]+://|git\+)|\.(whl|zip|tar\.gz|tgz)$|^\$")
COMPILE_HEADER = re.compile(r"^#\s+((?:uv )?pip[- ]compile\b.*)$", re.MULTILINE)


def read_requirements(text: str) -> Manifest:
    manifest = Manifest()
    newline = newline_of(text)
    for line in logical_lines(text):
        body = _without_comment(line.text)
        if body.strip():
            _read_line(text, line, body, newline, manifest)
    if "--hash" in text or COMPILE_HEADER.search(text):
        header = COMPILE_HEADER.search(text)
        manifest.lock_command = header.group(1).strip() if header else \
            "pip-compile --generate-hashes (or `uv pip compile --generate-hashes`)"
    return manifest


def _without_comment(text: str) -> str:
    """The line without its comment and the whitespace before it, as pip strips it."""
    comment = COMMENT.search(text)
    return text if comment is None else text[:comment.start()].rstrip()


def _read_line(text: str, line: LogicalLine, body: str, newline: str,
               manifest: Manifest) -> None:
    words = [(m.start(), m.group()) for m in re.finditer(r"\S+", body)]
    _read_indexes(line, words, newline, manifest)
    first_start, first = words[0]
    if first.startswith("-"):
        return  # -r/-c includes, -e editables, index and binary options
    option = next((start for start, word in words if word.startswith("-")), len(body))
    requirement_text = body[first_start:option].rstrip()
    if LOCATION.search(requirement_text.split(";")[0].strip()):
        return  # a path, URL or archive: nothing to classify
    if not is_relevant(requirement_text):
        return
    requirement = parse_requirement(requirement_text)
    if requirement is None:
        raise Unparsable(line_at(text, line.first.start),
                         f"pip would reject `{requirement_text}`")
    manifest.entries.append(_entry(line, requirement_text, first_start, newline, requirement))


def _entry(line: LogicalLine, raw: str, start: int, newline: str, requirement) -> Entry:
    head = raw.split(";")[0].rstrip()
    marker = raw.split(";", 1)[1].strip() if ";" in raw else ""
    name, extras = written_head(raw)
    contiguous = line.contiguous(start, start + len(head))
    begin, end = line.offset(start), line.offset(start) + len(head)

    def rewrite(spec: str) -> Edit | None:
        return Edit(begin, end, f"{name}{extras}{spec}") if contiguous else None

    def insert(requirements: Sequence[str]) -> Edit:
        suffix = f" ; {marker}" if marker else ""
        return Edit(line.last.content_end, line.last.content_end,
                    "".join(f"{newline}{r}{suffix}" for r in requirements))

    remove = Edit(line.first.start, line.last.end, "")
    return entry_from(requirement, raw, begin, rewrite=rewrite, remove=remove, insert=insert)


def _read_indexes(line: LogicalLine, words: list[tuple[int, str]], newline: str,
                  manifest: Manifest) -> None:
    for i, (start, word) in enumerate(words):
        option, _, value = word.partition("=")
        if option not in INDEX_OPTIONS:
            continue
        at = start + len(option) + 1
        if not value and i + 1 < len(words):
            at, value = words[i + 1]

        def add_after(urls: Sequence[str]) -> Edit:
            return Edit(line.last.content_end, line.last.content_end,
                        "".join(f"{newline}--extra-index-url {u}" for u in urls))

        manifest.indexes.append(Index(value, line.offset(start), add_after=add_after,
                                      replace=_url_replacer(line, at, value)))


def _url_replacer(line: LogicalLine, start: int, url: str):
    if not url or not line.contiguous(start, start + len(url)):
        return None
    begin = line.offset(start)

    def replace(new: str) -> Edit:
        return Edit(begin, begin + len(url), new)
    return replace


def scan(text: str, emitter: Emitter, path: str = "") -> None:
    manifest = read_requirements(text)
    source = path.rsplit(".", 1)[0] + ".in" if manifest.lock_command else ""
    check.emit(manifest, emitter, source)
