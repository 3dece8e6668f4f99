"""Plain-PyTorch helpers for code migrated from NeuronX Distributed (NxD) model parallelism.

NxD kept the process layout in module globals of `parallel_state`, which every module of a
program read (a model file asks the tensor-parallel size while the training script set it).
The native layout is a DeviceMesh; to be readable from every migrated module of the program
without importing anything of neuron-migrate, the mesh lives in one registry module in
`sys.modules` that the first `_neuron_init_mesh` creates. The helpers below are copied into
each migrated file like the others (`rules/emitted_helpers.py`), so every copy reads the same mesh.
"""

from __future__ import annotations

from neuron_migrate.ruleapi import Helper, helper

TP_IMPORTS = ("torch", "torch.distributed.tensor.parallel")
"""What a file that builds tensor-parallel layers needs at module level: the styles are
written out at each layer (`torch.distributed.tensor.parallel.ColwiseParallel(...)`)."""

PARALLEL_HELPERS: dict[str, Helper] = {
    "_neuron_mesh": helper('''
def _neuron_mesh(required=True):
    """The (data parallel, tensor parallel) DeviceMesh that replaced NxD's parallel_state,
    shared by every module of the program through one registry module."""
    import sys

    mesh = getattr(sys.modules.get("_neuron_parallel_layout"), "mesh", None)
    if mesh is None and required:
        raise RuntimeError(
            "the model-parallel layout is not initialized: the call that replaced "
            "parallel_state.initialize_model_parallel must run first")
    return mesh
''', imports=()),
    "_neuron_init_mesh": helper('''
def _neuron_init_mesh(tensor_model_parallel_size=1):
    """parallel_state.initialize_model_parallel: the processes as data-parallel replicas of
    tensor-parallel groups, tensor-parallel ranks contiguous as NxD placed them."""
    import os
    import sys
    import types

    from torch.distributed.device_mesh import init_device_mesh

    if not torch.distributed.is_initialized():
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # a worker torchrun started
            torch.distributed.init_process_group("neuron")
        else:  # one process, as NxD ran without torchrun: a group of its own
            torch.distributed.init_process_group(
                "neuron", store=torch.distributed.HashStore(), rank=0, world_size=1)
    world_size = torch.distributed.get_world_size()
    if world_size % tensor_model_parallel_size:
        raise ValueError(
            f"the world size {world_size} is not a multiple of the tensor-parallel size "
            f"{tensor_model_parallel_size}")
    layout = sys.modules.setdefault("_neuron_parallel_layout",
                                    types.ModuleType("_neuron_parallel_layout"))
    layout.mesh = init_device_mesh(
        "neuron", (world_size // tensor_model_parallel_size, tensor_model_parallel_size),
        mesh_dim_names=("dp", "tp"))
    return layout.mesh
'''),
    "_neuron_destroy_mesh": helper('''
def _neuron_destroy_mesh():
    """parallel_state.destroy_model_parallel: forget the layout (its groups end with the
    process group)."""
    import sys

    sys.modules.pop("_neuron_parallel_layout", None)
''', imports=()),
    "_neuron_tensor_parallel": helper('''
def _neuron_tensor_parallel(module, style, init_method=None):
    """Shard a full-size layer over the tensor-parallel ranks with a parallel style, as NxD's
    parallel layers were built: `init_method` sees the whole weight (NxD initialised one
    master weight and split it) and rank 0's values are scattered, so every layout starts
    from the same model."""
    if init_method is not None:
        with torch.no_grad():
            init_method(module.weight)
    return torch.distributed.tensor.parallel.parallelize_module(
        module, _neuron_mesh()["tp"], style)
''', requires=("_neuron_mesh",), imports=TP_IMPORTS),
    "_neuron_parallel_cross_entropy": helper('''
def _neuron_parallel_cross_entropy(logits, target, label_smoothing=0.0):
    """NxD's parallel_cross_entropy: the per-token loss (no reduction) of logits whose last
    dimension (the vocabulary) is split over the tensor-parallel ranks. The shards are
    gathered (differentiably) and the loss taken on the whole vocabulary."""
    from torch.distributed.tensor import DTensor, Shard

    mesh = _neuron_mesh()["tp"]
    if mesh.size() > 1:
        logits = DTensor.from_local(logits, mesh, [Shard(logits.dim() - 1)]).full_tensor()
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.size(-1)), target.reshape(-1), reduction="none",
        label_smoothing=label_smoothing)
    return loss.view_as(target)
''', requires=("_neuron_mesh",)),
    "_neuron_clip_grad_norm": helper('''
def _neuron_clip_grad_norm(parameters, max_norm, norm_type=2.0):
    """NxD's grads.clip_grad_norm: clip by the norm of the whole model's gradients, a
    tensor-parallel weight counted over all its shards and a replicated one once; returns
    the total norm."""
    from torch.distributed.tensor import DTensor

    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    norms = []
    for grad in grads:
        norm = torch.linalg.vector_norm(grad, norm_type)
        norms.append(norm.full_tensor() if isinstance(norm, DTensor) else norm)
    total = torch.linalg.vector_norm(torch.stack([n.to(norms[0].device) for n in norms]),
                                     norm_type)
    scale = float(max_norm) / (float(total) + 1e-6)
    if scale < 1.0:
        with torch.no_grad():
            for grad in grads:
                grad.mul_(scale)
    return total
'''),
    "_neuron_average_in_group": helper('''
def _neuron_average_in_group(optimizer, group, optimizer_args=None, step=False):
    """Average the gradients of the optimizer's parameters over the processes of `group`
    (xm.reduce_gradients / optimizer_step with NxD's data-parallel replica groups), then
    step if asked."""
    _neuron_average_gradients(
        [param for param_group in optimizer.param_groups for param in param_group["params"]],
        group=group)
    if step:
        return optimizer.step(**(optimizer_args or {}))
    return None
''', requires=("_neuron_distributed", "_neuron_average_tensors", "_neuron_average_gradients")),
    "_neuron_redistribute": helper('''
def _neuron_redistribute(tensor, source, target, grad=None):
    """NxD's region mappings over the "tp" mesh dimension: what this rank holds is read as
    the `source` placement and its part of the `target` placement is returned; backward
    moves the gradient the other way (as the gradient placement `grad` when given)."""
    from torch.distributed.tensor import DTensor

    mesh = _neuron_mesh()["tp"]
    moved = DTensor.from_local(tensor, mesh, [source], run_check=False)
    if target != source:
        moved = moved.redistribute(mesh, [target])
    return moved.to_local(grad_placements=None if grad is None else [grad])
''', requires=("_neuron_mesh",), imports=("torch", "torch.distributed.tensor")),
    "_neuron_allreduce_sequence_parallel_gradients": helper('''
def _neuron_allreduce_sequence_parallel_gradients(optimizer):
    """NxD's grads.allreduce_sequence_parallel_gradients: sum over the tensor-parallel ranks
    the gradients of the optimizer's parameters marked `sequence_parallel_enabled` (a norm
    of the script's own that sees one slice of the sequence per rank). A DTensor parameter
    (a norm under SequenceParallel) is skipped: its backward already summed its gradient."""
    from torch.distributed.tensor import DTensor

    if not _neuron_distributed():  # one process: nothing to sum
        return
    group = _neuron_mesh()["tp"].get_group()
    for param_group in optimizer.param_groups:
        for param in param_group["params"]:
            if (getattr(param, "sequence_parallel_enabled", False)
                    and param.grad is not None and not isinstance(param.grad, DTensor)):
                torch.distributed.all_reduce(param.grad, group=group)
''', requires=("_neuron_mesh", "_neuron_distributed")),
    "_neuron_move_model": helper('''
def _neuron_move_model(model, device):
    """NxD's move_model_to_device: model.to(device) keeping the `sequence_parallel_enabled`
    marks of its parameters (a move may make new parameter objects, which NxD re-marked so
    that allreduce_sequence_parallel_gradients still finds them). DTensor parameters keep
    their sharding and tied weights stay tied through Module.to."""
    marked = {name: param.sequence_parallel_enabled for name, param in model.named_parameters()
              if hasattr(param, "sequence_parallel_enabled")}
    model.to(device)
    for name, param in model.named_parameters():
        if name in marked:
            param.sequence_parallel_enabled = marked[name]
''', imports=()),
    "_neuron_mesh_size": helper('''
def _neuron_mesh_size(dim):
    """The size of one dimension of the layout's mesh; 1 for a kind of parallelism it does
    not have (NxD's pipeline, expert and context sizes without those dimensions)."""
    mesh = _neuron_mesh()
    return mesh[dim].size() if dim in (mesh.mesh_dim_names or ()) else 1
''', requires=("_neuron_mesh",), imports=()),
    "_neuron_mesh_rank": helper('''
def _neuron_mesh_rank(dim):
    """This process's rank along one dimension of the layout's mesh; 0 for a kind of
    parallelism it does not have."""
    mesh = _neuron_mesh()
    return mesh.get_local_rank(dim) if dim in (mesh.mesh_dim_names or ()) else 0
''', requires=("_neuron_mesh",), imports=()),
    "_neuron_divide": helper('''
def _neuron_divide(numerator, denominator):
    """NxD's parallel_layers.utils.divide: the quotient of a division that must be exact."""
    if numerator % denominator:
        raise ValueError(f"{numerator} is not divisible by {denominator}")
    return numerator // denominator
''', imports=()),
    "_NeuronStridedColumns": helper('''
class _NeuronStridedColumns(torch.nn.Module):
    """NxD's ColumnParallelLinear(stride=k): k fused outputs (q, k and v; gate and up) each
    split over the tensor-parallel ranks, every rank holding its slice of each. Natively, k
    column-parallel layers whose local outputs are concatenated in that order; with sequence
    parallelism the input is gathered once for all of them. Each part's ColwiseParallel
    already sums its input gradient over the ranks, so the gathered input's gradient is
    replicated and backward keeps this rank's slice of it (a Partial gradient here would be
    summed again, multiplying it by the tensor-parallel size)."""

    def __init__(self, parts, sequence_dim=None):
        super().__init__()
        self.parts = torch.nn.ModuleList(parts)
        self.sequence_dim = sequence_dim

    def forward(self, x):
        if self.sequence_dim is not None:
            x = _neuron_redistribute(x, torch.distributed.tensor.Shard(self.sequence_dim),
                                     torch.distributed.tensor.Replicate())
        return torch.cat([part(x) for part in self.parts], dim=-1)
''', requires=("_neuron_mesh", "_neuron_redistribute"),
       imports=("torch", "torch.distributed.tensor")),
}

PARALLEL_HELPERS.update({
    "_neuron_parallel_config": helper('''
def _neuron_parallel_config(tensor_parallel_size=1, pipeline_parallel_size=1,
                            expert_parallel_size=1, context_parallel_size=1,
                            pipeline_config=None, optimizer_config=None,
                            activation_checkpoint_config=None, pad_model=False,
                            sequence_parallel=False, model_init_config=None, lora_config=None,
                            mixed_precision_config=None, sequential_move_factor=11, lnc_size=1):
    """neuronx_distributed_config: the same settings, with NxD's defaults, and the mesh once a
    process group exists. What has no native form here stops the run with what to do."""
    for kind, size in (("pipeline", pipeline_parallel_size), ("expert", expert_parallel_size),
                       ("context", context_parallel_size)):
        if size != 1:
            raise NotImplementedError(
                f"{kind}_parallel_size={size}: {kind} parallelism was NxD's; migrate it by "
                "hand (torch.distributed.pipelining, or a mesh dimension of its own)")
    if pad_model or lora_config is not None or pipeline_config:
        raise NotImplementedError("pad_model, lora_config and pipeline_config were NxD's; "
                                  "pad the heads, apply LoRA (peft) or pipeline by hand")
    optimizer_config = {"zero_one_enabled": False, "grad_clipping": True, "max_grad_norm": 1.0,
                        **(optimizer_config or {})}
    zero = optimizer_config["zero_one_enabled"]
    mixed_precision_config = {"use_master_weights": zero, "use_fp32_grad_acc": zero,
                              "use_master_weights_in_ckpt": False,
                              **(mixed_precision_config or {})}
    model_init_config = {"sequential_move_factor": sequential_move_factor,
                         "meta_device_init": False, "param_init_fn": None,
                         **(model_init_config or {})}
    config = {"tensor_parallel_size": tensor_parallel_size, "pipeline_parallel_size": 1,
              "expert_parallel_size": 1, "context_parallel_size": 1,
              "optimizer_config": optimizer_config,
              "activation_checkpoint_config": activation_checkpoint_config,
              "sequence_parallel": sequence_parallel, "model_init_config": model_init_config,
              "mixed_precision_config": mixed_precision_config}
    if torch.distributed.is_initialized() and _neuron_mesh(required=False) is None:
        _neuron_init_mesh(tensor_parallel_size)
    return config
''', requires=("_neuron_mesh", "_neuron_init_mesh")),
    "_NeuronParallelModel": helper('''
class _NeuronParallelModel(torch.nn.Module):
    """initialize_parallel_model's NxDModel without pipeline parallelism: the model itself,
    with NxD's run_train (forward, then backward) and its module accessors; its parameters
    and state dict are the model's own, without a prefix (the migrated checkpoint helpers
    hand torch.distributed.checkpoint the model itself, whose tree has the same names)."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def run_train(self, *args, **kwargs):
        loss = self.module(*args, **kwargs)
        loss.backward()
        return loss

    def local_modules(self):
        return [self.module]

    def original_module(self):
        return self.module

    def named_parameters(self, *args, **kwargs):
        return self.module.named_parameters(*args, **kwargs)

    def named_buffers(self, *args, **kwargs):
        return self.module.named_buffers(*args, **kwargs)

    def named_modules(self, *args, **kwargs):
        return self.module.named_modules(*args, **kwargs)

    def state_dict(self, *args, **kwargs):
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        return self.module.load_state_dict(state_dict, strict=strict, assign=assign)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.module, name)
'''),
    "_neuron_parallel_model": helper('''
def _neuron_parallel_model(nxd_config, model_fn, include_buffers=False, *model_args,
                           **model_kwargs):
    """initialize_parallel_model: build the model (its tensor-parallel layers shard
    themselves over the mesh), move it to the neuron device and checkpoint the activations
    of the layers the config names."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        apply_activation_checkpointing)

    if _neuron_mesh(required=False) is None:
        _neuron_init_mesh(nxd_config["tensor_parallel_size"])
    init = nxd_config["model_init_config"]
    if init["meta_device_init"]:
        model = _neuron_build_on_meta(model_fn, include_buffers, *model_args, **model_kwargs)
    else:
        model = model_fn(*model_args, **model_kwargs).to("neuron")
    if init["param_init_fn"] is not None:
        _neuron_init_parameters(model, init["param_init_fn"])
    checkpointed = nxd_config["activation_checkpoint_config"]
    if checkpointed == "full":
        names = set(getattr(model, "_no_split_modules", None) or ())
        if not names:
            raise NotImplementedError(
                'activation_checkpoint_config="full" named the layers of a Hugging Face '
                "model; pass the layer classes instead")
        classes = tuple({type(m) for m in model.modules() if type(m).__name__ in names})
    elif checkpointed is not None:
        classes = tuple(checkpointed if isinstance(checkpointed, (list, tuple))
                        else [checkpointed])
    if checkpointed is not None:
        apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, classes))
    return _NeuronParallelModel(model)
''', requires=("_neuron_mesh", "_neuron_init_mesh", "_NeuronParallelModel",
                "_neuron_build_on_meta", "_neuron_init_parameters")),
    "_neuron_init_parameters": helper('''
def _neuron_init_parameters(model, param_init_fn):
    """NxD's param_init_fn(module, device), called on every module. It sees each sharded
    weight whole, one module at a time, and rank 0's values are scattered, as NxD
    initialised one master weight per layer and split it: every layout starts alike."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    with torch.no_grad():
        for module in model.modules():
            sharded = {name: param for name, param in module._parameters.items()
                       if isinstance(param, DTensor)}
            for name, param in sharded.items():
                module._parameters[name] = torch.nn.Parameter(
                    torch.empty(param.shape, dtype=param.dtype, device="neuron"),
                    requires_grad=param.requires_grad)
            param_init_fn(module, torch.device("neuron"))
            for name, param in sharded.items():
                whole = module._parameters[name].detach()
                param.copy_(distribute_tensor(whole, param.device_mesh, param.placements))
                module._parameters[name] = param
'''),
    "_neuron_build_on_meta": helper('''
def _neuron_build_on_meta(model_fn, include_buffers, *model_args, **model_kwargs):
    """NxD's meta_device_init: parameters are created on the meta device, so a large model is
    never whole in memory (tensor-parallel layers shard themselves there), then allocated on
    the neuron device for param_init_fn to fill. Buffers stay real unless include_buffers,
    as in NxD."""
    if include_buffers:
        with torch.device("meta"):
            model = model_fn(*model_args, **model_kwargs)
    else:
        register = torch.nn.Module.register_parameter

        def register_on_meta(module, name, param):
            register(module, name, param)
            if param is not None and not param.is_meta:
                module._parameters[name] = torch.nn.Parameter(
                    param.to("meta"), requires_grad=param.requires_grad)

        torch.nn.Module.register_parameter = register_on_meta
        try:
            model = model_fn(*model_args, **model_kwargs)
        finally:
            torch.nn.Module.register_parameter = register
    buffers = [(module, name, buffer) for module in model.modules()
               for name, buffer in module._buffers.items()
               if buffer is not None and not buffer.is_meta]
    model.to_empty(device="neuron")
    for module, name, buffer in buffers:
        module._buffers[name] = buffer.to("neuron")
    return model
'''),
    "_NeuronParallelOptimizer": helper('''
class _NeuronParallelOptimizer(torch.optim.Optimizer):
    """initialize_parallel_optimizer's NxDOptimizer (and NxD's ZeRO-1 optimizer): the
    optimizer, with a step that first sums the gradients of parameters marked
    sequence_parallel_enabled over the tensor-parallel ranks when the config says
    sequence_parallel, averages the gradients over the data-parallel ranks (in buckets) and
    clips them by the whole model's norm, kept in `grad_norm`, as NxD's did. With
    zero_one_enabled, each data-parallel rank keeps the state of, and updates, only the
    parameters it owns (`zero_one_owners`), then the owners share the new values; the
    param_groups stay whole and state_dict() holds this rank's share, which DCP's
    get_optimizer_state_dict saves and loads (set_optimizer_state_dict with strict=False,
    since each rank loads only its own share)."""

    def __init__(self, optimizer, nxd_config):
        super().__init__(optimizer.param_groups, optimizer.defaults)  # hooks see this step
        # the wrapped optimizer's own groups and state: a scheduler's learning rate, a
        # state dict and a step all act on the same ones
        self.param_groups = optimizer.param_groups
        self.state = optimizer.state
        self.optimizer = optimizer
        self.nxd_config = nxd_config
        self.grad_norm = None
        self.zero_one_owners = None
        self._zero_one_loads = None
        if nxd_config["optimizer_config"].get("zero_one_enabled") and _neuron_distributed():
            ranks = torch.distributed.get_world_size(_neuron_mesh().get_group("dp"))
            self._zero_one_loads = [0] * ranks
            self.zero_one_owners = _neuron_zero_one_owners(
                self._parameters(), ranks, self._zero_one_loads)

    def _parameters(self):
        return [p for group in self.param_groups for p in group["params"]]

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict):
        if self.zero_one_owners is not None:  # keep only the state of parameters owned here
            rank = torch.distributed.get_rank(_neuron_mesh().get_group("dp"))
            owned = {i for i, p in enumerate(self._parameters())
                     if self.zero_one_owners.get(p) == rank}
            state_dict = {**state_dict, "state": {
                key: value for key, value in state_dict["state"].items()
                if not isinstance(key, int) or key in owned}}
        self.optimizer.load_state_dict(state_dict)
        self.param_groups = self.optimizer.param_groups  # loading made new ones
        self.state = self.optimizer.state

    def zero_grad(self, set_to_none=False):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group):
        if not hasattr(self, "optimizer"):  # Optimizer.__init__ registering the groups
            super().add_param_group(param_group)
            return
        self.optimizer.add_param_group(param_group)
        if self.zero_one_owners is not None:
            self.zero_one_owners.update(_neuron_zero_one_owners(
                self.param_groups[-1]["params"], len(self._zero_one_loads),
                self._zero_one_loads))

    def step(self, closure=None):
        loss = None
        if closure is not None:  # the gradients it makes are the ones averaged and clipped
            with torch.enable_grad():
                loss = closure()
        params = self._parameters()
        if self.nxd_config.get("sequence_parallel"):  # NM706 passes only optimizer_config
            _neuron_allreduce_sequence_parallel_gradients(self)
        if _neuron_distributed():
            _neuron_average_gradients(params, group=_neuron_mesh().get_group("dp"))
        settings = self.nxd_config["optimizer_config"]
        if settings["grad_clipping"]:
            self.grad_norm = _neuron_clip_grad_norm(params, settings["max_grad_norm"])
        if self.zero_one_owners is None:
            self.optimizer.step()
            return loss
        group = _neuron_mesh().get_group("dp")
        rank = torch.distributed.get_rank(group)
        others = {p: p.grad for p, owner in self.zero_one_owners.items()
                  if owner != rank and p.grad is not None}
        for param in others:  # an optimizer skips a parameter without a gradient
            param.grad = None
        try:
            self.optimizer.step()
        finally:
            for param, grad in others.items():
                param.grad = grad
        _neuron_share_updates(self.zero_one_owners, group)
        return loss
''', requires=("_neuron_distributed", "_neuron_mesh", "_neuron_average_tensors",
               "_neuron_average_gradients", "_neuron_clip_grad_norm",
               "_neuron_allreduce_sequence_parallel_gradients", "_neuron_zero_one_owners",
               "_neuron_share_updates")),
    "_neuron_parallel_optimizer": helper('''
def _neuron_parallel_optimizer(nxd_config, optimizer_class, parameters, **defaults):
    """initialize_parallel_optimizer: the optimizer with NxD's gradient averaging and
    clipping; with ZeRO-1, its state sharded over the data-parallel ranks and its gradients
    clipped at `max_norm` among the optimizer's arguments (1.0 by default), not at the
    config's max_grad_norm, as NxD's ZeRO-1 optimizer did."""
    settings = nxd_config["optimizer_config"]
    if settings["zero_one_enabled"]:
        # NxD never passed max_grad_norm to its ZeRO-1 optimizer: it clipped at that
        # optimizer's own max_norm, 1.0 unless given among the optimizer's arguments
        settings = {**settings, "max_grad_norm": defaults.pop("max_norm", 1.0)}
        nxd_config = {**nxd_config, "optimizer_config": settings}
    return _NeuronParallelOptimizer(optimizer_class(parameters, **defaults), nxd_config)
''', requires=("_neuron_distributed", "_neuron_mesh", "_neuron_average_tensors",
               "_neuron_average_gradients", "_neuron_clip_grad_norm",
               "_neuron_allreduce_sequence_parallel_gradients", "_neuron_zero_one_owners",
               "_neuron_share_updates", "_NeuronParallelOptimizer")),
    "_neuron_rank_message": helper('''
def _neuron_rank_message(msg):
    """NxD's parallel_state.rmsg: the message prefixed with this process's place in the
    layout (-1 before the layout exists)."""
    mesh = _neuron_mesh(required=False)
    ranks = [-1, -1, -1, -1]
    if mesh is not None:
        ranks = [_neuron_mesh_rank(dim) for dim in ("pp", "tp", "dp", "cp")]
    rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
    return f"[rank_{rank}_pp{ranks[0]}_tp{ranks[1]}_dp{ranks[2]}_cp{ranks[3]}] {msg}"
''', requires=("_neuron_mesh", "_neuron_mesh_rank")),
})
