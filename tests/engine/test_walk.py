"""The fast walk must see what LibCST's own visitors see, in the same order."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import libcst as cst
import pytest

from neuron_migrate.syntax.walk import REMOVE, transform, walk

STDLIB = Path(sysconfig.get_paths()["stdlib"])
CODE = (cst.Name, cst.Attribute, cst.Call, cst.SimpleString, cst.FormattedString,
        cst.Comparison, cst.Param, cst.Lambda, cst.ListComp, cst.Assign, cst.Subscript)


class _Collect(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, CODE):
            self.seen.append(id(node))
        return True


class _Walked:
    def __init__(self) -> None:
        self.seen: list[int] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, CODE):
            self.seen.append(id(node))
        return True

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
        return updated


@pytest.mark.slow
@pytest.mark.parametrize("module", ["inspect", "argparse", "dataclasses", "typing"])
def test_walk_meets_the_code_nodes_in_libcst_order(module: str) -> None:
    tree = cst.parse_module((STDLIB / f"{module}.py").read_bytes())
    expected, actual = _Collect(), _Walked()
    tree.visit(expected)
    walk(tree, actual)
    assert actual.seen == expected.seen and len(actual.seen) > 1000


def test_transform_without_changes_keeps_every_node() -> None:
    tree = cst.parse_module((STDLIB / "argparse.py").read_bytes())
    assert transform(tree, _Walked()) is tree


class _Rename(_Walked):
    def on_leave(self, original, updated):
        if isinstance(updated, cst.Name) and updated.value == "xm":
            return updated.with_changes(value="torch")
        if isinstance(updated, cst.Arg) and isinstance(updated.value, cst.Name) and \
                updated.value.value == "drop":
            return REMOVE
        return updated


def test_transform_replaces_and_removes_like_a_transformer() -> None:
    tree = cst.parse_module("def f(a=xm.x):\n    return g(xm.y, drop, [xm for xm in z])\n")
    new = transform(tree, _Rename())
    assert new.code == ("def f(a=torch.x):\n"
                        "    return g(torch.y, [torch for torch in z])\n")


def test_removing_a_required_child_is_an_error() -> None:
    class Drop(_Walked):
        def on_leave(self, original, updated):
            return REMOVE if isinstance(updated, cst.Name) and updated.value == "x" else updated

    with pytest.raises(TypeError, match="cannot be removed"):
        transform(cst.parse_expression("x.y"), Drop())
