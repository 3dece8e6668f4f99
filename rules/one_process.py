"""Whether a file provably runs as one process, so that a rewrite may leave out the
distributed machinery (writer choice, barrier, process group) an XLA call carried.

Conservative by construction: the file must be a script (a `__main__` block) or a notebook
(a kernel is one process); its text must hold no word of ranks, worlds, collectives,
launchers or frameworks that start workers (a comment saying `torchrun` counts too); and
nothing in its repository may start it with a multi-process launcher or import it
(`deps.script_mentions`). Anything else is "maybe several", and the full helpers stay.
"""

from __future__ import annotations

import ast
import re

from neuron_migrate.ruleapi import Site
from neuron_migrate.ruleapi.deps import maybe_several_processes
from neuron_migrate.rules.frameworks import group_owner

SEVERAL = re.compile(
    r"rank|world|distributed|spawn|launch|torchrun|nproc|ordinal|process_group|master|"
    r"reduce|gather|scatter|rendezvous|broadcast|barrier|optimizer_step|mpi|horovod|"
    r"accelerat|deepspeed|lightning|fabric|trainer|ray\.|multiprocessing|xla_dist|"
    r"parallel|shard|zeroredundancy|fsdp|ddp|pjrt|replica|collective|mesh|spmd")
"""Words of anything that runs in, starts, or asks about several processes."""

_SAVE_FLAGS = ("master_only", "global_master")


def one_process(site: Site) -> bool:
    """Whether the file of `site` runs as a single process wherever it is started from."""
    text = site.text.lower()
    for flag in _SAVE_FLAGS:  # xm.save's own keywords name a master, not several processes
        text = text.replace(flag, "")
    if SEVERAL.search(text):
        return False
    tree = site.module_tree
    if group_owner(tree, site.module_calls()) is not None:
        return False
    if site.path.endswith(".ipynb"):
        return True
    return _has_main_block(tree) and not maybe_several_processes(site.path)


def _has_main_block(tree: ast.Module) -> bool:
    for statement in tree.body:
        if isinstance(statement, ast.If) and isinstance(test := statement.test, ast.Compare) \
                and len(test.comparators) == 1 and isinstance(test.ops[0], ast.Eq):
            sides = {ast.unparse(test.left), ast.unparse(test.comparators[0])}
            if sides in ({"__name__", "'__main__'"}, {"__name__", '"__main__"'}):
                return True
    return False
