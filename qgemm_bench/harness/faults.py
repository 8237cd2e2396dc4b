"""What an exception from a backend means for the run: out of memory (the
sweep goes on), a lost CUDA context (nothing more can run in this process),
or an ordinary error."""

from __future__ import annotations

import torch

from qgemm_bench.harness.results import ERROR, OOM

# CUDA errors that are sticky: after one, every later CUDA call in the
# process fails with the same error, so later rows would be noise.
STICKY = ("illegal memory access", "device-side assert", "unspecified launch failure", "misaligned address",
          "illegal instruction", "uncorrectable ecc error", "hardware stack error", "cuda_error_illegal_address",
          "cudaerrorillegaladdress", "cuda_error_launch_failed", "cudaerrorlaunchfailure")
CPU_OOM = ("defaultcpuallocator", "can't allocate memory", "cannot allocate memory", "not enough memory")


def _chain(e: BaseException):
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def context_lost(e: BaseException) -> bool:
    return any(p in str(x).lower() for x in _chain(e) for p in STICKY)


def status(e: BaseException) -> str:
    for x in _chain(e):
        if isinstance(x, (torch.cuda.OutOfMemoryError, MemoryError)) or any(p in str(x).lower() for p in CPU_OOM):
            return OOM
    return ERROR


class ContextLost(Exception):
    """A backend hit a sticky CUDA error: the sweep stops measuring."""

    def __init__(self, message: str, row=None):
        super().__init__(message)
        self.row = row  # the failing backend's row, to record before stopping
