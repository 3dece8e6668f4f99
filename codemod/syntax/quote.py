"""Quoting code in messages.

Rules quote the code they change (`xm.mark_step()`, `xm.save(state, path)`) about twice per
rewrite, and LibCST's code generation for a lone expression costs more than the rewrite
itself. The shapes rules quote (names, dotted names, literals, f-strings, calls,
comparisons, `not`/`and`/`or`, conditional expressions, parentheses) are written here directly
from the nodes, whitespace included; anything else, or anything spanning lines, goes to
LibCST. Both give the same text (tests/engine/test_quote.py).
"""

from __future__ import annotations

from collections.abc import Sequence

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
    lpar = getattr(node, "lpar", None)
    if lpar:
        return (f"{''.join('(' + _space(p.whitespace_after) for p in lpar)}"
                f"{_bare(node)}"
                f"{''.join(_space(p.whitespace_before) + ')' for p in node.rpar)}")  # type: ignore[attr-defined]
    return _bare(node)


def _bare(node: cst.CSTNode) -> str:
    """The expression without its own parentheses."""
    kind = type(node)
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
    if kind is cst.Comparison:
        return _expression(node.left) + "".join(  # type: ignore[attr-defined]
            _operator(target.operator) + _expression(target.comparator)
            for target in node.comparisons)  # type: ignore[attr-defined]
    if kind is cst.BooleanOperation:
        return (f"{_expression(node.left)}{_operator(node.operator)}"  # type: ignore[attr-defined]
                f"{_expression(node.right)}")  # type: ignore[attr-defined]
    if kind is cst.UnaryOperation:
        return _operator(node.operator) + _expression(node.expression)  # type: ignore[attr-defined]
    if kind is cst.IfExp:
        return (f"{_expression(node.body)}{_space(node.whitespace_before_if)}if"  # type: ignore[attr-defined]
                f"{_space(node.whitespace_after_if)}{_expression(node.test)}"  # type: ignore[attr-defined]
                f"{_space(node.whitespace_before_else)}else"  # type: ignore[attr-defined]
                f"{_space(node.whitespace_after_else)}{_expression(node.orelse)}")  # type: ignore[attr-defined]
    if kind is cst.FormattedString:
        return f"{node.start}{_parts(node.parts)}{node.end}"  # type: ignore[attr-defined]
    raise _Other


def _parts(parts: Sequence[cst.BaseFormattedStringContent]) -> str:
    """An f-string's text and `{expression!conversion:spec}` parts."""
    out = []
    for part in parts:
        if type(part) is cst.FormattedStringText:
            out.append(part.value)  # type: ignore[attr-defined]
            continue
        if type(part) is not cst.FormattedStringExpression:
            raise _Other
        out += ["{", _space(part.whitespace_before_expression), _expression(part.expression)]  # type: ignore[attr-defined]
        if part.equal is not None:  # type: ignore[attr-defined]
            out.append(_around(part.equal, cst.AssignEqual, "="))  # type: ignore[attr-defined]
        out.append(_space(part.whitespace_after_expression))  # type: ignore[attr-defined]
        if part.conversion is not None:  # type: ignore[attr-defined]
            out += ["!", part.conversion]  # type: ignore[attr-defined]
        if part.format_spec is not None:  # type: ignore[attr-defined]
            out += [":", _parts(part.format_spec)]  # type: ignore[attr-defined]
        out.append("}")
    return "".join(out)


# Operators' tokens; `is not` and `not in` have whitespace between their two words.
_OPERATORS: dict[type, str] = {
    cst.Equal: "==", cst.LessThan: "<", cst.LessThanEqual: "<=", cst.GreaterThan: ">",
    cst.GreaterThanEqual: ">=", cst.In: "in", cst.Is: "is", cst.And: "and", cst.Or: "or",
}
_TWO_WORDS: dict[type, tuple[str, str]] = {cst.IsNot: ("is", "not"), cst.NotIn: ("not", "in")}
_UNARY: dict[type, str] = {cst.Not: "not", cst.Minus: "-", cst.Plus: "+", cst.BitInvert: "~"}


def _operator(node: cst.CSTNode) -> str:
    kind = type(node)
    if kind in _UNARY:
        return _UNARY[kind] + _space(node.whitespace_after)  # type: ignore[attr-defined]
    if kind is cst.NotEqual:
        return _around(node, kind, node.value)  # type: ignore[attr-defined]
    if kind in _OPERATORS:
        return _around(node, kind, _OPERATORS[kind])
    if kind in _TWO_WORDS:
        first, second = _TWO_WORDS[kind]
        return (f"{_space(node.whitespace_before)}{first}"  # type: ignore[attr-defined]
                f"{_space(node.whitespace_between)}{second}"  # type: ignore[attr-defined]
                f"{_space(node.whitespace_after)}")  # type: ignore[attr-defined]
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
