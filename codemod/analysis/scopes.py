"""Python scoping, just enough to know what a name means at a given place.

The analysis (`analyse.py`) fills these tables from the stdlib `ast`, which is an order of
magnitude cheaper than LibCST's metadata providers; the rewriter then asks the same tables about
LibCST nodes. Both sides share `Scope.lookup`, so a name means the same thing to the code that
decides what to rewrite and to the code that rewrites it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

XLA_PREFIXES = ("torch_xla", "neuronx_distributed")
"""Qualified-name prefixes whose every use must be rewritten or reported, and whose imports
go once nothing uses them: PyTorch/XLA, and NeuronX Distributed, which is built on it and
fails to import on TorchNeuron."""


def is_xla(qualname: str) -> bool:
    for prefix in XLA_PREFIXES:  # `prefix` itself, or a name inside it (asked very often)
        if qualname.startswith(prefix) and (len(qualname) == len(prefix)
                                            or qualname[len(prefix)] == "."):
            return True
    return False


@dataclass(eq=False, slots=True)
class Binding:
    """One place that binds a name: an import, or anything else (assignment, parameter, ...).

    For `import a.b.c` the bound name is `a` and `qualname` is `a`, while `module` keeps the
    full dotted path, which decides whether the import is still needed.
    """

    name: str
    qualname: str | None = None
    module: str | None = None
    statement: ast.stmt | None = None
    alias_index: int = -1
    fallback: bool = False
    string_value: str | None = None
    device_value: bool = False  # assigned the result of an XLA device call
    call_value: str | None = None  # dotted name of the function whose result it holds
    star: bool = False

    @property
    def is_import(self) -> bool:
        return self.qualname is not None


@dataclass(frozen=True)
class Resolution:
    """What a dotted expression such as `xm.mark_step` refers to.

    `qualnames` holds one entry per import that can reach this place (usually one); `ambiguous`
    is set when a non-import binding of the root name can reach it too, so a rewrite would be a
    guess.
    """

    qualnames: tuple[str, ...]
    bindings: tuple[Binding, ...]
    ambiguous: bool = False

    @property
    def qualname(self) -> str | None:
        distinct = set(self.qualnames)
        return self.qualnames[0] if len(distinct) == 1 and not self.ambiguous else None

    @property
    def touches_xla(self) -> bool:
        return any(is_xla(q) for q in self.qualnames)

    def extend(self, attrs: list[str]) -> Resolution:
        if not attrs:
            return self
        suffix = "." + ".".join(attrs)
        return Resolution(tuple(q + suffix for q in self.qualnames), self.bindings, self.ambiguous)


class Scope:
    """A module, class, function, lambda or comprehension scope."""

    __slots__ = ("kind", "parent", "bindings", "globals", "nonlocals", "stars", "star_names",
                 "resolved", "module_names", "_by_qualname", "_star_bindings", "_roots")

    def __init__(self, kind: str, parent: Scope | None,
                 star_names: frozenset[str] = frozenset()) -> None:
        self.kind = kind
        self.star_names = star_names
        self.parent = parent
        self.bindings: dict[str, list[Binding]] = {}
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()
        self.stars: list[Binding] = []
        # Answers the rewrite asks again and again, kept once the analysis is complete (the
        # rules ask about the same few names in every statement): dotted name -> resolution,
        # module -> `module_name`, and the scope's names by the qualified names they bind.
        self.resolved: dict[tuple[str, ...], Resolution | None] = {}
        self.module_names: dict[str, str | None] = {}
        self._by_qualname: dict[str, list[str]] | None = None
        # name -> (how many star imports there were, the bindings then): one list per name,
        # so that whoever keys a name by its bindings (the flows do) sees the same key
        self._star_bindings: dict[str, tuple[int, list[Binding] | None]] = {}
        # name -> (the bindings a lookup found, how many there were, what they resolve to):
        # a name bound a thousand times in one function is resolved at each of its uses, and
        # the lists only grow, so the answer stands while the list is the same length
        self._roots: dict[str, tuple[list[Binding], int, Resolution | None]] = {}

    @property
    def module(self) -> Scope:
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    def bind(self, binding: Binding) -> None:
        target = self
        if binding.name in self.globals:
            target = self.module
        elif binding.name in self.nonlocals:
            target = self._enclosing_function(binding.name) or self
        target.bindings.setdefault(binding.name, []).append(binding)

    def _enclosing_function(self, name: str) -> Scope | None:
        scope = self.parent
        while scope is not None and scope.kind != "module":
            if scope.kind != "class" and name in scope.bindings:
                return scope
            scope = scope.parent
        return None

    def lookup(self, name: str) -> list[Binding] | None:
        """The bindings a load of `name` here can see, by Python's rules (LEGB)."""
        if name in self.globals:
            return self.module.bindings.get(name) or self._star(name)
        scope: Scope | None = self
        first = True
        while scope is not None:
            if (first or scope.kind != "class") and name not in scope.nonlocals:
                found = scope.bindings.get(name)
                if found:
                    return found
            first = False
            scope = scope.parent
        return self._star(name)

    def _star(self, name: str) -> list[Binding] | None:
        module = self.module
        known = module._star_bindings.get(name)
        if known is not None and known[0] == len(module.stars):
            return known[1]
        found = None
        for star in module.stars:
            if f"{star.module}.{name}" in module.star_names:
                found = [Binding(name, qualname=f"{star.module}.{name}", star=True,
                                 statement=star.statement)]
                break
        module._star_bindings[name] = (len(module.stars), found)
        return found

    def resolve(self, root: str, attrs: list[str]) -> Resolution | None:
        bindings = self.lookup(root)
        if not bindings:
            return None
        known = self._roots.get(root)
        if known is not None and known[0] is bindings and known[1] == len(bindings):
            resolution = known[2]
        else:
            resolution = _resolution(bindings)
            self._roots[root] = (bindings, len(bindings), resolution)
        return resolution.extend(attrs) if resolution is not None else None

    def resolve_cached(self, root: str, attrs: list[str]) -> Resolution | None:
        """`resolve`, kept in `resolved`: the rewriter and the reader of review-only
        statements ask for the same names again and again."""
        key = (root, *attrs)
        memo = self.resolved
        found = memo.get(key, memo)  # the memo itself stands for "not asked yet"
        if found is memo:
            found = memo[key] = self.resolve(root, attrs)
        return found  # type: ignore[return-value]

    def module_name(self, qualname: str) -> str | None:
        """A name that refers here to the module `qualname` (`torch`, or an alias such as
        `th`): the innermost scope's first such binding that is not shadowed here. For the
        rewrite only: the answer is kept."""
        if qualname not in self.module_names:
            self.module_names[qualname] = self._module_name(qualname)
        return self.module_names[qualname]

    def _module_name(self, qualname: str) -> str | None:
        if (r := self.resolve(qualname, [])) is not None and r.qualname == qualname:
            return qualname
        scope: Scope | None = self
        while scope is not None:
            for name in scope._names_by_qualname().get(qualname, ()):
                resolved = self.resolve(name, [])
                if resolved is not None and resolved.qualname == qualname:
                    return name
            scope = scope.parent
        return None

    def _names_by_qualname(self) -> dict[str, list[str]]:
        """This scope's names by the qualified names they are bound to, in binding order."""
        if self._by_qualname is None:
            self._by_qualname = {}
            for name, bindings in self.bindings.items():
                for qualname in dict.fromkeys(b.qualname for b in bindings if b.qualname):
                    self._by_qualname.setdefault(qualname, []).append(name)
        return self._by_qualname

    def qualname(self, dotted: str | None) -> str | None:
        """The qualified name a dotted name (`dist.init_process_group`) refers to here."""
        if not dotted:
            return None
        root, *attrs = dotted.split(".")
        resolution = self.resolve(root, attrs)
        return resolution.qualname if resolution is not None else None


def _resolution(bindings: list[Binding]) -> Resolution | None:
    """What a name with these bindings refers to: None unless one of them is an import."""
    imports = [b for b in bindings if b.is_import]
    if not imports:
        return None
    others = [b for b in bindings if not b.is_import and not b.fallback]
    return Resolution(tuple(b.qualname for b in imports if b.qualname), tuple(bindings),
                      ambiguous=bool(others))
