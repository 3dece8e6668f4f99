"""What the smoke runner adds to a worker's error: which neuron-migrate rule wrote the code it
failed in, and whether data parallelism survived across the workers.

A migration defines small helpers in the user's file (`rules/emitted_helpers.py`: functions named
`_neuron_*`, classes `_Neuron*`). When an error is raised inside one, the user should learn
that the code is the tool's, which rule wrote it and where the script calls it. The map from
helper to rule is read from the rule catalogue's own source (each rule module names the
helpers its rules ask the engine for), so a new helper or rule needs no second list here; a
test checks that every helper is claimed by a rule.

Dynamo's refusals under ``fullgraph=True`` name the line they traced only inside the message
("from user code: File ..."); that line is picked out here too, with the rule that rewrites
``torch_xla.compile``.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuron_migrate.smoke.cuda_diagnosis import cuda_origin
from neuron_migrate.smoke.paths import relative

HELPER_NAME = re.compile(r"^(_neuron_\w+|_Neuron\w+)$")
_LIBRARY = ("site-packages", "dist-packages")
_TRACED = re.compile(r'from user code:\s*\n\s*File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')
# Dynamo's data-dependent refusals: "Caused by: if x.item() > 0:  # dir/train.py:14 in step (...)"
_CAUSED_BY = re.compile(r"Caused by: (.*?)\s+# (\S+?\.py):(\d+) in (\S+)")
_DYNAMO_ERRORS = ("Unsupported", "UserError")


@dataclass(frozen=True)
class RuleRef:
    id: str
    name: str

    def __str__(self) -> str:
        return f"{self.id} ({self.name})"


# ------------------------------------------------------------------ the catalogue, read
@functools.cache
def helper_rules() -> dict[str, tuple[RuleRef, ...]]:
    """Every helper, with the rules that write it into a file: directly (the rule asks for it)
    or as a helper another one needs (`_neuron_to_device` comes with `_NeuronDeviceLoader`)."""
    from neuron_migrate.rules import FAMILIES, all_rules
    from neuron_migrate.rules.emitted_helpers import HELPERS

    names = {rule.id: rule.name for rule in all_rules()}
    direct: dict[str, set[str]] = defaultdict(set)
    for rule in all_rules():  # helpers a rule's class attributes name (tables of helpers)
        for helper in _named_in_attributes(type(rule), set(HELPERS)):
            direct[helper].add(rule.id)
    for family in FAMILIES:
        try:
            source = inspect.getsource(family)
        except (OSError, TypeError):  # installed without sources: the helper is still named
            continue
        for rule_id, helpers in _helpers_by_rule(ast.parse(source), set(HELPERS)).items():
            for helper in helpers:
                direct[helper].add(rule_id)
    found: dict[str, set[str]] = defaultdict(set)
    for helper, rule_ids in direct.items():
        for needed in _with_requirements(helper, HELPERS):
            found[needed] |= rule_ids
    return {helper: tuple(RuleRef(i, names.get(i, "")) for i in sorted(ids))
            for helper, ids in sorted(found.items())}


def _named_in_attributes(cls: type, helpers: set[str]) -> set[str]:
    """Helper names held by a rule class's attributes: strings, and the values of tables
    (`{qualname: helper}`) or sequences; the example is output, not a use."""
    found: set[str] = set()
    for klass in cls.__mro__:
        for name, value in vars(klass).items():
            if name == "example":
                continue
            values = value.values() if isinstance(value, dict) else \
                value if isinstance(value, (tuple, list, frozenset, set)) else (value,)
            found |= {v for v in values if isinstance(v, str) and v in helpers}
    return found


def _with_requirements(name: str, helpers: dict[str, Any]) -> set[str]:
    seen: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        if current not in seen and current in helpers:
            seen.add(current)
            pending.extend(helpers[current].requires)
    return seen


def _helpers_by_rule(module: ast.Module, helpers: set[str]) -> dict[str, set[str]]:
    """For each rule class of a module (a class whose body sets ``id = "NM..."``): the helper
    names its code mentions, itself or through the module's functions, constants and base
    classes it uses. A rule's ``example`` only shows output and is not read."""
    top: dict[str, ast.AST] = {}
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            top[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    top[target.id] = node

    @functools.cache
    def mentioned(name: str) -> frozenset[str]:
        found: set[str] = set()
        pending, seen = [name], {name}
        while pending:
            for node in _code_nodes(top[pending.pop()]):
                if isinstance(node, ast.Constant) and node.value in helpers:
                    found.add(node.value)
                elif isinstance(node, ast.Name) and node.id in top and node.id not in seen:
                    seen.add(node.id)
                    pending.append(node.id)
        return frozenset(found)

    return {rule_id: set(mentioned(name)) for name, node in top.items()
            if (rule_id := _rule_id(node)) is not None}


def _rule_id(node: ast.AST) -> str | None:
    if not isinstance(node, ast.ClassDef):
        return None
    for statement in node.body:
        if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name) and statement.targets[0].id == "id"
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
                and re.fullmatch(r"NM\d+", statement.value.value)):
            return statement.value.value
    return None


def _code_nodes(node: ast.AST) -> list[ast.AST]:
    """The nodes of a definition, without the subtrees of its ``example = ...``."""
    out: list[ast.AST] = []
    pending = [node]
    while pending:
        current = pending.pop()
        if (isinstance(current, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "example"
                                                    for t in current.targets)):
            continue
        out.append(current)
        pending.extend(ast.iter_child_nodes(current))
    return out


@functools.cache
def rule_for_call(qualname: str) -> RuleRef | None:
    """The rule that rewrites calls of ``qualname`` (e.g. ``torch_xla.compile``)."""
    from neuron_migrate.rules import all_rules

    for rule in all_rules():
        if qualname in (getattr(rule, "calls", None) or ()):
            return RuleRef(rule.id, rule.name)
    return None


# ------------------------------------------------------------------ an error, explained
def origin(error: dict[str, Any]) -> dict[str, Any] | None:
    """Where the error comes from when the tool wrote that code: the outermost helper frame
    (the helper the script calls), the rules that write it, and the script's call site; or,
    for Dynamo's refusals, the line it traced."""
    frames = error.get("frames") or []
    for position, frame in enumerate(frames):
        helper = _helper_of(frame)
        if helper is None:
            continue
        rules = helper_rules().get(helper, ())
        caller = frames[position - 1] if position else None
        return {"helper": helper, "rules": [r.id for r in rules],
                "call_site": caller, "text": _helper_text(helper, rules, frame)}
    return _dynamo_origin(error) or cuda_origin(error)


def _dynamo_origin(error: dict[str, Any]) -> dict[str, Any] | None:
    """For Dynamo's refusals: the line it traced, named only inside its message."""
    if error.get("type", "").rsplit(".", 1)[-1] not in _DYNAMO_ERRORS:
        return None
    message = error.get("message") or ""
    if traced := _TRACED.search(message):
        file, line, function, source = traced.groups()
    elif caused := _CAUSED_BY.search(message):
        source, file, line, function = caused.groups()
    else:
        return None
    rule = rule_for_call("torch_xla.compile")
    written = (f"; if it came from torch_xla.compile, {rule} wrote the torch.compile call"
               if rule else "")
    return {"helper": None, "rules": [rule.id] if rule else [],
            "call_site": {"file": file, "line": int(line), "function": function},
            "text": f"Dynamo traced `{source.strip()}` at {relative(file)}:{line} in "
                    f"{function}{written}"}


def _helper_text(helper: str, rules: tuple[RuleRef, ...], frame: dict[str, Any]) -> str:
    where = f"{relative(frame['file'])}:{frame['line']}"
    if not rules:
        return (f"raised in {helper} ({where}), named like the helpers neuron-migrate writes "
                "into migrated files, but not one this version knows")
    writers = " or ".join(str(r) for r in rules)
    return f"raised in {helper} ({where}), written by {writers}"


def _helper_of(frame: dict[str, Any]) -> str | None:
    """The helper a frame runs in: its function's name, or (for a method of a helper class,
    or a traceback read as text) the top-level definition around its line."""
    function = frame.get("function") or ""
    if HELPER_NAME.match(function):
        return function
    file = frame.get("file") or ""
    if any(part in file for part in _LIBRARY) or not file.endswith(".py"):
        return None
    return _definition_around(file, int(frame.get("line") or 0))


@functools.lru_cache(maxsize=64)
def _top_level_helpers(file: str) -> tuple[tuple[str, int, int], ...]:
    try:
        tree = ast.parse(Path(file).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return ()
    return tuple((node.name, node.lineno, node.end_lineno or node.lineno) for node in tree.body
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                 and HELPER_NAME.match(node.name))


def _definition_around(file: str, line: int) -> str | None:
    return next((name for name, first, last in _top_level_helpers(file) if first <= line <= last),
                None)


# ------------------------------------------------------------------ data parallelism, judged
def parallelism_problems(outcomes: list[dict[str, Any]], nproc: int) -> list[dict[str, Any]]:
    """The ranks that stepped without averaging their gradients (the first problem of each,
    as its worker saw it), or, when none stepped that way, that no worker of a multi-process
    run ever created a process group (an evaluation script that never steps, say)."""
    if nproc < 2 or not outcomes:
        return []
    problems = [dict(o["parallelism"], rank=o.get("rank", 0),
                     count=o.get("steps_without_averaging", 1))
                for o in sorted(outcomes, key=lambda o: o.get("rank", 0)) if o.get("parallelism")]
    if problems or any(o.get("process_group") for o in outcomes):
        return problems
    return [{"key": "never-created", "rank": None, "step": None, "count": 0, "message": (
        f"data parallelism lost: {nproc} processes ran with WORLD_SIZE={nproc} and none ever "
        f"created a process group, so each ran the whole script alone (ranks read 0, world "
        f"size 1). A data-parallel script calls torch.distributed.init_process_group(\"neuron\") "
        f"at the start of each worker; run a single-process script without --nproc")}]


def problem_lines(problems: list[dict[str, Any]]) -> list[str]:
    """One line per kind of problem: ranks that hit the same one at the same step share it."""
    groups: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for problem in problems:
        groups[problem["key"], problem["step"]].append(problem)
    lines = []
    for same in groups.values():
        first = same[0]
        if first["rank"] is None:
            lines.append(first["message"])
            continue
        ranks = ", ".join(str(p["rank"]) for p in same)
        steps = max(p["count"] for p in same)
        lines.append(f"{first['message']} [rank{'s' if len(same) > 1 else ''} {ranks}; "
                     f"{steps} step{'s' if steps > 1 else ''} without averaging]")
    return lines
