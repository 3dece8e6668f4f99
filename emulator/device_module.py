"""The ``torch.neuron`` device module, as far as the prototype proved it against the docs.

Real behaviour: device_count, current_device, set_device, the ``device`` context manager,
synchronize (validates the ordinal; there is nothing to wait for), RNG (the CPU generator is
the device generator), get_amp_supported_dtype, is_bf16_supported, get_device_properties.
Placeholders: Stream/Event do nothing and memory statistics are 0 (there is no allocator).
"""

from __future__ import annotations

import types
from typing import Any

import torch

from . import NAME, ordinals
from .counters import COUNTERS
from .rng import DEVICE_RNG

_GIB = 2**30


class device:  # noqa: N801 - mirrors torch.cuda.device
    def __init__(self, dev: Any) -> None:
        self.index = ordinals.index_of(dev)
        self.previous = 0

    def __enter__(self) -> "device":
        self.previous = ordinals.current_index()
        ordinals.set_current(self.index)
        return self

    def __exit__(self, *exc: object) -> bool:
        ordinals.set_current(self.previous)
        return False


class Event:
    """No-op: emulated work is synchronous."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False) -> None:
        pass

    def record(self, stream: Any = None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def wait(self, stream: Any = None) -> None:
        pass


class Stream:
    """No-op: emulated work is synchronous."""

    def __init__(self, device: Any = None, priority: int = 0) -> None:
        self.device = torch.device(NAME, ordinals.index_of(device))

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def wait_stream(self, other: "Stream") -> None:
        pass

    def wait_event(self, event: Event) -> None:
        pass

    def record_event(self, event: Event | None = None) -> Event:
        return event or Event()


class stream:  # noqa: N801 - mirrors torch.cuda.stream
    def __init__(self, s: Stream | None) -> None:
        pass

    def __enter__(self) -> "stream":
        return self

    def __exit__(self, *exc: object) -> bool:
        return False


class _Properties:
    def __init__(self, index: int) -> None:
        self.name = "NeuronCore (emulated on CPU)"
        self.index = index
        self.total_memory = 16 * _GIB

    def __repr__(self) -> str:
        return f"_NeuronDeviceProperties(name='{self.name}', total_memory={self.total_memory})"


def set_device(dev: Any) -> None:
    ordinals.set_current(ordinals.index_of(dev))


def synchronize(dev: Any = None) -> None:
    if dev is not None:
        ordinals.index_of(dev)  # validates the ordinal


def manual_seed(seed: int) -> None:
    # torch.manual_seed calls torch.neuron.manual_seed_all: delegating back would recurse
    DEVICE_RNG.manual_seed(seed)


def seed() -> None:
    DEVICE_RNG.manual_seed(torch.default_generator.seed())


_streams: dict[int, Stream] = {}


def current_stream(dev: Any = None) -> Stream:
    index = ordinals.index_of(dev)
    return _streams.setdefault(index, Stream(index))


def _zero(dev: Any = None) -> int:
    return 0


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def build() -> types.ModuleType:
    m = types.ModuleType("torch.neuron")
    m.__doc__ = "CPU emulation of TorchNeuron's torch.neuron module (neuron-migrate smoke)"
    functions: dict[str, Any] = {
        "EMULATED": True,
        "is_available": lambda: True, "is_initialized": lambda: True,
        "_is_in_bad_fork": lambda: False, "_lazy_init": _nothing,
        "device_count": ordinals.device_count, "current_device": ordinals.current_index,
        "set_device": set_device, "device": device, "synchronize": synchronize,
        "get_device_name": lambda dev=None: "NeuronCore (emulated on CPU)",
        "get_device_properties": lambda dev=None: _Properties(ordinals.index_of(dev)),
        "manual_seed": manual_seed, "manual_seed_all": manual_seed,
        "seed": seed, "seed_all": seed, "initial_seed": lambda: DEVICE_RNG.seed,
        "get_rng_state": lambda dev=None: DEVICE_RNG.get_state(),
        "set_rng_state": lambda state, dev=None: DEVICE_RNG.set_state(state),
        "get_rng_state_all": lambda: [DEVICE_RNG.get_state()],
        "set_rng_state_all": lambda states: DEVICE_RNG.set_state(states[0]),
        "memory_allocated": _zero, "max_memory_allocated": _zero,
        "memory_reserved": _zero, "max_memory_reserved": _zero,
        "memory_stats": lambda dev=None: {},
        "memory_summary": lambda dev=None, abbreviated=False: "emulated neuron device: no allocator\n",
        "reset_peak_memory_stats": _nothing, "reset_accumulated_memory_stats": _nothing,
        "empty_cache": _nothing, "mem_get_info": lambda dev=None: (16 * _GIB, 16 * _GIB),
        "get_amp_supported_dtype": lambda: [torch.bfloat16, torch.float16],
        "is_bf16_supported": lambda including_emulation=True: True,
        "Stream": Stream, "Event": Event, "stream": stream, "set_stream": _nothing,
        "current_stream": current_stream, "default_stream": current_stream,
        "get_dynamo_metrics": lambda: {"graphs_compiled": COUNTERS.graphs_compiled},
        "reset_dynamo_metrics": lambda: setattr(COUNTERS, "graphs_compiled", 0),
    }
    for name, value in functions.items():
        setattr(m, name, value)
    return m
