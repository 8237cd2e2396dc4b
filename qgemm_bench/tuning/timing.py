"""How every tuner times a candidate: as the runner times by default (one
CUDA graph over rotating copies whose total exceeds 2x L2, the runner's
warm-up and timed windows, p50 per call), and on the CPU (the Triton
interpreter) a wall-clock loop. Candidates are timed after all of them
were checked, in rounds, every other one reversed (sweep.round_order): a
config's time moves with what ran just before it, and the mean of a
forward and a reverse round cancels a linear drift."""

from __future__ import annotations

import statistics
import time

import torch

from qgemm_bench.harness import faults
from qgemm_bench.harness.measure import Settings, copies_for
from qgemm_bench.harness.sweep import round_order
from qgemm_bench.harness.timing import time_cpu, time_graph

ROUNDS = 2  # a forward and a reverse round (see the module doc)


def p50_us(fns: list, settings: Settings | None = None, device: torch.device | None = None) -> float:
    """Median us of one call. fns: one call per rotating copy (CUDA), or
    any list whose first call is timed alone (CPU). With the 10 / 40 ms
    windows used before, the order of large-M configs was not the
    runner's (H100, int4 K = N = 8192, 3 rounds: M = 512 256x64x64 w4 s3
    93.3 against 256x128x64 w8 s5's 101.0 us in short windows, 103.1
    against 100.1 in the runner's): the runner's windows by default."""
    s = settings or Settings()
    if device is not None and device.type != "cuda":
        return float(statistics.median(time_cpu(fns[0], s.warmup_ms, s.rep_ms).samples_us))
    return float(statistics.median(time_graph(fns, s.warmup_ms, s.rep_ms).samples_us))


def n_copies(touched: int, per_copy: int, device: torch.device) -> int:
    """Rotating copies so the bytes a call touches, over all copies,
    exceed 2x L2 (one on the CPU, where no cache is being defeated)."""
    if device.type != "cuda":
        return 1
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    return copies_for(touched, per_copy, l2, device)


def time_rounds(cands: list, time_one, rounds: int = ROUNDS, watch=None, stop: float | None = None,
                keep: int | None = None) -> list:
    """cands: each candidate's call list. Each one's mean p50 over `rounds`
    rounds (round_order), or the exception that stopped it. time_one(calls)
    times one candidate once; watch (a Watchdog) guards each timing; stop
    (time.monotonic()): no round starts after it (the first always runs
    whole, so every candidate has a time: a shape's budget shortens the
    rounds, never the comparison); keep: the rounds after the first time
    only the `keep` fastest of the first (the contenders; the others keep
    their first round's time). A lost CUDA context raises: every later
    timing would fail too."""
    times: list = [[] for _ in cands]
    contenders = list(range(len(cands)))
    for r in range(rounds):
        if r and stop is not None and time.monotonic() > stop:
            break
        if r == 1 and keep is not None:
            ok = [i for i in contenders if not isinstance(times[i], Exception)]
            contenders = sorted(sorted(ok, key=lambda i: times[i][0])[:keep])
        for i in round_order(contenders, r):
            if isinstance(times[i], Exception):
                continue
            try:
                label = f"the timing of candidate {i + 1} of {len(cands)} in round {r + 1}"
                if watch is None:
                    times[i].append(time_one(cands[i]))
                else:
                    with watch.step(label):
                        times[i].append(time_one(cands[i]))
            except Exception as e:  # noqa: BLE001 - a GPU-side failure is this candidate's, not the tune's
                if faults.context_lost(e):
                    raise
                times[i] = e
    return [t if isinstance(t, Exception) else sum(t) / len(t) for t in times]
