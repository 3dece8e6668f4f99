"""Everything a rule may use, in one place.

A rule module imports from `neuron_migrate.ruleapi` (and its submodules), from its own
family's modules in `rules/`, from the standard library and from LibCST; nothing else of
`neuron_migrate`. The contract test (tests/project/test_layers.py, import-linter) fails on any other
import, so the engine, the analyses and the dependency scanner can change their insides
without breaking a rule, and a newcomer reading a rule sees its whole vocabulary here:

- this module: what a rule is (`Rule`, its hooks' `Site` and `Outcome`s), the finding kinds,
  the plain-PyTorch helpers a rewrite may write (`Helper`), quoting code in messages, and
  reading or building the LibCST nodes of a call;
- `ruleapi.analysis`: the read-only questions rules ask of the stdlib `ast` (dotted names,
  reaching assignments, training steps, a device string's flow, wrapped optimizers);
- `ruleapi.readiness`: the base and the facts of the NM9xx readiness rules;
- `ruleapi.deps`: the dependency scanner's ids and signals, for the rules documenting it;
- `ruleapi.findings`: the ids of the findings the engine makes itself.
"""

from __future__ import annotations

from neuron_migrate.helper_code import Helper, helper
from neuron_migrate.model import Kind
from neuron_migrate.rule import (Example, Insert, Outcome, Remove, Replace, ReplaceStatement,
                                 Review, Role, Rule, Site)
from neuron_migrate.syntax.calls import (append_arg, argument, bool_value, call, drop_args,
                                         has_star_args, keep_args, keyword, keyword_arg,
                                         positional, relaid, string, string_value, template,
                                         with_string)
from neuron_migrate.syntax.names import dotted
from neuron_migrate.syntax.quote import code

__all__ = [
    "Example", "Helper", "Insert", "Kind", "Outcome", "Remove", "Replace", "ReplaceStatement",
    "Review", "Role", "Rule", "Site", "append_arg", "argument", "bool_value", "call", "code",
    "dotted", "drop_args", "has_star_args", "helper", "keep_args", "keyword", "keyword_arg",
    "positional", "relaid", "string", "string_value", "template", "with_string",
]
