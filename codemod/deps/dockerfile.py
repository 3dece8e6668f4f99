"""Dockerfiles and Containerfiles.

Instructions are read as the builder reads them: continuation lines joined, comment lines
inside a continuation dropped, the `escape` parser directive honoured. ARGs declared before
the first FROM are global defaults: FROM lines see them, and a stage sees one only after it
redeclares it (`ARG NAME`). Each stage is its own group of requirements, so one stage's
`nki` does not satisfy another's.
"""

from __future__ import annotations

import re

from codemod.deps import check, ids
from codemod.deps.commands import Variable, Word, expand, simple_commands, split_words
from codemod.deps.emit import Emitter
from codemod.deps.entries import Manifest, Unparsable, line_at
from codemod.deps.lines import LogicalLine, logical_lines
from codemod.deps.shell import PARALLEL_COMPILE_MESSAGE, read_command, record_assignment, value_span
from codemod.deps.signals import check_image, scan_text_signals

ESCAPE = re.compile(r"#\s*escape\s*=\s*(\S)", re.IGNORECASE)


class _Build:
    """What the reader knows at one point of the file."""

    def __init__(self, text: str, emitter: Emitter) -> None:
        self.text = text
        self.emitter = emitter
        self.manifest = Manifest()
        self.globals: dict[str, Variable] = {}
        self.scope: dict[str, Variable] | None = None  # None before the first FROM
        self.stage = 0

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

    def on_run(self, line: LogicalLine, arguments: list[Word]) -> None:
        arguments = [w for w in arguments if not w.value.startswith("--mount")
                     and not w.value.startswith(("--network", "--security"))]
        if arguments and arguments[0].raw.startswith("["):
            self._exec_form(line)
            return
        scope = dict(self.scope if self.scope is not None else self.globals)
        for command in simple_commands(arguments):
            read_command(command, self.text, scope, self.manifest, self.emitter, self.group)

    def on_cmd(self, line: LogicalLine, arguments: list[Word]) -> None:
        self._exec_form(line)

    on_entrypoint = on_cmd

    def _exec_form(self, line: LogicalLine) -> None:
        index = line.text.find("neuron_parallel_compile")
        if index >= 0:
            self.emitter.report(ids.PARALLEL_COMPILE, line.offset(index),
                                PARALLEL_COMPILE_MESSAGE)


def _as_assignment(word: Word, value: str) -> Word:
    return Word(f"{word.raw}={value}", f"{word.value}={value}", word.start, word.end,
                "", False)


def scan(text: str, emitter: Emitter, path: str = "") -> None:
    build = _Build(text, emitter)
    for line in logical_lines(text, skip=_is_comment, escape=_escape_of(text)):
        if line.unterminated:
            raise Unparsable(line_at(text, line.first.start),
                             "the line continuation starting here is never ended")
        if not _is_comment(line.text):
            build.instruction(line)
    check.emit(build.manifest, emitter)
    scan_text_signals(text, emitter)


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
