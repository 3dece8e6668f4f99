"""How a worker's ranks are laid out: which of them average gradients, which hold the same
parameters. Learned from the script's own DeviceMesh and tensor-parallel calls.

The data-parallel check (emulator/parallelism.py) and the replica check (emulator/distributed.py)
cannot treat every rank of the world as a data-parallel replica: a tensor-parallel rank holds a
shard of each layer and averages nothing with its tensor-parallel peers. A script that parallelises declares its layout when it builds a DeviceMesh: each dimension
is data parallel or model parallel, and the mesh gives every rank its coordinates.

How a dimension's kind is decided, in order:
- used as the mesh of ``parallelize_module`` (tensor parallelism): model parallel, whatever its
  name (the common tensor-parallel-only script builds an unnamed one-dimensional mesh);
- named ``dp``, ``data_parallel``, ``dp_replicate`` or ``dp_shard``: data parallel (the last
  shards the parameters, FSDP-style, so its ranks are not replicas of each other);
- named anything else (``tp``, ``pp``, ``cp``, ``ep``...): model parallel;
- unnamed: data parallel, the meaning the checks gave every rank before meshes were read.

The layout is that of the root mesh (not a slice of one) with the most dimensions, the first
such: a script that builds a one-dimensional world mesh for one purpose and a 2-D mesh for its
model is described by the 2-D one. Without any mesh there is no layout, and every rank of the
world counts as a data-parallel replica, as before.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

DATA_PARALLEL = ("dp", "data_parallel", "dp_replicate", "dp_shard")
REPLICATING = ("dp", "data_parallel", "dp_replicate")  # ranks hold the same parameters
_TP_MODULE = "torch.distributed.tensor.parallel.api"


@dataclass(frozen=True)
class MeshSeen:
    """A root DeviceMesh as this worker built it: the rank at each coordinate, and the names."""

    ranks: tuple[Any, ...]  # nested tuples of ints, shaped as the mesh
    shape: tuple[int, ...]
    names: tuple[str, ...] | None


_meshes: list[MeshSeen] = []
_tensor_parallel_groups: list[frozenset[int]] = []  # the meshes parallelize_module was given


@dataclass(frozen=True)
class Layout:
    """This rank's place in the mesh: the ranks it averages gradients with (``data_group``) and
    the ranks that hold the same parameters as it does (``replica_group``)."""

    rank: int
    dims: tuple[tuple[str, int, str], ...]  # (name, size, "data" | "model") per mesh dimension
    data_group: tuple[int, ...]
    replica_group: tuple[int, ...]

    @property
    def model_parallel(self) -> bool:
        return any(kind == "model" and size > 1 for _, size, kind in self.dims)

    def describe(self) -> str:
        """`dp=2 × tp=2` (unnamed dimensions by index: `dim0=4`)."""
        return " × ".join(f"{name}={size}" for name, size, _ in self.dims)

    def as_dict(self) -> dict[str, Any]:
        return {"mesh": self.describe(), "dims": [list(d) for d in self.dims],
                "data_group": list(self.data_group), "replica_group": list(self.replica_group),
                "model_parallel": self.model_parallel}


def current_layout(rank: int) -> Layout | None:
    """This rank's layout in the widest root mesh the script built, or None without one."""
    seen = [m for m in _meshes if rank in _flatten(m.ranks)]
    if not seen:
        return None
    mesh = max(seen, key=lambda m: len(m.shape))  # max keeps the first of equals
    coordinate = _coordinate(mesh.ranks, rank)
    dims = tuple((_dim_name(mesh, d), size, _kind(mesh, d, coordinate))
                 for d, size in enumerate(mesh.shape))
    data = {d for d, (_, _, kind) in enumerate(dims) if kind == "data"}
    replicating = {d for d in data if mesh.names is None or mesh.names[d] in REPLICATING}
    return Layout(rank, dims, _group(mesh, coordinate, data),
                  _group(mesh, coordinate, replicating))


def _dim_name(mesh: MeshSeen, dim: int) -> str:
    return mesh.names[dim] if mesh.names else f"dim{dim}"


def _kind(mesh: MeshSeen, dim: int, coordinate: tuple[int, ...]) -> str:
    """"model" for a dimension the script parallelised a module over or named so, else "data"."""
    along = frozenset(_group(mesh, coordinate, {dim}))
    if mesh.shape[dim] > 1 and along in _tensor_parallel_groups:
        return "model"
    if mesh.names is None or mesh.names[dim] in DATA_PARALLEL:
        return "data"
    return "model"


def _group(mesh: MeshSeen, coordinate: tuple[int, ...], free: set[int]) -> tuple[int, ...]:
    """The ranks whose coordinates equal this one's on every dimension not in ``free``."""
    found = []
    for rank in _flatten(mesh.ranks):
        other = _coordinate(mesh.ranks, rank)
        if all(other[d] == coordinate[d] for d in range(len(coordinate)) if d not in free):
            found.append(rank)
    return tuple(sorted(found))


def _flatten(ranks: Any) -> list[int]:
    if isinstance(ranks, int):
        return [ranks]
    return [r for inner in ranks for r in _flatten(inner)]


def _coordinate(ranks: Any, rank: int) -> tuple[int, ...]:
    if isinstance(ranks, int):
        return ()
    for index, inner in enumerate(ranks):
        if rank in _flatten(inner):
            return (index, *_coordinate(inner, rank))
    raise ValueError(f"rank {rank} is not in the mesh")


def _as_tuples(value: Any) -> Any:
    return tuple(_as_tuples(v) for v in value) if isinstance(value, list) else value


# ------------------------------------------------------------------- learning the layout
def record_mesh(mesh: Any) -> None:
    """Keep a root mesh this rank belongs to (slices of a mesh describe no new layout)."""
    if getattr(mesh, "_root_mesh", None) is not None:
        return
    try:
        ranks = mesh.mesh.tolist()
        names = tuple(mesh.mesh_dim_names) if mesh.mesh_dim_names else None
    except Exception:  # noqa: BLE001 - a mesh this rank is not in, or a torch that moved it
        return
    _meshes.append(MeshSeen(_as_tuples(ranks), tuple(mesh.mesh.shape), names))


def record_tensor_parallel(mesh: Any) -> None:
    """Keep the ranks of a mesh the script parallelised a module over (its own slice)."""
    try:
        _tensor_parallel_groups.append(frozenset(int(r) for r in mesh.mesh.flatten().tolist()))
    except Exception:  # noqa: BLE001 - no mesh (the current one was meant) or an odd one
        return


def watch() -> None:
    """Learn meshes as the script builds them: wrap DeviceMesh.__init__ (its module comes with
    torch.distributed) and, once the script imports tensor parallelism, parallelize_module.
    Importing tensor parallelism here would cost every run ~0.4 s, so its module is patched
    as it is imported."""
    import torch.distributed as dist

    if not dist.is_available():
        return
    from torch.distributed.device_mesh import DeviceMesh

    original = DeviceMesh.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        record_mesh(self)

    DeviceMesh.__init__ = __init__  # type: ignore[method-assign]
    if _TP_MODULE in sys.modules:
        _patch_parallelize(sys.modules[_TP_MODULE])
    else:
        sys.meta_path.insert(0, _AfterImport(_TP_MODULE, _patch_parallelize))


def _patch_parallelize(module: ModuleType) -> None:
    original = module.parallelize_module

    def parallelize_module(module_: torch.nn.Module, device_mesh: Any = None,
                           *args: Any, **kwargs: Any) -> torch.nn.Module:
        result = original(module_, device_mesh, *args, **kwargs)
        if device_mesh is not None:
            record_tensor_parallel(device_mesh)
        return result

    parallelize_module.__doc__ = original.__doc__
    parallelize_module.__wrapped__ = original  # type: ignore[attr-defined]
    module.parallelize_module = parallelize_module


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``patch`` on one module right after it executes, before anything imports from it."""

    def __init__(self, name: str, patch: Callable[[ModuleType], None]) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, patch = spec.loader, self.patch
        execute = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            patch(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
