#!/usr/bin/env python3
"""No GPU needed: compile split_k_parts.reduce_planes (REDUCE "kernel"'s
second launch) for sm_90 with this machine's Triton and print, per plane
count, its launch (plane_launch's BLOCK, warps, SPREAD), registers, and its
global loads (L) and fp32 adds (A) in program order: how many loads a
thread issues before its first add. docs/split_k.md's counts are Triton
3.6's, the GPU machine's (pip install --target /tmp/t36 triton==3.6.0,
then PYTHONPATH=/tmp/t36:$PWD).

  python3 scripts/reduce_sass.py [--shape M,N] [--splits 16,64,128] [--loop | --spread]

--loop / --spread force the per-thread split-order loop or the tile of
planes whatever the plane count (plane_launch picks the tile from
SPREAD_PLANES)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's qgemm_bench
sys.path.insert(0, str(Path(__file__).resolve().parent))  # fused_sass: one copy of the SASS readers

from qgemm_bench.errors import InputError, one_line  # noqa: E402
from qgemm_bench.harness.args import Parser, comma_list, int_in  # noqa: E402


def parse_args(argv=None):
    p = Parser(description=__doc__, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="16,16", metavar="M,N", help="the output's M,N (default 16,16)")
    p.add_argument("--splits", default="16,64,128", help="plane counts (default 16,64,128)")
    p.add_argument("--sms", type=int_in(1, 1024), default=132, help="SMs (plane_launch's block size; default 132)")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--loop", action="store_true", help="the per-thread loop at every plane count")
    form.add_argument("--spread", action="store_true", help="the tile of planes at every plane count")
    args = p.parse_args(argv)
    shape = args.shape.split(",")
    if len(shape) != 2 or not all(v.strip().isdigit() for v in shape):
        p.error(f"--shape {args.shape!r}: expected M,N (two positive integers), e.g. --shape 16,16")
    args.m, args.n = (int(v) for v in shape)
    try:
        splits = comma_list(args.splits, "--splits", "plane count", "16,64,128")
    except InputError as e:
        p.error(str(e))
    from qgemm_bench.backends.triton_kernels.split_k_configs import MAX_SPLIT

    if not all(v.isdigit() and 1 <= int(v) <= MAX_SPLIT for v in splits):
        p.error(f"--splits {args.splits!r}: expected plane counts from 1 to {MAX_SPLIT} (the tables' largest "
                "split), e.g. --splits 16,64,128")
    args.splits = [int(v) for v in splits]
    if min(args.m, args.n) < 1:
        p.error("--shape takes positive integers")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    import fused_sass

    from qgemm_bench.backends.triton_kernels import split_k_parts

    for split in args.splits:
        grid, meta = split_k_parts.plane_launch(args.m, args.n, split, args.sms,
                                                spread=True if args.spread else False if args.loop else None)
        const = {"SPLIT_K": split, "HAS_BIAS": False, "BLOCK": meta["BLOCK"], "PLANES": meta["PLANES"],
                 "SPREAD": meta["SPREAD"], "PDL": 3}
        sig = {"ws_ptr": "*fp32", "bias_ptr": "*bf16", "out_ptr": "*bf16", "M": "i32", "N": "i32",
               **{x: "constexpr" for x in const}}
        try:
            k = fused_sass.compile_jit(split_k_parts.reduce_planes, sig, const, ["ws_ptr", "bias_ptr", "out_ptr"],
                                       {"num_warps": meta["num_warps"], "num_stages": 1})
            with tempfile.TemporaryDirectory() as tmp:
                sass, regs = fused_sass.sass_and_registers(k.asm["cubin"], Path(tmp))
        except Exception as e:  # a Triton without its CUDA tools
            print(f"error: compiling for sm_90 failed: {one_line(e, 240)}", file=sys.stderr)
            return 2
        ops = fused_sass.opcodes(sass.splitlines())
        seq = "".join("L" if o.startswith("LDG") else "A" if o == "FADD" else "" for o in ops)
        first = seq.find("A")
        print(f"{args.m}x{args.n}, {split} planes: grid {grid[0]}, BLOCK {meta['BLOCK']}, {meta['num_warps']} warps, "
              f"{'tile (SPREAD)' if meta['SPREAD'] else 'per-thread loop'}; {regs} registers, "
              f"{seq.count('L')} loads a thread, {first if first >= 0 else seq.count('L')} before the first add")
        print(f"  {seq}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
