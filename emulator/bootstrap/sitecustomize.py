"""Installs the emulated neuron device in every Python process started with this folder on
PYTHONPATH (the smoke runner puts it there), without touching the user's script.

The emulator package is loaded from its own folder, not by putting neuron-migrate's
site-packages on the path, so the user's environment sees nothing else of ours. A
sitecustomize that this one shadows is still run.
"""

import atexit
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load_emulator():
    if "emulator" in sys.modules:
        return sys.modules["emulator"]
    package = os.path.dirname(_HERE)
    spec = importlib.util.spec_from_file_location(
        "emulator", os.path.join(package, "__init__.py"), submodule_search_locations=[package])
    module = importlib.util.module_from_spec(spec)
    sys.modules["emulator"] = module
    spec.loader.exec_module(module)
    return module


def _finish():
    session = sys.modules.get("emulator.session")
    if session is not None:
        session.finish()


def _run_shadowed_sitecustomize():
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == _HERE:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_shadowed_sitecustomize", candidate)
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


# Status 3 tells the smoke runner the emulator itself could not be installed (torch missing,
# or a release without the hooks it needs), which is not the script's failure. Python would
# otherwise print the error and run the script without the device.
INSTALL_FAILED = 3

_run_shadowed_sitecustomize()
if os.environ.get("NEURON_EMU", "1") != "0":
    # registered before torch is imported, so that it runs after every other exit handler
    atexit.register(_finish)
    try:
        _load_emulator().install(quiet=os.environ.get("NEURON_EMU_QUIET", "1") == "1")
        from emulator import session

        session.start()
    except Exception as error:  # noqa: BLE001 - any failure here means "no device"
        sys.stderr.write(f"neuron-migrate smoke: could not install the emulated neuron "
                         f"device: {type(error).__name__}: {error}\n")
        sys.stderr.flush()
        os._exit(INSTALL_FAILED)
