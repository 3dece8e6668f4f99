"""NM220: launching. `xmp.spawn` and `torch_xla.launch` give way to torchrun."""

from __future__ import annotations

import ast
import shlex
import warnings
import weakref
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, ReplaceStatement, Review, Role, Rule,
                                    Site, argument, bool_value, code, has_star_args, string_value,
                                    template)
from neuron_migrate.ruleapi.analysis import ast_dotted, statements
from neuron_migrate.ruleapi.deps import ids

D_DIST = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html"

SPAWN = "torch_xla.distributed.xla_multiprocessing.spawn"
LAUNCH = frozenset({"torch_xla.launch", "torch_xla.torch_xla.launch"})
_LAUNCHES = frozenset({SPAWN, *LAUNCH})
_INIT = frozenset({"torch.distributed.init_process_group",
                   "torch.distributed.distributed_c10d.init_process_group"})
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
T = TypeVar("T")


@dataclass(frozen=True)
class LaunchFacts:
    """What the whole file says about starting workers, for the rules that must agree."""

    entry_group: bool  # a launch NM220 rewrites creates the process group at the entry
    own_group: bool  # it creates a process group other than the XLA one NM201 makes "neuron"
    # the entry functions (as `ast.unparse` spells them) of the launches that start the
    # program's workers, and of those elsewhere (library or test code whose caller goes on
    # after the workers ran)
    entries: frozenset[str] = frozenset()
    elsewhere: frozenset[str] = frozenset()

    def is_entry(self, fn: str) -> bool:
        """Whether launching `fn` starts the script's workers: the launch runs at the top
        level, in the `if __name__ == "__main__":` block, or in a function that block calls
        (by name, at any depth)."""
        try:
            spelled = ast.unparse(ast.parse(fn, mode="eval").body)
        except SyntaxError:
            return False
        return spelled in self.entries and spelled not in self.elsewhere


Calls = Sequence[tuple[ast.Call, int]]
"""Every call of a file, with the index of the top-level statement that holds it
(`Site.module_calls`)."""


def launch_facts(source: str | ast.Module, calls: Calls | None = None) -> LaunchFacts:
    """NM220 and NM201 both ask, and the answer spans the file: worked out once, from the
    engine's parse of the file (`site.module_tree`) and the calls its analysis found
    (`site.module_calls()`); a text is parsed, and a tree without them walked, first."""
    if isinstance(source, str):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                source = ast.parse(source)
        except (SyntaxError, ValueError):
            return LaunchFacts(False, False)
    tree = source
    return _kept("launch", tree, lambda: _launch_facts(tree, _calls(tree, calls)))


def _launch_facts(tree: ast.Module, every: Calls) -> LaunchFacts:
    calls = _named_calls(tree, every, _INIT | _LAUNCHES)
    own = any(not _xla_group(node) for name, node, _ in calls if name in _INIT)
    reached = _reached_from_main(tree, every)
    entries: set[str] = set()
    elsewhere: set[str] = set()
    several = False  # an entry launch starts more than one process
    for name, node, top in calls:
        if name not in _LAUNCHES:
            continue
        statement = tree.body[top]
        entry = not isinstance(statement, _DEFINITIONS) or statement.name in reached
        fn = node.args[0] if node.args else next(
            (k.value for k in node.keywords if k.arg == "fn"), None)
        if fn is not None:
            (entries if entry else elsewhere).add(ast.unparse(fn))
            several |= entry and not _one_process(node, name == SPAWN)
    return LaunchFacts(several and not own, own, frozenset(entries), frozenset(elsewhere))


def called_names(tree: ast.Module, calls: Calls | None = None,
                 among: frozenset[str] | None = None) -> frozenset[str]:
    """The qualified names of everything the module calls, wherever it imported them (of
    those `among` them, when given)."""
    named = _named_calls(tree, _calls(tree, calls), among)
    return frozenset(name for name, _, _ in named if name is not None)


def named_calls(tree: ast.Module, calls: Calls | None, among: frozenset[str]
                ) -> tuple[Call, ...]:
    """The module's calls of `among`, with the qualified name each calls."""
    return _named_calls(tree, _calls(tree, calls), among)


Call = tuple[str | None, ast.Call, int]
"""A call's qualified name (`_qualname`), the call, and the index of the top-level statement
that holds it."""

_KEPT: weakref.WeakKeyDictionary[ast.Module, dict[Hashable, Any]] = weakref.WeakKeyDictionary()


def _kept(kind: Hashable, tree: ast.Module, make: Callable[[], T]) -> T:
    """What `make` says about `tree`, worked out once per file (the rules ask for every
    statement they rewrite), and kept as long as the tree lives."""
    answers = _KEPT.get(tree)
    if answers is None:
        answers = _KEPT[tree] = {}
    if kind not in answers:
        answers[kind] = make()
    return answers[kind]  # type: ignore[no-any-return]


def _calls(tree: ast.Module, calls: Calls | None) -> Calls:
    """The analysis' calls, or those of a walk of the tree."""
    if calls is not None:
        return calls
    return _kept("calls", tree, lambda: [
        (node, index) for index, statement in enumerate(tree.body)
        for node in ast.walk(statement) if isinstance(node, ast.Call)])


def _named_calls(tree: ast.Module, calls: Calls,
                 among: frozenset[str] | None = None) -> tuple[Call, ...]:
    """The file's calls with what each calls (`_qualname`), or those that call one of
    `among`. A dotted call's qualified name ends with its last attribute (only a plain name
    stands for an import's full name), so a call whose last attribute ends none of them is
    passed over without working its name out."""
    def make() -> tuple[Call, ...]:
        aliases = _kept("aliases", tree, lambda: _import_aliases(_imports(tree)))
        if among is None:
            return tuple((_qualname(node.func, aliases), node, top) for node, top in calls)
        ends = {q.rsplit(".", 1)[-1] for q in among}
        found: list[Call] = []
        for node, top in calls:
            func = node.func
            if type(func) is ast.Attribute and func.attr not in ends or \
                    type(func) is not ast.Attribute and type(func) is not ast.Name:
                continue
            name = _qualname(func, aliases)
            if name in among:
                found.append((name, node, top))
        return tuple(found)
    return _kept(("named", among), tree, make)


def _imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The file's imports in the order `ast.walk` meets them, so that a name imported twice
    means what it did over `ast.walk` (the later import wins)."""
    return [node for node in statements(tree.body)
            if isinstance(node, (ast.Import, ast.ImportFrom))]


def _one_process(call: ast.Call, spawn: bool) -> bool:
    """`nprocs=1` / `debug_single_process=True`, spelled out: the launch ran in the caller."""
    name, index, value = ("nprocs", 2, 1) if spawn else ("debug_single_process", 3, True)
    given = next((k.value for k in call.keywords if k.arg == name),
                 call.args[index] if len(call.args) > index else None)
    return isinstance(given, ast.Constant) and given.value == value \
        and type(given.value) is type(value)


def _import_aliases(imports: Iterable[ast.Import | ast.ImportFrom]) -> dict[str, str]:
    """What each imported name stands for, wherever it was imported (enough to tell
    torch.distributed's and torch_xla's calls from the user's own functions)."""
    aliases: dict[str, str] = {}
    for node in imports:
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".", 1)[0]
                aliases[alias.asname or root] = alias.name if alias.asname else root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _reached_from_main(tree: ast.Module, calls: Calls) -> set[str]:
    """The module's functions that its top-level code calls by name, and those they call."""
    inside: dict[int, list[ast.Call]] = {}  # the calls of each top-level statement
    for node, top in calls:
        inside.setdefault(top, []).append(node)
    functions = {s.name: index for index, s in enumerate(tree.body)
                 if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    todo = [index for index, s in enumerate(tree.body) if not isinstance(s, _DEFINITIONS)]
    reached: set[str] = set()
    while todo:
        for node in inside.get(todo.pop(), ()):
            if isinstance(node.func, ast.Name) \
                    and node.func.id in functions and node.func.id not in reached:
                reached.add(node.func.id)
                todo.append(functions[node.func.id])
    return reached


def _xla_group(node: ast.Call) -> bool:
    """`init_process_group("xla", init_method="xla://")` and its spellings: what NM201 turns
    into the plain `init_process_group("neuron")` the worker entry creates anyway. A rank
    and world size passed with it are XLA's ordinal and world size, which torchrun's
    RANK and WORLD_SIZE are once migrated: the same group."""
    given = dict(zip(("backend", "init_method"), node.args))
    given.update((k.arg, k.value) for k in node.keywords if k.arg is not None)
    if len(node.args) > 2 or len(given) != len(node.args) + len(node.keywords) \
            or set(given) - {"backend", "init_method", "world_size", "rank"}:
        return False
    values = {k: v.value if isinstance(v, ast.Constant) else v for k, v in given.items()}
    backend, init = values.get("backend"), values.get("init_method")
    return backend in ("xla", None) and init in ("xla://", "pjrt://", None) \
        and (backend, init) != (None, None)


def _qualname(node: ast.expr, aliases: dict[str, str]) -> str | None:
    name = ast_dotted(node)
    if name is None:
        return None
    root, dot, rest = name.partition(".")
    return aliases.get(root, root) + dot + rest


def group_guard(site: Site) -> cst.BaseExpression | None:
    """`int(os.environ.get("WORLD_SIZE", 1)) > 1 and not dist.is_initialized()`: a torchrun
    worker of a job of several processes that has no process group yet."""
    os_, dist = site.ref("os"), site.ref("torch.distributed")
    if os_ is None or dist is None:
        return None
    return template('int({os}.environ.get("WORLD_SIZE", 1)) > 1 and not {d}.is_initialized()',
                    os=os_, d=dist)


def create_group(site: Site) -> cst.If | None:
    """The process group a worker needs before its first collective and before anything is
    put on the device (the neuron backend picks the worker's NeuronCore when it starts)."""
    guard, dist = group_guard(site), site.ref("torch.distributed")
    if guard is None or dist is None:
        return None
    init = template('{d}.init_process_group("neuron")', d=dist)
    return cst.If(test=guard, body=cst.IndentedBlock(
        body=[cst.SimpleStatementLine(body=[cst.Expr(init)])]))


class Spawn(Rule):
    id = ids.SPAWN
    name = "xmp-spawn"
    kind = Kind.FIX
    summary = ("`xmp.spawn` / `torch_xla.launch` call the entry function once per torchrun "
               "worker; the launch command changes")
    explanation = """\
What it does: `xmp.spawn(fn, args=(a, b), nprocs=..., start_method=...)` becomes a direct call
`fn(int(os.environ.get("RANK", 0)), a, b)`, preceded by the creation of the process group:
`if int(os.environ.get("WORLD_SIZE", 1)) > 1 and not dist.is_initialized():
dist.init_process_group("neuron")`. `torch_xla.launch(fn, args=...)` becomes the same with
`LOCAL_RANK`. The finding gives the command that now starts the job,
`torchrun --nproc-per-node=N script.py`, with N taken from `nprocs`.

Why: TorchNeuron uses standard torch.distributed: torchrun starts one process per NeuronCore
and sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; each process calls the
entry function once. Under PJRT the XLA collectives (`xm.optimizer_step`, `xm.all_reduce`, the
ordinals) worked without a process group; the native ones need one, and the neuron backend
assigns each process its NeuronCore when the group is created, so it is created first, before
the entry function can put anything on the device. PJRT passed `fn` the global ordinal
(`xmp.spawn`) or, under torchrun, LOCAL_RANK (`torch_xla.launch`); RANK and LOCAL_RANK are
their torchrun counterparts and are equal on one host.

What differs: the launch command: run the script with torchrun (`python script.py` still runs
it as one process). When `nprocs` was omitted, PJRT ran one process per NeuronCore of the
instance; pass that count (`neuron-ls` shows it). `nprocs=1` (or `debug_single_process=True`)
ran in the calling process, and still does: no torchrun, no process group. torchrun starts
fresh processes, so `start_method="fork"` has no equivalent: each worker runs the module's
top-level code itself. A script's own `init_process_group("xla")` stays, guarded by
`is_initialized()` (NM201); one with another backend or options of its own keeps its group
and none is added. Reported for review instead: a launch outside the script's entry (library
or test code, whose caller goes on after the workers finish), one in a notebook (its kernel is
one process), unpacked arguments, `join=False`, and a spawn whose result is used."""
    doc_url = D_DIST
    example = Example(
        before="import torch_xla.distributed.xla_multiprocessing as xmp\n\n"
               "xmp.spawn(_mp_fn, args=(flags,))\n",
        after="import os\n\nimport torch\n\n"
              "if int(os.environ.get(\"WORLD_SIZE\", 1)) > 1 and not "
              "torch.distributed.is_initialized():\n"
              "    torch.distributed.init_process_group(\"neuron\")\n"
              "_mp_fn(int(os.environ.get(\"RANK\", 0)), flags)\n",
    )
    calls = _LAUNCHES
    emits = ("torch.distributed.init_process_group", "torch.distributed.is_initialized")

    _SPAWN_PARAMS = ("fn", "args", "nprocs", "join", "daemon", "start_method")
    _LAUNCH_PARAMS = ("fn", "args", "start_method", "debug_single_process")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        spawn = site.qualname == SPAWN
        params = self._SPAWN_PARAMS if spawn else self._LAUNCH_PARAMS
        command = f"torchrun --nproc-per-node=N {shlex.quote(site.path)}"
        unknown = [a.keyword.value for a in node.args
                   if a.keyword is not None and a.keyword.value not in params]
        if has_star_args(node.args) or unknown or len(node.args) > len(params):
            return Review(f"`{code(node)}`: call the entry function as fn(RANK, *args) and "
                          f"launch with `{command}`")
        value = {p: argument(node.args, i, p) for i, p in enumerate(params)}
        fn, join = value["fn"], value.get("join")
        if fn is None:
            return Review(f"`{code(node)}`: no entry function")
        if site.path.endswith(".ipynb"):
            return Review(f"`{code(node)}`: a notebook's kernel is one process; move the "
                          "training code to a script, call the entry function as "
                          "fn(int(os.environ.get('RANK', 0)), *args) and launch it with "
                          "`torchrun --nproc-per-node=N script.py`")
        if not launch_facts(site.module_tree, site.module_calls()).is_entry(code(fn.value)):
            return Review(f"`{code(node)}` is not the script's entry (top-level code, the "
                          "`__main__` block or a function it calls), so its caller may go on "
                          "after the workers finish; under torchrun the whole program runs in "
                          f"every worker: restructure it by hand (`{command}`)")
        if join is not None and bool_value(join.value) is not True:
            return Review(f"`{code(node)}`: join=False returned while the workers ran; with "
                          f"torchrun each worker runs the function itself (`{command}`)")
        if site.role is not Role.STATEMENT:
            return Review(f"`{code(node)}`: its result is used; call the entry function as "
                          f"fn(RANK, *args) and launch with `{command}`")
        entry = _entry_call(fn.value, value["args"], site, "RANK" if spawn else "LOCAL_RANK")
        if entry is None:
            return Review(f"`{code(node)}`: `os` or `torch` means something else here")
        single, count, note = _process_count(value.get("nprocs"),
                                             value.get("debug_single_process"))
        statements: list[cst.BaseStatement] = [cst.SimpleStatementLine([cst.Expr(entry)])]
        if single:
            return ReplaceStatement(tuple(statements), f"`{code(node)}` → `{code(entry)}`: "
                                    f"runs in this process ({note}), as before: no torchrun, "
                                    "no process group")
        command = f"torchrun --nproc-per-node={count} {shlex.quote(site.path)}"
        how = f"the launch command changes to `{command}` ({note})"
        if launch_facts(site.module_tree, site.module_calls()).own_group:
            how += ("; the script creates its own process group: make sure it does so on "
                    "every path, before anything is put on the device")
        else:
            group = create_group(site)
            if group is None:
                return Review(f"`{code(node)}`: `os` or `torch` means something else here")
            statements.insert(0, group)
            how += "; the process group is created first"
        start = value.get("start_method")
        if start is not None and string_value(start.value) == "fork":
            how += ("; start_method='fork' has no equivalent: each worker starts fresh and "
                    "runs the module's top-level code itself")
        return ReplaceStatement(tuple(statements),
                                f"`{code(node)}` → `{code(entry)}` in each worker: {how}")


def _entry_call(fn: cst.BaseExpression, args: cst.Arg | None, site: Site,
                variable: str) -> cst.Call | None:
    os_ = site.ref("os")
    if os_ is None:
        return None
    index = template(f'int({{os}}.environ.get("{variable}", 0))', os=os_)
    call_args = [cst.Arg(index)]
    if args is not None:
        if isinstance(args.value, (cst.Tuple, cst.List)):
            for element in args.value.elements:
                star = "*" if isinstance(element, cst.StarredElement) else ""
                call_args.append(cst.Arg(element.value, star=star))
        else:
            call_args.append(cst.Arg(args.value, star="*"))
    if not isinstance(fn, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not fn.lpar:
        fn = fn.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    spaced = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
              for a in call_args[:-1]]
    return cst.Call(func=fn, args=[*spaced, call_args[-1]])


def _process_count(nprocs: cst.Arg | None,
                   single_process: cst.Arg | None) -> tuple[bool, str, str]:
    """Whether the call ran in the calling process, the torchrun process count, and how it
    was worked out."""
    if single_process is not None:
        flag = bool_value(single_process.value)
        if flag is True:
            return True, "1", "debug_single_process=True"
        if flag is None:
            return (False, "N", f"N processes, or 1 where `{code(single_process.value)}` is "
                    "true: PJRT ran one per NeuronCore of the instance otherwise")
    count = code(nprocs.value) if nprocs is not None else "None"
    if count == "None":
        return (False, "N", "N: the NeuronCores of the instance, one process each, as PJRT "
                "ran when nprocs was omitted")
    if count == "1":
        return True, "1", "nprocs=1"
    if count.isdigit():
        return False, count, f"nprocs={count}"
    return False, "N", f"N: the value of `{count}`"


RULES: tuple[type[Rule], ...] = (Spawn,)
