"""Signals. SIGTERM (what CI timeouts and `kill` send) and SIGHUP (a closed
terminal or dropped ssh session) stop a run the way Ctrl-C does: the sweep
ends, the tables are written, exit 128 + the signal's number (143, 129; 130
for Ctrl-C). While the outputs are being written a further one waits for
them to be complete instead of leaving them half done."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# The signals that stop a run as Ctrl-C does (SIGHUP where the platform has it).
STOPPING = (signal.SIGTERM, *((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()))
EXIT_CODES = frozenset(128 + s for s in (signal.SIGINT, *STOPPING))  # a run these signals stopped exits with


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised as a KeyboardInterrupt so every Ctrl-C path
    handles it."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__()
        self.signum = signum


def exit_code(e: KeyboardInterrupt) -> int:
    return 128 + (e.signum if isinstance(e, Terminated) else signal.SIGINT)


def describe(e: KeyboardInterrupt) -> str:
    return f"terminated ({signal.Signals(e.signum).name})" if isinstance(e, Terminated) else "interrupted (Ctrl-C)"


def as_interrupt(signum: int) -> KeyboardInterrupt:
    """What a signal `deferred` held stands for."""
    return Terminated(signum) if signum in STOPPING else KeyboardInterrupt()


def _main_thread() -> bool:
    # Handlers can only be set from the main thread (in-process callers may not be).
    return threading.current_thread() is threading.main_thread()


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    if not _main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated(signum)

    old = {s: signal.signal(s, handler) for s in STOPPING}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextmanager
def deferred() -> Iterator[list[int]]:
    """Hold Ctrl-C, SIGTERM and SIGHUP until the block ends; yields the
    signals that arrived (the caller exits 128 + the first one's number)."""
    received: list[int] = []
    if not _main_thread():
        yield received
        return

    def handler(signum, frame):
        if not received:  # os.write: a handler may run in the middle of a print
            os.write(2, b"\nnote: finishing the outputs first; exiting when they are written\n")
        received.append(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, *STOPPING)}
    try:
        yield received
    finally:
        for s, h in old.items():
            signal.signal(s, h)
