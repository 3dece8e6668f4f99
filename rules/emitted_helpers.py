"""Plain-PyTorch helper functions some rewrites define in the user's file.

Where an XLA call did more than one native call does (`xm.optimizer_step` also averaged the
gradients; `MpDeviceLoader` also moved every batch), the rewrite calls a small helper defined
once in the migrated file, so the behaviour stays the same and the output never imports
neuron-migrate. Like the XLA calls, each helper works in a single process without a process
group; with WORLD_SIZE > 1 and no group it raises (`_neuron_distributed`) instead of letting each
process train alone. The test suite executes every one of them.
"""

from __future__ import annotations

from neuron_migrate.ruleapi import Helper, helper as _helper
from neuron_migrate.rules.emitted_checkpoint import CHECKPOINT_HELPERS
from neuron_migrate.rules.emitted_parallel import PARALLEL_HELPERS
from neuron_migrate.rules.emitted_sharding import SHARDING_HELPERS
from neuron_migrate.rules.emitted_zero_one import ZERO_ONE_HELPERS


def defined(name: str) -> str:
    """The text the engine writes for `name`: the helpers it requires, then itself (for the
    rules' before/after examples)."""
    return "\n\n".join(HELPERS[n].source for n in (*HELPERS[name].requires, name))


HELPERS: dict[str, Helper] = {
    "_neuron_to_device": _helper('''
def _neuron_to_device(value, device):
    """Move tensors, and tensors inside lists, tuples and dicts, to `device`."""
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=str(device) != "cpu")  # host copies: read at once
    if isinstance(value, dict):
        return type(value)((k, _neuron_to_device(v, device)) for k, v in value.items())
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_neuron_to_device(v, device) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_neuron_to_device(v, device) for v in value)
    return value
'''),
    "_NeuronDeviceLoader": _helper('''
class _NeuronDeviceLoader:
    """Iterate a DataLoader with every batch moved to `device` (what MpDeviceLoader did)."""

    def __init__(self, loader, device):
        self.loader = loader
        self.device = device

    def __iter__(self):
        for batch in self.loader:
            yield _neuron_to_device(batch, self.device)

    def __len__(self):
        return len(self.loader)
''', requires=("_neuron_to_device",)),
    "_neuron_distributed": _helper('''
def _neuron_distributed():
    """Whether collectives have a process group to run in. One process needs none, as with
    XLA; several processes without one would each train alone, so that is an error."""
    if torch.distributed.is_initialized():
        return True
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1:
        raise RuntimeError(
            f"WORLD_SIZE is {world_size} but no torch.distributed process group exists, so "
            "this process would not exchange anything with the others: call "
            "torch.distributed.init_process_group('neuron') at the start of the worker, "
            "before the model is moved to the device")
    return False
''', imports=("torch", "os")),
    "_neuron_rank": _helper('''
def _neuron_rank():
    """This process's global rank: the process group's, else torchrun's RANK (0 alone)."""
    if torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.environ.get("RANK", 0))
''', imports=("torch", "os")),
    "_neuron_world_size": _helper('''
def _neuron_world_size():
    """How many processes: the process group's, else torchrun's WORLD_SIZE (1 alone)."""
    if torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return int(os.environ.get("WORLD_SIZE", 1))
''', imports=("torch", "os")),
    "_neuron_reduce_gradients": _helper('''
def _neuron_reduce_gradients(optimizer):
    """Average the gradients of the optimizer's parameters over all processes (what
    xm.reduce_gradients and xm.optimizer_step did), in flat buckets: one all_reduce per
    bucket, as XLA fused them, not one per parameter."""
    _neuron_average_tensors([param.grad for group in optimizer.param_groups
                             for param in group["params"] if param.grad is not None])
''', requires=("_neuron_distributed", "_neuron_average_tensors")),
    "_neuron_optimizer_step": _helper('''
def _neuron_optimizer_step(optimizer, optimizer_args=None):
    """Average the gradients over all processes, then step (what xm.optimizer_step did)."""
    _neuron_reduce_gradients(optimizer)
    return optimizer.step(**(optimizer_args or {}))
''', requires=("_neuron_distributed", "_neuron_average_tensors",
             "_neuron_reduce_gradients")),
    "_neuron_all_reduce": _helper('''
def _neuron_all_reduce(op, value, scale=1.0, group=None):
    """xm.all_reduce: a tensor is reduced into a new tensor; a list is reduced in place."""
    tensors = list(value) if isinstance(value, (list, tuple)) else [value.clone()]
    distributed = _neuron_distributed()
    for tensor in tensors:
        if distributed:
            torch.distributed.all_reduce(tensor, op=op, group=group)
        if scale != 1.0:
            tensor.mul_(scale)
    return value if isinstance(value, (list, tuple)) else tensors[0]
''', requires=("_neuron_distributed",)),
    "_neuron_all_gather": _helper('''
def _neuron_all_gather(value, dim=0, group=None):
    """xm.all_gather: the tensors of all processes (of `group`), concatenated along `dim`."""
    if not _neuron_distributed():
        return value.clone()
    parts = [torch.empty_like(value) for _ in range(torch.distributed.get_world_size(group))]
    torch.distributed.all_gather(parts, value.contiguous(), group=group)
    return torch.cat(parts, dim=dim)
''', requires=("_neuron_distributed",)),
    "_neuron_reduce_scatter": _helper('''
def _neuron_reduce_scatter(op, value, scale, scatter_dim, shard_count, group=None):
    """xm.reduce_scatter: reduce over all processes (of `group`), keep this process's
    shard."""
    if not _neuron_distributed():
        return value.mul(scale)
    chunks = [c.contiguous() for c in value.chunk(shard_count, dim=scatter_dim)]
    output = torch.empty_like(chunks[0])
    torch.distributed.reduce_scatter(output, chunks, op=op, group=group)
    return output.mul_(scale) if scale != 1.0 else output
''', requires=("_neuron_distributed",)),
    "_neuron_gather_objects": _helper('''
def _neuron_gather_objects(payload):
    """Every process's `payload`, in rank order (xm.rendezvous with a payload)."""
    if not _neuron_distributed():
        return [payload]
    gathered = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, payload)
    return gathered
''', requires=("_neuron_distributed",)),
    "_neuron_mesh_reduce": _helper('''
def _neuron_mesh_reduce(data, reduce_fn):
    """xm.mesh_reduce: gather `data` from every process to the host, then reduce it."""
    return reduce_fn(_neuron_gather_objects(_neuron_to_device(data, "cpu")))
''', requires=("_neuron_distributed", "_neuron_gather_objects", "_neuron_to_device")),
    "_neuron_save": _helper('''
def _neuron_save(data, path, master_only=True, global_master=False):
    """xm.save: move tensors to the CPU and write from one process per host (or the global
    master with global_master=True); every process waits until it is written."""
    distributed = _neuron_distributed()
    if not master_only:
        writer = True
    elif global_master:
        writer = not distributed or torch.distributed.get_rank() == 0
    else:
        writer = int(os.environ.get("LOCAL_RANK", 0)) == 0
    if writer:
        torch.save(_neuron_to_device(data, "cpu"), path)
    if distributed:
        torch.distributed.barrier()
''', requires=("_neuron_distributed", "_neuron_to_device"), imports=("torch", "os")),
    "_neuron_broadcast_master_param": _helper('''
def _neuron_broadcast_master_param(model):
    """Copy rank 0's parameters and buffers to every process (xm.broadcast_master_param)."""
    if not _neuron_distributed():
        return
    for tensor in [*model.parameters(), *model.buffers()]:
        torch.distributed.broadcast(tensor.data, src=0)
''', requires=("_neuron_distributed",)),

    "_NeuronSampleGenerator": _helper('''
class _NeuronSampleGenerator:
    """Serve the same `data` `sample_count` times per pass: fake data in place of a DataLoader
    (what PyTorch/XLA's SampleGenerator did)."""

    def __init__(self, data, sample_count):
        self.data = data
        self.sample_count = sample_count
        self.served = 0

    def __iter__(self):
        return _NeuronSampleGenerator(self.data, self.sample_count)

    def __len__(self):
        return self.sample_count

    def __next__(self):
        if self.served >= self.sample_count:
            raise StopIteration
        self.served += 1
        return self.data
''', imports=()),
    "_NeuronRateTracker": _helper('''
class _NeuronRateTracker:
    """Samples per second: rate() since its last call, smoothed with the previous rate, and
    global_rate() since creation (what xm.RateTracker measured)."""

    def __init__(self, smooth_factor=None):
        import os
        import time  # here, not at the top: the file may bind `time` to something else

        if smooth_factor is None:
            smooth_factor = float(os.environ.get("RATE_TRACKER_SMOOTHING", 0.4))
        self.smooth_factor = smooth_factor
        self.clock = time.time
        self.start = self.last = self.clock()
        self.pending = 0.0  # added since the last rate()
        self.counted = 0.0  # added before the last rate()
        self.last_rate = None

    def add(self, count):
        self.pending += count

    def rate(self):
        now = self.clock()
        elapsed = now - self.last
        if elapsed <= 0:
            return 0.0
        rate = self.pending / elapsed
        if self.last_rate is not None:
            rate = (1 - self.smooth_factor) * rate + self.smooth_factor * self.last_rate
        self.counted += self.pending
        self.pending = 0.0
        self.last, self.last_rate = now, rate
        return rate

    def global_rate(self):
        elapsed = self.clock() - self.start
        return (self.counted + self.pending) / elapsed if elapsed > 0 else 0.0
''', imports=()),
    "_neuron_now": _helper('''
def _neuron_now(format="%H:%M:%S"):
    """The local time as text (PyTorch/XLA's test_utils.now)."""
    import datetime  # here, not at the top: the file may bind `datetime` to the class

    return datetime.datetime.now().strftime(format)
''', imports=()),
    "_neuron_write_to_summary": _helper('''
def _neuron_write_to_summary(summary_writer, global_step=None, dict_to_write=None,
                             write_xla_metrics=False):
    """Write scalars to a TensorBoard SummaryWriter, if there is one (PyTorch/XLA's
    test_utils.write_to_summary). There are no XLA metrics natively: write_xla_metrics
    writes nothing."""
    if summary_writer is None:
        return
    for name, value in (dict_to_write or {}).items():
        summary_writer.add_scalar(name, value, global_step)
''', imports=()),
    "_neuron_get_summary_writer": _helper('''
def _neuron_get_summary_writer(logdir):
    """A TensorBoard SummaryWriter writing to `logdir`, or None without a logdir (PyTorch/XLA's
    test_utils.get_summary_writer). TensorBoard is imported only when a writer is made."""
    if not logdir:
        return None
    import time

    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=logdir)
    _neuron_write_to_summary(writer, 0, {"TensorboardStartTimestamp": time.time()})
    return writer
''', requires=("_neuron_write_to_summary",), imports=()),
    "_neuron_close_summary_writer": _helper('''
def _neuron_close_summary_writer(summary_writer):
    """Flush and close a SummaryWriter, if there is one (PyTorch/XLA's
    test_utils.close_summary_writer)."""
    if summary_writer is not None:
        summary_writer.flush()
        summary_writer.close()
''', imports=()),
    "_neuron_device_spec": _helper('''
def _neuron_device_spec(device):
    """`device/rank`, as PyTorch/XLA's training updates named the process that printed."""
    if torch.distributed.is_initialized():
        rank = torch.distributed.get_rank()
    else:
        rank = int(os.environ.get("RANK", 0))
    return f"{device}/{rank}"
''', imports=("torch", "os")),
    "_neuron_print_training_update": _helper('''
def _neuron_print_training_update(device, step, loss, rate, global_rate, epoch=None,
                                  summary_writer=None):
    """Print one line of training progress, and write the rates to the summary writer if
    there is one (PyTorch/XLA's test_utils.print_training_update)."""
    fields = ["Training", f"Device={_neuron_device_spec(device)}",
              f"Epoch={epoch}" if epoch is not None else None, f"Step={step}",
              f"Loss={loss:.5f}", f"Rate={rate:.2f}", f"GlobalRate={global_rate:.2f}",
              f"Time={_neuron_now()}"]
    print("|", " ".join(field for field in fields if field), flush=True)
    if summary_writer:
        _neuron_write_to_summary(summary_writer, dict_to_write={
            "examples/sec": rate, "average_examples/sec": global_rate})
''', requires=("_neuron_device_spec", "_neuron_now", "_neuron_write_to_summary"), imports=()),
    "_neuron_print_test_update": _helper('''
def _neuron_print_test_update(device, accuracy, epoch=None, step=None):
    """Print one line of test results (PyTorch/XLA's test_utils.print_test_update)."""
    fields = ["Test", f"Device={_neuron_device_spec(device)}",
              f"Step={step}" if step is not None else None,
              f"Epoch={epoch}" if epoch is not None else None,
              f"Accuracy={accuracy:.2f}" if accuracy is not None else None,
              f"Time={_neuron_now()}"]
    print("|", " ".join(field for field in fields if field), flush=True)
''', requires=("_neuron_device_spec", "_neuron_now"), imports=()),
    "_neuron_send_cpu_data_to_device": _helper('''
def _neuron_send_cpu_data_to_device(datas, device):
    """Copy the tensors in `datas` (also inside lists, tuples and dicts) to `device`; a lone
    tensor comes back in a list (what xm.send_cpu_data_to_device returned)."""
    if isinstance(datas, torch.Tensor):
        datas = [datas]
    return _neuron_to_device(datas, device)
''', requires=("_neuron_to_device",)),
    "_neuron_getenv_as": _helper('''
def _neuron_getenv_as(name, type, defval=None):
    """The environment variable `name` converted with `type` (a bool from its integer value),
    or `defval` when it is not set (PyTorch/XLA's utils.getenv_as)."""
    import os

    value = os.environ.get(name)
    if value is None:
        return defval
    return type(int(value)) if type == bool else type(value)
''', imports=()),
    "_neuron_check_env_flag": _helper('''
def _neuron_check_env_flag(name, default=""):
    """Whether the environment variable `name` is "true" or a positive integer
    (PyTorch/XLA's utils.check_env_flag)."""
    import os

    flag = os.getenv(name, default)
    return flag == "true" or (flag.isdigit() and int(flag) > 0)
''', imports=()),
}


def _merged(*tables: dict[str, Helper]) -> None:
    """Add the families' own helper tables; a name defined twice would silently replace one
    helper's text with another's in every file that asks for it."""
    for table in tables:
        clash = HELPERS.keys() & table.keys()
        if clash:
            raise AssertionError(f"helpers defined twice: {sorted(clash)}")
        HELPERS.update(table)


_merged(PARALLEL_HELPERS, SHARDING_HELPERS, CHECKPOINT_HELPERS, ZERO_ONE_HELPERS)
