"""Reading a call's arguments and building new calls, arguments and string literals: the
node-level work most rewrites share, kept here so that each rule says only what it changes."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import libcst as cst

from neuron_migrate.syntax.names import string_literal
from neuron_migrate.syntax.walk import transform, walk


def positional(args: Sequence[cst.Arg], index: int) -> cst.Arg | None:
    plain = [a for a in args if a.keyword is None and not a.star]
    return plain[index] if index < len(plain) else None


def keyword(args: Sequence[cst.Arg], name: str) -> cst.Arg | None:
    for arg in args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def argument(args: Sequence[cst.Arg], index: int, name: str) -> cst.Arg | None:
    """The argument for a parameter that can be passed by position or by keyword."""
    return keyword(args, name) or positional(args, index)


def has_star_args(args: Sequence[cst.Arg]) -> bool:
    return any(a.star for a in args)


def string_value(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        return string_literal(node)
    return None


_SLOT = "__neuron_migrate_"  # a template's `{name}` parses as the Name `__neuron_migrate_name__`


@functools.lru_cache(maxsize=None)
def _template(source: str) -> tuple[cst.BaseExpression, frozenset[int]]:
    """The parsed template, and the ids of its placeholders and the nodes holding them (the
    only ones a fill has to visit)."""
    parsed = cst.parse_expression(source)
    spine = _Spine()
    walk(parsed, spine)
    return parsed, frozenset(spine.found)


class _Spine:
    def __init__(self) -> None:
        self.open: list[int] = []
        self.found: set[int] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.open.append(id(node))
        if type(node) is cst.Name and node.value.startswith(_SLOT):  # type: ignore[attr-defined]
            self.found.update(self.open)
        return True

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> None:
        self.open.pop()


class _Fill:
    def __init__(self, values: dict[str, cst.BaseExpression], spine: frozenset[int]) -> None:
        self.values = values
        self.spine = spine

    def on_visit(self, node: cst.CSTNode) -> bool:
        return id(node) in self.spine

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
        if type(updated) is cst.Name:
            return self.values.get(updated.value, updated)
        return updated


def template(source: str, **values: cst.BaseExpression) -> cst.BaseExpression:
    """`source` with each `{name}` replaced by a node; the template is parsed once.

    Like libcst.helpers.parse_template_expression, without a parse per call."""
    names = {key: f"{_SLOT}{key}__" for key in values}
    parsed, spine = _template(source.format(**names))
    return transform(parsed, _Fill({names[k]: v for k, v in values.items()}, spine))


def bool_value(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def with_string(node: cst.SimpleString, value: str) -> cst.SimpleString:
    """The same literal (prefix and quotes kept) holding another value."""
    return node.with_changes(value=f"{node.prefix}{node.quote}{value}{node.quote}")


def string(value: str) -> cst.SimpleString:
    return cst.SimpleString(f'"{value}"')


def drop_args(args: Sequence[cst.Arg], drop: set[int]) -> list[cst.Arg]:
    """Remove arguments, giving the new last argument the old last one's comma so that
    trailing commas and one-argument-per-line layouts survive."""
    kept = [a for i, a in enumerate(args) if i not in drop]
    if kept and kept[-1] is not args[-1]:
        kept[-1] = kept[-1].with_changes(comma=args[-1].comma)
    return kept


def keep_args(args: Sequence[cst.Arg], keep: Sequence[cst.Arg]) -> list[cst.Arg]:
    """The arguments in `keep`, as they were written (keywords, layout, comments); the new
    last one ends as the old last one did, unless a comment follows its own comma."""
    kept = [a for a in args if any(a is k for k in keep)]
    if not kept or kept[-1] is args[-1]:
        return kept
    own, last = kept[-1].comma, args[-1].comma
    if "#" not in _text(own):
        return [*kept[:-1], kept[-1].with_changes(comma=last)]
    if isinstance(own, cst.Comma) and isinstance(own.whitespace_after, cst.ParenthesizedWhitespace) \
            and isinstance(last, cst.Comma) and \
            isinstance(last.whitespace_after, cst.ParenthesizedWhitespace):
        # the comment stays; the closing parenthesis keeps the indentation it had
        own = own.with_changes(whitespace_after=own.whitespace_after.with_changes(
            last_line=last.whitespace_after.last_line))
    return [*kept[:-1], kept[-1].with_changes(comma=own)]


def _text(node: cst.CSTNode | cst.MaybeSentinel) -> str:
    return cst.Module([]).code_for_node(node) if isinstance(node, cst.CSTNode) else ""


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    """`name=value`, written the way PEP 8 writes keyword arguments."""
    return cst.Arg(value, keyword=cst.Name(name),
                   equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))


def append_arg(args: Sequence[cst.Arg], new: cst.Arg) -> list[cst.Arg]:
    """Add an argument at the end, keeping a trailing comma (and its layout) if there was one."""
    if not args:
        return [new]
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        after = last.comma.whitespace_after
        before = args[-2].comma if len(args) > 1 else None
        if isinstance(after, cst.ParenthesizedWhitespace) and isinstance(before, cst.Comma) \
                and isinstance(before.whitespace_after, cst.ParenthesizedWhitespace):
            # one argument a line: the new one goes on a line of its own, indented like the
            # others, and a comment after the last argument stays on its line
            between = after.with_changes(last_line=before.whitespace_after.last_line)
            closing = after.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
            return [*args[:-1], last.with_changes(comma=last.comma.with_changes(
                whitespace_after=between)), new.with_changes(comma=cst.Comma(
                    whitespace_after=closing))]
        return [*args, new.with_changes(comma=last.comma)]
    return [*args[:-1], last.with_changes(comma=cst.Comma(
        whitespace_after=cst.SimpleWhitespace(" "))), new]


def relaid(original: Sequence[cst.Arg], args: list[cst.Arg]) -> list[cst.Arg]:
    """`args`, kept, changed, added or dropped from `original`, separated as `original`
    separated its arguments (a multi-line call stays one argument a line) and ending as it
    ended (with or without a trailing comma)."""
    if not args:
        return args
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    sep = next((a.comma for a in original[:-1] if isinstance(a.comma, cst.Comma)), space)
    last = original[-1] if original else None
    trailing = last.comma if last is not None else cst.MaybeSentinel.DEFAULT
    middle = [a.with_changes(comma=sep) if not isinstance(a.comma, cst.Comma) or a is last
              else a for a in args[:-1]]
    return [*middle, args[-1].with_changes(comma=trailing)]


def call(func: cst.BaseExpression, *args: cst.BaseExpression) -> cst.Call:
    return cst.Call(func=func, args=[cst.Arg(a) for a in args])
