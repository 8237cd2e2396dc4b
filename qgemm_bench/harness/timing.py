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
MAX_SAMPLES = 1000  # bounds a row's samples in results.json; --rep's help says a longer window stops here


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
    each call. Adds ~8-12 us per call on the H100 (docs/measuring.md)."""
    from triton.testing import do_bench

    ms = do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
    return Timing("events", [t * 1e3 for t in ms])


def time_graph(fns: list, warmup_ms: float, rep_ms: float) -> Timing:
    """Capture calls cycling over `fns` (one per rotating input copy) in one
    CUDA graph; per-call time = replay time / calls in the graph.

    The copies together exceed ~2x L2, so every call reads its operands from
    HBM, and replay removes launch gaps: what a decode step pays.
    """
    # Warm up on a side stream before capture: libraries allocate workspaces
    # and handles lazily, and capture must not see that.
    cur = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(cur)
    with torch.cuda.stream(side):
        for f in fns:
            f()
    cur.wait_stream(side)
    # Size the graph from a timed one-round replay: eager timing of small
    # kernels measures Python launch gaps, not the kernels.
    graph, round_ms = _capture(fns, 1), None
    for _ in range(3):
        round_ms = _time_replay(graph)
    rounds = max(1, math.ceil(REPLAY_TARGET_MS / round_ms))
    calls = rounds * len(fns)
    if rounds > 1:
        del graph
        graph = _capture(fns, rounds)
    replay_ms = round_ms * rounds
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


def _capture(fns: list, rounds: int) -> torch.cuda.CUDAGraph:
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(rounds):
            for f in fns:
                f()
    return graph


def _time_replay(graph: torch.cuda.CUDAGraph) -> float:
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    graph.replay()
    e.record()
    e.synchronize()
    return s.elapsed_time(e)
