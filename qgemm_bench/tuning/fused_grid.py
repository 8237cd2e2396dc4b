#!/usr/bin/env python3
"""GPU: time the fused mixed-input kernel's candidate configs against the
peers in the same process, the way the runner times (one CUDA graph over
rotating copies > 2x L2, p50), to choose the configs checked into
backends/triton_kernels/fused_gemm.py (FUSED_CONFIGS; its grid has pointer
loads only: the TMA candidates are fused_gemm.pool's, timed by
tuning/weight_only.py table).
  python3 -m qgemm_bench.tuning.fused_grid OUT.json [--fmt int4 nvfp4] [--m 1 16 ...]
      [--shapes 8192x8192 4096x14336] [--peers cublas fbgemm triton] [--top 5]
Prints, per format, shape and M, the peers and the best configs; writes every
timing to OUT.json."""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from qgemm_bench.backends import registry
from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm, config
from qgemm_bench.errors import InputError, one_line
from qgemm_bench.harness.args import Parser
from qgemm_bench.harness.measure import Settings, copies_for
from qgemm_bench.harness.outputs import write_atomic
from qgemm_bench.operators import int4_gemm, nvfp4_gemm
from qgemm_bench.operators.common import rel_error
from qgemm_bench.operators.formats import INT4, NVFP4
from qgemm_bench.target import of
from qgemm_bench.tuning.timing import p50_us
from qgemm_bench.types import Case, Shape

DEV = torch.device("cuda")


def candidates(m: int) -> list[dict]:
    """A grid per M range: (BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, warps, stages)."""
    if m <= 16:
        grid = [(16, bn, bk, sk, 4, st) for bn in (64, 128, 256) for bk in (128, 256) for sk in (2, 4, 8)
                for st in (3, 4) if not (bn == 256 and bk == 256)]
    elif m <= 64:
        grid = [(bm, bn, bk, sk, 4, st) for bm in (32, 64) for bn in (64, 128) for bk in (128, 256)
                for sk in (1, 2, 4) for st in (3, 4)]
    elif m <= 512:  # the checked-in winners: 128x64x128 w8 s4, 256x64x128 w8 s3, 256x128x64 w8 s4
        grid = [(bm, bn, bk, 1, w, st) for bm in (64, 128, 256) for bn in (64, 128) for bk in (64, 128)
                for w, st in ((4, 4), (8, 3), (8, 4)) if not (bm == 256 and w == 4)]
    else:
        grid = [(bm, bn, bk, 1, w, st) for bm in (128, 256) for bn in (128, 256) for bk in (64, 128)
                for w, st in ((8, 3), (8, 4), (4, 3)) if bm * bn <= 128 * 256 and not (w == 4 and bm * bn > 128 * 128)]
    return [config(*g) for g in grid]


def case_inputs(fmt: str, m: int, k: int, n: int):
    op = int4_gemm if fmt == "int4" else nvfp4_gemm
    settings = op.Settings(128) if fmt == "int4" else op.Settings()
    case = Case(op.NAME, Shape(m, k, n), torch.bfloat16, DEV, settings)
    inputs = op.make_inputs(case, 0)
    return case, inputs, op.reference(inputs)


def weight_args(fmt: str, inputs):
    if fmt == "int4":
        return inputs.w, inputs.scales, None, INT4, 128
    return inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale.float(), NVFP4, 16


def n_copies(nbytes: int) -> int:
    l2 = torch.cuda.get_device_properties(DEV).L2_cache_size
    return copies_for(nbytes, nbytes, l2, DEV)


def p50(fns) -> float:
    """Short windows (10 / 40 ms), as this grid was first timed."""
    return p50_us(fns, Settings(warmup_ms=10, rep_ms=40), DEV)


def main(argv=None) -> int:
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--fmt", nargs="+", default=["int4", "nvfp4"], choices=["int4", "nvfp4"])
    p.add_argument("--m", nargs="+", type=int, default=[1, 16, 64, 256, 1024, 4096])
    p.add_argument("--shapes", nargs="+", default=["8192x8192"], help="KxN")
    p.add_argument("--peers", nargs="+", default=["cublas", "fbgemm", "triton"])
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--limit-s", type=float, default=540, help="stop starting new cases after this many seconds")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise InputError("needs a CUDA GPU")
    t0, results = time.time(), []
    for fmt in args.fmt:
        for kn in args.shapes:
            k, n = (int(v) for v in kn.lower().split("x"))
            for m in args.m:
                if time.time() - t0 > args.limit_s:
                    print(f"time limit: skipped {fmt} {m}x{k}x{n} and later", flush=True)
                    continue
                case, inputs, ref = case_inputs(fmt, m, k, n)
                nb = inputs.x.numel() * 2 + inputs.w.numel() + m * n * 2
                copies = [inputs] + [inputs.clone() for _ in range(n_copies(nb) - 1)]
                rows = []
                for name in args.peers:
                    try:
                        b = registry.get(case.op, name)
                        if b.why_not and b.why_not(case):
                            continue
                        fns = [b.prepare(case, c).fn for c in copies]
                        err = rel_error(fns[0](), ref)
                        rows.append((p50(fns), err, name))
                    except Exception as e:
                        print(f"  {name}: {one_line(e, 160)}")
                gemms = [FusedGemm(*weight_args(fmt, c), config=None, target=of(case.device)) for c in copies]
                for c in candidates(m):
                    for g in gemms:
                        g.config = c
                    try:
                        err = rel_error(gemms[0](inputs.x), ref)
                        us = p50([lambda g=g, x=cp.x: g(x) for g, cp in zip(gemms, copies, strict=True)])
                        rows.append((us, err, json.dumps(c)))
                    except Exception as e:
                        rows.append((float("inf"), float("nan"), f"FAILED {json.dumps(c)} {type(e).__name__}"))
                del gemms, copies
                torch.cuda.empty_cache()
                for us, err, label in rows:
                    results.append({"fmt": fmt, "m": m, "k": k, "n": n, "label": label, "us": us, "err": err})
                peers = [r for r in rows if not r[2].startswith(("{", "FAILED"))]
                ours = sorted((r for r in rows if r[2].startswith("{") and r[1] < 1e-2), key=lambda r: r[0])
                bad = [r for r in rows if r[2].startswith("FAILED") or (r[2].startswith("{") and not r[1] < 1e-2)]
                print(f"\n{fmt} {m}x{k}x{n} ({time.time() - t0:.0f} s)", flush=True)
                for us, err, label in sorted(peers) + ours[: args.top]:
                    print(f"  {us:9.2f} us  err {err:.1e}  {label}")
                if bad:
                    print(f"  failed or inaccurate: {len(bad)}, e.g. {bad[0][2][:160]}")
                write_atomic(args.out, json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
