#!/usr/bin/env python3
"""No GPU: how many waves the grid of each decode-size fused entry of a GPU's
store takes, and the register cap that would fit one more program an SM.

For each `<fmt>_gemm_fused` entry at M <= 64 whose kernel is fused_kernel
(entries whose WS tiles run are the Gluon kernel's: left out), the config is
compiled for sm_90 as scripts/fused_sass.py compiles it (this machine's
Triton: the GPU machine's 3.6 with `pip install --target /tmp/t36
triton==3.6.0` and PYTHONPATH=/tmp/t36:$PWD; PDL left out), and from its
registers, shared memory and threads: programs an SM (registers allocated 8
a thread at a time out of 65536, shared memory out of 228 KB with 1 KB a
program reserved, 2048 threads: fused_sass.ctas_per_sm), the grid (row tiles x N tiles
x SPLIT_K) and its waves on --sms SMs. Each cap (maxnreg, down to 64)
that fits more programs an SM and takes fewer rounds than the caps above
it is compiled too: its registers, spills and waves. A wave's tail is idle SMs; whether a cap
is faster is for the GPU (scripts/fused_ab.py with table+maxnreg=N).

  PYTHONPATH=/tmp/t36:$PWD python3 scripts/fused_waves.py [--gpu h200 | --table FILE] [--formats int4,nvfp4]
      [--sms 132]"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's qgemm_bench

from fused_sass import SM_REGISTERS, SM_THREADS, ctas_per_sm  # noqa: E402 (an SM's limits: one copy)

from qgemm_bench.errors import InputError  # noqa: E402
from qgemm_bench.harness.args import Parser, int_in, parsed  # noqa: E402

MIN_CAP = 64  # below it the decode-size loops spill (docs/fused_gemm.md, "Waves, offline")
FLAGS = {"ACC_SCALE": "--acc", "SCALE8": "--scale8", "ROT_DECODE": "--rot-decode", "SCALE_AHEAD": "--scale-ahead",
         "SHORT_DECODE": "--short-decode", "FOLD": "--fold", "HALVES": "--halves"}


def cap_for(ctas: int, threads: int) -> int:
    """The largest register cap (a multiple of 8) at which `ctas` programs fit an SM."""
    return SM_REGISTERS // (ctas * threads) // 8 * 8


def sass_args(c: dict, fmt: str, k: int, maxnreg: int | None = None) -> list[str]:
    a = ["--fmt", fmt, "--tile", f"{c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']}", "--split", str(c.get("SPLIT_K", 1)),
         "--warps", str(c["num_warps"]), "--stages", str(c["num_stages"]), "--k", str(k)]
    if c.get("TMA"):
        a.append("--tma" if c.get("TMA_W", True) else "--tma-x")
    a += [flag for key, flag in FLAGS.items() if c.get(key)]
    cap = maxnreg or c.get("maxnreg")
    return a + (["--maxnreg", str(cap)] if cap else [])


def compile_one(argv: list[str]) -> tuple[int, int, int]:
    """(registers, shared bytes, spill loads and stores) of fused_sass's compile."""
    import fused_sass

    k, sass, regs = fused_sass.compiled(fused_sass.parse_args(argv))
    return int(regs), k.metadata.shared, fused_sass.spill_count(sass)


def parse_args(argv=None):
    import argparse

    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpu", default="h200", help="the store entry (qgemm_bench/configs/<gpu>/; default h200)")
    p.add_argument("--table", default=None, metavar="FILE", help="a weight_only.json instead of --gpu's")
    p.add_argument("--formats", default="int4,nvfp4", help="int4, nvfp4 or both (default)")
    p.add_argument("--sms", type=int_in(1, 1024), default=132, help="SMs (default 132, the H200's)")
    args = p.parse_args(argv)
    args.fmts = [f for f in args.formats.split(",") if f]
    if not args.fmts or set(args.fmts) - {"int4", "nvfp4"}:
        raise InputError(f"--formats {args.formats!r}: int4, nvfp4 or both")
    path = Path(args.table) if args.table else \
        Path(__file__).resolve().parents[1] / "qgemm_bench" / "configs" / args.gpu / "weight_only.json"
    if not path.is_file():
        raise InputError(f"{'--table' if args.table else f'--gpu {args.gpu}:'} no {path}")
    args.path = path
    return args


def main(argv=None) -> int:
    os.environ.pop("TRITON_INTERPRET", None)  # compiled, not interpreted (fused_sass's kernels)
    if (args := parsed(parse_args, argv)) is None:
        return 2
    from qgemm_bench.backends.config_buckets import parse

    try:
        kernels = json.loads(args.path.read_text())["kernels"]
    except (ValueError, KeyError, TypeError) as e:
        print(f"error: {args.path}: not a weight_only table ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    print(f"{args.path}, {args.sms} SMs; regs / shared KB / programs an SM / grid / waves; "
          "then the cap for one more program an SM: regs, spills, waves")
    for fmt in args.fmts:
        for key, entry in sorted(kernels.get(f"{fmt}_gemm_fused", {}).items(), key=lambda e: parse(e[0])):
            m, k, n = parse(key)
            c = entry["config"]
            if m > 64 or "WS" in c:
                continue
            warps = c["num_warps"]
            threads = 32 * warps
            grid = math.ceil(m / c["BLOCK_M"]) * math.ceil(n / c["BLOCK_N"]) * c.get("SPLIT_K", 1)
            try:
                regs, smem, spills = compile_one(sass_args(c, fmt, k))
            except InputError as e:
                print(f"{fmt} {key}: not compiled: {e}")
                continue
            ctas = ctas_per_sm(regs, warps, smem)
            waves = grid / (args.sms * ctas)
            line = (f"{fmt} {key}: {regs} / {smem / 1024:.1f} / {ctas} / {grid} / {waves:.2f}"
                    + (f" ({spills} spills)" if spills else ""))
            rounds = math.ceil(waves)
            for more in range(ctas + 1, SM_THREADS // threads + 1):  # each cap taking fewer rounds than those above
                cap = cap_for(more, threads)
                if cap < MIN_CAP or ctas_per_sm(cap, warps, smem) < more:
                    break
                if math.ceil(grid / (args.sms * more)) < rounds:
                    r2, s2, sp2 = compile_one(sass_args(c, fmt, k, cap))
                    w2 = grid / (args.sms * ctas_per_sm(r2, warps, s2))
                    line += f"; maxnreg {cap}: {r2}, {sp2} spills, {w2:.2f}"
                    rounds = math.ceil(w2)
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
