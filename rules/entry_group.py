"""NM221: the process group PJRT never asked for. A script that used XLA collectives or
ordinals without creating a process group gets one at its entry."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from neuron_migrate.ruleapi import Example, Insert, Kind, Review, Rule, Site
from neuron_migrate.rules.collectives import BroadcastMasterParam, Rendezvous, TensorCollectives
from neuron_migrate.rules.frameworks import group_owner
from neuron_migrate.rules.launch import D_DIST, LAUNCH, SPAWN, called_names, create_group
from neuron_migrate.rules.one_process import one_process
from neuron_migrate.rules.optimizer import OptimizerStep, ReduceGradients
from neuron_migrate.rules.ranks import MasterOnly, RankAndWorldSize
from neuron_migrate.rules.saving import Save

_INIT = frozenset({"torch.distributed.init_process_group",
                   "torch.distributed.distributed_c10d.init_process_group"})
# the XLA calls whose native forms run in a process group, or answer for one
_WORLD = frozenset().union(*(rule.calls for rule in (
    Rendezvous, TensorCollectives, BroadcastMasterParam, OptimizerStep, ReduceGradients,
    RankAndWorldSize, MasterOnly, Save)))


@dataclass(frozen=True)
class GroupFacts:
    """What the whole file says about its process group."""

    world_calls: tuple[str, ...]  # the XLA collectives and ordinals it calls, sorted
    launches: bool  # an `xmp.spawn` / `torch_xla.launch` (NM220 creates the group there)
    creates: bool  # an `init_process_group` of its own, whatever its backend


def group_facts(tree: ast.Module, calls: Sequence[tuple[ast.Call, int]] | None = None
                ) -> GroupFacts:
    """From the engine's own parse of the file (`site.module_tree`) and the calls its
    analysis found (`site.module_calls()`): no second parse, no second walk."""
    called = called_names(tree, calls, _ASKED)
    return GroupFacts(tuple(sorted(called & _WORLD)), bool(called & {SPAWN, *LAUNCH}),
                      bool(called & _INIT))


_ASKED = _WORLD | _INIT | {SPAWN, *LAUNCH}


class EntryProcessGroup(Rule):
    id = "NM221"
    name = "entry-process-group"
    kind = Kind.FIX
    summary = ("a script that used XLA collectives or ordinals without creating a process "
               "group creates one at its entry")
    explanation = """\
What it does: in a script that calls XLA collectives or ordinals (`xm.optimizer_step`,
`xm.reduce_gradients`, `xm.all_reduce`, `xm.all_gather`, `xm.reduce_scatter`,
`xm.rendezvous`, `xm.mesh_reduce`, `xm.broadcast_master_param`, `xm.save`, `xm.get_ordinal`,
`xm.xrt_world_size`, `xr.world_size`, `xm.is_master_ordinal`, `xm.master_print`, ...) and
never creates a process group or launches workers itself, the `if __name__ == "__main__":`
block gets `if int(os.environ.get("WORLD_SIZE", 1)) > 1 and not dist.is_initialized():
dist.init_process_group("neuron")`, the same statement NM220 writes for `xmp.spawn`. It goes
before the first statement of the block that runs the module's own code (calls a function or
class it defines), puts something on a device or holds migrated code; argument parsing and
environment settings before that statement still run first.

Why: a script torchrun started under PJRT was one process of a world that torch_xla created
without being asked: its collectives and ordinals worked without `init_process_group`. The
native collectives run in a torch.distributed process group, and the neuron backend gives
each process its NeuronCore when that group is created. Without it, the migrated helpers stop
with an error when WORLD_SIZE > 1 rather than let each process train alone.

What differs: nothing in a single process (no WORLD_SIZE, or 1): no group is created, as
before. Under torchrun the group exists from the entry on, with torchrun's env:// rendezvous.
A script whose only such call is `xm.save` and that provably runs as one process (NM230
then writes a plain `torch.save`) gets no group. A file that calls `init_process_group`
itself, or launches its workers (`xmp.spawn`, `torch_xla.launch`: NM220), keeps its own
arrangement. So does a script that hands its
training to a framework that creates the process group when it starts (Lightning's `Trainer`
or `Fabric`, Accelerate, Hugging Face's `Trainer`, Ray Train's trainers): its entry is
reported instead, since a group created ahead of the framework's would change how it starts. A module without a `__main__` block
(a library, or a module a launcher imports) is not changed: the group is its caller's to
create, and the helpers say so if it is missing; a launcher that imports it gets the group
from NM220 or from this rule. This rule sees one file: if the script's group was created by a
function of another module it calls, that function's `init_process_group("xla")` now runs
only `if not dist.is_initialized()` (NM201), so it keeps the group created here; a call with
another backend (`"gloo"`, `"nccl"`) would raise: guard it the same way by hand."""
    doc_url = D_DIST
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\n\n"
               "def train():\n    xm.rendezvous(\"ready\")\n\n\n"
               "if __name__ == \"__main__\":\n    train()\n",
        after="import os\n\nimport torch\n\n\n"
              "def train():\n    if torch.distributed.is_initialized():\n"
              "        torch.distributed.barrier()\n\n\n"
              "if __name__ == \"__main__\":\n"
              "    if int(os.environ.get(\"WORLD_SIZE\", 1)) > 1 and not "
              "torch.distributed.is_initialized():\n"
              "        torch.distributed.init_process_group(\"neuron\")\n    train()\n",
    )
    emits = ("torch.distributed.init_process_group", "torch.distributed.is_initialized")

    def on_entry(self, site: Site) -> Insert | Review | None:
        if site.path.endswith(".ipynb"):
            return None  # a kernel is one process
        facts = group_facts(site.module_tree, site.module_calls())
        if not facts.world_calls or facts.launches or facts.creates:
            return None
        if set(facts.world_calls) <= Save.calls and one_process(site):
            return None  # NM230 writes a plain torch.save there: nothing needs a group
        used = ", ".join(f"`{name.rsplit('.', 1)[-1]}`" for name in facts.world_calls[:3])
        more = ", ..." if len(facts.world_calls) > 3 else ""
        owner = group_owner(site.module_tree, site.module_calls())
        if owner is not None:
            return Review(f"no `init_process_group` inserted at this entry: `{owner}` creates "
                          "the process group itself when it starts, and one created ahead of "
                          "it would change how it starts; the XLA calls of this file "
                          f"({used}{more}) ran in the world PJRT created implicitly, and their "
                          "native forms need that group: check that they run only after the "
                          "framework has set it up (inside its training code), and that it "
                          "creates it with the `neuron` backend")
        group = create_group(site)
        if group is None:
            return Review("this script used XLA collectives or ordinals, which need a process "
                          "group natively, but `os` or `torch` means something else here: "
                          "create it with torch.distributed.init_process_group('neuron') "
                          "when WORLD_SIZE > 1, before the training code runs")
        return Insert((group,), "`init_process_group(\"neuron\")` inserted before this "
                      "statement, the script's entry (it runs when torchrun starts several "
                      "processes and no group exists yet): the XLA calls of this file "
                      f"({used}{more}) ran in the world PJRT created implicitly; their native "
                      "forms need a torch.distributed process group, created before the "
                      "training code puts anything on the device")

RULES: tuple[type[Rule], ...] = (EntryProcessGroup,)
