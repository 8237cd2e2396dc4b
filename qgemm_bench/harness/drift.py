"""How much a row's time moved inside its own timing window: the median of
the second half of its samples (in the order taken) over the first's. On
the H200 the power state steps down inside a 100 ms window at large
compute-bound shapes (docs/measuring.md, "Inside one window"); a row's
median then depends on where the step fell."""

from __future__ import annotations

import statistics

from qgemm_bench.harness.results import OK

THRESHOLD = 0.05  # drift a report notes: within it, ranks of one round are ties
MIN_SAMPLES = 20  # fewer: too few on each side to say


def window_drift(samples_us) -> float | None:
    """Second half's median over the first half's, minus 1 (None: too few samples)."""
    s = list(samples_us or ())
    if len(s) < MIN_SAMPLES:
        return None
    half = len(s) // 2
    return statistics.median(s[half:]) / statistics.median(s[:half]) - 1.0


def drifted(rows, threshold: float = THRESHOLD) -> tuple[list[tuple[float, object]], int]:
    """([(drift, row)] of the timed rows that drifted more than threshold,
    the most first; how many timed rows had samples enough to say)."""
    out, n = [], 0
    for r in rows:
        if r.status != OK or (d := window_drift(r.samples_us)) is None:
            continue
        n += 1
        if d > threshold:
            out.append((d, r))
    return sorted(out, key=lambda t: -t[0]), n
