#!/usr/bin/env python3
"""No GPU needed: how much a run's rows drifted inside their own timing
window (qgemm_bench.harness.drift: the median of the window's second half of
samples over the first's). Rows that drifted more than --threshold are
listed, the most first, with a count per backend. A GPU whose clocks step
down under sustained load (the H200's power state) shows as compute-bound
rows whose second half is slower: their p50 then depends on where the step
fell, and ranks within that spread are ties. A run's report.md notes it too.

  python3 scripts/window_drift.py RUN [--threshold 0.05] [--most 15]

RUN: a run folder or its results.json."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's qgemm_bench

from qgemm_bench.errors import InputError  # noqa: E402
from qgemm_bench.harness import drift, results  # noqa: E402
from qgemm_bench.harness.args import Parser, float_in, int_in  # noqa: E402


def main(argv=None) -> int:
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a run folder or its results.json")
    p.add_argument("--threshold", type=float_in(0.0, 10.0), default=drift.THRESHOLD,
                   help=f"drift to list (default {drift.THRESHOLD:g}: {100 * drift.THRESHOLD:g}%%)")
    p.add_argument("--most", type=int_in(0, 100_000), default=15, help="rows listed (default 15)")
    try:
        args = p.parse_args(argv)
        _, rows = results.load(args.run)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out, n = drift.drifted(rows, args.threshold)
    print(f"{args.run}: {len(out)} of {n} rows ran more than {100 * args.threshold:g}% slower in the second half "
          f"of their window than in the first (rows of {drift.MIN_SAMPLES}+ samples)")
    for d, r in out[:args.most]:
        print(f"  {100 * d:5.1f}%  {r.backend:<14} {r.M}x{r.K}x{r.N}  p50 {r.p50_us:.1f} us, "
              f"{len(r.samples_us)} samples")
    if out:
        print("  by backend: " + ", ".join(f"{b} {c}" for b, c in Counter(r.backend for _, r in out).most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
