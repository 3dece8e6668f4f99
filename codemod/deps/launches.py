"""NM816: a launch line that starts a script which spawns its own workers.

`xmp.spawn(_mp_fn, args=..., nprocs=8)` started 8 processes from one `python train.py`. Once
the script is migrated (NM220) its entry runs once per process, as torchrun expects, so the
line that launches it must start the 8: `torchrun --nproc-per-node=8 train.py`. The line is
rewritten when that is unambiguous (the script is found, it spawns, and the count is a literal);
otherwise it is reported with the command to use.

The readers hand over one command at a time as words with file spans: shell words (scripts,
Dockerfile RUN and shell-form CMD, notebook `!` lines), or the items of a list (exec-form CMD,
a Kubernetes `command`), with a `Render` that knows how to write the new words there.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from neuron_migrate.deps import ids
from neuron_migrate.deps.commands import PYTHON, Variable, Word, assignment, expand
from neuron_migrate.deps.emit import Emitter, rule_enabled
from neuron_migrate.deps.entries import Edit
from neuron_migrate.deps.launch_paths import HERE, HostPaths, roots_of
from neuron_migrate.files import outside
from neuron_migrate.deps.lines import LogicalLine
from neuron_migrate.deps.spawners import Spawner, spawner_at, spawner_of
from neuron_migrate.model import Kind

PASS_THROUGH = frozenset({"nohup", "exec", "time", "command", "sudo", "env",
                          "neuron_parallel_compile",
                          # reserved words a command follows: `if [ ]; then python x.py; fi`
                          "if", "then", "else", "elif", "do", "while", "until", "{", "!"})
HOST_LAUNCHERS = frozenset({"srun", "mpirun", "mpiexec"})
TORCHRUN_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch"})
XLA_DIST = "torch_xla.distributed.xla_dist"
VALUE_OPTIONS = frozenset({"-W", "-X"})
DROPPED_OPTIONS = frozenset({"-u"})  # torchrun starts every worker with `python -u` itself


@dataclass(frozen=True)
class Launch:
    interpreter: Word
    options: tuple[Word, ...]
    target: Word
    module: bool
    host_launcher: str | None = None


@dataclass(frozen=True)
class XlaDist:
    word: Word


Render = Callable[[Launch, list[str | None]], Sequence[Edit] | None]
"""The edits that put the new words in place of the interpreter and its options (None in the
list: the interpreter as written); None when they cannot be written there."""


def shell_render(text: str) -> Render:
    """Shell words: one span from the interpreter to its last option, on one line."""

    def render(launch: Launch, words: list[str | None]) -> Sequence[Edit] | None:
        last = (launch.options or (launch.interpreter,))[-1]
        start, end = launch.interpreter.start, last.end
        if any(c in text[start:end] for c in "\r\n") or not launch.interpreter.contiguous:
            return None
        new = " ".join(launch.interpreter.raw if w is None else w for w in words)
        return (Edit(start, end, new),)

    return render


def item_render(quote: Callable[[str, Word], str], separator: Callable[[Word], str]) -> Render:
    """List items (exec-form JSON, YAML sequences): the interpreter's and its options' items
    are replaced one for one, and the rest inserted after the last of them."""

    def render(launch: Launch, words: list[str | None]) -> Sequence[Edit] | None:
        old = [launch.interpreter, *launch.options]
        if len(old) > len(words):
            return None
        edits = [Edit(item.start, item.end, quote(new, item))
                 for item, new in zip(old, words) if new is not None]
        rest = words[len(old):]
        if rest:
            last = old[-1]
            edits.append(Edit(last.end, last.end, "".join(
                separator(last) + quote(w or launch.interpreter.value, last) for w in rest)))
        return edits

    return render


def json_quote(value: str, item: Word) -> str:
    return json.dumps(value)


JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def exec_form_items(line: LogicalLine) -> list[Word] | None:
    """The strings of an exec-form instruction (`CMD ["python3", "train.py"]`) with their
    spans; None when the instruction is in shell form (Docker's own test: valid JSON)."""
    start = line.text.find("[")
    if start < 0 or line.text[:start].split()[1:] and not all(
            w.startswith("--") for w in line.text[:start].split()[1:]):
        return None
    try:
        values = json.loads(line.text[start:])
    except ValueError:
        return None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    tokens = list(JSON_STRING.finditer(line.text, start))
    if len(tokens) != len(values):
        return None
    return [Word(t.group(), value, line.offset(t.start()), line.offset(t.start()) + len(t.group()),
                 '"', line.contiguous(t.start(), t.end())) for t, value in zip(tokens, values)]


def find_launch(words: Sequence[Word], variables: dict[str, Variable]) -> Launch | XlaDist | None:
    """The Python launch in one simple command, if it is one."""
    i, host = 0, None
    while i < len(words):
        base = words[i].value.rsplit("/", 1)[-1]
        if assignment(words[i]) is not None or base in PASS_THROUGH:
            i += 1
        elif base in HOST_LAUNCHERS:
            host = base
            i = next((j for j in range(i + 1, len(words)) if _launcher_word(words[j], variables)),
                     len(words))
        else:
            break
    if i >= len(words):
        return None
    base = words[i].value.rsplit("/", 1)[-1]
    if base == "xla_dist":
        return XlaDist(words[i])
    if PYTHON.fullmatch(expand(words[i].value, variables) or "") is None:
        return None
    return _python(words, i, variables, host)


def _launcher_word(word: Word, variables: dict[str, Variable]) -> bool:
    base = word.value.rsplit("/", 1)[-1]
    return base in ("torchrun", "xla_dist") or \
        PYTHON.fullmatch(expand(word.value, variables) or "") is not None


def _python(words: Sequence[Word], i: int, variables: dict[str, Variable],
            host: str | None) -> Launch | XlaDist | None:
    options: list[Word] = []
    k = i + 1
    while k < len(words) and words[k].value.startswith("-"):
        value = words[k].value
        if value == "-m":
            if k + 1 >= len(words):
                return None
            module = words[k + 1].value
            if module in TORCHRUN_MODULES:
                return None
            if module == XLA_DIST:
                return XlaDist(words[i])
            return Launch(words[i], tuple(options), words[k + 1], True, host)
        if value in ("-c", "-") or value.startswith("-c"):
            return None
        width = 2 if value in VALUE_OPTIONS else 1
        options.extend(words[k:k + width])
        k += width
    if k >= len(words):
        return None
    return Launch(words[i], tuple(options), words[k], False, host)


SCRIPT_WORD = re.compile(rb"(?<![\w./~-])[\w./~-]*\w\.py\b")  # words start at a boundary
MODULE_WORD = re.compile(rb"(?<!\S)-m\s+([A-Za-z_][\w.]*)")
FOLDER_WORD = re.compile(rb"(?:\bcd|\bpushd|\bWORKDIR|\bworkingDir:|\bworking_dir:|\bCOPY|\bADD)"
                         rb"[ \t]+[\"']?([^\s\"';&|]+)")


_ZERO = r"""["']?(?:\$0|\$\{0\}|\$\{BASH_SOURCE(?:\[0\])?\})["']?"""
SCRIPT_DIR = re.compile(rf"""^\s*(?:export\s+|local\s+|readonly\s+)?([A-Za-z_]\w*)=["']?"""
                        rf"""\$\((?:\s*cd\s+["']?)?\$\((?:dirname|realpath)\s+{_ZERO}\)""")
PARENT_DIR = re.compile(r"""^\s*(?:export\s+|local\s+|readonly\s+)?([A-Za-z_]\w*)=["']?"""
                        r"""\$\(dirname\s+["']?\$\{?(\w+)\}?["']?\s*\)["']?\s*$""")


def note_script_dir(line: str, variables: dict[str, Variable], paths: HostPaths | None) -> None:
    """`HERE="$(cd "$(dirname "$0")"; pwd)"`, `TOP=$(dirname "$HERE")`: a variable holding the
    script's own folder (or its parent) names a real path, which `$HERE/train.py` then uses.
    Read after the line's own commands, which record what the shell reader made of it."""
    if paths is None or "dirname" not in line:
        return
    here = SCRIPT_DIR.match(line)
    if here is not None:
        variables[here[1]] = Variable(str(paths.roots[0]))
        return
    parent = PARENT_DIR.match(line)
    if parent is not None and parent[2] in variables:
        folder = variables[parent[2]].value.rstrip("/")
        if folder.startswith("/"):
            variables[parent[1]] = Variable(os.path.dirname(folder) or "/")


def names_a_spawner(path: str, data: bytes) -> bool:
    """Whether a file without Neuron words names a script that spawns its own workers: only
    then is it read in full. Each `name.py` word (and `-m module`) is looked for beside the
    file and at the roots, directly and under the folders its `cd`, WORKDIR and COPY words
    name: a stat per place, plain strings (pathlib costs more than the stat), and a substring
    search of each script found (cached)."""
    scripts = {m.decode("utf-8", "replace") for m in SCRIPT_WORD.findall(data)}
    for module in MODULE_WORD.findall(data):
        stem = module.decode().replace(".", "/")
        scripts.update((f"{stem}.py", f"{stem}/__main__.py"))
    if not scripts:
        return False
    folders = {""}
    for word in FOLDER_WORD.findall(data):  # `cd ~/src/project/x`: every tail, as HostPaths
        parts = [p for p in word.decode("utf-8", "replace").split("/") if p not in ("", "~")]
        folders.update("/".join(parts[i:]) for i in range(len(parts)))
    roots = [str(root) for root in roots_of(Path(path))]
    for script in scripts:
        script = script.lstrip("/~")
        for tail in (script, script.rsplit("/", 1)[-1]):
            for root in roots:
                for folder in folders:
                    candidate = os.path.join(root, folder, tail)
                    if outside.is_file(candidate) and \
                            spawner_at(Path(candidate)) is not None:
                        return True
    return False


def follow_directory(words: Sequence[Word], variables: dict[str, Variable],
                     paths: HostPaths | None) -> None:
    """`cd DIR`, `pushd DIR`, `popd`: where the next relative paths start."""
    if paths is None or not words:
        return
    name = words[0].value
    if name in ("cd", "pushd"):
        given = [w for w in words[1:] if not w.value.startswith("-") or w.value == "-"]
        target = None
        if len(given) == 1:
            value = given[0].value
            target = value if value.startswith(HERE) else expand(value, variables)
        paths.change_dir(target, push=name == "pushd")
    elif name == "popd":
        paths.pop_dir()


def check_launch(words: Sequence[Word], variables: dict[str, Variable],
                 paths: HostPaths | None, emitter: Emitter, render: Render) -> None:
    """Report (and, when it is unambiguous, rewrite) the launch in one command."""
    found = find_launch(words, variables)
    if isinstance(found, XlaDist):
        emitter.report(ids.LAUNCH, found.word.start, XLA_DIST_MESSAGE)
        return
    if found is None or paths is None:
        return
    target = expand(found.target.value, variables)
    if target is None:
        return
    scripts = _scripts(paths, target, found.module)
    spawners = {_spawner(paths, script) for script in scripts}
    if spawners <= {None}:
        return
    written = found.target.value
    shown = f"`{written}`" if not found.module else f"module `{written}`"
    if len(spawners) > 1:
        where = ", ".join(f"`{s}`" for s in scripts)
        emitter.report(ids.LAUNCH, found.interpreter.start,
                       f"{shown} may be any of {where}, and they do not all start the same "
                       "workers: check which this line runs and launch it with torchrun "
                       "(`torchrun --nproc-per-node=N`)")
        return
    (spawner,) = spawners
    assert spawner is not None
    if spawner.count == 1:
        return  # one process before, one process after
    _emit(found, spawner, shown, emitter, render)


def _emit(launch: Launch, spawner: Spawner, shown: str, emitter: Emitter,
          render: Render) -> None:
    count = str(spawner.count) if spawner.count is not None else "N"
    bare = launch.interpreter.value in ("python", "python3")
    words: list[str | None] = ["torchrun"] if bare else [None, "-m", "torch.distributed.run"]
    words.append(f"--nproc-per-node={count}")
    command = " ".join(launch.interpreter.value if w is None else w for w in words)
    said = (f"{shown} starts its own workers (`{spawner.call}`, line {spawner.line}: "
            f"{spawner.why}); migrated ({ids.SPAWN}), it runs one worker per process, so "
            f"this line would start one: launch it with `{command}`")
    blocker = _blocker(launch, spawner, emitter)
    if blocker is not None or spawner.count is None:
        reason = blocker or ("N is the number of processes per host, the NeuronCores the job "
                             "uses")
        emitter.report(ids.LAUNCH, launch.interpreter.start, f"{said} ({reason})",
                       suggestion=f"{command} {'-m ' if launch.module else ''}"
                                  f"{launch.target.value}")
        return
    edits = render(launch, words)
    emitter.report(ids.LAUNCH, launch.interpreter.start, said, edits or (None,))


def _blocker(launch: Launch, spawner: Spawner, emitter: Emitter) -> str | None:
    """Why the line cannot be rewritten as it stands, if it cannot."""
    if launch.host_launcher is not None:
        return (f"`{launch.host_launcher}` starts it on several hosts: give torchrun "
                "`--nnodes`, `--node-rank` and a rendezvous (`--rdzv-endpoint`) as well, "
                "one task per host")
    kept = [w.value for w in launch.options if w.value not in DROPPED_OPTIONS]
    if kept:
        return (f"the interpreter option {' '.join(kept)} cannot be passed on: torchrun starts "
                "its workers with `python -u` only")
    if spawner.held is not None:
        return (f"{ids.SPAWN} leaves the spawn call for review ({spawner.held}): restructure "
                "the script first")
    if not rule_enabled(emitter.registry, ids.SPAWN):
        return f"{ids.SPAWN} is not enabled, so the script keeps its spawn call: change both"
    spawn_rule = emitter.registry.by_id.get(ids.SPAWN)
    if spawn_rule is not None and spawn_rule.kind is not Kind.FIX:
        return (f"{ids.SPAWN} only reports the spawn call: change the script and this line "
                "together")
    return None


def _scripts(paths: HostPaths, target: str, module: bool) -> list[Path]:
    if not module:
        return paths.locate(target)
    stem = target.replace(".", "/")
    return [*paths.locate(f"{stem}.py"), *paths.locate(f"{stem}/__main__.py")]


def _spawner(paths: HostPaths, script: Path) -> Spawner | None:
    written = paths.written.get(script)
    return spawner_of(written) if written is not None else spawner_at(script)


XLA_DIST_MESSAGE = (
    "`xla_dist` started the script on every host of an XLA cluster; TorchNeuron uses "
    "torchrun: run `torchrun --nnodes=H --node-rank=I --nproc-per-node=N "
    "--rdzv-endpoint=HOST:PORT script.py` on each host (or let the cluster scheduler start it)")
