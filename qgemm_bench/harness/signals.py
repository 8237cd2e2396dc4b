"""Signals. SIGTERM (what CI timeouts and `kill` send) stops a run the way
Ctrl-C does: the sweep ends, the tables are written, exit 143 (130 for
Ctrl-C). While the outputs are being written a further Ctrl-C or SIGTERM
waits for them to be complete instead of leaving them half done."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as a KeyboardInterrupt so every Ctrl-C path handles it."""


def exit_code(e: KeyboardInterrupt) -> int:
    return 128 + (signal.SIGTERM if isinstance(e, Terminated) else signal.SIGINT)


def describe(e: KeyboardInterrupt) -> str:
    return "terminated (SIGTERM)" if isinstance(e, Terminated) else "interrupted (Ctrl-C)"


def as_interrupt(signum: int) -> KeyboardInterrupt:
    """What a signal `deferred` held stands for."""
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _main_thread() -> bool:
    # Handlers can only be set from the main thread (in-process callers may not be).
    return threading.current_thread() is threading.main_thread()


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    if not _main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated()

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def deferred() -> Iterator[list[int]]:
    """Hold Ctrl-C and SIGTERM until the block ends; yields the signals that
    arrived (the caller exits 128 + the first one's number)."""
    received: list[int] = []
    if not _main_thread():
        yield received
        return

    def handler(signum, frame):
        if not received:  # os.write: a handler may run in the middle of a print
            os.write(2, b"\nnote: finishing the outputs first; exiting when they are written\n")
        received.append(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for s, h in old.items():
            signal.signal(s, h)
