"""``install()``: make ``neuron`` a usable device backed by the CPU, in this process.

The emulator leans on a few private or experimental PyTorch hooks. Each is looked up through
:func:`_require`, so a torch release that moved one fails at install with a message naming
it, rather than somewhere inside the user's script. Checked on torch 2.13 and 2.14.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
import warnings
from typing import Any

import torch

from . import NAME, compile_backend, device_module, distributed, kernels, neuronx_stub
from . import fsdp, limits, ordinals, patches, serialization

TESTED_MINORS = ("2.13", "2.14")

_libraries: list[torch.library.Library] = []  # registrations live as long as these objects
_installed: list[types.ModuleType] = []


class UnsupportedTorch(RuntimeError):
    """This torch release lacks a hook the emulator needs."""


def _require(module: str, attribute: str) -> Any:
    """``module.attribute`` (the attribute may be dotted), or a clear UnsupportedTorch."""
    try:
        found: Any = importlib.import_module(module)
        for part in attribute.split("."):
            found = getattr(found, part)
        return found
    except (ImportError, AttributeError) as error:
        raise UnsupportedTorch(
            f"neuron emulator: torch {torch.__version__} has no {module}.{attribute}, which "
            f"the emulated neuron device relies on (tested on torch {', '.join(TESTED_MINORS)})"
        ) from error


def _check_version() -> None:
    minor = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    if minor not in TESTED_MINORS:
        warnings.warn(f"neuron emulator: untested on torch {torch.__version__} "
                      f"(tested: {', '.join(TESTED_MINORS)})", stacklevel=3)


def _skip_in_dynamo() -> None:
    """Dynamo must never trace the emulator (it is the "device"): after a graph break it would
    otherwise compile ``__torch_dispatch__`` frames as if they were user code."""
    skip_dirs = _require("torch._dynamo.trace_rules", "SKIP_DIRS")
    recompile = _require("torch._dynamo.trace_rules", "_recompile_re")
    skip_dirs.append(os.path.dirname(os.path.abspath(__file__)).replace(os.sep, "/") + "/")
    recompile()


_dynamo_ready: list[bool] = []


def _register_with_dynamo() -> None:
    if _dynamo_ready:
        return
    import torch._dynamo

    torch._dynamo.register_backend(compile_backend.backend, name=NAME)
    _skip_in_dynamo()
    _dynamo_ready.append(True)


def install(*, quiet: bool = True) -> types.ModuleType:
    """Idempotent; returns the ``torch.neuron`` module."""
    if _installed:
        return _installed[0]
    if "torch_neuronx" in sys.modules and not getattr(sys.modules["torch_neuronx"], "EMULATED", False):
        raise RuntimeError("neuron emulator: the real torch_neuronx is already imported")
    _check_version()
    setup_backend = _require("torch.utils.backend_registration",
                             "_setup_privateuseone_for_python_backend")
    _require("torch", "Tensor._make_wrapper_subclass")
    swap_on_conversion = _require("torch.__future__", "set_swap_module_params_on_conversion")

    module = device_module.build()
    setup_backend(rename=NAME, backend_module=module)
    # Module.to("neuron") must swap the Parameter objects for NeuronTensors, not set `.data`
    swap_on_conversion(True)
    kernels.register(_libraries)
    limits.register_refusals(_libraries)
    limits.patch_nested()

    # Importing Dynamo costs ~1.7 s per process; the compile wrapper does it on first use.
    compile_backend.patch_compile(_register_with_dynamo)
    if "torch._dynamo" in sys.modules:
        _register_with_dynamo()
    distributed.register_backend()
    patches.patch_pin_memory()
    patches.patch_accelerator()
    fsdp.install()
    serialization.patch()
    sys.modules.setdefault("torch_neuronx", neuronx_stub.build(module))
    _installed.append(module)
    if not quiet:
        print(f"[neuron-migrate smoke] '{NAME}' device emulated on CPU "
              f"({ordinals.device_count()} cores)", file=sys.stderr)
    return module
