"""Dockerfiles and Containerfiles.

Instructions are read as the builder reads them: continuation lines joined, comment lines
inside a continuation dropped, the `escape` parser directive honoured. ARGs declared before
the first FROM are global defaults: FROM lines see them, and a stage sees one only after it
redeclares it (`ARG NAME`). Each stage is its own group of requirements, so one stage's
`nki` does not satisfy another's.

Heredocs (`RUN <<EOF`, BuildKit's Dockerfile syntax 1.4 and later) are set aside before the
instructions are read, so that no line of a body is taken for an instruction; a body that is
the script RUN runs (`RUN <<EOF`, `RUN bash -e <<EOF`) is read as shell, in its stage; a file
COPY or ADD writes is read as one when it is a requirements file or a shell script
(`COPY <<EOF /app/requirements.txt`). Other bodies (a Python program's input, a file of
another kind) are not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from neuron_migrate.deps import check, ids
from neuron_migrate.deps.commands import Variable, Word, expand, simple_commands, split_words
from neuron_migrate.deps.emit import Emitter
from neuron_migrate.deps.entries import Manifest, Unparsable, line_at
from neuron_migrate.deps.launch_paths import ContainerPaths
from neuron_migrate.deps.launches import (
    check_launch, exec_form_items, follow_directory, item_render, json_quote, shell_render,
)
from neuron_migrate.deps.lines import LogicalLine, logical_lines, physical_lines
from neuron_migrate.deps.shell import PARALLEL_COMPILE_MESSAGE, read_command, record_assignment, value_span
from neuron_migrate.deps.signals import check_image, scan_text_signals

ESCAPE = re.compile(r"#\s*escape\s*=\s*(\S)", re.IGNORECASE)
HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)[ \t]*([\"']?)([A-Za-z_][\w.-]*)\2")  # not <<<
HEREDOC_INSTRUCTIONS = frozenset({"RUN", "COPY", "ADD"})
SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh"})
RUN_FLAGS = ("--mount", "--network", "--security")
WRITTEN_KINDS = frozenset({"requirements", "shell"})
COMMAND_SEPARATOR = re.compile(r"&&|\|\||[;|&]")


@dataclass(frozen=True)
class Heredoc:
    start: int  # the body's first character
    end: int  # where its delimiter line starts
    end_of_delimiter: int
    script: bool  # the shell script RUN runs, not a file or another program's input
    target: str | None = None  # the file COPY or ADD writes it to


class _Build:
    """What the reader knows at one point of the file."""

    def __init__(self, text: str, emitter: Emitter,
                 heredocs: dict[int, list[Heredoc]] | None = None) -> None:
        self.text = text
        self.heredocs = heredocs or {}  # by the offset of their instruction
        self.emitter = emitter
        self.manifest = Manifest()
        self.globals: dict[str, Variable] = {}
        self.scope: dict[str, Variable] | None = None  # None before the first FROM
        self.stage = 0
        self.paths = emitter.paths if isinstance(emitter.paths, ContainerPaths) else None

    @property
    def group(self) -> str:
        return f"stage {self.stage}"

    def instruction(self, line: LogicalLine) -> None:
        words = split_words(line)
        if not words or words[0].separator:
            return
        keyword, arguments = words[0].value.upper(), words[1:]
        handler = getattr(self, f"on_{keyword.lower()}", None)
        if handler is not None:
            handler(line, arguments)

    def on_from(self, line: LogicalLine, arguments: list[Word]) -> None:
        self.stage += 1
        self.scope = {}
        if self.paths is not None:
            self.paths.new_stage()
        image = next((w for w in arguments if not w.value.startswith("--")), None)
        if image is not None:
            check_image(expand(image.value, self.globals) or image.value, image.start,
                        self.emitter)

    def on_arg(self, line: LogicalLine, arguments: list[Word]) -> None:
        for word in arguments:
            name, equals, value = word.value.partition("=")
            target = self.globals if self.scope is None else self.scope
            if equals:
                known = {**self.globals, **target} if self.scope is None else target
                target[name] = Variable(expand(value, known) or value, value_span(word, name))
            elif self.scope is not None and name in self.globals:
                self.scope[name] = self.globals[name]

    def on_env(self, line: LogicalLine, arguments: list[Word]) -> None:
        scope = self.scope if self.scope is not None else self.globals
        if len(arguments) >= 2 and "=" not in arguments[0].value:  # legacy `ENV NAME value`
            name = arguments[0].value
            value = " ".join(w.value for w in arguments[1:])
            scope[name] = Variable(value)
            record_assignment(_as_assignment(arguments[0], value), {}, self.manifest,
                              self.emitter, self.group)
            return
        for word in arguments:
            record_assignment(word, scope, self.manifest, self.emitter, self.group)

    def on_workdir(self, line: LogicalLine, arguments: list[Word]) -> None:
        if self.paths is not None and len(arguments) == 1:
            self.paths.set_workdir(expand(arguments[0].value, self._variables()))

    def on_copy(self, line: LogicalLine, arguments: list[Word]) -> None:
        if self.paths is None or any(w.value.startswith("--from") for w in arguments):
            return  # another stage's or image's files: not the build context
        given = [w for w in arguments if not w.value.startswith("--")]
        if len(given) < 2 or given[0].raw.startswith("[") or \
                line.first.start in self.heredocs:
            return
        values = [expand(w.value, self._variables()) for w in given]
        if all(v is not None for v in values):
            self.paths.copy(values[:-1], values[-1])  # type: ignore[arg-type]

    on_add = on_copy

    def _variables(self) -> dict[str, Variable]:
        return dict(self.scope if self.scope is not None else self.globals)

    def on_run(self, line: LogicalLine, arguments: list[Word]) -> None:
        arguments = [w for w in arguments if not w.value.startswith(RUN_FLAGS)]
        if self.paths is not None:
            self.paths.reset()  # each RUN is a new shell in WORKDIR
        if arguments and arguments[0].raw.startswith("["):
            self._exec_form(line)
            self._exec_launch(line)
            return
        scope = dict(self.scope if self.scope is not None else self.globals)
        for command in simple_commands(arguments):
            read_command(command, self.text, scope, self.manifest, self.emitter, self.group)
        for heredoc in self.heredocs.get(line.first.start, ()):
            if heredoc.script:
                for body_line in logical_lines(_only(self.text, heredoc.start, heredoc.end)):
                    for command in simple_commands(split_words(body_line)):
                        read_command(command, self.text, scope, self.manifest, self.emitter,
                                     self.group)

    def on_cmd(self, line: LogicalLine, arguments: list[Word]) -> None:
        self._exec_form(line)
        if self.paths is not None:
            self.paths.reset()
        if self._exec_launch(line):
            return
        variables = self._variables()
        for command in simple_commands(arguments):  # the shell form
            follow_directory(command, variables, self.paths)
            check_launch(command, variables, self.paths, self.emitter, shell_render(self.text))

    on_entrypoint = on_cmd

    def _exec_launch(self, line: LogicalLine) -> bool:
        """The exec form (`["python3", "train.py"]`): False when the line is not one."""
        items = exec_form_items(line)
        if items is None:
            return False
        check_launch(items, {}, self.paths, self.emitter, item_render(json_quote, _comma))
        return True

    def _exec_form(self, line: LogicalLine) -> None:
        index = line.text.find("neuron_parallel_compile")
        if index >= 0:
            self.emitter.report(ids.PARALLEL_COMPILE, line.offset(index),
                                PARALLEL_COMPILE_MESSAGE)


def _comma(item: Word) -> str:
    return ", "


def _as_assignment(word: Word, value: str) -> Word:
    return Word(f"{word.raw}={value}", f"{word.value}={value}", word.start, word.end,
                "", False)


def scan(text: str, emitter: Emitter, path: str = "") -> None:
    escape = _escape_of(text)
    heredocs = _heredocs(text, escape)
    build = _Build(text, emitter, heredocs)
    instructions = _blank(text, [(h.start, h.end_of_delimiter)
                                 for docs in heredocs.values() for h in docs])
    for line in logical_lines(instructions, skip=_is_comment, escape=escape):
        if line.unterminated:
            raise Unparsable(line_at(text, line.first.start),
                             "the line continuation starting here is never ended")
        if not _is_comment(line.text):
            build.instruction(line)
    check.emit(build.manifest, emitter)
    for docs in heredocs.values():
        for heredoc in docs:
            _scan_written(text, heredoc, emitter, path)
    scan_text_signals(text, emitter)


def _scan_written(text: str, heredoc: Heredoc, emitter: Emitter, path: str) -> None:
    """A requirements file or shell script COPY/ADD writes from a heredoc, read as one, in
    place: the rest of the Dockerfile is blank to that reader. (Kinds with a structure, TOML
    or YAML, are not read: a `<<-` body keeps the tabs BuildKit would strip.)"""
    from neuron_migrate.deps import kind_of, scanner  # the package imports this module lazily

    kind = kind_of(Path(heredoc.target)) if heredoc.target else None
    if kind in WRITTEN_KINDS:
        scanner(kind)(_only(text, heredoc.start, heredoc.end), emitter, path)


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")


def _escape_of(text: str) -> str:
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        match = ESCAPE.match(line)
        if match:
            return match[1]
    return "\\"


def _heredocs(text: str, escape: str) -> dict[int, list[Heredoc]]:
    """The heredoc bodies, by the offset of the instruction that opens them. An instruction
    whose line carries `<<WORD` ends with the last of its bodies, as BuildKit reads it."""
    found: dict[int, list[Heredoc]] = {}
    lines = physical_lines(text)
    i, opened, keyword, head = 0, -1, "", ""
    while i < len(lines):
        line = lines[i]
        content = text[line.start:line.content_end]
        i += 1
        if opened < 0:
            if not content.strip() or _is_comment(content):
                continue
            opened, keyword, head = line.start, content.split(None, 1)[0].upper(), ""
        elif _is_comment(content):
            continue
        continued = content.endswith(escape)
        piece = content[:-len(escape)] if continued else content
        markers = list(HEREDOC.finditer(piece)) if keyword in HEREDOC_INSTRUCTIONS else []
        if markers and _exec_form(head + piece[:markers[0].start()]):
            markers = []  # `RUN ["sh", "-c", "cat <<EOF"]`: JSON, no heredoc
        if not markers:
            head += piece + " "
            opened = opened if continued else -1
            continue
        script = keyword == "RUN" and _runs_shell(head + piece[:markers[0].start()])
        target = _destination(piece[markers[-1].end():], markers) if keyword != "RUN" else None
        for n, marker in enumerate(markers):
            body = i
            while i < len(lines) and not _delimits(text[lines[i].start:lines[i].content_end],
                                                   marker):
                i += 1
            if i == len(lines):
                raise Unparsable(line_at(text, line.start),
                                 f"the heredoc <<{marker[3]} opened here is never ended")
            found.setdefault(opened, []).append(
                Heredoc(lines[body].start, lines[i].start, lines[i].end, script and n == 0,
                        target and (target + marker[3] if target.endswith("/") else target)))
            i += 1
        opened = -1
    return found


def _destination(rest: str, markers: list[re.Match[str]]) -> str | None:
    """Where COPY/ADD writes its heredocs: the last word after them; a folder (`dir/`) gets
    one file per heredoc, named by its delimiter. Several into one file name: unknown."""
    words = rest.split()
    if not words or (len(markers) > 1 and not words[-1].endswith("/")):
        return None
    return words[-1]


def _delimits(line: str, marker: re.Match[str]) -> bool:
    return (line.lstrip("\t") if marker[1] else line) == marker[3]


def _exec_form(head: str) -> bool:
    words = [w for w in head.split()[1:] if not w.startswith("--")]
    return bool(words) and words[0].startswith("[")


def _runs_shell(head: str) -> bool:
    """Whether the heredoc after `head` (the instruction up to its first `<<`) is a shell
    script: RUN has no command of its own, or the command it feeds is a shell with options."""
    words = [w for w in head.split()[1:] if not w.startswith(RUN_FLAGS)]
    if not words:
        return True
    command = COMMAND_SEPARATOR.split(" ".join(words))[-1].split()
    return bool(command) and command[0].rsplit("/", 1)[-1] in SHELLS and \
        all(w.startswith("-") for w in command[1:])


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with the spans turned to spaces, line ends kept: offsets stay valid."""
    if not spans:
        return text
    chars = list(text)
    for start, end in spans:
        for k in range(start, end):
            if chars[k] not in "\r\n":
                chars[k] = " "
    return "".join(chars)


def _only(text: str, start: int, end: int) -> str:
    """`text` blank outside [start, end), line ends kept."""
    return _blank(text, [(0, start), (end, len(text))])
