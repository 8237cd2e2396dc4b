"""Does a shape fit in the device's memory? Checked before anything is
allocated: `--shape 1000000000000,128,64` would otherwise allocate until it
fails, row after row (or, on a CPU, until the machine swaps)."""

from __future__ import annotations

import gc
import os
from types import ModuleType

import torch

from qgemm_bench.types import Case, Shape


def total_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def free_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return total_bytes(device)


def working_bytes(op: ModuleType, shape: Shape, dtype: torch.dtype, settings) -> int:
    """An upper estimate of what making a case's inputs and its reference
    takes: the operands as the kernels read them (op.bytes) plus fp32 copies
    of the weight (drawn, then dequantized), of x and of the output."""
    m, k, n = shape
    return op.bytes(shape, dtype, settings) + 4 * (2 * k * n + m * k + m * n)


def gib(b: float) -> str:
    return f"{b / 2**30:.3g} GiB"


def too_large(op: ModuleType, case: Case) -> str | None:
    """Why this case is not attempted (None if it may fit)."""
    need = working_bytes(op, case.shape, case.dtype, case.settings)
    free = free_bytes(case.device)
    if need <= free:
        return None
    return (f"too large: {case.shape} needs about {gib(need)} for its inputs and reference, "
            f"{case.device} has {gib(free)} free; not run")


def never_fits(op: ModuleType, shape: Shape, dtype: torch.dtype, settings, device: torch.device) -> str | None:
    """Why a shape can never run on this device: its operands alone (read
    once, output written once) exceed all of the device's memory."""
    need, total = op.bytes(shape, dtype, settings), total_bytes(device)
    if need <= total:
        return None
    return f"shape {shape} needs at least {gib(need)} for its operands; {device} has {gib(total)} in all"


def free(device: torch.device) -> None:
    """After a shape or a failure (the sweep's, a warm-up worker's): every
    cycle, then the survivors frozen (what is left is modules, compiled
    kernels and caches), so the next full collection scans only what came
    after, and the cached blocks back to the driver for the next shape (or
    another process's). Unfrozen it took 0.33 s a shape on the H200 with the
    peers imported (16 s of a default run)."""
    gc.collect()
    gc.freeze()
    if device.type == "cuda":
        try:
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - a failing CUDA call here is reported by the next row
            pass
