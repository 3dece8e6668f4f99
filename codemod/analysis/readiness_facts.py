"""What the readiness rules need to know about a whole file before they look at one node:
what its names import, what it compiles, and which code runs on every training step.

All of it comes from the stdlib `ast` in one walk (`readiness_scan`). It is a per-file view: a model class
compiled by another file is not known here to be compiled.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field

from neuron_migrate.analysis.locate import ast_dotted
from neuron_migrate.analysis.readiness_scan import Scan, scan

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPILE = frozenset({"torch.compile"})
_XLA_COMPILE = frozenset({"torch_xla.compile", "torch_xla.torch_xla.compile"})
_SET_DEFAULT = frozenset({"torch.compiler.set_default_backend"})
_MOVES = frozenset({"to", "cuda", "neuron", "half", "bfloat16", "float", "train", "eval",
                    "requires_grad_"})
"""Module methods that return the module itself: `Net().to(device)` is still a `Net`."""


@dataclass
class Facts:
    aliases: dict[str, str] = field(default_factory=dict)
    """Local name -> the module or object it imports (`np` -> `numpy`)."""
    default_neuron: bool = False
    """The file calls `torch.compiler.set_default_backend("neuron")`."""
    compiles: bool = False
    """The file compiles something (any torch.compile, Module.compile or torch_xla.compile),
    or is XLA-era code: XLA compiled everything, and the migration compiles its model
    (NM503)."""
    compiled: set[int] = field(default_factory=set)
    """ids of the functions (and methods) torch.compile traces."""
    step_functions: set[int] = field(default_factory=set)
    """ids of functions called once per training step (they call backward)."""
    backward: bool = False
    """The file calls `.backward()` somewhere: without, nothing is a training step."""
    compiled_names: set[str] = field(default_factory=set)
    """Dotted names of compiled callables (`model = torch.compile(model)`, `model.compile()`,
    a function under `@torch.compile`): a loop that calls one each time round runs a
    step on the device, training or not (an evaluation loop)."""
    assigned: dict[str, list[ast.expr]] = field(default_factory=dict)
    """A dotted target (`x`, `self.model`) -> every value assigned to it in the file."""
    calls: list[ast.Call] = field(default_factory=list)
    functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = field(
        default_factory=dict)
    """Every function and method of the file, by name."""
    memo: dict[str, object] = field(default_factory=dict)
    _names: dict[int, str | None] = field(default_factory=dict)
    tree: ast.Module = field(default_factory=lambda: ast.Module(body=[], type_ignores=[]))
    """What rules work out once per file from these facts."""
    scan: Scan = field(default_factory=Scan)
    """The walk these facts come from: every call, by callee name and by body."""

    def calls_named(self, names: Iterable[str]) -> list[ast.Call]:
        """Every call that may be to something named one of `names` (in no particular order):
        `name(...)`, `x.name(...)`, or `alias(...)` where the file imports the name as
        `alias`. Any call whose qualified name ends in one of `names`, or which is a method
        call of one of them, is among these."""
        wanted = set(names)
        wanted.update(alias for alias, target in self.aliases.items()
                      if target.rsplit(".", 1)[-1] in wanted)
        named = self.scan.named
        return [call for name in wanted for call in named.get(name, ())]

    def may_step(self) -> bool:
        """Whether any code of the file runs per step: a step function, a loop whose body
        calls backward (what `loop_steps` needs, without a step function), or one that calls
        a compiled model."""
        if self.compiled_names and any(self._evaluates(loop) for loop in self.scan.loops):
            return True
        return self.backward and (bool(self.step_functions) or any(
            self.scan.bodies[id(loop)].trains for loop in self.scan.loops))

    def loop_steps(self, loop: ast.For | ast.AsyncFor | ast.While) -> bool:
        """Whether a loop runs a step on the device each time round: its body calls
        backward, a step function of this file, or a compiled model or function (an
        evaluation loop), outside any inner loop."""
        if self._evaluates(loop):
            return True
        if not self.backward:
            return False
        body = self.scan.bodies[id(loop)]
        if body.trains:
            return True
        for call in body.calls:
            for short in callees(call, self):
                if any(id(f) in self.step_functions for f in self.functions.get(short, ())):
                    return True
        return False

    def _evaluates(self, loop: ast.For | ast.AsyncFor | ast.While) -> bool:
        """Whether a loop's body calls a compiled callable (outside any inner loop)."""
        names = self.compiled_names
        return bool(names) and any(ast_dotted(call.func) in names
                                   for call in self.scan.bodies[id(loop)].calls)

    def qualname(self, expr: ast.AST) -> str | None:
        """The qualified name a dotted expression refers to, through the file's imports."""
        kind = type(expr)
        if kind is not ast.Name and kind is not ast.Attribute:
            return None
        key = id(expr)
        if key in self._names:
            return self._names[key]
        self._names[key] = found = self._qualname(expr)
        return found

    def _qualname(self, expr: ast.AST) -> str | None:
        root = expr
        while type(root) is ast.Attribute:
            root = root.value  # type: ignore[attr-defined]
        if type(root) is not ast.Name or root.id not in self.aliases:  # type: ignore[attr-defined]
            return None
        dotted = ast_dotted(expr)
        if dotted is None:
            return None
        head, dot, rest = dotted.partition(".")
        target = self.aliases.get(head)
        if target is None:
            return None
        return f"{target}{dot}{rest}"


def facts_of(tree: ast.Module) -> Facts:
    facts = Facts(tree=tree)
    found = scan(tree)
    classes: dict[str, ast.ClassDef] = {}
    functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    decorated: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for node in found.statements():
        if isinstance(node, ast.Import):
            facts.compiles |= any(a.name.split(".", 1)[0] == "torch_xla" for a in node.names)
            for alias in node.names:
                if alias.asname:
                    facts.aliases[alias.asname] = alias.name
                else:
                    root = alias.name.split(".", 1)[0]
                    facts.aliases[root] = root
        elif isinstance(node, ast.ImportFrom):
            if node.module and not node.level:
                facts.compiles |= node.module.split(".", 1)[0] == "torch_xla"
                for alias in node.names:
                    if alias.name != "*":
                        facts.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = node
        elif isinstance(node, _FUNCTIONS):
            functions.setdefault(node.name, []).append(node)
            if node.decorator_list:
                decorated.append(node)
        elif node.value is not None:  # type: ignore[attr-defined]
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
            for target in targets:
                name = ast_dotted(target)
                if name is not None:
                    facts.assigned.setdefault(name, []).append(node.value)  # type: ignore[attr-defined]
    facts.calls = found.calls
    facts.functions = functions
    facts.backward = found.backward
    facts.scan = found
    _compiled(facts, decorated, classes, functions)
    facts.compiled_names = _compiled_names(facts)
    if facts.backward:
        _steps(facts, found, functions)
    return facts


def is_compile_call(call: ast.Call, facts: Facts) -> bool:
    """`torch.compile(...)`, `torch_xla.compile(...)` or `module.compile(...)` (a method
    call with keyword arguments only, on something that is not an imported module: not
    `re.compile(pattern)`, nor Keras' `model.compile(optimizer=...)`)."""
    qualname = facts.qualname(call.func)
    if qualname in _COMPILE or qualname in _XLA_COMPILE:
        return True
    return is_module_compile(call, facts)


def is_module_compile(call: ast.Call, facts: Facts) -> bool:
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "compile") or call.args:
        return False
    if facts.qualname(func.value) is not None:
        return False  # re.compile, regex.compile, ...
    return not any(k.arg in ("optimizer", "loss", "metrics") for k in call.keywords)


def _compiled(facts: Facts, decorated: list[ast.FunctionDef | ast.AsyncFunctionDef],
              classes: dict[str, ast.ClassDef],
              functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]) -> None:
    compiled_classes: set[str] = set()
    by_id = {id(f): f for group in functions.values() for f in group}
    # the calls below only act on torch.compile, torch_xla.compile, x.compile(...) and
    # set_default_backend, so the calls named anything else can be left out (the result
    # does not depend on the order of the calls: see _mark_target)
    for call in facts.calls_named(("compile", "set_default_backend")):
        qualname = facts.qualname(call.func)
        if qualname in _SET_DEFAULT and call.args and \
                isinstance(call.args[0], ast.Constant) and call.args[0].value == "neuron":
            facts.default_neuron = True
        if not is_compile_call(call, facts):
            continue
        facts.compiles = True
        if is_module_compile(call, facts):
            target: ast.expr | None = call.func.value  # type: ignore[attr-defined]
        else:
            target = call.args[0] if call.args else None
        if target is not None:
            before = set(facts.compiled)
            _mark_target(facts, target, classes, functions, compiled_classes)
            if facts.qualname(call.func) in _XLA_COMPILE:
                # a training step under torch_xla.compile runs eagerly once migrated (NM502)
                facts.compiled = before | {i for i in facts.compiled - before
                                           if not trains(by_id[i].body)}
    for function in decorated:
        for decorator in function.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            head = call.func if call is not None else decorator
            if facts.qualname(head) in _COMPILE | _XLA_COMPILE:
                facts.compiles = True
                facts.compiled.add(id(function))
    _submodules(compiled_classes, classes)
    for name in compiled_classes:
        _mark_class(facts, classes[name])


def _compiled_names(facts: Facts) -> set[str]:
    """The dotted names of what the file compiles with torch.compile or Module.compile (not
    torch_xla.compile: migrated, that code runs eagerly)."""
    names = {name for name, values in facts.assigned.items()
             if any(isinstance(v, ast.Call) and is_compile_call(v, facts) and
                    facts.qualname(v.func) not in _XLA_COMPILE for v in values)}
    for call in facts.calls_named(("compile",)):
        if is_module_compile(call, facts):
            name = ast_dotted(call.func.value)  # type: ignore[attr-defined]
            if name is not None:
                names.add(name)
    names |= {f.name for group in facts.functions.values() for f in group
              if id(f) in facts.compiled and f.name != "forward"}
    return names


def _mark_target(facts: Facts, target: ast.expr, classes: dict[str, ast.ClassDef],
                 functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]],
                 compiled: set[str], depth: int = 0) -> None:
    """What a compiled expression stands for: a class constructed here (its forward is
    compiled), a function defined here, or a name assigned one of those."""
    if depth > 4:
        return
    while isinstance(target, ast.Call) and isinstance(target.func, ast.Attribute) and \
            target.func.attr in _MOVES:
        target = target.func.value  # Net().to(device)
    if isinstance(target, ast.Call):
        name = ast_dotted(target.func)
        if name in classes:
            compiled.add(name)
        elif facts.qualname(target.func) in _COMPILE and target.args:
            _mark_target(facts, target.args[0], classes, functions, compiled, depth + 1)
        return
    if isinstance(target, ast.Attribute) and target.attr == "forward":
        _mark_target(facts, target.value, classes, functions, compiled, depth + 1)
        return
    name = ast_dotted(target)
    if name is None:
        return
    if "." not in name or name.count(".") == 1 and name.startswith("self."):
        for function in functions.get(name.rsplit(".", 1)[-1], ()):
            facts.compiled.add(id(function))  # torch.compile(step), torch.compile(self.step)
    for value in facts.assigned.get(name, ()):
        _mark_target(facts, value, classes, functions, compiled, depth + 1)


def _submodules(compiled: set[str], classes: dict[str, ast.ClassDef]) -> None:
    """A compiled module's submodules are traced with it: the classes of this file its
    methods construct, transitively."""
    pending = list(compiled)
    while pending:
        cls = classes[pending.pop()]
        for node in ast.walk(cls):
            if isinstance(node, ast.Call):
                name = ast_dotted(node.func)
                if name in classes and name not in compiled:
                    compiled.add(name)
                    pending.append(name)


def _mark_class(facts: Facts, cls: ast.ClassDef) -> None:
    """`forward`, and the methods it calls through `self.`, transitively."""
    methods = {m.name: m for m in cls.body if isinstance(m, _FUNCTIONS)}
    pending = [name for name in ("forward",) if name in methods]
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        method = methods[name]
        facts.compiled.add(id(method))
        for node in ast.walk(method):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    isinstance(node.func.value, ast.Name) and node.func.value.id == "self" \
                    and node.func.attr in methods:
                pending.append(node.func.attr)


def trains(body: list[ast.stmt], loops: bool = True) -> bool:
    """Whether this code calls `.backward()` itself (nested functions aside; without
    `loops`, nested loops aside too: the code is one step, not a loop over steps)."""
    for node in _shallow(body, loops):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "backward":
            return True
    return False


def callees(call: ast.Call, facts: Facts) -> set[str]:
    """The names of this file's functions a call may run: its own name, and the names of
    what was assigned to it (`self.compiled_step = self.step`)."""
    name = ast_dotted(call.func)
    if name is None:
        return set()
    names = {name.rsplit(".", 1)[-1]}
    for value in facts.assigned.get(name, ()):
        dotted = ast_dotted(value)
        if dotted is not None:
            names.add(dotted.rsplit(".", 1)[-1])
    return names


_NESTED = (*_FUNCTIONS, ast.ClassDef, ast.Lambda)
_NESTED_AND_LOOPS = (*_NESTED, ast.For, ast.AsyncFor, ast.While)


def _shallow(body: list[ast.stmt], loops: bool = True):  # type: ignore[no-untyped-def]
    skip = _NESTED if loops else _NESTED_AND_LOOPS
    pending: list[ast.AST] = [node for node in body if not isinstance(node, skip)]
    while pending:
        node = pending.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, skip):
                pending.append(child)


def _steps(facts: Facts, found: Scan,
           functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]) -> None:
    """Functions that train (call backward) and are called from inside a loop: their body
    is a training step, run once per batch."""
    bodies = found.bodies
    trainers = {name for name, group in functions.items()
                if any(bodies[id(f)].trains for f in group)}
    if not trainers:
        return
    for node in found.loops:
        for inner in bodies[id(node)].calls:
            for short in callees(inner, facts) & trainers:
                for function in functions[short]:
                    if bodies[id(function)].trains:
                        facts.step_functions.add(id(function))
