"""What the sharding rules ask about the code around a site (stdlib `ast`, no rewriting).

A method call (`opt.state_dict()`, `model.clip_grad_norm_(1.0)`) means something else on the
native objects only when the object is one that XLA's FSDP or ZeRO-1 made; and NxD's ZeRO-1
optimizer shards over all processes only when nothing else divides them.
"""

from __future__ import annotations

import ast
import re

import libcst as cst

from neuron_migrate.ruleapi import Site, code
from neuron_migrate.ruleapi.analysis import ast_dotted, reaching

_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_NXD_LAYOUT = "initialize_model_parallel"
XLA_ZERO_MODULE = "torch_xla.distributed.zero_redundancy_optimizer"
XLA_ZERO = frozenset({f"{XLA_ZERO_MODULE}.ZeroRedundancyOptimizer"})
NXD_ZERO = frozenset({
    "neuronx_distributed.optimizer.NeuronZero1Optimizer",
    "neuronx_distributed.optimizer.zero_redundancy_optimizer.NeuronZero1Optimizer",
})
ZERO_CLASSES = XLA_ZERO | NXD_ZERO
# What XLA's ZeRO-1 becomes, and the native class users may already have written; the text
# check in module_mentions also finds the helper (`_NeuronZeroRedundancyOptimizer(`).
NATIVE_ZERO = frozenset({"torch.distributed.optim.ZeroRedundancyOptimizer",
                          "torch.distributed.optim.zero_redundancy_optimizer."
                          "ZeroRedundancyOptimizer"})


def bound_to(expr: cst.BaseExpression, site: Site, classes: frozenset[str]) -> bool:
    """Whether some assignment that can reach this site gives `expr` (a name or `self.x`) a
    value made by calling one of `classes`: then its methods are those of the XLA object, and
    a path where it is something else does not make the advice wrong, only unneeded."""
    if not site.module_mentions(classes):
        return False
    name = code(expr)
    if not _DOTTED.fullmatch(name):
        return False
    for definition in reaching(site.module_tree, site.statement, name):
        value = definition.value
        if isinstance(value, ast.Call) and _calls(value, site, classes):
            return True
    return False


def _calls(call: ast.Call, site: Site, classes: frozenset[str]) -> bool:
    dotted = ast_dotted(call.func)
    return dotted is not None and site.qualname_of(cst.parse_expression(dotted)) in classes


def proven_pure_data_parallel(site: Site) -> bool:
    """Whether NxD's process layout in this file is data parallel only: it is set up here
    (`parallel_state.initialize_model_parallel`) and every size it is given is a literal 1.
    NxD's ZeRO-1 shards over the data-parallel ranks; only then are they all processes."""
    layouts = [call for call, _ in site.module_calls()
               if (ast_dotted(call.func) or "").rsplit(".", 1)[-1] == _NXD_LAYOUT]
    return bool(layouts) and all(_sizes_one(call) for call in layouts)


def _sizes_one(call: ast.Call) -> bool:
    if any(isinstance(a, ast.Starred) for a in call.args) or \
            any(k.arg is None for k in call.keywords):
        return False
    values = [*call.args, *(k.value for k in call.keywords if k.arg.endswith("_size"))]
    return all(isinstance(v, ast.Constant) and v.value == 1 for v in values)
