"""The original side of a verify run: torch_xla on the CPU, one process per replica.

PyTorch/XLA cannot run several replicas on one CPU in one process (every all-reduce hangs
with CPU_NUM_DEVICES=2), so verify starts one process per replica, each with one CPU device,
as torchrun would (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), and this module makes
torch_xla's replication API answer from those and carry its collectives over a Gloo group of
its own (on NEURON_VERIFY_BRIDGE_PORT, apart from any process group the script creates):
- ordinals and world size (xm.get_ordinal, xm.xrt_world_size, torch_xla.runtime.*);
- xm.all_reduce (so xm.reduce_gradients and xm.optimizer_step), xm.all_gather,
  xm.reduce_scatter, xm.collective_broadcast (so xm.broadcast_master_param),
  xm.rendezvous (so xm.mesh_reduce and xm.do_on_ordinals);
- xmp.spawn and torch_xla.launch call the function in this process, as its replica;
- torch.distributed's "xla" backend (and the xla:// init method) becomes Gloo over env://,
  and a collective on an XLA tensor goes through the CPU.
It also pins PJRT_DEVICE to CPU (scripts set it to NEURON or TPU themselves) and draws random
tensors made on the XLA device from the CPU generator, as the emulator does on the migrated
side (XLA has a generator of its own that ignores torch.manual_seed).
"""

import datetime
import functools
import os

PINNED = {"PJRT_DEVICE": "CPU"}
NUMERICS = ("XLA_USE_BF16", "XLA_DOWNCAST_BF16", "XLA_USE_FP16", "XLA_DOWNCAST_FP16",
            "NEURON_RT_STOCHASTIC_ROUNDING_EN")
BLOCKED = {}  # what the script (or its environment) set that verify kept from the run
_REDUCE_OPS = {"sum": "SUM", "mul": "PRODUCT", "and": "BAND", "or": "BOR", "min": "MIN",
               "max": "MAX"}
_bridge = []


def install():
    _pin_environment()
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.xla_multiprocessing as xmp
    import torch_xla.runtime as xr

    rank, world = _rank(), _world()
    xm._WORLD_SIZE, xm._ORDINAL = world, rank
    local = int(os.environ.get("LOCAL_RANK", rank))
    for name, value in (("world_size", world), ("global_ordinal", rank),
                        ("local_ordinal", local), ("process_index", rank),
                        ("process_count", world), ("global_device_count", world),
                        ("local_process_count", int(os.environ.get("LOCAL_WORLD_SIZE", world))),
                        ("addressable_device_count", 1), ("local_device_count", 1)):
        if hasattr(xr, name):
            setattr(xr, name, functools.partial(_constant, value))
    xm.all_reduce = _all_reduce
    xm.all_gather = _all_gather
    xm.reduce_scatter = _reduce_scatter
    xm.collective_broadcast = _collective_broadcast
    xm.rendezvous = _rendezvous
    xm.xla_rendezvous = lambda payload=b"", ordinals=None, tag=None: _rendezvous(tag, payload)
    xmp.spawn = _spawn
    torch_xla.launch = _launch  # absent before torch_xla 2.5; scripts written for it call it
    _bridge_distributed(torch)
    _random_from_cpu(torch)


def _constant(value, *args, **kwargs):
    return value


def _rank():
    return int(os.environ.get("RANK", "0") or 0)


def _world():
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


# ------------------------------------------------------------------------ environment
def _pin_environment():
    """PJRT_DEVICE stays CPU, and with NEURON_VERIFY_MATCH_NUMERICS the variables that change
    the original's numerics stay unset, whatever the script writes to os.environ."""
    pinned = dict(PINNED)
    blocked = set()
    if os.environ.get("NEURON_VERIFY_MATCH_NUMERICS") == "1":
        blocked.update(NUMERICS)
    for name in blocked:
        if os.environ.get(name, "") not in ("", "0"):
            BLOCKED[name] = os.environ[name]
        os.environ.pop(name, None)
    os.environ.update(pinned)

    class PinnedEnviron(type(os.environ)):
        def __setitem__(self, key, value):
            if key in pinned:
                return
            if key in blocked:
                if str(value) not in ("", "0"):
                    BLOCKED[key] = str(value)
                return
            super().__setitem__(key, value)

    os.environ.__class__ = PinnedEnviron


# -------------------------------------------------------------------------- the bridge
def _group():
    """The Gloo group the XLA collectives go over, made at the first one (every replica
    reaches the same collectives in the same order)."""
    if not _bridge:
        import torch.distributed as dist

        timeout = datetime.timedelta(seconds=300)
        store = dist.TCPStore(os.environ.get("MASTER_ADDR", "127.0.0.1"),
                              int(os.environ["NEURON_VERIFY_BRIDGE_PORT"]), _world(),
                              _rank() == 0, timeout)
        _bridge.append(dist.ProcessGroupGloo(store, _rank(), _world(), timeout))
    return _bridge[0]


def to_cpu(tensors):
    """CPU copies of XLA tensors (parameters too), in one execution of the pending graph.
    Never through a detached alias: XLA donates a buffer updated in place, and an alias
    synced on its own would keep a handle to the deleted buffer."""
    import torch_xla

    tensors = list(tensors)
    torch_xla._XLAC._xla_sync_multi(tensors, devices=[], wait=True, sync_xla_data=True)
    return torch_xla._XLAC._xla_get_cpu_tensors(tensors)


def _whole_world(groups):
    if groups and sorted(groups[0]) != list(range(_world())) or groups and len(groups) > 1:
        raise NotImplementedError(
            "neuron-migrate verify: XLA replica groups other than all replicas (model "
            "parallelism) are out of scope")


def _all_reduce(reduce_type, inputs, scale=1.0, groups=None, pin_layout=True):
    import torch
    import torch.distributed as dist

    _whole_world(groups)
    single = isinstance(inputs, torch.Tensor)
    tensors = [inputs] if single else list(inputs)
    if _world() == 1 and scale == 1.0:
        return inputs.clone() if single else inputs
    cpus = to_cpu(tensors)
    if _world() > 1:
        op = getattr(dist.ReduceOp, _REDUCE_OPS[reduce_type])
        for cpu in cpus:
            _group().allreduce([cpu], op).wait()
    if scale != 1.0:
        cpus = [cpu * scale for cpu in cpus]
    results = [cpu.to(t.device) for cpu, t in zip(cpus, tensors)]
    if single:
        return results[0]
    with torch.no_grad():
        for t, result in zip(tensors, results):
            t.copy_(result)
    return inputs


def _all_gather(value, dim=0, groups=None, output=None, pin_layout=True):
    import torch

    _whole_world(groups)
    cpu = to_cpu([value])[0]
    parts = [torch.empty_like(cpu) for _ in range(_world())]
    if _world() > 1:
        _group().allgather([parts], [cpu]).wait()
    else:
        parts = [cpu]
    result = torch.cat(parts, dim=dim).to(value.device)
    if output is not None:
        with torch.no_grad():
            output.copy_(result)
        return output
    return result


def _reduce_scatter(reduce_type, input, scale, scatter_dim, shard_count, groups=None,
                    output=None, pin_layout=True):
    import torch

    reduced = _all_reduce(reduce_type, input, scale, groups)
    shard = reduced.chunk(shard_count, dim=scatter_dim)[_rank()].contiguous()
    if output is not None:
        with torch.no_grad():
            output.copy_(shard)
        return output
    return shard


def _collective_broadcast(tensors, root_ordinal=0, groups=None, pin_layout=True):
    import torch

    _whole_world(groups)
    if _world() == 1:
        return
    cpus = to_cpu(list(tensors))
    for cpu in cpus:
        _group().broadcast(cpu, root_ordinal).wait()
    with torch.no_grad():
        for t, cpu in zip(tensors, cpus):
            t.copy_(cpu.to(t.device))


def _rendezvous(tag=None, payload=b"", replicas=()):
    """Every replica's payload, in rank order; a barrier on the way."""
    import torch

    payload = bytes(payload or b"")
    if _world() == 1:
        return [payload]
    size = torch.tensor([len(payload)], dtype=torch.int64)
    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(_world())]
    _group().allgather([sizes], [size]).wait()
    longest = max(int(s) for s in sizes) or 1
    mine = torch.zeros(longest, dtype=torch.uint8)
    if payload:
        mine[:len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    parts = [torch.zeros(longest, dtype=torch.uint8) for _ in range(_world())]
    _group().allgather([parts], [mine]).wait()
    return [bytes(part[:int(s)].tolist()) for part, s in zip(parts, sizes)]


# ------------------------------------------------------------------------ launching
def _spawn(fn, args=(), nprocs=None, start_method="spawn", **kwargs):
    """This process is one replica: run it here, with its local ordinal."""
    fn(int(os.environ.get("LOCAL_RANK", _rank())), *args)


def _launch(fn, args=(), start_method="spawn", debug_single_process=False, **kwargs):
    """torch_xla.launch, as xmp.spawn: the function gets the replica's index first."""
    _spawn(fn, args)


def _bridge_distributed(torch):
    """The "xla" process-group backend as Gloo over torchrun's env://; collectives called on
    XLA tensors through torch.distributed run on CPU copies."""
    import torch.distributed as dist

    original = dist.init_process_group

    def init_process_group(backend=None, init_method=None, *args, **kwargs):
        if (backend or "").lower() == "xla" or str(init_method or "").startswith(("xla://", "pjrt://")):
            backend, init_method = "gloo", "env://"
        return original(backend, init_method, *args, **kwargs)

    init_process_group.__wrapped__ = original
    dist.init_process_group = init_process_group
    for name in ("all_reduce", "broadcast"):
        setattr(dist, name, _through_cpu(torch, getattr(dist, name)))


def _through_cpu(torch, collective):
    @functools.wraps(collective)
    def run(tensor, *args, **kwargs):
        if not isinstance(tensor, torch.Tensor) or tensor.device.type != "xla":
            return collective(tensor, *args, **kwargs)
        cpu = to_cpu([tensor])[0]
        work = collective(cpu, *args, **kwargs)
        if work is not None:
            work.wait()
        with torch.no_grad():
            tensor.copy_(cpu.to(tensor.device))
        return None

    return run


# ------------------------------------------------------------------------ randomness
_FACTORIES = ("randn", "rand", "randint", "randperm", "normal", "bernoulli", "multinomial",
              "poisson", "randn_like", "rand_like", "randint_like")
_IN_PLACE = ("normal_", "uniform_", "bernoulli_", "random_", "exponential_", "log_normal_",
             "cauchy_", "geometric_")


def _is_xla(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value.device.type == "xla"
    if isinstance(value, (str, torch.device)):
        return torch.device(value).type == "xla"
    return False


def _random_from_cpu(torch):
    for name in _FACTORIES:
        if hasattr(torch, name):
            setattr(torch, name, _factory_on_cpu(torch, getattr(torch, name)))
    for name in _IN_PLACE:
        if hasattr(torch.Tensor, name):
            setattr(torch.Tensor, name, _in_place_on_cpu(torch, getattr(torch.Tensor, name)))
    for name in ("bernoulli", "multinomial"):
        setattr(torch.Tensor, name, _factory_on_cpu(torch, getattr(torch.Tensor, name)))


def _factory_on_cpu(torch, factory):
    @functools.wraps(factory)
    def make(*args, **kwargs):
        device = kwargs.get("device")
        xla_input = next((a for a in args if _is_xla(a)), None)
        if not _is_xla(device) and xla_input is None:
            return factory(*args, **kwargs)
        target = torch.device(device) if _is_xla(device) else xla_input.device
        if "device" in kwargs or (xla_input is not None and factory.__name__.endswith("_like")):
            kwargs["device"] = "cpu"
        requires_grad = kwargs.pop("requires_grad", False)
        args = tuple(to_cpu([a])[0] if _is_xla(a) else a for a in args)
        result = factory(*args, **kwargs).to(target)
        return result.requires_grad_() if requires_grad else result

    return make


def _in_place_on_cpu(torch, method):
    @functools.wraps(method)
    def draw(self, *args, **kwargs):
        if self.device.type != "xla":
            return method(self, *args, **kwargs)
        args = tuple(to_cpu([a])[0] if _is_xla(a) else a for a in args)
        cpu = torch.empty(self.shape, dtype=self.dtype)
        method(cpu, *args, **kwargs)
        with torch.no_grad():
            self.copy_(cpu.to(self.device))
        return self

    return draw
