"""The naive approach, for comparison: a LibCST transformer with QualifiedNameProvider making
the same device and step rewrites (xla_device() -> torch.device("neuron"), mark_step()
deleted) over the given files. Run as a script: python naive_baseline.py FILE..."""

from __future__ import annotations

import sys

import libcst as cst
from libcst.metadata import MetadataWrapper, QualifiedNameProvider

DEVICE = "torch_xla.core.xla_model.xla_device"
STEP = "torch_xla.core.xla_model.mark_step"


class Rewrite(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def _names(self, node: cst.CSTNode) -> set[str]:
        return {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if DEVICE in self._names(original.func):
            return cst.parse_expression('torch.device("neuron")')
        return updated

    def leave_Expr(self, original: cst.Expr, updated: cst.Expr):  # type: ignore[no-untyped-def]
        if isinstance(original.value, cst.Call) and STEP in self._names(original.value.func):
            return cst.RemovalSentinel.REMOVE
        return updated


def main(paths: list[str]) -> None:
    for path in paths:
        with open(path, "rb") as handle:
            try:
                module = cst.parse_module(handle.read())
            except cst.ParserSyntaxError:
                continue  # public checkouts hold a few files no parser reads
        MetadataWrapper(module).visit(Rewrite()).bytes


if __name__ == "__main__":
    main(sys.argv[1:])
