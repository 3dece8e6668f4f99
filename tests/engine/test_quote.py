"""Quoted code in messages must be exactly LibCST's code for the node."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import libcst as cst
import pytest

from neuron_migrate.syntax import quote
from neuron_migrate.syntax.walk import walk

STDLIB = Path(sysconfig.get_paths()["stdlib"])
_LIBCST = cst.Module(body=[])


_QUOTED = (cst.Call, cst.Attribute, cst.Name, cst.SimpleString, cst.Comparison,
           cst.BooleanOperation, cst.UnaryOperation, cst.IfExp, cst.FormattedString)


class _Expressions:
    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, _QUOTED):
            self.nodes.append(node)
        return True

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> None:
        pass


@pytest.mark.parametrize("module", ["argparse", "subprocess", "logging/__init__"])
def test_quoted_code_is_libcsts_code(module: str) -> None:
    found = _Expressions()
    walk(cst.parse_module((STDLIB / f"{module}.py").read_bytes()), found)
    quick = 0
    for node in found.nodes:
        assert quote.code(node) == _LIBCST.code_for_node(node)
        try:
            quote._expression(node)
            quick += 1
        except quote._Other:
            pass
    assert quick > len(found.nodes) // 2  # the quick path is the common one


@pytest.mark.parametrize("source", [
    "f(a, b)", "f(a,b)", "f( a , b , )", "f(*args, **kw)", "f(x = 1)", "f(x=1)", "a . b",
    "xm.save(model.state_dict(), 'ckpt.pt')", "(a).b", "f(\n    a,\n)", "f(a)(b)",
    "f(a[1])", "f(lambda: 1)", "f(*  a)", "a if b else c", "(a  if b else(c))",
    "not a", "not(a)", "-x", "~ x", "a and b or not c", "a == 0", "a != b",
    "a is not  None", "a not  in b", "1 < a <= 2", "a in b", "a is b", "((a))", "( a )",
    "f'step {step}'", "f'{a!r:>{width}} {b=}{c = }'", "rf'{{x}}{y}'", "f(f'{a}', b)",
    "int(os.environ.get('LOCAL_RANK', 0)) == 0", "(a\n)", "f(a + b)",
])
def test_quoted_code_of_small_expressions(source: str) -> None:
    node = cst.parse_expression(source)
    assert quote.code(node) == source


def test_nodes_built_by_rules_quote_like_libcst() -> None:
    """Nodes made in code have default (sentinel) commas and equals signs."""
    call = cst.Call(cst.Attribute(cst.Name("torch"), cst.Name("device")),
                    [cst.Arg(cst.SimpleString('"neuron"')),
                     cst.Arg(cst.Integer("0"), keyword=cst.Name("index"))])
    assert quote.code(call) == _LIBCST.code_for_node(call) == 'torch.device("neuron", index = 0)'
    rank = cst.IfExp(test=cst.Call(cst.Name("ready")), body=cst.Name("a"), orelse=cst.Integer("0"),
                     lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    check = cst.Comparison(rank, [cst.ComparisonTarget(cst.Equal(), cst.Integer("0"))])
    guard = cst.BooleanOperation(cst.UnaryOperation(cst.Not(), cst.Name("b")), cst.Or(), check)
    assert quote.code(guard) == _LIBCST.code_for_node(guard) == "not b or (a if ready() else 0) == 0"
    quote._expression(guard)  # written by the quick path, not LibCST
