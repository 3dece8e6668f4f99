"""NM102's judgement of a device string's flow (see `neuron_migrate.analysis.flow`): may every string of it
become "neuron", and what must the message say?

All or none: a flow is renamed when every place its value reaches is one this module knows
(a device argument, the process-group backend, a comparison, a log message, a call another
rule rewrites, a test of its truth) and every value that enters it is one the file shows (or a
device's own type, which the migration renames too). Anything else keeps the whole flow as it
is, reported with the reason.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from neuron_migrate.ruleapi import Site
from neuron_migrate.ruleapi.analysis import Flow, Source, Use, ast_dotted
from neuron_migrate.rules.frameworks import lightning_xla_string

_INIT_PROCESS_GROUP = frozenset({"torch.distributed.init_process_group",
                                 "torch.distributed.distributed_c10d.init_process_group"})
_AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast",
                       "torch_xla.amp.autocast", "torch_xla.amp.autocast_mode.autocast"})
_DEVICE_KEYWORDS = frozenset({"device", "device_type", "map_location"})
_MESHES = frozenset(f"torch.distributed.{module}.{name}"
                    for module in ("device_mesh", "tensor", "_tensor")
                    for name in ("DeviceMesh", "init_device_mesh"))
_DEVICE_FIRST = frozenset({"torch.device", "torch.set_default_device", "torch.get_device_module",
                           *_AUTOCAST, *_MESHES})
_DEVICE_ATTRIBUTES = frozenset({"type", "device", "device_type"})
_XLA_GETTERS = frozenset({"torch_xla.core.xla_model.xla_device", "torch_xla.device",
                          "torch_xla.torch_xla.device"})
_DEVICE_GETTERS = _XLA_GETTERS | {"torch.device"}
_DISPLAY_NAMES = frozenset({"print", "str", "repr", "format", "len"})
_DISPLAY_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical",
                              "exception", "log", "write", "set_description", "set_postfix_str",
                              "master_print"})
_DISPLAY_CALLS = frozenset({"warnings.warn", "logging.debug", "logging.info", "logging.warning",
                            "logging.warn", "logging.error", "logging.critical",
                            "logging.exception", "logging.log"})


@dataclass(frozen=True)
class Verdict:
    rename: bool
    text: str  # what the finding adds after its first words
    deferred: bool = False  # a literal another rule renames in its own call
    unindexed: bool = False  # compared with a device that prints as "neuron", without an index


def judge(flow: Flow, site: Site) -> Verdict:
    ends = [(use, _end_kind(use, site)) for use in flow.ends]
    if _deferred(flow, ends):
        return Verdict(False, "", deferred=True)
    sources = [(source, _source_kind(source)) for source in flow.sources]
    others = _others(flow, renamed=False)
    blocked = _enum_members(flow, sources)  # first: the gravest
    blocked += [_goes(u) for u, k in ends if k == "unknown"]
    blocked += [f"its value comes from {s.label}" + (f" (line {s.line})" if s.line else "")
                + ", which neuron-migrate cannot follow" for s, k in sources if k == "external"]
    unindexed = _unindexed(flow, sources)
    blocked += unindexed
    if len(flow.literals) > 1:
        blocked += [f"the string on line {unit.lineno} is silenced by a "
                    "`neuron-migrate: ignore` comment" for unit in flow.units.values()
                    if site.silenced("NM102", unit)][:1]
    if blocked:
        target = "neuron" if unindexed else _new(flow)  # "neuron:0" would never match
        return Verdict(False, f"{others}: {blocked[0]}; if it names a device, change them all "
                       f"to {target!r}", unindexed=bool(unindexed))
    evidence = any(k in ("device", "backend", "rewritten") for _, k in ends) or \
        any(k == "device" for _, k in sources) or bool(flow.guards) or \
        any(device_like(name) for name in flow.names)
    outside = [_outside(s) for s, k in sources if k == "interface"]
    outside += [f"is returned by `{u.grandparent.name}` to callers outside this file"  # type: ignore[union-attr]
                for u, k in ends if k == "returned"]
    if outside and not evidence:
        return Verdict(False, f"{others}: its value {outside[0]}; it never selects a device "
                       "here, so it reads as a name of your own; if it names a device, rename "
                       "it everywhere it flows")
    return Verdict(True, _others(flow, renamed=True) + _notes(flow, ends, sources))


def device_like(name: str) -> bool:
    name = name.lower()
    return name in ("device", "dev", "device_type", "device_name", "devices") or \
        name.endswith("_device") or name.startswith("device_")


# ---------------------------------------------------------------------- ends and sources
def _end_kind(use: Use, site: Site) -> str:
    """What a place the value reaches does with it: device, backend, display, rewritten (a
    call another rule rewrites), test, returned (to callers outside the file) or unknown."""
    parent, grand = use.parent, use.grandparent
    if isinstance(parent, (ast.If, ast.While, ast.Assert)) or \
            isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
        return "test"
    if isinstance(parent, ast.Return):
        return "returned"
    if isinstance(parent, ast.Call) and use.node in parent.args:
        return _argument_kind(parent, parent.args.index(use.node), None, use, site)  # type: ignore[arg-type]
    if isinstance(parent, ast.keyword) and isinstance(grand, ast.Call):
        return _argument_kind(grand, None, parent.arg, use, site)
    return "unknown"


def _argument_kind(call: ast.Call, index: int | None, keyword: str | None, use: Use,
                   site: Site) -> str:
    func = call.func
    qualname = use.scope.qualname(ast_dotted(func)) if use.scope is not None else None
    if qualname in _INIT_PROCESS_GROUP and (index == 0 or keyword == "backend"):
        return "backend"
    if keyword in _DEVICE_KEYWORDS or qualname in _DEVICE_FIRST and index == 0:
        return "device"
    if isinstance(func, ast.Attribute) and func.attr == "to" and index == 0:
        return "device"
    if qualname is not None and site.rewrites(qualname):
        return "rewritten"  # the rewrite receives the renamed value
    if qualname in _DISPLAY_CALLS or isinstance(func, ast.Name) and (
            func.id in _DISPLAY_NAMES or func.id.endswith(("Error", "Exception", "Warning"))):
        return "display"
    if isinstance(func, ast.Attribute) and func.attr in _DISPLAY_METHODS:
        return "display"
    return "unknown"


def _source_kind(source: Source) -> str:
    """device (a device, or a device's type: renamed by the migration too), interface (the
    command line, callers outside the file, other modules), enum (an enum member's value) or
    external (anything else)."""
    if source.kind in ("option", "parameter", "module", "class"):
        return "interface"
    if source.kind == "enum":
        return "enum"
    node = source.node
    if source.kind != "expr" or node is None:
        return "external"
    if isinstance(node, ast.Attribute) and node.attr in _DEVICE_ATTRIBUTES:
        return "device"  # `t.device.type`, `model.device`, `mesh.device_type`
    if isinstance(node, ast.Call) and source.scope is not None and \
            source.scope.qualname(ast_dotted(node.func)) in _DEVICE_GETTERS:
        return "device"
    return "external"


def _enum_members(flow: Flow, sources: list[tuple[Source, str]]) -> list[str]:
    """The member a literal of the flow is the value of (attributes of one name share a
    flow across classes: `A.XLA = "XLA"` and `B.XLA = "xla"`)."""
    members = [s for s, k in sources if k == "enum"]
    lines = flow.lines()
    members.sort(key=lambda s: s.line not in lines)
    return [_enum_member(members[0], flow)] if members else []


def _enum_member(source: Source, flow: Flow) -> str:
    old = next((n.value for n in flow.literals if isinstance(n, ast.Constant)), "xla")
    return (f"it is {source.label}: with another value, `{source.owner}(\"{old}\")` would "
            "no longer find the member, and the member would become an alias of any other "
            "that has that value")


def _unindexed(flow: Flow, sources: list[tuple[Source, str]]) -> list[str]:
    """`str(xm.xla_device()) == "xla:0"`: the XLA device carried its index; its replacement,
    `torch.device("neuron")`, prints as "neuron", so "neuron:0" would never match."""
    indexed = any(isinstance(n, ast.JoinedStr) or ":" in n.value for n in flow.literals)  # type: ignore[attr-defined]
    for source, kind in sources:
        node = source.node
        if indexed and kind == "device" and isinstance(node, ast.Call) and \
                source.scope is not None and \
                (qualname := source.scope.qualname(ast_dotted(node.func))) is not None and \
                _unindexed_device(qualname, node):
            printed = "prints" if qualname not in _XLA_GETTERS else \
                "printed as \"xla:0\"; its replacement torch.device(\"neuron\") prints"
            return [f"it is compared with the device from {source.label} (line {source.line}), "
                    f"which {printed} as \"neuron\", without an index: compare `.type` "
                    "instead"]
    return []


def _unindexed_device(qualname: str, call: ast.Call) -> bool:
    """An XLA device getter, or what NM101 made of one (`torch.device("neuron")`, which
    prints without an index): a second run must reach the first run's verdict."""
    if qualname in _XLA_GETTERS:
        return True
    return qualname == "torch.device" and len(call.args) == 1 and not call.keywords and \
        isinstance(call.args[0], ast.Constant) and call.args[0].value == "neuron"


def _deferred(flow: Flow, ends: list[tuple[Use, str]]) -> bool:
    """A literal written straight into init_process_group (NM201) or autocast (NM401, which
    leaves calls with unpacked arguments alone) is that rule's to rename; one that selects
    Lightning's XLA accelerator or strategy (NM716) is that rule's to report."""
    if len(flow.literals) != 1:
        return False
    literal = flow.literals[0]
    for use, _ in ends:
        call = use.parent if isinstance(use.parent, ast.Call) else use.grandparent
        if use.node is not literal or not isinstance(call, ast.Call) or use.scope is None:
            continue
        qualname = use.scope.qualname(ast_dotted(call.func))
        unpacked = any(isinstance(a, ast.Starred) for a in call.args) or \
            any(k.arg is None for k in call.keywords)
        if qualname in _INIT_PROCESS_GROUP or qualname in _AUTOCAST and not unpacked:
            return True
        keyword = use.parent.arg if isinstance(use.parent, ast.keyword) else None
        if lightning_xla_string(qualname, keyword, getattr(literal, "value", None)):
            return True  # Lightning's accelerator or strategy name: NM716 reports the call
    return False


# ---------------------------------------------------------------------- messages
def _notes(flow: Flow, ends: list[tuple[Use, str]], sources: list[tuple[Source, str]]) -> str:
    notes: list[str] = []
    new = _new(flow)
    backend = [_line(u.node) for u, k in ends if k == "backend"]
    if backend and any(k == "device" for _, k in ends):
        notes.append(f"it is also the process-group backend (line {backend[0]}): natively both "
                     "are called \"neuron\"")
    options = [s for s, k in sources if s.kind == "option"]
    if options:
        notes.append(f"{options[0].label} now takes {new!r}: update launch commands that pass "
                     "the old value")
    callers = sorted({s.owner for s, k in sources if s.kind == "parameter"})
    if callers:
        notes.append(f"callers of `{callers[0]}` outside this file must pass {new!r} too")
    if any(isinstance(n, ast.JoinedStr) for n in flow.literals):
        notes.append("the device string is built at run time; check the index it gets")
    return "".join(f"; {note}" for note in notes)


def _others(flow: Flow, renamed: bool) -> str:
    """The other strings of the flow, which share the finding's fate."""
    lines = flow.lines()
    if len(flow.literals) < 2:
        return ""
    where = f"line {lines[0]}" if len(lines) == 1 else \
        "lines " + ", ".join(str(n) for n in lines)
    if renamed:
        return f" (one value with the strings on {where}, which change together)"
    return f", as are the strings on {where} that hold the same value"


def _new(flow: Flow) -> str:
    for literal in flow.literals:
        if isinstance(literal, ast.Constant):
            return _neuron(literal.value)
    return "neuron"


def _neuron(value: str) -> str:
    """"xla:1" or "cuda:1" -> "neuron:1"."""
    return "neuron" + value[value.index(":"):] if ":" in value else "neuron"


def _line(node: ast.AST) -> int:
    return getattr(node, "lineno", 0)


def _outside(source: Source) -> str:
    if source.kind == "option":
        return f"comes from {source.label}"
    if source.kind == "parameter":
        return f"comes from callers of `{source.owner}` outside this file"
    return f"is {source.label}"


def _goes(use: Use) -> str:
    """Where the value goes, for a review message."""
    parent, line = use.parent, _line(use.node)
    if isinstance(parent, ast.Subscript) and use.node is parent.slice:
        return f"it is used as a key in {_code(use)} (line {line})"
    if isinstance(parent, ast.Dict):
        return f"it is a key or value of the dict on line {line}"
    if isinstance(parent, (ast.List, ast.Tuple, ast.Set)):
        return f"it is an element of {_code(use)} (line {line})"
    return f"its value goes to {_code(use)} (line {line}), which neuron-migrate cannot follow"


def _code(use: Use) -> str:
    node = use.grandparent if isinstance(use.parent, ast.keyword) else use.parent
    if not isinstance(node, ast.expr):
        node = use.node  # type: ignore[assignment]
    try:
        text = ast.unparse(node)
    except Exception:  # an ast the unparser does not know
        return "an expression"
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}...`"
