"""A literal's flow told from its statement (`neuron_migrate.analysis.flow_direct`) is the flow
the whole-file build gives it, and the build is skipped only when every literal asked about is
told that way."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from neuron_migrate.analysis.analyse import Analysis, analyse
from neuron_migrate.analysis.flow import Flow, Flows, _strings, string_flows
from neuron_migrate.model import Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules

from tests.conftest import PYTHON_FIXTURES, fixture_id

REGISTRY = Registry(all_rules())
CUDA = Registry(all_rules(), Options(sources=frozenset({"xla", "cuda"})))


def _analysis(source: str, registry: Registry = REGISTRY) -> Analysis:
    return analyse(ast.parse(source), registry.interesting_string, registry.star_names,
                   registry.watched_roots, registry.device_calls)


def _fresh(analysis: Analysis, registry: Registry = REGISTRY) -> Flows:
    return string_flows(analysis, registry.flow_string, registry.device_calls)


def _content(flow: Flow | None) -> object:
    if flow is None:
        return None
    return ([id(n) for n in flow.literals], sorted(flow.names),
            [(id(u.node), id(u.scope), id(u.parent), id(u.grandparent)) for u in flow.ends],
            [(s.kind, s.label, s.line, id(s.node), id(s.scope), s.owner) for s in flow.sources],
            flow.guards, list(flow.units.items()))


def _asked(analysis: Analysis) -> list[tuple[ast.stmt, tuple[str, str | None], int, ast.expr]]:
    """Every string of every statement, as a rewriter asks for it."""
    asked = []
    for unit in ast.walk(analysis.tree):
        if isinstance(unit, ast.stmt):
            for signature, nodes in _strings(unit).items():
                asked += [(unit, signature, rank, node) for rank, node in enumerate(nodes)]
    return asked


def _compare_every_string(source: str, registry: Registry = REGISTRY) -> int:
    """Each string asked alone of a fresh `Flows` (so that the direct answer is tried) against
    the built flows; returns how many were told without building."""
    analysis = _analysis(source, registry)
    built = _fresh(analysis, registry)
    direct = 0
    for unit, signature, rank, node in _asked(analysis):
        flows = _fresh(analysis, registry)
        flow = flows.at(unit, signature, rank)
        assert _content(flow) == _content(built.of(node)), (node.lineno, ast.unparse(unit))
        direct += flows._of is None and flow is not None
    return direct


TRICKY = '''\
import unittest
import torch
import torch.distributed as dist
import torch_xla.core.xla_model as xm
from helpers import *

DEVICE = "xla"
torch.device("xla")                        # told directly
dist.init_process_group(backend="xla")     # told directly
model = torch.nn.Linear(2, 2).to("xla")    # a method the file does not define: told
x = torch.ones(2, device="xla:1")          # a keyword: told
print(str("xla"), "xla".startswith("xla"), "xla:{}".format(1))  # followed: built
move("xla")                                # a function of the file: built
helper.to("xla")                           # `to` is a method of a class here: built
device_from_star("xla")                    # a star import's name
a = lambda d="xla": torch.device("xla")    # a lambda: built
b = [torch.device("xla") for _ in range(2)]
c = {"k": torch.device("xla")}["k"]
d = f"{torch.device('xla')}"
e: int = torch.device("xla")
f: torch.device("xla")                     # an annotation without a value: never walked
g = torch.device("xla") if DEVICE == "xla" else torch.device("cpu")
h, i = torch.device("xla"), torch.device("xla:1")
j = parser.set_defaults(torch.device("xla"), device="xla")
k = obj.get("device", torch.device("xla"))
l = "%s" % torch.device("xla")
obj(torch.device("xla")).attr += 1
obj.items[torch.device("xla")] = 1
del cache[torch.device("xla")]
for q in torch.device("xla"), torch.device("cpu"):
    pass
with torch.device("xla") as dev:
    pass
assert torch.device("xla"), torch.device("xla")
raise ValueError(torch.device("xla"))


def move(device, other=torch.device("xla")) -> torch.device("xla"):
    return torch.device("xla")


class Holder(torch.device("xla").__class__, metaclass=Meta(torch.device("xla"))):
    attr = 1

    def to(self, device):
        return device

    @staticmethod
    @decorate(torch.device("xla"))
    def build():
        if xm.xla_device() == torch.device("xla"):
            return 1
        while torch.device("xla"):
            break


class Test(unittest.TestCase):
    def test(self):
        self.assertEqual(1, 1, msg=torch.device("xla"))
        self.assertIn("xla", ("xla", "cpu"))


match torch.device("xla"):
    case "xla" if torch.device("xla"):
        pass

try:
    pass
except error_of(torch.device("xla")):
    pass
'''


def test_the_direct_answer_is_the_built_flow_for_every_string_of_tricky_code() -> None:
    assert _compare_every_string(TRICKY) >= 4
    assert _compare_every_string(TRICKY.replace('"xla', '"cuda'), CUDA) >= 4


@pytest.mark.parametrize("before", PYTHON_FIXTURES, ids=fixture_id)
def test_the_direct_answer_is_the_built_flow_in_every_fixture(before: Path) -> None:
    _compare_every_string(before.read_text(encoding="utf-8", errors="replace"))


def test_a_file_whose_strings_all_end_in_calls_is_never_built() -> None:
    analysis = _analysis(textwrap.dedent("""\
        import torch
        import torch.distributed as dist
        dist.init_process_group("xla")
        model = torch.nn.Linear(2, 2).to(torch.device("xla"))
        batch = torch.ones(2, device="xla:0")
    """))
    flows = _fresh(analysis)
    answers = [flows.at(unit, signature, rank) for unit, signature, rank, _ in _asked(analysis)]
    assert len([a for a in answers if a is not None]) == 3
    assert flows._of is None  # no whole-file build
    ends = [a.ends[0] for a in answers if a is not None]
    assert [type(e.parent).__name__ for e in ends] == ["Call", "Call", "keyword"]


def test_a_string_compared_or_passed_to_a_function_of_the_file_is_built() -> None:
    analysis = _analysis(textwrap.dedent("""\
        import torch
        def pick(device):
            return torch.device(device)
        pick("xla")
    """))
    flows = _fresh(analysis)
    unit = analysis.tree.body[-1]
    flow = flows.at(unit, ("str", "xla"), 0)
    assert flows._of is not None and flow is not None
    assert "device" in flow.names  # it met the parameter
