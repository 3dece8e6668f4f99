"""Plain-PyTorch helpers for code migrated from XLA's ZeRO-1 optimizers (rules/sharding.py).

torch_xla's `ZeroRedundancyOptimizer` (and NxD's `NeuronZero1Optimizer` on top of it) did more
than shard the optimizer state: its `step()` averaged the gradients over the data-parallel
processes and clipped them by their global norm first. PyTorch's own
`torch.distributed.optim.ZeroRedundancyOptimizer` shards the state and nothing else (it
expects DistributedDataParallel to have averaged the gradients), so the migrated file gets a
subclass that does the rest, as the XLA step did. Merged into `rules.emitted_helpers.HELPERS`.
"""

from __future__ import annotations

from neuron_migrate.ruleapi import Helper, helper

SHARDING_HELPERS: dict[str, Helper] = {
    "_neuron_average_tensors": helper('''
def _neuron_average_tensors(grads, bucket_bytes=25 * 1024 * 1024, group=None):
    """Average gradients over the processes of `group` (all by default), as XLA's ZeRO-1 step
    and NxD's bucket_allreduce_gradients did: flat buckets of about `bucket_bytes` (one dtype
    and device each), one all_reduce per bucket, never one per gradient. A tensor-parallel
    (DTensor) gradient is averaged shard by shard with the same shard of the other replicas."""
    if not _neuron_distributed() or torch.distributed.get_world_size(group) == 1:
        return
    world_size = torch.distributed.get_world_size(group)

    def average(bucket):
        flat = torch.cat([grad.reshape(-1) for grad in bucket])
        torch.distributed.all_reduce(flat, op=torch.distributed.ReduceOp.SUM, group=group)
        flat.div_(world_size)
        for grad, part in zip(bucket, flat.split([grad.numel() for grad in bucket])):
            grad.copy_(part.view_as(grad))

    buckets, sizes = {}, {}
    for grad in grads:
        grad = grad.to_local() if hasattr(grad, "to_local") else grad
        key = (grad.dtype, grad.device)
        buckets.setdefault(key, []).append(grad)
        sizes[key] = sizes.get(key, 0) + grad.numel() * grad.element_size()
        if sizes[key] >= bucket_bytes:
            average(buckets.pop(key))
            sizes.pop(key)
    for bucket in buckets.values():
        average(bucket)
''', requires=("_neuron_distributed",)),
    "_neuron_average_gradients": helper('''
def _neuron_average_gradients(params, bucket_bytes=25 * 1024 * 1024, group=None):
    """Average the gradients of `params` over the processes of `group` (all by default), in
    buckets, as XLA's ZeRO-1 step did."""
    _neuron_average_tensors([p.grad for p in params if p.grad is not None], bucket_bytes, group)
''', requires=("_neuron_distributed", "_neuron_average_tensors")),
    "_NeuronZeroRedundancyOptimizer": helper('''
class _NeuronZeroRedundancyOptimizer(torch.distributed.optim.ZeroRedundancyOptimizer):
    """XLA's ZeRO-1 optimizer on torch.distributed: the optimizer state sharded over the
    processes, and a step that first averages the gradients over them and, with
    grad_clipping, clips them to max_norm (default 1.0) by their global norm, kept in
    `grad_norm` (what torch_xla's ZeroRedundancyOptimizer.step did)."""

    def __init__(self, params, optimizer_class, grad_clipping=True, max_norm=None,
                 **defaults):
        _neuron_process_group()
        super().__init__(params, optimizer_class, **defaults)
        self.grad_clipping = grad_clipping
        self.max_norm = 1.0 if max_norm is None else max_norm
        self.grad_norm = None

    @torch.no_grad()
    def step(self, closure=None, **kwargs):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        params = [param for group in self.param_groups for param in group["params"]]
        _neuron_average_gradients(params)
        if self.grad_clipping:
            self.grad_norm = torch.nn.utils.clip_grad_norm_(params, self.max_norm)
        super().step(**kwargs)
        return loss
''', requires=("_neuron_distributed", "_neuron_process_group", "_neuron_average_tensors",
             "_neuron_average_gradients"),
   imports=("torch", "torch.distributed.optim")),
    "_neuron_process_group": helper('''
def _neuron_process_group():
    """Make sure a process group exists: FSDP2 and ZeroRedundancyOptimizer need one, even in
    a single process, where XLA's FSDP and ZeRO-1 ran without one; that process gets a group
    of its own (several processes without one raise, see _neuron_distributed)."""
    if not _neuron_distributed():
        backends = torch.distributed.Backend.backend_list
        torch.distributed.init_process_group(
            "neuron" if "neuron" in backends else "gloo",  # gloo: CPU-only PyTorch
            store=torch.distributed.HashStore(), rank=0, world_size=1)
''', requires=("_neuron_distributed",)),
    "_neuron_fully_shard": helper('''
def _neuron_fully_shard(module, **options):
    """Shard `module`'s parameters over all processes with FSDP2's fully_shard, in place, and
    return it (what XlaFullyShardedDataParallel(module) did)."""
    _neuron_process_group()
    return torch.distributed.fsdp.fully_shard(module, **options)
''', requires=("_neuron_distributed", "_neuron_process_group"),
   imports=("torch", "torch.distributed.fsdp")),
}
