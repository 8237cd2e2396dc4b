"""Latency measurement: CUDA-graph replay (default on GPU), do_bench events, and
a wall-clock loop on CPU. Each returns per-call samples in microseconds."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

# A graph replay is sized to take at least this long, so the ~few-us replay
# launch is a small share of each sample.
REPLAY_TARGET_MS = 1.0
MIN_SAMPLES = {"graph": 10, "events": 10, "cpu-wall": 3}
MAX_SAMPLES = 1000


@dataclass
class Timing:
    mode: str  # "graph" | "events" | "cpu-wall"
    samples_us: list[float]  # per-call latency, one value per sample
    calls_per_sample: int = 1
    note: str = ""
    extra: dict = field(default_factory=dict)


def _sample_count(mode: str, rep_ms: float, sample_ms: float) -> int:
    n = math.ceil(rep_ms / max(sample_ms, 1e-6))
    return max(MIN_SAMPLES[mode], min(MAX_SAMPLES, n))


def time_cpu(fn, warmup_ms: float, rep_ms: float) -> Timing:
    """Wall clock around each call (CPU tensors, or the Triton interpreter)."""
    t0 = time.perf_counter()
    fn()
    est_ms = (time.perf_counter() - t0) * 1e3
    deadline = time.perf_counter() + warmup_ms / 1e3
    while time.perf_counter() < deadline:
        fn()
    samples = []
    for _ in range(_sample_count("cpu-wall", rep_ms, est_ms)):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return Timing("cpu-wall", samples)


def time_events(fn, warmup_ms: float, rep_ms: float) -> Timing:
    """triton.testing.do_bench: L2 flushed between calls, CUDA events around
    each call. Adds ~8-12 us per call on the H100 (GPU.md)."""
    from triton.testing import do_bench

    ms = do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
    return Timing("events", [t * 1e3 for t in ms])


def time_graph(fns: list, warmup_ms: float, rep_ms: float) -> Timing:
    """Capture calls cycling over `fns` (one per rotating input copy) in one
    CUDA graph; per-call time = replay time / calls in the graph.

    The copies together exceed ~2x L2, so every call reads its operands from
    HBM, and replay removes launch gaps: what a decode step pays.
    """
    cur = torch.cuda.current_stream()
    # Warm up on a side stream before capture (libraries allocate workspaces
    # and handles lazily), and estimate the per-call time.
    side = torch.cuda.Stream()
    side.wait_stream(cur)
    with torch.cuda.stream(side):
        for f in fns:
            f()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for f in fns:
            f()
        end.record()
    cur.wait_stream(side)
    torch.cuda.synchronize()
    est_ms = start.elapsed_time(end) / len(fns)

    rounds = max(1, math.ceil(REPLAY_TARGET_MS / (est_ms * len(fns))))
    calls = rounds * len(fns)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(rounds):
            for f in fns:
                f()
    replay_ms = est_ms * calls
    for _ in range(max(1, math.ceil(warmup_ms / replay_ms))):
        graph.replay()
    n = _sample_count("graph", rep_ms, replay_ms)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for s, e in events:
        s.record()
        graph.replay()
        e.record()
    torch.cuda.synchronize()
    samples = [s.elapsed_time(e) * 1e3 / calls for s, e in events]
    del graph
    return Timing("graph", samples, calls_per_sample=calls, extra={"copies": len(fns)})
