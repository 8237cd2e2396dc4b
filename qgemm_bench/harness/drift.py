"""How much a row's time moved inside its own timing window: the median of
the second half of its samples (in the order taken) over the first's. On
the H200 the power state steps down inside a 100 ms window at large
compute-bound shapes (docs/measuring.md, "Inside one window"); a row's
median then depends on where the step fell. And how far apart its rounds
(--repeats) landed: a measurement can run steadily slow for its whole
window and not in another round (results/h200/README.md, session 60), and
the pooled median of two clusters of samples lands between them."""

from __future__ import annotations

import statistics

from qgemm_bench.harness.results import OK

THRESHOLD = 0.05  # drift a report notes: within it, ranks of one round are ties
ROUNDS_THRESHOLD = 0.10  # rounds' p50s further apart than this (slowest over fastest) a report notes
MIN_SAMPLES = 20  # fewer: too few on each side to say


def window_drift(samples_us) -> float | None:
    """Second half's median over the first half's, minus 1 (None: too few samples)."""
    s = list(samples_us or ())
    if len(s) < MIN_SAMPLES:
        return None
    half = len(s) // 2
    return statistics.median(s[half:]) / statistics.median(s[:half]) - 1.0


def rounds_spread(round_p50_us) -> float | None:
    """Slowest round's p50 over the fastest's, minus 1 (None: fewer than two rounds)."""
    rounds = [x for x in (round_p50_us or ()) if x and x > 0]
    return max(rounds) / min(rounds) - 1.0 if len(rounds) >= 2 else None


def _over(rows, measure, threshold: float) -> tuple[list[tuple[float, object]], int]:
    """([(value, row)] of the ok rows whose measure(row) exceeds threshold, the
    most first; how many ok rows had a measure (not None))."""
    out, n = [], 0
    for r in rows:
        if r.status != OK or (d := measure(r)) is None:
            continue
        n += 1
        if d > threshold:
            out.append((d, r))
    return sorted(out, key=lambda t: -t[0]), n


def drifted(rows, threshold: float = THRESHOLD) -> tuple[list[tuple[float, object]], int]:
    """([(drift, row)] of the timed rows that drifted more than threshold,
    the most first; how many timed rows had samples enough to say)."""
    return _over(rows, lambda r: window_drift(r.samples_us), threshold)


def rounds_apart(rows, threshold: float = ROUNDS_THRESHOLD) -> tuple[list[tuple[float, object]], int]:
    """([(spread, row)] of the timed rows whose rounds' p50s (round_p50_us)
    differ by more than threshold, slowest over fastest minus 1, the most
    first; how many timed rows had two rounds or more)."""
    return _over(rows, lambda r: rounds_spread(r.round_p50_us), threshold)
