"""Shell command lines: words with their file spans, `pip install` arguments, variables.

Shared by Dockerfile RUN instructions, shell scripts and notebook `!pip` lines. This is not a
shell: it splits words the way `sh` quotes them, stops at comments and command separators,
and substitutes `$VAR` / `${VAR}` / `${VAR:-default}` from the assignments it was given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from neuron_migrate.deps.lines import LogicalLine

SEPARATORS = ("&&", "||", ";", "|", "&", "(", ")")
VARIABLE = re.compile(r"\$(?:\{(?P<braced>\w+)(?::?-(?P<default>[^}]*))?\}|(?P<plain>\w+))")
PIP = re.compile(r"(?:.*/)?pip(?:3(?:\.\d+)?)?|\$\{?\w*PIP\w*\}?")
PYTHON = re.compile(r"(?:.*/)?python(?:3(?:\.\d+)?)?")
MAGIC = re.compile(r"^\s*[!%]+")
VALUE_OPTIONS = frozenset({
    "-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url",
    "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--platform",
    "--python-version", "--implementation", "--abi", "--no-binary", "--only-binary",
    "--progress-bar", "--cache-dir", "--src", "--upgrade-strategy", "--trusted-host",
    "--global-option", "--config-settings", "-C", "--log", "--proxy", "--retries",
    "--timeout", "--exists-action", "--cert", "--client-cert", "--report", "-e", "--editable",
    "--root-user-action", "--python", "--index-strategy",
})
INDEX_OPTIONS = frozenset({"-i", "--index-url", "--extra-index-url"})


@dataclass(frozen=True)
class Word:
    raw: str
    value: str
    start: int
    """File offset of the word's first character."""
    end: int
    quote: str
    """The quote wrapping the whole word, or "" when it is bare (or mixed)."""
    contiguous: bool
    separator: bool = False


@dataclass(frozen=True)
class Variable:
    value: str
    span: tuple[int, int] | None = None
    """Where the value is written in the file, when it can be edited there."""


def strip_magic(line: str) -> str:
    """`!pip install x` / `%pip install x` / `%env A=1` as a shell would see them, keeping
    every character where it was so columns stay right."""
    match = MAGIC.match(line)
    if match is None:
        return line
    rest = line[match.end():]
    if line[match.start():match.end()].strip().startswith("%") and rest.startswith("env "):
        name, _, value = rest[4:].strip().partition(" ") if "=" not in rest else \
            (rest[4:].strip(), "", "")
        setting = f"{name}={value.strip()}" if value else name
        indent = match.end() + 4 + len(rest[4:]) - len(rest[4:].lstrip())
        return (" " * indent + setting).ljust(len(line))
    return " " * match.end() + rest


def split_words(line: LogicalLine) -> list[Word]:
    if _QUOTING.search(line.text) is None:
        return _plain_words(line)
    return _quoted_words(line)


def _quoted_words(line: LogicalLine) -> list[Word]:
    words: list[Word] = []
    text = line.text
    i = 0
    while i < len(text):
        if text[i].isspace():
            i += 1
        elif text[i] == "#":
            break
        elif text[i] in _SEPARATOR_STARTS:
            op = next(s for s in SEPARATORS if text.startswith(s, i))
            words.append(_word(line, i, i + len(op), op, separator=True))
            i += len(op)
        else:
            end, value = _scan_word(text, i)
            words.append(_word(line, i, end, value))
            i = end
    return words


_SEPARATOR_STARTS = frozenset(s[0] for s in SEPARATORS)
# a run of characters that stand for themselves: neither space, quote, backslash nor the
# start of a separator (every one of those stops the run, to be read one at a time)
_PLAIN = re.compile("[^\\s'\"\\\\%s]+" % re.escape("".join(sorted(_SEPARATOR_STARTS))))
_DOUBLE_QUOTED = re.compile(r'(?:[^"\\]+|\\[\s\S]?)*')
_QUOTING = re.compile("['\"\\\\%s]" % re.escape("".join(sorted(_SEPARATOR_STARTS))))
"""What a word may hold that stands for something else, or ends it: quotes, a backslash, the
start of a separator."""
_RUN = re.compile(r"\S+")


def _plain_words(line: LogicalLine) -> list[Word]:
    """`split_words` of a line without anything `_QUOTING` finds, most lines of a script:
    each run of non-space characters is a word and its own value, and one that begins with
    `#` begins a comment."""
    words: list[Word] = []
    for run in _RUN.finditer(line.text):
        raw = run.group()
        if raw[0] == "#":
            break
        start = line.offset(run.start())
        words.append(Word(raw, raw, start, start + len(raw), "",
                          line.contiguous(run.start(), run.end())))
    return words


def _scan_word(text: str, i: int) -> tuple[int, str]:
    """Dockerfiles and scripts are mostly plain words: runs of plain characters are taken
    at once (a character-by-character scan was most of a dependency file's reading)."""
    value: list[str] = []
    while i < len(text):
        plain = _PLAIN.match(text, i)
        if plain is not None:
            value.append(plain.group())
            i = plain.end()
            continue
        char = text[i]
        if char.isspace() or char in _SEPARATOR_STARTS:
            break
        if char == "'":
            close = text.find("'", i + 1)
            close = len(text) if close < 0 else close
            value.append(text[i + 1:close])
            i = close + 1
        elif char == '"':
            close = _DOUBLE_QUOTED.match(text, i + 1).end()  # type: ignore[union-attr]
            value.append(text[i + 1:close])
            i = close + 1
        elif char == "\\" and i + 1 < len(text):
            value.append(text[i + 1])
            i += 2
        else:
            value.append(char)
            i += 1
    return min(i, len(text)), "".join(value)


def _word(line: LogicalLine, start: int, end: int, value: str, separator: bool = False) -> Word:
    raw = line.text[start:end]
    quote = raw[0] if len(raw) >= 2 and raw[0] in "'\"" and raw[-1] == raw[0] \
        and raw.count(raw[0]) == 2 else ""
    offset = line.offset(start)
    return Word(raw, value, offset, offset + len(raw), quote, line.contiguous(start, end),
                separator)


def simple_commands(words: list[Word]) -> list[list[Word]]:
    commands: list[list[Word]] = [[]]
    for word in words:
        if word.separator:
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def expand(value: str, variables: dict[str, Variable]) -> str | None:
    """Substitute known variables; None when one is unknown (and has no default)."""
    unknown = False

    def substitute(match: re.Match[str]) -> str:
        nonlocal unknown
        name = match["braced"] or match["plain"]
        if name in variables:
            return variables[name].value
        if match["default"] is not None:
            return match["default"]
        unknown = True
        return ""

    result = VARIABLE.sub(substitute, value)
    return None if unknown else result


ASSIGNMENT = re.compile(r"([A-Za-z_]\w*)=(.*)", re.DOTALL)


def assignment(word: Word) -> tuple[str, str] | None:
    """`NAME=value` as a shell assignment word."""
    match = ASSIGNMENT.fullmatch(word.value) if "=" in word.value else None
    return (match[1], match[2]) if match else None


def pip_arguments(command: list[Word],
                  variables: dict[str, Variable] | None = None) -> list[Word] | None:
    """The words after `install` when this simple command is a pip install, else None. The
    command's words are read with the `variables` known (`${PYTHON} -m pip install`, where
    an ARG or an assignment named the interpreter)."""
    values = [w.value for w in command]
    while values and (values[0] in ("sudo", "env") or "=" in values[0]):
        values, command = values[1:], command[1:]
    for i, value in enumerate(values):
        if value == "install" and i >= 1 and (_is_pip(values[:i]) or
                                              _is_pip(_expanded(values[:i], variables))):
            return command[i + 1:]
    return None


def _expanded(values: list[str], variables: dict[str, Variable] | None) -> list[str]:
    """The words as the shell sees them once the known variables are put in."""
    if not variables or not any("$" in value for value in values):
        return []
    return " ".join(expand(value, variables) or value for value in values).split()


def _is_pip(head: list[str]) -> bool:
    if len(head) == 1:
        return PIP.fullmatch(head[0]) is not None
    if len(head) == 2 and head == ["uv", "pip"]:
        return True
    return len(head) >= 3 and PYTHON.fullmatch(head[0]) is not None and \
        head[-2] == "-m" and PIP.fullmatch(head[-1]) is not None


def split_pip_arguments(arguments: list[Word]) -> tuple[list[Word], list[tuple[Word, str]]]:
    """Requirement words, and (option word, URL) for every index option."""
    requirements: list[Word] = []
    indexes: list[tuple[Word, str]] = []
    i = 0
    while i < len(arguments):
        word = arguments[i]
        option, equals, inline = word.value.partition("=")
        if word.value.startswith("-"):
            takes_value = option in VALUE_OPTIONS and not equals
            value_word = arguments[i + 1] if takes_value and i + 1 < len(arguments) else None
            if option in INDEX_OPTIONS:
                url = inline if equals else (value_word.value if value_word else "")
                indexes.append((value_word or word, url))
            i += 2 if takes_value else 1
            continue
        requirements.append(word)
        i += 1
    return requirements, indexes
