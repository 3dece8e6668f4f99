"""A module's code generated without position bookkeeping.

LibCST's code generation opens a `record_syntactic_position` context around most nodes it
writes, for the position metadata provider; a plain `Module.bytes` opens a generator-based
context manager that does nothing, hundreds of thousands of times per run. The state here
hands out one shared do-nothing context instead: the same tokens, the same text.
"""

from __future__ import annotations

import contextlib
from typing import Any

import libcst as cst
from libcst._nodes.internal import CodegenState

_NOTHING = contextlib.nullcontext()


class _PlainState(CodegenState):
    def record_syntactic_position(self, node: cst.CSTNode, **where: Any
                                  ) -> contextlib.nullcontext[None]:  # type: ignore[override]
        return _NOTHING


def module_bytes(module: cst.Module) -> bytes:
    """What `module.bytes` returns."""
    state = _PlainState(default_indent=module.default_indent,
                        default_newline=module.default_newline)
    module._codegen(state)
    return "".join(state.tokens).encode(module.encoding)
