#!/usr/bin/env python3
"""No GPU needed: how much a run's rows drifted inside their own timing
window. For each row with enough raw samples (results.json's samples_us,
in the order they were taken), the median of the window's second half over
the first; rows that drifted more than --threshold are listed, slowest
drift first, with a count per backend. A GPU whose clocks step down under
sustained load (the H200's power state) shows as compute-bound rows whose
second half is slower: their p50 then depends on where in the window the
step fell, and ranks within that spread are ties.

  python3 scripts/window_drift.py RUN [--threshold 0.05] [--min-samples 20] [--most 15]

RUN: a run folder or its results.json."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path


def drift(samples: list[float]) -> float:
    """Median of the second half of the samples over the first's, minus 1."""
    half = len(samples) // 2
    return statistics.median(samples[half:]) / statistics.median(samples[:half]) - 1.0


def drifted(rows: list[dict], threshold: float, min_samples: int) -> tuple[list[tuple], int]:
    """([(drift, row)] above threshold, slowest first; rows with enough samples)."""
    out, n = [], 0
    for r in rows:
        s = r.get("samples_us") or []
        if r.get("status") != "ok" or len(s) < min_samples:
            continue
        n += 1
        if (d := drift(s)) > threshold:
            out.append((d, r))
    return sorted(out, key=lambda t: -t[0]), n


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a run folder or its results.json")
    p.add_argument("--threshold", type=float, default=0.05, help="drift to list (default 0.05: 5%%)")
    p.add_argument("--min-samples", type=int, default=20, help="rows with fewer samples are skipped (default 20)")
    p.add_argument("--most", type=int, default=15, help="rows listed (default 15)")
    args = p.parse_args(argv)
    path = Path(args.run)
    path = path / "results.json" if path.is_dir() else path
    try:
        rows = json.loads(path.read_text())["rows"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"error: {args.run}: not a run's results.json ({type(e).__name__})", file=sys.stderr)
        return 2
    if args.min_samples < 2 or args.most < 0:
        print("error: --min-samples is at least 2 and --most at least 0", file=sys.stderr)
        return 2
    out, n = drifted(rows, args.threshold, args.min_samples)
    print(f"{path}: {len(out)} of {n} rows ran more than {100 * args.threshold:g}% slower in the second half of "
          f"their window than in the first")
    for d, r in out[:args.most]:
        print(f"  {100 * d:5.1f}%  {r['backend']:<14} {r['M']}x{r['K']}x{r['N']}  p50 {r['p50_us']:.1f} us, "
              f"{len(r['samples_us'])} samples")
    if out:
        print("  by backend: " + ", ".join(f"{b} {c}" for b, c in Counter(r["backend"] for _, r in out).most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
