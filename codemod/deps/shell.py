"""Shell scripts (and notebook `!`/`%` lines): pip installs, exported XLA variables,
neuron_parallel_compile runs, and launches of scripts that spawn their own workers."""

from __future__ import annotations

import re

from neuron_migrate.deps import check, ids
from neuron_migrate.deps.commands import (
    Variable, Word, assignment, expand, pip_arguments, simple_commands, split_words,
)
from neuron_migrate.deps.emit import Emitter
from neuron_migrate.deps.entries import Index, Manifest, Unparsable, line_at
from neuron_migrate.deps.launches import check_launch, follow_directory, note_script_dir, shell_render
from neuron_migrate.deps.lines import LogicalLine, logical_lines
from neuron_migrate.deps.pip_words import read_pip_install
from neuron_migrate.deps.signals import check_variable, scan_text_signals

EXPORT_LINE = re.compile(r"[ \t]*export[ \t]+([A-Za-z_]\w*)=(\"[^\"$`\\]*\"|'[^']*'|"
                         r"[^\s;&|$`'\"\\#()<>]*)[ \t]*")
"""A line that only exports one plain value: removed whole when the variable is one of
`REMOVABLE_VARIABLES` and nothing else in the script reads it."""
OPENS_BLOCK = re.compile(r"(?:\bthen|\bdo|\belse|\{|\(|\)|;;|\\)\s*$")
CLOSES_BLOCK = re.compile(r"\s*(?:fi|done|else|elif|esac|\}|\)|;;)(?:\s|;|$)")
HEREDOC_DELIMITER = re.compile(r"[A-Za-z_][\w.-]*")
DECLARE = frozenset({"export", "declare", "readonly", "local", "typeset"})
INDEX_SETTINGS = frozenset({"global.extra-index-url", "global.index-url",
                            "install.extra-index-url", "install.index-url"})
PIP_INDEX_VARIABLES = frozenset({"PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL"})
PARALLEL_COMPILE_MESSAGE = (
    "`neuron_parallel_compile` pre-compiled XLA graphs; TorchNeuron runs eagerly and "
    "compiles only under `torch.compile(backend=\"neuron\")`: drop the pre-compilation run "
    "and launch the training command directly")


def value_span(word: Word, name: str) -> tuple[int, int] | None:
    """Where an assignment word's value is written, when it is plain or wholly quoted."""
    raw = word.raw[len(name) + 1:]
    start = word.start + len(name) + 1
    if not word.contiguous or not raw:
        return None
    if len(raw) >= 2 and raw[0] in "'\"" and raw[-1] == raw[0] and raw.count(raw[0]) == 2:
        return start + 1, start + len(raw) - 1
    return (start, start + len(raw)) if not any(c in raw for c in "'\"$\\") else None


def record_assignment(word: Word, variables: dict[str, Variable], manifest: Manifest,
                      emitter: Emitter, group: str = "") -> bool:
    """Note a `NAME=value` word; report XLA variables. False when the word is not one."""
    pair = assignment(word)
    if pair is None:
        return False
    name, value = pair
    variables[name] = Variable(expand(value, variables) or value, value_span(word, name))
    check_variable(name, value, word.start, emitter)
    if name in PIP_INDEX_VARIABLES:
        for url in value.split():
            manifest.indexes.append(Index(url, word.start, group))
    return True


def read_command(command: list[Word], text: str, variables: dict[str, Variable],
                 manifest: Manifest, emitter: Emitter, group: str = "") -> None:
    """One simple command. A script's lines are read only when they hold a word of `ACTING`
    (`_may_act`): a command this comes to act on must add its own word there."""
    words = command[1:] if command[0].value in DECLARE else command
    while words and record_assignment(words[0], variables, manifest, emitter, group):
        words = words[1:]
    if not words:
        return
    follow_directory(words, variables, emitter.paths)
    check_launch(words, variables, emitter.paths, emitter, shell_render(emitter.text))
    for word in words:
        if word.value.endswith("neuron_parallel_compile") and \
                word.value.rsplit("/", 1)[-1] == "neuron_parallel_compile":
            emitter.report(ids.PARALLEL_COMPILE, word.start, PARALLEL_COMPILE_MESSAGE)
    arguments = pip_arguments(words, variables)
    if arguments is not None:
        read_pip_install(arguments, text, variables, group, manifest)
        return
    values = [w.value for w in words]
    if values[1:3] == ["config", "set"] and len(words) > 4 and values[3] in INDEX_SETTINGS:
        for url in values[4].split():
            manifest.indexes.append(Index(url, words[4].start, group))


def scan(text: str, emitter: Emitter, path: str = "") -> None:
    """A shell script. One whose heredoc is never ended is refused, as a Dockerfile's is:
    what follows the marker is that document's text, not commands to read or rewrite."""
    lines = list(logical_lines(text))
    documents = _check_heredocs(text, lines)
    read(text, emitter, lines)
    remove_exports(text, lines, documents, emitter)


def read(text: str, emitter: Emitter, lines: list[LogicalLine] | None = None,
         variables: dict[str, Variable] | None = None) -> None:
    """Shell lines, one by one (also a notebook's `!` lines, where a heredoc cannot be);
    `lines` are the text's logical lines when the caller has them already, `variables`
    those set before the text runs (a Makefile's)."""
    manifest = Manifest()
    variables = dict(variables or {})
    for line in logical_lines(text) if lines is None else lines:
        if _may_act(line.text):
            for command in simple_commands(split_words(line)):
                read_command(command, text, variables, manifest, emitter)
        note_script_dir(line.text, variables, emitter.paths)
    check.emit(manifest, emitter)
    scan_text_signals(text, emitter)


ACTING = ("=", "$", "python", "install", "cd", "pushd", "popd", "xla_dist",
          "neuron_parallel_compile", "index-url")
"""A command `read_command` acts on has a word holding one of these: an assignment, a
variable (which may stand for an interpreter), a launch, a pip install, a change of folder,
`neuron_parallel_compile`, or `pip config set global.index-url`."""


def remove_exports(text: str, lines: list[LogicalLine], documents: list[tuple[int, int]],
                   emitter: Emitter) -> None:
    """Turn the review of an XLA-only `export NAME=value` line (NM812) into its removal,
    where removing the line changes nothing: TorchNeuron does not read the variable, as
    NM601 removes it from Python. Kept (reviewed): a line in a heredoc, one continued or
    sharing a line with other commands, one that may be a block's only command (`then` before
    it or `fi` after it), a variable the script reads (`$NAME`), XLA_USE_BF16."""
    from neuron_migrate.deps.entries import Edit
    from neuron_migrate.deps.signals import removable_variable

    code = [line for line in lines if line.text.strip() and
            not line.text.lstrip().startswith("#")]
    for index, line in enumerate(code):
        found = EXPORT_LINE.fullmatch(line.text)
        if found is None or line.first != line.last or not removable_variable(found[1]) or \
                any(start <= line.first.start < end for start, end in documents):
            continue
        before = code[index - 1].text if index else ""
        after = code[index + 1].text if index + 1 < len(code) else ""
        if OPENS_BLOCK.search(before) or CLOSES_BLOCK.match(after) or \
                re.search(rf"\${{?{found[1]}\b", text):
            continue
        position = emitter.position(line.offset(found.start(1)))
        finding = next((f for f in emitter.findings if f.rule_id == ids.XLA_ENV_VAR and
                        (f.line, f.column) == position), None)
        if finding is None:
            continue
        emitter.findings.remove(finding)
        emitter.report(ids.XLA_ENV_VAR, line.offset(found.start(1)),
                       f"{finding.message} (`{line.text.strip()}` is removed)",
                       [Edit(line.first.start, line.first.end, "")])


def _may_act(line: str) -> bool:
    """Whether a line may hold a command `read_command` acts on: most lines of a script
    (`echo`, `fi`, `mkdir -p x`) are not split into words at all. A word's value is its text
    less some quotes and backslashes, so the line is searched without any of those."""
    bare = line.replace("'", "").replace('"', "").replace("\\", "")
    return any(token in bare for token in ACTING)


def _check_heredocs(text: str, lines: list[LogicalLine]) -> list[tuple[int, int]]:
    """The spans of the script's heredoc bodies; Unparsable when one is never ended."""
    spans: list[tuple[int, int]] = []
    for line in lines:
        if "<<" in line.text:  # every marker is a word that starts so: others are not split
            spans += check_heredoc_line(text, line)
    return spans


def check_heredoc_line(text: str, line: LogicalLine) -> list[tuple[int, int]]:
    """Raises Unparsable when a heredoc the line opens is never ended in `text`; else the
    spans of the bodies it opens."""
    spans = []
    for word, following in zip(words := split_words(line), [*words[1:], None]):
        marker = _heredoc_marker(word, following)
        if marker is None:
            continue
        strip_tabs, delimiter = marker
        body = text[line.last.end:].splitlines(keepends=True)
        ends = [i for i, row in enumerate(body)
                if (row.rstrip("\r\n").lstrip("\t") if strip_tabs else row.rstrip("\r\n"))
                == delimiter]
        if not ends:
            raise Unparsable(line_at(text, word.start),
                             f"the heredoc <<{delimiter} opened here is never ended")
        spans.append((line.last.end, line.last.end + sum(map(len, body[:ends[0]]))))
    return spans


def _heredoc_marker(word: Word, following: Word | None) -> tuple[bool, str] | None:
    """`<<EOF`, `<<-EOF`, `<< 'EOF'`: whether tabs are stripped, and the delimiter."""
    if word.separator or word.quote or not word.raw.startswith("<<") or \
            word.raw.startswith("<<<"):
        return None
    strip_tabs = word.raw.startswith("<<-")
    delimiter = word.value[3 if strip_tabs else 2:]
    if not delimiter and following is not None and not following.separator:
        delimiter = following.value
    return (strip_tabs, delimiter) if HEREDOC_DELIMITER.fullmatch(delimiter) else None
