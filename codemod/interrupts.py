"""Ctrl-C and SIGTERM in the main process of a run: the run stops, but a file being written
is finished first, so that a stopped `apply` never leaves a file half written or a result
unreported."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Interrupts:
    """Ctrl-C (or SIGTERM) during a run: raised as KeyboardInterrupt, except while a file is
    being written and recorded, where it waits until the file is whole (written or not at
    all, its temporary file gone) and listed among the results. A flag rather than a blocked
    signal: the interpreter may take the signal on any thread and still raises it in the
    main one."""

    USUAL = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}

    def __init__(self) -> None:
        self.holding = False
        self.received = 0

    def _handle(self, signum: int, frame: object) -> None:
        self.received = self.received or signum
        if not self.holding:
            raise KeyboardInterrupt

    # the engine lets SIGTERM end the process during a long native call (a parse), which
    # this handler could only take once the call returns; no file is being written then
    _handle.ends_in_native_code = True  # type: ignore[attr-defined]

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        main = threading.current_thread() is threading.main_thread()
        # a signal the caller ignores or handles itself is left as it is
        taken = [s for s, usual in self.USUAL.items() if main and signal.getsignal(s) is usual]
        for number in taken:
            signal.signal(number, self._handle)
        try:
            yield
        finally:
            for number in taken:
                signal.signal(number, self.USUAL[number])

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
        if self.received:
            raise KeyboardInterrupt
