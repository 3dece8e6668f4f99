"""Reading LibCST nodes the way the `ast` analysis reads the same code: dotted names, string
values, and a signature that finds a node's `ast` twin. Shared by the engine, the site and
the rules."""

from __future__ import annotations

import libcst as cst

REFERENCES = frozenset({cst.Name, cst.Attribute})
SIGNED = frozenset({cst.Call, cst.Name, cst.Attribute, cst.SimpleString, cst.FormattedString,
                    cst.Comparison, cst.Param})  # the kinds `signature` knows


def string_literal(node: cst.SimpleString) -> str | None:
    """The value of a str literal. The common case (no prefix, no escapes) is sliced out;
    `evaluated_value` compiles the literal, which costs more than the whole rest of a visit."""
    raw = node.value
    quote = raw[-3:] if raw[-3:] in ('"""', "'''") and len(raw) >= 6 else raw[-1:]
    if raw[:1] in ("'", '"') and "\\" not in raw:
        return raw[len(quote):-len(quote)]
    value = node.evaluated_value
    return value if isinstance(value, str) else None


def dotted(node: cst.BaseExpression) -> str | None:
    parts: list[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)  # type: ignore[attr-defined]
    return ".".join(reversed(parts))


def attribute_chain(name: str, attrs: list[str]) -> cst.BaseExpression:
    """`name.attr1.attr2...` as a node: `dotted` the other way round."""
    expr: cst.BaseExpression = cst.Name(name)
    for part in attrs:
        expr = cst.Attribute(value=expr, attr=cst.Name(part))
    return expr


def signature(node: cst.CSTNode) -> tuple[str, str | None] | None:
    """A key that the same construct has in LibCST and in `ast`, to find its position."""
    kind = type(node)
    if kind is cst.Call:
        return ("call", dotted(node.func))  # type: ignore[attr-defined]
    if kind in REFERENCES:
        name = dotted(node)  # type: ignore[arg-type]
        return ("name", name) if name else None
    if kind is cst.SimpleString:
        value = string_literal(node)  # type: ignore[arg-type]
        return ("str", value) if value is not None else None
    if kind is cst.FormattedString:
        return ("fstr", None)
    if kind is cst.Comparison:
        return ("cmp", None)
    if kind is cst.Param:
        return ("param", node.name.value)  # type: ignore[attr-defined]
    return None
