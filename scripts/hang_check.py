#!/usr/bin/env python3
"""GPU (H100): the runner's --stall-timeout against a real hung kernel. The
int4 M = 64, K = N = 8192 table entry is forced to ws_gemm tiles that never
return on the H100 (64x64x64, 8 stages, SPLITS 2, SKEW 2: the reason for
ws_gemm.MAX_SKEW_STAGES, lifted here in a child process), and a run of cuBLAS
and triton at that shape and one more must stop after S seconds with exit 1,
the triton row an error, the rows after it skipped and every output written.
Prints one line per check; exit 1 if any fails.

  python3 scripts/hang_check.py OUT_DIR [--stall-timeout 30]
H100 (commit fb11e41 and the model bench's watchdog): every check ok, exit 1 after 44 s with S = 30, the
GPU idle after."""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
HANG = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "num_stages": 8, "SPLITS": 2, "SKEW": 2}


def child(argv: list[str]) -> int:
    from qgemm_bench.backends import triton_dispatch
    from qgemm_bench.backends.triton_kernels import ws_gemm
    from qgemm_bench.cli import main

    ws_gemm.MAX_SKEW_STAGES = HANG["num_stages"]
    store_entry = triton_dispatch.weight_only_entry

    def forced(target, store=None):  # the store's entry, read once per process, with the hanging tiles
        e = store_entry(target, store)
        e.table["kernels"]["int4_gemm_fused"]["M64_K8192_N8192"]["config"]["WS"] = dict(HANG)
        return e

    triton_dispatch.weight_only_entry = forced
    return main(argv)


def main() -> int:
    from qgemm_bench.errors import InputError
    from qgemm_bench.harness.args import Parser, stall_seconds

    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path, help="the run's output folder (new or empty)")
    p.add_argument("--stall-timeout", type=stall_seconds, default=30.0, metavar="S",
                   help="seconds, above 0 (default 30)")
    try:
        args = p.parse_args()
        if args.stall_timeout == 0:
            raise InputError("--stall-timeout 0: the check needs the watchdog on (S > 0)")
        import torch

        from qgemm_bench.harness.environment import gpu_slug

        if not torch.cuda.is_available() or gpu_slug(torch.device("cuda")) != "h100":
            raise InputError("needs an H100: the tiles that hang, and the table entry forced to them, are the H100's")
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    run = ["--op", "int4_gemm", "--shape", "64,8192,8192", "--shape", "128,8192,8192", "--backends",
           "cublas,triton", "--stall-timeout", f"{args.stall_timeout:g}", "--no-plots", "--output-dir", str(args.out)]
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, __file__, "--child", *run], capture_output=True, text=True,
                              timeout=args.stall_timeout + 300)
    except subprocess.TimeoutExpired:  # the watchdog never fired: what this script is here to catch
        print(f"FAIL the run did not end within {args.stall_timeout + 300:g} s (killed)")
        return 1
    took = time.monotonic() - t0
    rows = list(csv.DictReader(open(args.out / "results.csv"))) if (args.out / "results.csv").exists() else []
    status = {(r["backend"], r["M"]): r["status"] for r in rows}
    meta = json.loads((args.out / "results.json").read_text())["metadata"] if rows else {}
    checks = {
        f"exit 1 (got {proc.returncode}) after {took:.0f} s": proc.returncode == 1,
        "triton at 64x8192x8192 an error": status.get(("triton", "64")) == "error",
        "cublas at 64x8192x8192 measured": status.get(("cublas", "64")) == "ok",
        "every 128x8192x8192 row skipped": [v for (b, m), v in status.items() if m == "128"] == ["skipped"] * 3,
        "metadata.stopped names the stall": "did not finish" in meta.get("stopped", ""),
    }
    for what, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if not all(checks.values()):
        print(proc.stderr[-2000:], file=sys.stderr)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(child(sys.argv[2:]) if sys.argv[1:2] == ["--child"] else main())
