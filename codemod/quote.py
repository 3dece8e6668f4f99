"""Quoting code in messages.

Rules quote the code they change (`xm.mark_step()`, `xm.save(state, path)`) about twice per
rewrite, and LibCST's code generation for a lone expression costs more than the rewrite
itself. The common shapes (names, dotted names, literals, calls whose parts are those) are
written here directly from the nodes, whitespace included; anything else, or anything with
parentheses or line breaks, goes to LibCST. Both give the same text (tests/test_quote.py).
"""

from __future__ import annotations

import libcst as cst

_EMPTY_MODULE = cst.Module(body=[])
_ATOMS = frozenset({cst.Name, cst.SimpleString, cst.Integer, cst.Float})


class _Other(Exception):
    """A shape the quick path does not write."""


def code(node: cst.CSTNode) -> str:
    """The source text of `node`, as LibCST would generate it."""
    try:
        return _expression(node)
    except _Other:
        return _EMPTY_MODULE.code_for_node(node)


def _space(node: cst.CSTNode) -> str:
    if type(node) is not cst.SimpleWhitespace:
        raise _Other
    return node.value  # type: ignore[attr-defined]


def _expression(node: cst.CSTNode) -> str:
    kind = type(node)
    if getattr(node, "lpar", None):
        raise _Other
    if kind in _ATOMS:
        return node.value  # type: ignore[attr-defined]
    if kind is cst.Attribute:
        return (f"{_expression(node.value)}{_around(node.dot, cst.Dot, '.')}"  # type: ignore[attr-defined]
                f"{node.attr.value}")  # type: ignore[attr-defined]
    if kind is cst.Call:
        last = len(node.args) - 1  # type: ignore[attr-defined]
        args = "".join(_arg(arg, i != last) for i, arg in enumerate(node.args))  # type: ignore[attr-defined]
        return (f"{_expression(node.func)}{_space(node.whitespace_after_func)}("  # type: ignore[attr-defined]
                f"{_space(node.whitespace_before_args)}{args})")  # type: ignore[attr-defined]
    raise _Other


def _arg(arg: cst.Arg, default_comma: bool) -> str:
    parts = [arg.star, _space(arg.whitespace_after_star)]
    if arg.keyword is not None:
        parts.append(_expression(arg.keyword))
    if arg.equal is cst.MaybeSentinel.DEFAULT:  # what LibCST writes for nodes built in code
        parts.append(" = " if arg.keyword is not None else "")
    else:
        parts.append(_around(arg.equal, cst.AssignEqual, "="))
    parts.append(_expression(arg.value))
    if arg.comma is cst.MaybeSentinel.DEFAULT:
        parts.append(", " if default_comma else "")
    else:
        parts.append(_around(arg.comma, cst.Comma, ","))
    parts.append(_space(arg.whitespace_after_arg))
    return "".join(parts)


def _around(token: object, kind: type, text: str) -> str:
    """A punctuation token with the whitespace on either side of it."""
    if type(token) is not kind:
        raise _Other
    return (f"{_space(token.whitespace_before)}{text}"  # type: ignore[attr-defined]
            f"{_space(token.whitespace_after)}")  # type: ignore[attr-defined]
