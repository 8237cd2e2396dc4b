"""Measure one backend at one case: prepare, check accuracy, memory, latency."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from qgemm_bench.backends.registry import Backend, Prepared
from qgemm_bench.errors import one_line
from qgemm_bench.harness import timing
from qgemm_bench.harness.results import INCORRECT, OK
from qgemm_bench.operators.common import Inputs, rel_error
from qgemm_bench.types import Case

MiB = 2**20
# Rotating copies: enough that one pass over them moves > 2x L2, bounded so
# copies never crowd GPU memory. The smallest preset shape (split-K 16x4096x16,
# 256 KiB a call) needs ~400 on the H100; 256 stopped it at 1.3x L2.
ROTATE_L2_FACTOR = 2
MAX_COPIES = 1024
COPIES_MEM_FRACTION = 0.25


@dataclass
class Settings:
    timing: str = "graph"  # graph | events (GPU); CPU always uses cpu-wall
    warmup_ms: float = 25.0
    rep_ms: float = 100.0


def nbytes_unique(tensors) -> int:
    seen, total = set(), 0
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    return total


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def copies_for(touched: int, per_copy_mem: int, l2_bytes: int, device: torch.device) -> int:
    """How many rotating input copies one timing uses: enough that the bytes a
    call touches, over all copies, exceed ROTATE_L2_FACTOR x L2; at most
    MAX_COPIES and COPIES_MEM_FRACTION of free memory (the tuning scripts
    time the way the runner does through this)."""
    n = math.ceil(ROTATE_L2_FACTOR * l2_bytes / max(touched, 1))
    free, _ = torch.cuda.mem_get_info(device)
    by_mem = int(COPIES_MEM_FRACTION * free // max(per_copy_mem, 1))
    return max(1, min(n, MAX_COPIES, by_mem))


def copies_needed(case: Case, inputs: Inputs, prepared: Prepared, out: torch.Tensor, l2_bytes: int) -> int:
    touched = nbytes_unique([inputs.activation, *prepared.resident]) + out.numel() * out.element_size()
    per_copy_mem = nbytes_unique([*inputs.tensors(), *prepared.resident])
    return copies_for(touched, per_copy_mem, l2_bytes, case.device)


def measure(case: Case, backend: Backend, inputs: Inputs, ref: torch.Tensor, tol: float,
            settings: Settings, l2_bytes: int) -> dict:
    """Returns Row fields for this backend (status, accuracy, memory, timing).
    Exceptions propagate; the sweep turns them into error rows."""
    dev = case.device
    t0 = time.perf_counter()
    prepared = backend.prepare(case, inputs)
    sync(dev)
    prepare_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    out = prepared.fn()
    sync(dev)
    first_call_s = time.perf_counter() - t0

    err = rel_error(out, ref)
    correct = math.isfinite(err) and err <= tol
    fields = {
        "status": OK if correct else INCORRECT,
        "reason": "" if correct else f"relative error {err:.3g} > tolerance {tol:g}",
        "rel_err": err, "tolerance": tol,
        "weight_mib": nbytes_unique(prepared.resident) / MiB,
        "prepare_s": prepare_s, "first_call_s": first_call_s,
        "compile_s": prepared.compile_s, "autotune_s": prepared.autotune_s,
    }
    if prepared.notes:
        fields["reason"] = "; ".join(x for x in (fields["reason"], prepared.notes) if x)

    t0 = time.perf_counter()
    if dev.type == "cuda":
        fields["peak_extra_mib"] = peak_extra_bytes(prepared.fn, dev) / MiB
        t = time_on_gpu(case, backend, inputs, prepared, out, settings, l2_bytes)
    else:
        t = timing.time_cpu(prepared.fn, settings.warmup_ms, settings.rep_ms)
    fields["measure_s"] = time.perf_counter() - t0
    del out
    fields.update(summarize(t.samples_us))
    fields.update({"timing": t.mode, "calls_per_sample": t.calls_per_sample, "copies": t.extra.get("copies", 1)})
    if t.note:
        fields["reason"] = "; ".join(x for x in (fields["reason"], t.note) if x)
    return fields


def summarize(samples_us) -> dict:
    s = np.asarray(samples_us, dtype=float)
    return {"samples_us": [float(x) for x in s], "p50_us": float(np.median(s)),
            "p20_us": float(np.percentile(s, 20)), "p80_us": float(np.percentile(s, 80))}


def peak_extra_bytes(fn, dev: torch.device) -> int:
    """Peak memory one call allocates beyond what was allocated before it
    (its output included)."""
    sync(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    base = torch.cuda.memory_allocated(dev)
    out = fn()
    sync(dev)
    peak = torch.cuda.max_memory_allocated(dev) - base
    del out
    return peak


def time_on_gpu(case, backend, inputs, prepared, out, settings, l2_bytes) -> timing.Timing:
    if settings.timing == "events":
        return timing.time_events(prepared.fn, settings.warmup_ms, settings.rep_ms)
    n = copies_needed(case, inputs, prepared, out, l2_bytes)
    fns = [prepared.fn] + [backend.prepare(case, inputs.clone()).fn for _ in range(n - 1)]
    try:
        return timing.time_graph(fns, settings.warmup_ms, settings.rep_ms)
    except Exception as e:  # capture can fail for code that syncs or allocates oddly
        torch.cuda.synchronize(case.device)
        t = timing.time_events(prepared.fn, settings.warmup_ms, settings.rep_ms)
        t.note = f"CUDA graph capture failed ({one_line(e, 160)}); timed with events"
        return t
    finally:
        del fns
