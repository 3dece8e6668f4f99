"""Records a training run for `neuron-migrate verify`, without touching the user's script.

This folder goes on the PYTHONPATH of every process `verify` starts: the original under the
reference interpreter (torch_xla on the CPU), the migrated script under the emulated device
(there the emulator's own sitecustomize comes first on the path and runs this one). Its
siblings are loaded from their own files, so the user's environment sees nothing else of
neuron-migrate, and the reference interpreter needs none of it installed.
"""

import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name):
    """A sibling module under a private name (a script may have its own `record` module)."""
    qualified = f"_neuron_verify_{name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, os.path.join(_HERE, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    spec.loader.exec_module(module)
    return module


if os.environ.get("NEURON_VERIFY_RECORD"):
    try:
        if os.environ.get("NEURON_VERIFY_SIDE") == "original":
            _load("xla_bridge").install()
        _load("record").install()
    except Exception as error:  # noqa: BLE001 - a recorder that cannot record must say so
        sys.stderr.write(f"neuron-migrate verify: could not install the recorder: "
                         f"{type(error).__name__}: {error}\n")
        sys.stderr.flush()
        os._exit(4)
