"""Questions the readiness rules ask of the stdlib `ast`: is this a device, a float64 dtype,
a numpy float64 array; is this value on the device?"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from neuron_migrate.analysis.locate import ast_dotted
from neuron_migrate.analysis.readiness import Where
from neuron_migrate.analysis.readiness_facts import Facts
from neuron_migrate.analysis.readiness_scan import CHILDREN

_ACCELERATORS = frozenset({"cuda", "neuron", "xla", "mps", "xpu", "hpu", "privateuseone"})
_DEVICE_NAMES = frozenset({"dev", "gpu", "cuda", "local_rank", "rank", "device_id", "gpu_id"})
_HOST = frozenset({"cpu", "numpy", "item", "tolist"})
_MOVERS = frozenset({"cuda", "neuron"})
FLOAT64 = frozenset({"torch.float64", "torch.double"})
_FLOAT64_STRINGS = frozenset({"float64", "double", "torch.float64", "torch.double"})
_NP_FLOAT64 = frozenset({"numpy.float64", "numpy.double", "numpy.float_", "float"})
_NP_FLOAT_MAKERS = frozenset({
    "zeros", "ones", "empty", "full", "eye", "identity", "linspace", "logspace", "loadtxt",
    "genfromtxt", "random.rand", "random.randn", "random.random", "random.uniform",
    "random.normal", "random.standard_normal", "random.random_sample", "random.sample"})


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def method(call: ast.AST, *names: str) -> bool:
    """Whether `call` is a method call `x.name(...)` for one of these names."""
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
        call.func.attr in names


def is_device(expr: ast.AST | None, facts: Facts) -> bool:
    """Whether an expression names an accelerator (anything but the CPU): "cuda:0", an index,
    `torch.device("neuron")`, `device`, `args.device`, `x.device`, `xm.xla_device()`."""
    if expr is None:
        return False
    if isinstance(expr, ast.Constant):
        if isinstance(expr.value, bool):
            return False
        if isinstance(expr.value, int):
            return True
        return isinstance(expr.value, str) and \
            expr.value.split(":", 1)[0].lower() in _ACCELERATORS
    if isinstance(expr, ast.Call):
        if facts.qualname(expr.func) == "torch.device":
            return not expr.args or is_device(expr.args[0], facts) or \
                not isinstance(expr.args[0], ast.Constant)
        name = ast_dotted(expr.func)
        return name is not None and "device" in name.rsplit(".", 1)[-1].lower() and \
            "cpu" not in name.lower()
    name = ast_dotted(expr)
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1].lower()
    if "cpu" in last or "dtype" in last or facts.qualname(expr) is not None:
        return False
    return "device" in last or last in _DEVICE_NAMES


def device_move(node: ast.AST, facts: Facts) -> bool:
    """`x.to(device, ...)`, `x.to(device=...)`, `x.cuda()`, `x.neuron()`."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    if node.func.attr in _MOVERS:
        return True
    if node.func.attr != "to":
        return False
    first = node.args[0] if node.args else None
    return is_device(first, facts) or is_device(keyword(node, "device"), facts)


def placed(node: ast.AST, facts: Facts) -> bool:
    """A call that puts its result on the device: a move (`device_move`), or a tensor made
    there (`torch.randn(3, device=device)`)."""
    return device_move(node, facts) or \
        (isinstance(node, ast.Call) and is_device(keyword(node, "device"), facts))


def receivers(node: ast.AST) -> Iterator[ast.AST]:
    """The method calls and subscripts `node` is applied to: `a.to(d)[0].double()` yields
    `a.to(d)[0]`, `a.to(d)`, `a`."""
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        elif isinstance(node, (ast.Subscript, ast.Attribute)):
            node = node.value
        else:
            return
        yield node


def applied(node: ast.AST, where: Where) -> Iterator[ast.Call]:
    """The method calls applied to `node`'s value afterwards: in `node.float().to(d)`,
    `.float()` then `.to(d)`."""
    current = node
    ancestors = list(where.ancestors)
    while len(ancestors) >= 2:
        attribute, call = ancestors[-1], ancestors[-2]
        if isinstance(attribute, ast.Attribute) and attribute.value is current and \
                isinstance(call, ast.Call) and call.func is attribute:
            yield call
            current = call
            del ancestors[-2:]
        else:
            return


def on_device(node: ast.AST, where: Where) -> bool:
    """Whether the tensor `node` computes is on the device: moved there in its own chain
    (before or after), computed in compiled code or a training step, or derived from a name
    the file moves there. A chain that goes to the host (`.cpu()`, `.numpy()`, `.item()`)
    is not."""
    before = list(receivers(node))
    after = list(applied(node, where))
    if any(method(c, *_HOST) for c in (*before, *after)):
        return False
    if any(placed(c, where.facts) for c in (node, *before, *after)):
        return True
    if where.compiled or where.per_step:
        return True
    root = before[-1] if before else node
    name = ast_dotted(root)
    return name is not None and name in moved_names(where)


def moved_names(where: Where) -> frozenset[str]:
    """Names moved to a device (`model.to(device)`, `x = x.cuda()`) or assigned a value that
    is on it (`x = batch.to(device)`): in the function around the node, at module level, or,
    for `self.` attributes, anywhere in the file."""
    facts = where.facts
    cache: dict[int, frozenset[str]] = facts.memo.setdefault("moved", {})  # type: ignore[assignment]
    if -1 not in cache:
        everywhere = _moved(facts.tree.body, facts, enter=True)
        module = _moved(facts.tree.body, facts, enter=False)
        cache[-1] = frozenset(n for n in everywhere if n.startswith("self.")) | module
    function = where.function
    if function is None:
        return cache[-1]
    if id(function) not in cache:
        cache[id(function)] = cache[-1] | _moved(function.body, facts, enter=True)
    return cache[id(function)]


def _moved(body: list[ast.stmt], facts: Facts, enter: bool) -> frozenset[str]:
    """`enter`: into nested functions and classes too."""
    names: set[str] = set()
    outputs: list[tuple[list[ast.expr], ast.Call]] = []
    pending: list[ast.AST] = list(body)
    children = CHILDREN  # the fields that may hold a statement or a call
    while pending:
        node = pending.pop()
        kind = type(node)
        if kind is ast.Call:
            if device_move(node, facts):
                name = ast_dotted(node.func.value)  # type: ignore[attr-defined]
                if name is not None:
                    names.add(name)
        elif kind is ast.Assign or kind is ast.AnnAssign:
            value = node.value  # type: ignore[attr-defined]
            targets = node.targets if kind is ast.Assign else [node.target]  # type: ignore[attr-defined]
            if value is not None and (placed(value, facts) or
                                      any(placed(r, facts) for r in receivers(value))):
                names.update(n for n in map(ast_dotted, targets) if n is not None)
            elif isinstance(value, ast.Call):
                outputs.append((targets, value))
        elif not enter and kind in _SCOPES:
            continue
        for field in children[kind]:
            value = getattr(node, field)
            if type(value) is list:
                pending.extend(value)
            elif value is not None:
                pending.append(value)
    return frozenset(names | _outputs(outputs, names))


def _outputs(calls: list[tuple[list[ast.expr], ast.Call]], moved: set[str]) -> set[str]:
    """Names assigned what a model on the device returns (`logits = model(batch)` after
    `model = Net().to(device)`), and what those return in turn."""
    found: set[str] = set()
    for _ in range(3):  # the assignments were met in no particular order
        before = len(found)
        for targets, call in calls:
            if ast_dotted(call.func) in moved | found:
                found.update(n for n in map(ast_dotted, targets) if n is not None)
        if len(found) == before:
            break
    return found


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def is_float64(expr: ast.AST | None, facts: Facts) -> bool:
    """`torch.float64`, `torch.double`, or the string "float64"."""
    if expr is None:
        return False
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, str) and expr.value in _FLOAT64_STRINGS
    return facts.qualname(expr) in FLOAT64


def numpy_float64(expr: ast.AST | None, facts: Facts, depth: int = 0) -> bool:
    """Whether an expression makes a numpy float64 array: `np.zeros(n)`, `np.random.rand(n)`,
    `np.array([0.5, 1.5])`, `a.astype(np.float64)`, or a name assigned one of those."""
    if expr is None or depth > 3:
        return False
    if isinstance(expr, ast.Name):
        values = facts.assigned.get(expr.id, ())
        return bool(values) and all(numpy_float64(v, facts, depth + 1) for v in values)
    if not isinstance(expr, ast.Call):
        return False
    if method(expr, "astype"):
        return bool(expr.args) and _np_float64_dtype(expr.args[0], facts)
    qualname = facts.qualname(expr.func) or ""
    if not qualname.startswith("numpy."):
        return False
    dtype = keyword(expr, "dtype")
    if dtype is not None:
        return _np_float64_dtype(dtype, facts)
    short = qualname.removeprefix("numpy.")
    if short in _NP_FLOAT_MAKERS:
        return True
    if short in ("array", "asarray") and expr.args:
        return _float_literals(expr.args[0])
    return False


def _np_float64_dtype(expr: ast.AST, facts: Facts) -> bool:
    if isinstance(expr, ast.Constant):
        return expr.value in ("float64", "double", "f8", "d")
    if isinstance(expr, ast.Name) and expr.id == "float":
        return True
    return facts.qualname(expr) in _NP_FLOAT64


def _float_literals(expr: ast.AST) -> bool:
    """A list (of lists) of number literals, at least one of them a float."""
    numbers = [n for n in ast.walk(expr) if isinstance(n, ast.Constant)]
    return bool(numbers) and isinstance(expr, (ast.List, ast.Tuple)) and \
        all(isinstance(n.value, (int, float)) and not isinstance(n.value, bool)
            for n in numbers) and any(isinstance(n.value, float) for n in numbers)


def code(node: ast.AST) -> str:
    """Source for a message, shortened."""
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."
