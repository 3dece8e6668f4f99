"""NM240, NM245: NeuronX Distributed's process layout (`parallel_state`) becomes a DeviceMesh.

NxD laid the processes out as a grid (pipeline, data parallel, tensor parallel; tensor
parallel contiguous) and answered rank and size questions from module globals. The native
form is a DeviceMesh with named dimensions over the `neuron` device; the answers read it.
Pipeline, expert and context parallelism have no mechanical native form and are reported.
"""

from __future__ import annotations

import ast

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Replace, Review, Rule, Site, argument,
                                    code, has_star_args, keep_args, template)
from neuron_migrate.rules.emitted_helpers import defined
from neuron_migrate.rules.ranks import global_rank

D_MESH = "https://docs.pytorch.org/docs/stable/distributed.html#torch.distributed.device_mesh.init_device_mesh"
D_DIST = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html"
D_RANDOM = "https://docs.pytorch.org/docs/stable/distributed.tensor.html#random-operations"

PS = "neuronx_distributed.parallel_layers.parallel_state"


def qualnames(module: str, *names: str) -> frozenset[str]:
    """Each name under its defining module and, for `parallel_layers.<module>`, the package."""
    found = {f"{module}.{name}" for name in names}
    if module.startswith("neuronx_distributed.parallel_layers."):
        found |= {f"neuronx_distributed.parallel_layers.{name}" for name in names}
    return frozenset(found)


TENSOR_PARALLEL = frozenset({
    *(f"neuronx_distributed.parallel_layers{m}.{c}" for m in ("", ".layers")
      for c in ("ColumnParallelLinear", "RowParallelLinear", "ParallelEmbedding")),
    *(f"neuronx_distributed{m}.neuronx_distributed_config" for m in ("", ".trainer")),
    # the same file once migrated names the helpers instead (module_mentions also looks for
    # `name(` in the text), so that a second apply reports what the first did
    *(f"migrated.{helper}" for helper in ("_neuron_tensor_parallel", "_neuron_parallel_config",
                                          "_NeuronStridedColumns")),
})
"""Names whose presence in a file says its model is sharded with NxD's tensor parallelism:
its layers or its trainer API (whose model is built from them), not the layout alone."""
_LAYOUTS = ("initialize_model_parallel", "_neuron_init_mesh")
"""NxD's layout call, before and after the migration: with a tensor-parallel size other than
a literal 1, layers built in another module may be sharded."""


def may_shard(site: Site) -> bool:
    """Whether the file's model may hold DTensor parameters: NxD layers or its trainer API in
    the file, or a layout whose tensor-parallel size is not a literal 1 (its layers may be
    built elsewhere). Only then is xm.save's one-writer copy not provably the whole state."""
    if site.module_mentions(TENSOR_PARALLEL):
        return True
    for call, _ in site.module_calls():
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name not in _LAYOUTS:
            continue
        size = next((k.value for k in call.keywords
                     if k.arg == "tensor_model_parallel_size"), None)
        size = call.args[0] if size is None and call.args else size
        if call.keywords and any(k.arg is None for k in call.keywords):
            return True
        if size is not None and not (isinstance(size, ast.Constant) and size.value == 1):
            return True
    return False


# query → (mesh dimension, what of it)
_QUERIES = {
    "get_tensor_model_parallel_rank": ("tp", "rank"),
    "get_tensor_model_parallel_size": ("tp", "size"),
    "get_tensor_model_parallel_group": ("tp", "group"),
    "get_tensor_model_parallel_src_rank": ("tp", "src"),
    "get_data_parallel_rank": ("dp", "rank"),
    "get_data_parallel_size": ("dp", "size"),
    "get_data_parallel_group": ("dp", "group"),
    "get_data_parallel_src_rank": ("dp", "src"),
}
# pipeline, expert and context queries: the mesh has no such dimension unless someone adds
# one, so they read it with a default (size 1, rank 0); their groups have no native stand-in
_ABSENT = {
    "get_pipeline_model_parallel_rank": ("pp", "rank"),
    "get_pipeline_model_parallel_size": ("pp", "size"),
    "get_expert_model_parallel_rank": ("ep", "rank"),
    "get_expert_model_parallel_size": ("ep", "size"),
    "get_context_model_parallel_rank": ("cp", "rank"),
    "get_context_model_parallel_size": ("cp", "size"),
}
_FORMS = {
    "rank": '{mesh}().get_local_rank("{dim}")',
    "size": '{mesh}()["{dim}"].size()',
    "group": '{mesh}().get_group("{dim}")',
    "src": 'int({mesh}()["{dim}"].mesh[0])',
}
_REPLICA_GROUPS = ("get_tensor_model_parallel_replica_groups", "get_data_parallel_replica_groups",
                   "get_world_group")
_OTHER_PARALLELISM = {
    "pipeline": ("get_pipeline_model_parallel_rank", "get_pipeline_model_parallel_size",
                 "get_pipeline_model_parallel_group", "get_next_rank_group",
                 "get_prev_rank_group", "get_pipeline_model_parallel_next_rank",
                 "get_pipeline_model_parallel_prev_rank"),
    "expert": ("get_expert_model_parallel_rank", "get_expert_model_parallel_size",
               "get_expert_model_parallel_group", "get_expert_data_parallel_rank",
               "get_expert_data_parallel_size", "get_expert_data_parallel_group"),
    "context": ("get_context_model_parallel_rank", "get_context_model_parallel_size",
                "get_context_model_parallel_group"),
}
_NATIVE_FOR = {
    "pipeline": "torch.distributed.pipelining (PipelineStage and a schedule such as "
                "ScheduleGPipe or Schedule1F1B) on a 'pp' mesh dimension",
    "expert": "an expert-parallel mesh dimension with DTensor placements or all_to_all "
              "dispatch written with torch.distributed",
    "context": "torch.distributed.tensor.experimental.context_parallel on a 'cp' mesh dimension",
}
_INIT_SIZES = ("pipeline_model_parallel_size", "context_parallel_size",
               "expert_model_parallel_size")
_INIT_OTHERS = ("skip_collective_init", "lnc_size", "mesh_only")


_REPLICA_LISTS = {"dp": qualnames(PS, "get_data_parallel_replica_groups"),
                  "tp": qualnames(PS, "get_tensor_model_parallel_replica_groups")}
_GROUP_AS_LIST = {"dp": qualnames(PS, "get_data_parallel_group"),
                  "tp": qualnames(PS, "get_tensor_model_parallel_group")}


def replica_dimension(groups: cst.BaseExpression, site: Site) -> str | None:
    """The mesh dimension ("dp" or "tp") whose groups an XLA `groups=` argument lists, when
    it is NxD's replica-group query (`get_data_parallel_replica_groups()`,
    `get_tensor_model_parallel_group(as_list=True)`, ...); None for anything else."""
    if not isinstance(groups, cst.Call):
        return None
    qualname = site.qualname_of(groups.func)
    as_list = argument(groups.args, 0, "as_list")
    for dim in ("dp", "tp"):
        if qualname in _REPLICA_LISTS[dim] and not groups.args:
            return dim
        if qualname in _GROUP_AS_LIST[dim] and len(groups.args) == 1 and \
                as_list is not None and code(as_list.value) == "True":
            return dim
    return None


def mesh_group(dim: str, site: Site) -> cst.BaseExpression:
    """The expression for one dimension's process group of the migrated layout."""
    return template(f'{{m}}().get_group("{dim}")', m=site.helper("_neuron_mesh"))


_ZERO1 = {"sharding_groups": ("dp",), "grad_norm_groups": ("tp",)}
_TAKES_GROUPS = {
    "torch_xla.core.xla_model.reduce_gradients": {"groups": ("dp",)},
    "torch_xla.core.xla_model.optimizer_step": {"groups": ("dp",)},
    **{f"torch_xla.core.xla_model.{name}": {"groups": ("dp", "tp")}
       for name in ("all_reduce", "all_gather", "reduce_scatter")},
    **{f"neuronx_distributed.optimizer{module}.NeuronZero1Optimizer": _ZERO1
       for module in ("", ".zero_redundancy_optimizer")},
}
"""Calls whose replica-group arguments the migration turns into the mesh dimension's group
(NM207, NM210, NM211) or makes unnecessary (NM706: NxD's ZeRO-1 over its own layout)."""


def _replaced_with_its_call(node: cst.Call, site: Site) -> bool:
    """Whether this replica-groups query is an argument that the call it feeds no longer
    needs as a list of groups after the migration."""
    holder = site.argument_of
    dim = replica_dimension(node, site)
    if holder is None or dim is None:
        return False
    call, arg = holder
    takes = _TAKES_GROUPS.get(site.qualname_of(call.func) or "", {})
    return arg.keyword is not None and dim in takes.get(arg.keyword.value, ())


def _collective_on_model_tensor(site: Site) -> str | None:
    """The torch.distributed call this group query is the group of, when its tensor may be a
    model's DTensor: a file with NxD's layers or trainer API, or a tensor named as a
    gradient or parameter. None otherwise."""
    holder = site.argument_of
    if holder is None:
        return None
    call, _ = holder
    if not (site.qualname_of(call.func) or "").startswith("torch.distributed."):
        return None
    tensor = argument(call.args, 0, "tensor")
    if tensor is None:
        return None
    named = any(word in code(tensor.value) for word in ("grad", "param", "weight", ".data"))
    if not named and not site.module_mentions(TENSOR_PARALLEL):
        return None
    return code(call.func) + f"({code(tensor.value)}, ...)"


class ProcessLayout(Rule):
    id = "NM240"
    name = "nxd-process-layout"
    kind = Kind.FIX
    summary = ("NxD's `parallel_state` becomes a DeviceMesh (\"dp\", \"tp\") over the neuron "
               "device; rank, size and group queries read it")
    explanation = """\
What it does: `parallel_state.initialize_model_parallel(tensor_model_parallel_size=T)`
becomes `_neuron_init_mesh(T)`, a helper that creates the process group if needed and
`init_device_mesh("neuron", (world // T, T), mesh_dim_names=("dp", "tp"))`: data-parallel
replicas of tensor-parallel groups, the tensor-parallel ranks contiguous, as NxD laid them
out. The queries read that mesh: `get_tensor_model_parallel_rank()` becomes
`_neuron_mesh().get_local_rank("tp")`, `get_tensor_model_parallel_size()`
`_neuron_mesh()["tp"].size()`, `get_tensor_model_parallel_group()`
`_neuron_mesh().get_group("tp")`, the `*_src_rank()` queries the first global rank of the
group, and likewise for the data-parallel ones with "dp". `model_parallel_is_initialized()`
becomes `_neuron_mesh(required=False) is not None`, `destroy_model_parallel()` forgets the
mesh, `is_global_rank_zero()` compares the global rank with 0 and `rmsg(msg)` prefixes the
message with the ranks as NxD did.

Why: TorchNeuron runs PyTorch's own parallelism (DTensor, FSDP2, DDP) on the `neuron`
torch.distributed backend; NxD, which kept this layout, is XLA-based and ended with its
training APIs. A model module asks the tensor-parallel size while the training script set
it, so the mesh is shared by every migrated module of the program: the helpers keep it in
one registry module (`sys.modules["_neuron_parallel_layout"]`), with no import of
neuron-migrate.

What differs: nothing for tensor and data parallelism. A pipeline, context or expert
parallel size other than 1 (or one not written as a literal), the `as_list=True` replica
group lists that fed XLA collectives, and the pipeline, expert and context groups are
reported with the native construct to use (torch.distributed.pipelining, a mesh dimension
of their own). Their size and rank queries read the mesh too (`_neuron_mesh_size("pp")`):
a dimension it does not have has size 1 and rank 0, which is the migrated layout's answer,
and stays right if you add the dimension. NxD's alternative ring orders for Trn2 (`lnc_size`) are a placement detail
the native backend decides."""
    doc_url = D_MESH
    example = Example(
        before="from neuronx_distributed.parallel_layers import parallel_state\n\n"
               "parallel_state.initialize_model_parallel(tensor_model_parallel_size=2)\n"
               "heads = 16 // parallel_state.get_tensor_model_parallel_size()\n",
        after="import torch\n\n\n" + defined("_neuron_init_mesh") + "\n\n"
              + defined("_neuron_mesh").split("\n\n\n")[-1] + "\n\n"
              "_neuron_init_mesh(tensor_model_parallel_size=2)\n"
              "heads = 16 // _neuron_mesh()[\"tp\"].size()\n",
    )
    calls = (qualnames(PS, "initialize_model_parallel") | qualnames(PS, *_QUERIES)
             | qualnames(PS, "model_parallel_is_initialized", "destroy_model_parallel",
                         "is_global_rank_zero", "rmsg", *_REPLICA_GROUPS)
             | qualnames(PS, *(q for qs in _OTHER_PARALLELISM.values() for q in qs)))
    emits = ("torch.distributed.device_mesh.init_device_mesh",
             "torch.distributed.device_mesh.DeviceMesh.get_local_rank",
             "torch.distributed.device_mesh.DeviceMesh.get_group",
             "torch.distributed.device_mesh.DeviceMesh.size",
             "torch.distributed.init_process_group", "torch.distributed.get_world_size")

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        name = (site.qualname or "").rsplit(".", 1)[-1]
        if has_star_args(node.args):
            return Review(f"`{code(node)}`: unpacked arguments; rewrite it by hand with "
                          "the DeviceMesh")
        if _replaced_with_its_call(node, site):
            return None  # the call it feeds runs over the mesh dimension's group instead
        if name == "initialize_model_parallel":
            return self._initialize(node, site)
        if name in _QUERIES:
            return self._query(node, site, *_QUERIES[name])
        if name in _ABSENT and not node.args:
            return self._absent(node, site, *_ABSENT[name])
        for kind, names in _OTHER_PARALLELISM.items():
            if name in names:
                return Review(f"`{code(node)}`: {kind} parallelism has no mechanical native "
                              f"form; use {_NATIVE_FOR[kind]}")
        if name in _REPLICA_GROUPS:
            return Review(f"`{code(node)}`: lists of replica groups fed XLA collectives; pass "
                          "`group=_neuron_mesh().get_group(\"dp\")` (or \"tp\") to the "
                          "torch.distributed collective instead")
        if name == "rmsg" and len(node.args) == 1:
            new = node.with_changes(func=site.helper("_neuron_rank_message"))
            return Replace(new, f"`{code(node)}` → `{code(new)}`: the same prefix, read from "
                           "the mesh")
        if name == "model_parallel_is_initialized":
            new = template('{m}(required=False) is not None', m=site.helper("_neuron_mesh"))
        elif name == "destroy_model_parallel":
            new = cst.Call(site.helper("_neuron_destroy_mesh"))
        else:
            rank = global_rank(site)
            if rank is None:
                return Review(f"`{code(node)}`: `torch` or `os` means something else here")
            rank = rank.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            new = template("{r} == 0", r=rank)
        new = site.parenthesized(new, comparison=True)
        return Replace(new, f"`{code(node)}` → `{code(new)}`")

    def _initialize(self, node: cst.Call, site: Site) -> Outcome:
        for index, size in enumerate(_INIT_SIZES, start=1):
            arg = argument(node.args, index, size)
            if arg is not None and code(arg.value) != "1":
                kind = size.split("_")[0]
                kind = "context" if kind == "context" else kind
                return Review(f"`{code(node)}`: {size} is not 1, and {kind} parallelism has "
                              f"no mechanical native form; use {_NATIVE_FOR[kind]}, with a "
                              "DeviceMesh of one dimension per kind of parallelism")
        for index, other in enumerate(_INIT_OTHERS, start=len(_INIT_SIZES) + 1):
            arg = argument(node.args, index, other)
            if arg is not None and other != "lnc_size" and code(arg.value) != "False":
                return Review(f"`{code(node)}`: `{other}` has no native counterpart; create "
                              "the mesh with init_device_mesh by hand")
        tp = argument(node.args, 0, "tensor_model_parallel_size")
        new = node.with_changes(func=site.helper("_neuron_init_mesh"),
                                args=keep_args(node.args, [tp] if tp is not None else []))
        return Replace(new, f"`{code(node)}` → `{code(new)}`: a (\"dp\", \"tp\") DeviceMesh "
                       "over the neuron device, laid out as NxD laid out its groups")

    def _absent(self, node: cst.Call, site: Site, dim: str, what: str) -> Outcome:
        helper = site.helper("_neuron_mesh_size" if what == "size" else "_neuron_mesh_rank")
        new = cst.Call(helper, [cst.Arg(cst.SimpleString(f'"{dim}"'))])
        answer = "1" if what == "size" else "0"
        return Replace(new, f"`{code(node)}` → `{code(new)}`: the mesh has no \"{dim}\" "
                       f"dimension unless you add one, so this reads {answer}")

    def _query(self, node: cst.Call, site: Site, dim: str, what: str) -> Outcome:
        as_list = argument(node.args, 0, "as_list")
        if as_list is not None and code(as_list.value) != "False":
            return Review(f"`{code(node)}`: lists of replica groups fed XLA collectives; pass "
                          f"`group=_neuron_mesh().get_group(\"{dim}\")` to the "
                          "torch.distributed collective instead")
        if node.args and as_list is None:
            return Review(f"`{code(node)}`: unexpected arguments; read the DeviceMesh by hand")
        mesh = site.helper("_neuron_mesh")
        new = template(_FORMS[what].format(mesh="{m}", dim=dim), m=mesh)
        collective = _collective_on_model_tensor(site) if what == "group" else None
        if collective is not None:
            return Replace(new, f"`{code(node)}` → `{code(new)}`; `{collective}`: a "
                           "gradient or parameter of a migrated tensor-parallel layer is a "
                           "DTensor (even at tensor-parallel size 1), on which a "
                           "torch.distributed collective raises NotImplementedError: pass "
                           "its local shard, `t.to_local()` (what NxD's layers held), or "
                           "average gradients with the mesh's group as NM210/NM211 write it",
                           kind=Kind.REVIEW)
        return Replace(new, f"`{code(node)}` → `{code(new)}`")


class ModelParallelSeed(Rule):
    id = "NM245"
    name = "nxd-model-parallel-seed"
    kind = Kind.FIX
    summary = "`model_parallel_xla_manual_seed(seed)` becomes `torch.manual_seed(seed)`"
    explanation = """\
What it does: NxD's `model_parallel_xla_manual_seed(seed)` (and
`parallel_layers.random.model_parallel_xla_manual_seed`) becomes `torch.manual_seed(seed)`.

Why: NxD seeded XLA's generator, plus a second tracked generator offset by the
tensor-parallel rank for dropout inside tensor-parallel regions. Natively, random operations
on sharded DTensors go through DTensor's own RNG tracker, which keeps the values of a
sharded tensor the same whatever the layout, provided every rank starts from the same seed.

What differs: dropout masks inside tensor-parallel regions are drawn by DTensor's tracker,
not by NxD's rank-offset generator: the same in distribution, not bit for bit. Dropout on
plain (local) tensors inside a tensor-parallel region draws the same mask on every rank."""
    doc_url = D_RANDOM
    example = Example(
        before="from neuronx_distributed.parallel_layers import random\n\n"
               "random.model_parallel_xla_manual_seed(42)\n",
        after="import torch\n\ntorch.manual_seed(42)\n",
    )
    calls = qualnames("neuronx_distributed.parallel_layers.random",
                      "model_parallel_xla_manual_seed")
    emits = ("torch.manual_seed",)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        seed = argument(node.args, 0, "seed")
        if seed is None or len(node.args) != 1 or has_star_args(node.args):
            return Review(f"`{code(node)}`: seed every rank alike with torch.manual_seed")
        manual_seed = site.ref("torch.manual_seed")
        if manual_seed is None:
            return Review(f"`{code(node)}`: `torch` means something else here")
        new = node.with_changes(func=manual_seed)
        return Replace(new, f"`{code(node)}` → `{code(new)}`: DTensor's RNG tracker keeps "
                       "sharded random values layout-independent")


RULES = (ProcessLayout, ModelParallelSeed)
