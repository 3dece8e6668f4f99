"""Plain-PyTorch ZeRO-1 for code migrated from NeuronX Distributed (NxD): the optimizer state
sharded over the data-parallel ranks of the layout's mesh, next to tensor parallelism too.

PyTorch's own `ZeroRedundancyOptimizer` cannot serve here: it flattens parameters into its own
buffers, which a tensor-parallel (DTensor) parameter does not allow, and its state dict is not
one torch.distributed.checkpoint can write shard by shard. The helpers below shard the way
NxD's ZeRO-1 did, within the optimizer the script built: every parameter is owned by one
data-parallel rank, which alone keeps its optimizer state and updates it; the owners then
send the updated values to the other replicas. The optimizer's `param_groups` stay whole (a
scheduler, clipping and logging see every parameter), and its `state_dict()` holds this rank's
share under the whole model's numbering, which is the form DCP's `get_optimizer_state_dict`
saves per rank and loads back at any layout. Merged into `rules.emitted_helpers.HELPERS`.
"""

from __future__ import annotations

from neuron_migrate.ruleapi import Helper, helper

ZERO_ONE_HELPERS: dict[str, Helper] = {
    "_neuron_zero_one_owners": helper('''
def _neuron_zero_one_owners(params, ranks, loads=None):
    """The data-parallel rank (0 .. ranks - 1) that keeps each parameter's optimizer state:
    largest parameters first, each to the least loaded rank, by the whole (unsharded) size,
    so every process of the job computes the same owners."""
    loads = [0] * ranks if loads is None else loads
    owners = {}
    for param in sorted((p for p in params if p.requires_grad), key=lambda p: -p.numel()):
        rank = loads.index(min(loads))
        loads[rank] += param.numel()
        owners[param] = rank
    return {param: owners[param] for param in params if param in owners}
''', imports=()),
    "_neuron_share_updates": helper('''
@torch.no_grad()
def _neuron_share_updates(owners, group, bucket_bytes=25 * 1024 * 1024):
    """After each data-parallel rank updated the parameters it owns: every owner broadcasts
    them, flattened in buckets of about `bucket_bytes`, so all replicas hold the same
    parameters again (ZeRO-1's all-gather of the updated shards). A tensor-parallel (DTensor)
    parameter sends this rank's shard to the same shard of the other replicas."""
    if not _neuron_distributed():  # one process: it owns everything
        return

    def send(owner, tensors):
        flat = torch.cat([t.reshape(-1) for t in tensors])
        torch.distributed.broadcast(
            flat, src=torch.distributed.get_global_rank(group, owner), group=group)
        for tensor, part in zip(tensors, flat.split([t.numel() for t in tensors])):
            tensor.copy_(part.view_as(tensor))

    buckets, sizes = {}, {}
    for param, owner in owners.items():
        local = param.to_local() if hasattr(param, "to_local") else param
        key = (owner, local.dtype, local.device)
        buckets.setdefault(key, []).append(local)
        sizes[key] = sizes.get(key, 0) + local.numel() * local.element_size()
        if sizes[key] >= bucket_bytes:
            send(owner, buckets.pop(key))
            sizes.pop(key)
    for (owner, _, _), tensors in buckets.items():
        send(owner, tensors)
''', requires=("_neuron_distributed",)),
}
