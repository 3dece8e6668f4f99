"""The set of rules in force for a run, indexed the way the rewriter asks for them."""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from neuron_migrate import catalogue_index
from neuron_migrate.model import Options

if TYPE_CHECKING:  # the rules import LibCST: a run that parses nothing never loads them
    from neuron_migrate.helper_code import Helper
    from neuron_migrate.rule import Rule

BASE_TOKENS = (b"xla", b"pjrt")
"""A file containing none of these (or of the rules' own tokens) is never parsed."""

UNUSED_IMPORT = "NM001"
UNUSED_SUPPRESSION = "NM002"
HELPERS_MODULE = "NM003"
UNMAPPED = "NM701"
AMBIGUOUS = "NM702"
STAR_IMPORT = "NM703"
XLA_BY_NAME = "NM715"
XLA_ERA = "NM960"
"""Findings the engine itself makes; their documentation lives in `rules/` like any other."""


class RuleLine(NamedTuple):
    """What a report says of a rule beside its findings, and `neuron-migrate rules` lists."""

    id: str
    name: str
    kind: str
    summary: str
    doc_url: str


def _line_of(rule: Rule) -> RuleLine:
    return RuleLine(rule.id, rule.name, str(rule.kind), rule.summary, rule.doc_url)


@functools.lru_cache(maxsize=1)
def _indexed() -> dict[str, RuleLine]:
    return {entry[0]: RuleLine(*entry) for entry in catalogue_index.RULES}


class Registry:
    def __init__(self, rules: Iterable[Rule], options: Options | None = None) -> None:
        self.options = options or Options()
        self.all_rules = tuple(r for r in rules if r.source in self.options.sources)
        self.rules = tuple(r for r in self.all_rules if self.options.enabled(r.id))
        self.by_id = {r.id: r for r in self.all_rules}
        self.helper_table: dict[str, Helper] = {}
        """The helpers the rules may write into a file, in the catalogue's order."""
        for table in {id(r.helper_table): r.helper_table for r in self.all_rules}.values():
            self.helper_table.update(table)  # the rules of the catalogue share one table
        self.by_call: dict[str, Rule] = {}
        self.by_name: dict[str, Rule] = {}
        self._prefixes: dict[str, Rule] = {}  # a prefix two rules claim: the first rule's
        for rule in self.all_rules:
            for qualname in rule.calls:
                self.by_call[qualname] = rule
            for qualname in rule.names:
                self.by_name[qualname] = rule
            for prefix in rule.prefixes:
                self._prefixes.setdefault(prefix, rule)
        self.any_call = self._with_hook("on_any_call")
        self.assign = self._with_hook("on_assign")
        self.string = self._with_hook("on_string")
        self.attribute = self._with_hook("on_attribute")
        self.watches = tuple(sorted({p for r in self.rules for p in r.watches}))
        self.attributes = frozenset(a for r in self.rules for a in r.attributes)
        self.entry = self._with_hook("on_entry")
        self.planned = self._with_hook("edits")
        self.before = self._with_hook("on_before")
        self._string_rules = self._with_hook("interesting_string")
        self._string_cache: dict[str, Rule | None] = {}
        self._flow_rules = self._with_hook("flow_string")
        self.star_names = frozenset(self.by_call) | frozenset(self.by_name)
        roots = {q.split(".", 1)[0] for q in (*self.by_call, *self.by_name)}
        roots |= {prefix.split(".", 1)[0] for prefix in self._prefixes}
        self.watched_roots = frozenset(roots - {"torch", "torch_xla"})
        self.device_calls = frozenset(q for r in self.all_rules if getattr(r, "device_getter", False)
                                      for q in r.calls)
        self.by_import: dict[str, Rule] = {}
        for rule in self.all_rules:
            for module in rule.imports:
                self.by_import[module] = rule
        tokens = set(BASE_TOKENS)
        for rule in self.all_rules:
            tokens.update(rule.tokens)
        self.tokens = tuple(sorted(tokens))
        self._search = _search_order(self.tokens)
        # the NM9xx readiness rules, run over the stdlib ast of every file that is parsed (the
        # environment rules and NM960 carry a limit for `audit`'s summary, but walk nothing)
        self.readiness = tuple(r for r in self.rules if hasattr(r, "limit")
                               and hasattr(r, "check"))

    def _with_hook(self, hook: str) -> tuple[Rule, ...]:
        from neuron_migrate.rule import overrides

        return tuple(r for r in self.rules if overrides(r, hook))

    def enabled(self, rule: Rule) -> bool:
        return rule in self.rules

    def call_rule(self, qualnames: Iterable[str]) -> Rule | None:
        """The rule that owns every one of these qualified names, if one rule owns them all."""
        owners = {id(self.by_call.get(q)): self.by_call.get(q) for q in qualnames}
        if len(owners) != 1:
            return None
        return next(iter(owners.values()))

    def name_rule(self, qualnames: Iterable[str]) -> Rule | None:
        owners = {id(self.by_name.get(q)): self.by_name.get(q) for q in qualnames}
        return next(iter(owners.values())) if len(owners) == 1 else None

    def prefix_rule(self, qualname: str) -> Rule | None:
        """The review rule whose prefix covers this name most specifically, if any: the name
        itself, then each shorter dotted prefix of it, looked up."""
        prefixes = self._prefixes
        name = qualname
        while True:
            rule = prefixes.get(name)
            if rule is not None:
                return rule
            name, dot, _ = name.rpartition(".")
            if not dot:
                return None

    def string_rule(self, value: str) -> Rule | None:
        """Asked of every string constant of every parsed file; the same strings recur."""
        try:
            return self._string_cache[value]
        except KeyError:
            pass
        found = next((r for r in self._string_rules if r.interesting_string(value)), None)
        if len(self._string_cache) < 100_000:
            self._string_cache[value] = found
        return found

    def interesting_string(self, value: str) -> bool:
        return self.string_rule(value) is not None

    def flow_string(self, node: ast.expr) -> bool:
        """Whether some rule follows the flow of this string constant or f-string."""
        return any(rule.flow_string(node) for rule in self._flow_rules)

    _last_prefilter: tuple[bytes, bool] | None = None

    def line(self, rule_id: str) -> RuleLine | None:
        """The rule's name, kind, summary and documentation, or None for an unknown id."""
        rule = self.by_id.get(rule_id)
        return None if rule is None else _line_of(rule)

    def described(self) -> tuple[tuple[RuleLine, str], ...]:
        """Every rule of the run's stacks with its explanation, by id: a report's rule list."""
        return tuple((_line_of(r), r.explanation) for r in sorted(self.all_rules,
                                                                  key=lambda r: r.id))

    def prefilter(self, data: bytes) -> bool:
        """Whether the file holds an XLA-era token. A run asks it of the same bytes more than
        once (where to migrate a file, then whether to parse it), and a file without any
        token, most of a repository, costs a search per token each time: the answer for the
        last bytes asked about is kept (they are immutable; the object itself is the key)."""
        last = self._last_prefilter
        if last is not None and last[0] is data:
            return last[1]
        found = any(token in data for token in self._search)
        self._last_prefilter = (data, found)
        return found


def _search_order(tokens: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """The tokens `prefilter` looks for, in the order that decides most files soonest: a
    token holding another is dropped (`neuronx` is found by `neuron`), lower-case and
    shorter tokens, the more common in code, come first. A file without any token, the usual
    case, is searched once per token whatever the order."""
    kept = {t for t in tokens if not any(other != t and other in t for other in tokens)}
    return tuple(sorted(kept, key=lambda t: (not t.islower(), len(t), t)))


class DeferredRegistry(Registry):
    """A `Registry` whose rules are loaded the first time anything but `prefilter` is asked.

    Loading the catalogue imports LibCST and every rule module, most of a run's start-up. A
    file with no XLA-era token is decided by `prefilter` alone, from tokens known without the
    rules (`neuron_migrate.catalogue`), so a `check` of clean files (a pre-commit hook's usual run)
    never pays for it.
    """

    def __init__(self, load: Callable[[], Iterable[Rule]], tokens: Iterable[bytes],
                 options: Options | None = None) -> None:  # no super().__init__: that loads
        self.options = options or Options()
        self.tokens = tuple(sorted(set(tokens)))
        self._search = _search_order(self.tokens)
        self._load = load
        self._loaded: Registry | None = None

    @property
    def loaded(self) -> Registry:
        if self._loaded is None:
            self._loaded = Registry(self._load(), self.options)
            # from now on attributes are found without `__getattr__`, which every lookup
            # in a file's migration would otherwise go through
            self.__dict__.update({k: v for k, v in self._loaded.__dict__.items()
                                  if k not in ("options", "tokens")})
        return self._loaded

    def line(self, rule_id: str) -> RuleLine | None:
        """From the catalogue's index while the rules are not loaded: a report of results
        taken from the cache prints every finding's documentation link, and should not load
        LibCST and every rule for it."""
        if self._loaded is not None:
            return self._loaded.line(rule_id)
        return _indexed().get(rule_id)

    def described(self) -> tuple[tuple[RuleLine, str], ...]:
        """From the catalogue's index while the rules are not loaded, as `line`: the SARIF
        report lists every rule, and a report of cached results should not load them for it."""
        if self._loaded is not None:
            return self._loaded.described()
        sources = self.options.sources
        return tuple((line, catalogue_index.DETAILS[rule_id][1])
                     for rule_id, line in sorted(_indexed().items())
                     if catalogue_index.DETAILS[rule_id][0] in sources)

    def __getattr__(self, name: str) -> Any:
        """Only attributes a loaded registry has and this one lacks get here."""
        if name.startswith("__") or name in ("_load", "_loaded"):
            raise AttributeError(name)
        return getattr(self.loaded, name)

    def __reduce__(self) -> tuple[Any, ...]:
        """Worker processes get the loaded registry: workers are handed the files that need the
        rules, so deferring there would only postpone the same load, and the loader is bound
        to the run's settings, which the workers do not need."""
        return _same, (self.loaded,)


def _same(registry: Registry) -> Registry:
    return registry
