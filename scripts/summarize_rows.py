#!/usr/bin/env python3
"""Print selected rows of run folders' rows.jsonl (works on partial runs).
Usage: scripts/summarize_rows.py RUN_DIR [RUN_DIR ...] [--k K --n N]"""

import argparse
import json
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("runs", nargs="+")
p.add_argument("--k", type=int)
p.add_argument("--n", type=int)
a = p.parse_args()
for run in a.runs:
    path = Path(run) / "rows.jsonl"
    if not path.exists():
        print(f"{run}: no rows")
        continue
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    bad = [r for r in rows if r["status"] != "ok"]
    print(f"{run}: {len(rows)} rows, {len(bad)} not ok")
    for r in bad[:6]:
        print(f"  {r['M']}x{r['K']}x{r['N']} {r['backend']}: {r['status']}: {r['reason'][:160]}")
    for r in rows:
        if (a.k is None or r["K"] == a.k) and (a.n is None or r["N"] == a.n):
            p50 = f"{r['p50_us']:.1f}" if r["p50_us"] is not None else "-"
            err = f"{r['rel_err']:.1e}" if r["rel_err"] is not None else "-"
            print(f"  {r['M']}x{r['K']}x{r['N']} {r['backend']:<20} {r['status']:<10} p50 {p50:>9} us  err {err}")
