"""Installs the emulated neuron device in every Python process started with this folder on
PYTHONPATH (the smoke runner puts it there), without touching the user's script.

The emulator package is loaded from its own folder, not by putting neuron-migrate's
site-packages on the path, so the user's environment sees nothing else of ours. A
sitecustomize that this one shadows is still run.
"""

import atexit
import importlib.util
import os
import signal
import sys
import threading
import time

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


def _is_worker():
    """Whether this process is the smoke worker itself, not a process it started (which
    inherits the environment, and this folder on PYTHONPATH)."""
    if "NEURON_EMU_RUNNER_PID" not in os.environ:
        return False
    return os.environ.setdefault("NEURON_EMU_WORKER", str(os.getpid())) == str(os.getpid())


def _die_with_runner():
    """The worker dies with the smoke runner, however the runner dies (SIGKILL included,
    which leaves it no chance to clean up). Linux: the kernel's parent-death signal, asked for
    before anything slow (torch's import) runs, then a check that the runner did not die
    before the request. Elsewhere: a thread that watches the runner and kills the worker's
    process group when it is gone."""
    runner = int(os.environ["NEURON_EMU_RUNNER_PID"])
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) == 0:  # 1: PR_SET_PDEATHSIG
                if not _alive(runner):
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                return
        except (OSError, AttributeError):
            pass
    threading.Thread(target=_watch_runner, args=(runner, os.getppid()), daemon=True,
                     name="neuron-smoke-runner-watch").start()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _watch_runner(runner, parent):
    while os.getppid() == parent and _alive(runner):
        time.sleep(0.5)
    os.killpg(os.getpgrp(), signal.SIGKILL)


_stacks = None  # the open file faulthandler dumps into; kept for the life of the process


def _dump_stacks_on_signal():
    """At its timeout the runner asks each worker where its threads are, to tell a hang
    from a slow run (codemod/smoke/timeouts.py); faulthandler answers from C, even while the
    main thread is blocked in a collective. The file appears once the handler is in place."""
    global _stacks
    path, number = os.environ.get("NEURON_EMU_STACKS"), os.environ.get("NEURON_EMU_STACK_SIGNAL")
    if not path or not number:
        return
    import faulthandler

    try:
        _stacks = open(path, "w")
        faulthandler.register(int(number), file=_stacks, all_threads=True)
    except (OSError, ValueError, RuntimeError):
        pass


# Status 3 tells the smoke runner the emulator itself could not be installed (torch missing,
# or a release without the hooks it needs), which is not the script's failure. Python would
# otherwise print the error and run the script without the device.
INSTALL_FAILED = 3

if _is_worker():
    _die_with_runner()
    _dump_stacks_on_signal()
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
