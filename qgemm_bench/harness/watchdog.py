"""A stall watchdog. A GPU kernel that never finishes (a split-K program
spinning on a count that never comes: ws_gemm.MAX_SKEW_STAGES) blocks the
process in a CUDA call that no signal interrupts, so a run would wait for
ever and write nothing but rows.jsonl. `Watchdog(seconds, on_stall)` times
each step; when one outlives it, on_stall(label) runs on the timer's thread
(it writes what is known and returns an exit status) and the process exits
with that status: os._exit, because the stuck main thread cannot be unwound
(nor can the GPU work be cancelled in-process)."""

from __future__ import annotations

import os
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def stall_reason(what: str, seconds: float) -> str:
    """The one line that says `what` outlived a watchdog of `seconds` (rows' reasons, stderr)."""
    return (f"{what} did not finish in {seconds:g} s (--stall-timeout; a GPU kernel that never finishes cannot be "
            "stopped in-process)")


class Watchdog:
    def __init__(self, seconds: float, on_stall: Callable[[object], int]):
        self.seconds = seconds  # 0: off
        self.on_stall = on_stall
        self._lock = threading.Lock()

    @contextmanager
    def step(self, label: object) -> Iterator[None]:
        """Run the block under the watchdog; label (any object) names it to on_stall."""
        if not self.seconds:
            yield
            return
        finished = threading.Event()

        def fire() -> None:
            with self._lock:  # the block's end waits here: it is either done or never reported done
                if finished.is_set():
                    return
                code = 1
                try:
                    code = self.on_stall(label)
                except BaseException:  # noqa: BLE001 - still exit: the main thread is stuck
                    os.write(2, f"error: writing the stopped run failed:\n{traceback.format_exc()}".encode())
                finally:
                    for stream in (sys.stdout, sys.stderr):
                        try:
                            stream.flush()
                        except (OSError, ValueError):
                            pass
                    os._exit(code)

        timer = threading.Timer(self.seconds, fire)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            with self._lock:
                finished.set()
            timer.cancel()
