"""Plain-PyTorch helpers for code migrated from NeuronX Distributed's checkpoints
(rules/nxd_checkpoints.py).

NxD wrote one file per tensor-parallel rank, so a checkpoint loaded only at the layout that
saved it. After the migration, tensor-parallel weights are DTensors; the helpers write them
with `torch.distributed.checkpoint` (DCP), in which every rank writes its own shards and a
load reshards to whatever layout the loading job has. What NxD kept beside the tensors
(the scheduler's state, user content, the `done` marker of a complete tag) is kept the same
way. Merged into `rules.emitted_helpers.HELPERS`.
"""

from __future__ import annotations

import textwrap

from neuron_migrate.ruleapi import Helper, helper

CONVERT = ("convert such a checkpoint once on the XLA stack to a full state dict (NxD's "
           "checkpoint converter, --convert_to_full_state), then with "
           "torch.distributed.checkpoint.format_utils."
           "torch_save_to_dcp(full_state_dict_file, dcp_folder)")
"""What to run for a checkpoint NxD wrote on the XLA stack: said by the rules at each load
site and by the helpers when they meet one."""
ZERO1 = ("a ZeRO-1 optimizer's state differs on each data-parallel rank, and "
         "PyTorch's ZeroRedundancyOptimizer (what the migration makes of XLA's) has no "
         "sharded state dict for torch.distributed.checkpoint: call "
         "optimizer.consolidate_state_dict(to=0) and save optimizer.state_dict() from rank 0, "
         "or shard the model with FSDP2 (fully_shard), whose optimizer state get_state_dict "
         "and DCP handle")
"""Why an XLA ZeRO-1 optimizer's checkpoint is not migrated: said by the rules and the
helpers. NxD's ZeRO-1 becomes an optimizer whose sharded state DCP saves."""


def _zero1(source: str) -> str:
    """A helper's source that refuses ZeRO-1 flags, with the reason written in (a string
    literal a line, as it sits in `raise ValueError(...)` two levels deep)."""
    lines = textwrap.wrap(ZERO1, 72, drop_whitespace=False)
    return source.replace("_NEURON_ZERO1", "\n            ".join(f'"{line}"' for line in lines))


CHECKPOINT_HELPERS: dict[str, Helper] = {
    "_neuron_xla_era_checkpoint": helper(f'''
def _neuron_xla_era_checkpoint(path):
    """Stop with what to run when `path` holds a checkpoint NxD wrote on the XLA stack (one
    file per tensor-parallel rank, torch.save or xser), which torch.distributed.checkpoint
    cannot read."""
    import glob
    import os

    if os.path.exists(os.path.join(path, ".metadata")):
        return
    ranks = sorted(glob.glob(os.path.join(glob.escape(path), "*tp_rank_*")))
    if ranks:
        raise RuntimeError(
            f"{{path}} holds a checkpoint NeuronX Distributed wrote on the XLA stack "
            f"({{os.path.basename(ranks[0])}}: one file per tensor-parallel rank), which "
            "torch.distributed.checkpoint cannot read: {CONVERT}")
''', imports=()),
    "_neuron_dcp_skeleton": helper('''
def _neuron_dcp_skeleton(path):
    """What a torch.distributed.checkpoint folder holds, as the nested dict it was saved
    from: an empty full-size CPU tensor for each tensor, None for each other value. dcp.load
    fills a dict shaped like what was saved, and NxD's load returned all of it."""
    import torch.distributed.checkpoint as dcp

    metadata = dcp.FileSystemReader(path).read_metadata()
    paths = metadata.planner_data or {}
    skeleton = {}
    for key, item in metadata.state_dict_metadata.items():
        value = None
        if hasattr(item, "size"):  # a tensor's; other values are pickled bytes
            value = torch.empty(tuple(item.size), dtype=item.properties.dtype)
        *parents, last = paths.get(key, (key,))
        node = skeleton
        for parent, child in zip(parents, [*parents[1:], last]):
            empty = [] if isinstance(child, int) else {}
            if isinstance(node, list):
                node.extend([None] * (parent + 1 - len(node)))
                node[parent] = empty if node[parent] is None else node[parent]
                node = node[parent]
            else:
                node = node.setdefault(parent, empty)
        if isinstance(node, list):
            node.extend([None] * (last + 1 - len(node)))
        node[last] = value
    return skeleton
'''),
    "_neuron_bfloat16": helper('''
def _neuron_bfloat16(value):
    """`value` with every float32 tensor in it (in dicts, lists and tuples) cast to bfloat16,
    as NxD's save did with down_cast_bf16=True."""
    if isinstance(value, torch.Tensor):
        return value.to(torch.bfloat16) if value.dtype == torch.float32 else value
    if isinstance(value, dict):
        return {key: _neuron_bfloat16(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_neuron_bfloat16(item) for item in value)
    return value
'''),
    "_neuron_dcp_save": helper('''
def _neuron_dcp_save(checkpoint, output_dir, save_serially=True, save_xser=False,
                     down_cast_bf16=False, master_dp_only=True):
    """NxD's parallel_layers.checkpointing.save: the checkpoint dict written to `output_dir`
    with torch.distributed.checkpoint. Every rank writes its own shards of tensor-parallel
    (DTensor) weights and one rank each replicated value, so the checkpoint loads at any
    layout; NxD wrote one file per tensor-parallel rank, which loaded only at its own.
    NxD's parameters are all taken, in its order, for a call made where the function was
    passed as a value; save_serially and save_xser have no effect."""
    import torch.distributed.checkpoint as dcp

    if not master_dp_only:
        raise ValueError(
            "master_dp_only=False saved state that differs between data-parallel ranks, of "
            "which torch.distributed.checkpoint keeps one copy: save it per rank")
    if down_cast_bf16:
        checkpoint = _neuron_bfloat16(checkpoint)
    dcp.save(checkpoint, checkpoint_id=output_dir)
''', requires=("_neuron_bfloat16",)),
    "_neuron_optimizer_states": helper('''
def _neuron_optimizer_states(value, model=None):
    """Each optimizer state dict in `value` (dicts and lists walked) made loadable again by
    Optimizer.load_state_dict: torch.distributed.checkpoint wrote its parameter ids as
    strings and reads its tensors whole on the CPU. The ids become ints again, and with a
    model whose parameters are DTensors, each state tensor of a parameter's shape is
    sharded as that parameter, matched by position in model.parameters(); a state whose
    positions cannot be proved to be the model's stops the load rather than attach to the
    wrong parameters."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    if isinstance(value, list):
        return [_neuron_optimizer_states(item, model) for item in value]
    if not isinstance(value, dict):
        return value
    groups, state = value.get("param_groups"), value.get("state")
    if not (isinstance(groups, list) and isinstance(state, dict)
            and all(isinstance(g, dict) and "params" in g for g in groups)):
        return {key: _neuron_optimizer_states(item, model) for key, item in value.items()}
    state = {int(key): item for key, item in state.items()}
    params = list(model.parameters()) if model is not None else []
    if any(isinstance(p, DTensor) for p in params):
        ids = [i for group in groups for i in group["params"]]
        if ids != list(range(len(params))) or any(
                isinstance(t, torch.Tensor) and t.dim() and t.shape != params[i].shape
                for i, entry in state.items() for t in entry.values()):
            raise RuntimeError(
                "the checkpoint's optimizer state cannot be matched to the model's sharded "
                "parameters by position: save and load it with torch.distributed.checkpoint."
                "state_dict.get_optimizer_state_dict / set_optimizer_state_dict")
        state = {i: {name: distribute_tensor(t.to(params[i].device), params[i].device_mesh,
                                             params[i].placements)
                     if isinstance(params[i], DTensor) and isinstance(t, torch.Tensor)
                     and t.dim() else t
                     for name, t in entry.items()}
                 for i, entry in state.items()}
    return {**value, "state": state}
'''),
    "_neuron_unwrapped_model": helper('''
def _neuron_unwrapped_model(model):
    """The model itself for torch.distributed.checkpoint when `model` is what
    initialize_parallel_model returned: that wrapper names its parameters without the
    `module.` prefix, as NxD's did, while DCP walks the module tree."""
    if isinstance(model, torch.nn.Module) and hasattr(type(model), "original_module"):
        return model.original_module()
    return model
'''),
    "_neuron_dcp_load": helper('''
def _neuron_dcp_load(chkpt_path, model=None, model_or_optimizer=None, model_key="model",
                     load_xser=False, sharded=True, strict=True, master_dp_only=True,
                     weights_only=False):
    """NxD's parallel_layers.checkpointing.load: read the checkpoint its save wrote (resharded
    to this job's layout), load `checkpoint[model_key]` into the model, and return the rest
    of the checkpoint (the whole of it without a model; None when model_key is None), as
    NxD did. sharded=False: `chkpt_path` is one file of the model's full state dict, which
    each rank shards as its layers are sharded. An optimizer's state dict in the rest comes
    back as Optimizer.load_state_dict needs it (_neuron_optimizer_states). load_xser,
    master_dp_only and weights_only (taken for a call of the function passed as a value)
    have no effect."""
    from torch.distributed.checkpoint import load
    from torch.distributed.checkpoint.state_dict import (StateDictOptions,
                                                         get_model_state_dict,
                                                         set_model_state_dict)

    model = _neuron_unwrapped_model(model_or_optimizer if model is None else model)
    if isinstance(model, torch.optim.Optimizer):
        raise TypeError(
            "an optimizer's sharded state loads with its model: use torch.distributed."
            "checkpoint.state_dict.set_optimizer_state_dict(model, optimizer, state)")
    if sharded:
        _neuron_xla_era_checkpoint(chkpt_path)
        checkpoint = _neuron_dcp_skeleton(chkpt_path)
        if model is not None:
            if model_key is None:
                checkpoint = get_model_state_dict(model)
            else:
                checkpoint[model_key] = get_model_state_dict(model)
        load(checkpoint, checkpoint_id=chkpt_path)
    else:
        checkpoint = torch.load(chkpt_path, map_location="cpu", weights_only=False)
    if model is None:
        return _neuron_optimizer_states(checkpoint)
    state = checkpoint if model_key is None else checkpoint.pop(model_key)
    set_model_state_dict(model, state, options=StateDictOptions(
        full_state_dict=not sharded, strict=strict))
    return None if model_key is None else _neuron_optimizer_states(checkpoint, model)
''', requires=("_neuron_xla_era_checkpoint", "_neuron_dcp_skeleton",
               "_neuron_optimizer_states", "_neuron_unwrapped_model")),
    "_neuron_checkpoint_tags": helper('''
def _neuron_checkpoint_tags(checkpoint_dir_str):
    """The complete checkpoints (tags with a `done` file) under a folder, oldest first, as
    NxD listed them."""
    import glob
    import os

    done = glob.glob(os.path.join(glob.escape(checkpoint_dir_str), "*", "done"))
    return [os.path.basename(os.path.dirname(f)) for f in sorted(done, key=os.path.getmtime)]
''', imports=()),
    "_neuron_has_checkpoint": helper('''
def _neuron_has_checkpoint(checkpoint_dir_str):
    """NxD's has_checkpoint: whether a complete checkpoint is under the folder."""
    return bool(_neuron_checkpoint_tags(checkpoint_dir_str))
''', requires=("_neuron_checkpoint_tags",), imports=()),
    "_neuron_save_checkpoint": helper(_zero1('''
def _neuron_save_checkpoint(checkpoint_dir_str, tag, model=None, optimizer=None,
                            scheduler=None, user_content=None, num_workers=8, use_xser=False,
                            num_kept_ckpts=None, async_save=False, zero1_optimizer=False,
                            use_zero1_dcp=False, avoid_saving_lower_precision_weights=False):
    """NxD's save_checkpoint: the model's and the optimizer's state dicts (get_state_dict)
    written with torch.distributed.checkpoint to <checkpoint_dir_str>/<tag>/model and
    /optim, every rank its own shards, so they load at any layout; rank 0 writes the
    scheduler's state and user_content beside them, then a `done` file once every rank has
    written, and removes the oldest complete tags beyond num_kept_ckpts, as NxD did.
    A ZeRO-1 optimizer made from NxD's saves its own share of the state on each rank.
    NxD's other parameters are taken for a call of the function passed as a value:
    num_workers, use_xser, zero1_optimizer, use_zero1_dcp and
    avoid_saving_lower_precision_weights have no effect, and async_save=True saves before
    returning."""
    import os
    import shutil

    from torch.distributed.checkpoint import save
    from torch.distributed.checkpoint.state_dict import (get_model_state_dict,
                                                         get_optimizer_state_dict)
    from torch.distributed.optim import ZeroRedundancyOptimizer

    if isinstance(optimizer, ZeroRedundancyOptimizer):
        raise ValueError(
            _NEURON_ZERO1)
    folder = os.path.join(checkpoint_dir_str, str(tag))
    model = _neuron_unwrapped_model(model)
    distributed = _neuron_distributed()
    first = not distributed or torch.distributed.get_rank() == 0
    if isinstance(optimizer, torch.optim.Optimizer):
        if not isinstance(model, torch.nn.Module):
            raise TypeError("an optimizer's sharded state is saved with its model: pass model=")
        optimizer = get_optimizer_state_dict(model, optimizer)
    if isinstance(model, torch.nn.Module):
        model = get_model_state_dict(model)
    if first:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "checkpoint"), "w") as marker:
            marker.write("1")
    for name, state in (("model", model), ("optim", optimizer)):
        if state is not None:
            save(state, checkpoint_id=os.path.join(folder, name))
    if first:
        if scheduler is not None:
            torch.save(scheduler.state_dict(), os.path.join(folder, "scheduler.pt"))
        if user_content is not None:
            torch.save(user_content, os.path.join(folder, "user_content.pt"))
    if distributed:
        torch.distributed.barrier()
    if first:
        with open(os.path.join(folder, "done"), "w") as marker:
            marker.write("1")
        tags = _neuron_checkpoint_tags(checkpoint_dir_str)
        if num_kept_ckpts is not None and num_kept_ckpts != -1:
            for old in tags[:max(len(tags) - num_kept_ckpts, 0)]:
                os.remove(os.path.join(checkpoint_dir_str, old, "done"))
                shutil.rmtree(os.path.join(checkpoint_dir_str, old))
    if distributed:
        torch.distributed.barrier()
'''), requires=("_neuron_checkpoint_tags", "_neuron_distributed",
                  "_neuron_unwrapped_model")),
    "_neuron_load_checkpoint": helper(_zero1('''
def _neuron_load_checkpoint(path, tag=None, model=None, optimizer=None, scheduler=None,
                            num_workers=8, strict=True, use_zero1_dcp=False):
    """NxD's load_checkpoint: the newest complete tag unless one is given; the model's and
    the optimizer's state read from what its save_checkpoint wrote, resharded to this
    job's layout (set_model_state_dict, set_optimizer_state_dict), the scheduler's state
    loaded; returns the saved user content, or None, as NxD did. A ZeRO-1 optimizer made
    from NxD's loads its own share of the state on each rank. num_workers and
    use_zero1_dcp (taken for a call of the function passed as a value) have no effect."""
    import os

    from torch.distributed.checkpoint import load
    from torch.distributed.checkpoint.state_dict import (StateDictOptions,
                                                         get_model_state_dict,
                                                         get_optimizer_state_dict,
                                                         set_model_state_dict,
                                                         set_optimizer_state_dict)
    from torch.distributed.optim import ZeroRedundancyOptimizer

    if isinstance(optimizer, ZeroRedundancyOptimizer):
        raise ValueError(
            _NEURON_ZERO1)
    if tag is None:
        tags = _neuron_checkpoint_tags(path)
        if not tags:
            raise RuntimeError(f"Error: no checkpoint under directory {path}")
        tag = tags[-1]
    folder = os.path.join(path, str(tag))
    model = _neuron_unwrapped_model(model)
    if optimizer is not None and model is None:
        raise TypeError("an optimizer's sharded state loads with its model: pass model=")
    if model is not None:
        _neuron_xla_era_checkpoint(os.path.join(folder, "model"))
        state = get_model_state_dict(model)
        load(state, checkpoint_id=os.path.join(folder, "model"))
        set_model_state_dict(model, state, options=StateDictOptions(strict=strict))
    if optimizer is not None:
        _neuron_xla_era_checkpoint(os.path.join(folder, "optim"))
        state = get_optimizer_state_dict(model, optimizer)
        load(state, checkpoint_id=os.path.join(folder, "optim"))
        # a ZeRO-1 optimizer's state dict holds this rank's share: the rest is not missing
        sharded = getattr(optimizer, "zero_one_owners", None) is not None
        set_optimizer_state_dict(model, optimizer, state,
                                 options=StateDictOptions(strict=not sharded))
    if scheduler is not None:
        scheduler.load_state_dict(torch.load(os.path.join(folder, "scheduler.pt"),
                                             weights_only=False))
    user_content = os.path.join(folder, "user_content.pt")
    if os.path.exists(user_content):
        return torch.load(user_content, map_location="cpu", weights_only=False)
    return None
'''), requires=("_neuron_checkpoint_tags", "_neuron_xla_era_checkpoint",
                  "_neuron_unwrapped_model")),
}
