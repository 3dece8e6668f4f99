"""A module's code generated without position bookkeeping.

LibCST's code generation serves its position metadata as well as plain text, and pays for it
on every node: `_codegen` calls the state's `before_codegen` and `after_codegen` hooks around
each node's `_codegen_impl`, most nodes open a `record_syntactic_position` context, every
parenthesized expression opens a generator-based context (`_parenthesize`), and every token
goes through a method call. A plain `Module.bytes` does all of that for nothing, about a
million times per run. While `module_bytes` generates, those steps are short-circuited:

- each node class's `_codegen` is its own `_codegen_impl` (the hooks do nothing on this
  state, so skipping them changes no token);
- `_parenthesize` is a small class-based context writing the same `(` and `)` nodes at the
  same points (the generator's code after its `yield` runs only when the body did not raise,
  and so does `__exit__` here), or the shared do-nothing context when there are none;
- the state's `add_token` and indentation methods are the bound list methods they wrap.

The patches are installed for the one call and removed after it, so LibCST's own
`Module.code` and its metadata providers (which rely on the hooks) see LibCST unchanged. The
same tokens, in the same order: the same text.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import libcst as cst
from libcst._nodes.expression import _BaseParenthesizedNode
from libcst._nodes.internal import CodegenState

_NOTHING = contextlib.nullcontext()


class _PlainState(CodegenState):
    def __init__(self, default_indent: str, default_newline: str) -> None:
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        tokens, indents = self.tokens, self.indent_tokens
        self.add_token = tokens.append  # type: ignore[method-assign]
        self.add_indent_tokens = functools.partial(tokens.extend, indents)  # type: ignore[method-assign]
        self.increase_indent = indents.append  # type: ignore[method-assign]
        self.decrease_indent = indents.pop  # type: ignore[method-assign,assignment]

    def record_syntactic_position(self, node: cst.CSTNode, **where: Any
                                  ) -> contextlib.nullcontext[None]:  # type: ignore[override]
        return _NOTHING


class _Parentheses:
    """What `_BaseParenthesizedNode._parenthesize` does, without a generator."""

    __slots__ = ("node", "state")

    def __init__(self, node: _BaseParenthesizedNode, state: CodegenState) -> None:
        self.node, self.state = node, state

    def __enter__(self) -> None:
        for lpar in self.node.lpar:
            lpar._codegen(self.state)

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if kind is None:
            for rpar in self.node.rpar:
                rpar._codegen(self.state)


def _parenthesize(node: _BaseParenthesizedNode, state: CodegenState
                  ) -> _Parentheses | contextlib.nullcontext[None]:
    """Most expressions have no parentheses of their own, and nothing to write around them."""
    if not node.lpar and not node.rpar:
        return _NOTHING
    return _Parentheses(node, state)


@functools.cache
def _node_classes() -> tuple[type[cst.CSTNode], ...]:
    """Every subclass of CSTNode that inherits `_codegen`, each once (a class with two node
    bases is listed by both). Listed once: a node class defined later keeps LibCST's
    `_codegen`, which generates the same text, only slower."""
    found: dict[type[cst.CSTNode], None] = {}
    pending = [cst.CSTNode]
    while pending:
        cls = pending.pop()
        if cls not in found:
            found[cls] = None
            pending.extend(cls.__subclasses__())
    return tuple(cls for cls in found if "_codegen" not in cls.__dict__)


@contextlib.contextmanager
def _plain_codegen() -> Iterator[None]:
    """LibCST's node classes with the shortcuts above, for the duration of one generation."""
    classes = _node_classes()
    parenthesize = _BaseParenthesizedNode.__dict__["_parenthesize"]
    for cls in classes:
        cls._codegen = cls._codegen_impl  # type: ignore[method-assign]
    _BaseParenthesizedNode._parenthesize = _parenthesize  # type: ignore[assignment]
    try:
        yield
    finally:
        _BaseParenthesizedNode._parenthesize = parenthesize  # type: ignore[method-assign]
        for cls in classes:
            del cls._codegen


def module_bytes(module: cst.Module) -> bytes:
    """What `module.bytes` returns."""
    state = _PlainState(module.default_indent, module.default_newline)
    with _plain_codegen():
        module._codegen(state)
    return "".join(state.tokens).encode(module.encoding)
