#!/usr/bin/env python3
"""GPU: where the time goes in a decode-size weight-only GEMM (issue 53):
int4 g128 and NVFP4 at K = N = 8192, M = 1, 16, 64, each piece of the
fused split-K kernel's work timed alone, as the runner times (a CUDA graph
over rotating copies > 2x L2, harness/timing.time_graph with the runner's
windows), against the weight-read floor (op bytes / measured copy GB/s).

  python scripts/decode_probe.py [--out PATH] [--budget-s 140] [--no-sweep] [--formats int4,nvfp4] [--k K --n N]
  python scripts/decode_probe.py --cpu-smoke      (no GPU: every kernel once in the interpreter, checked)

Rows, per format and M (docs/fused_gemm.md, "Where the time goes at decode
sizes", says how to read them):
  copy       torch D2D copy of the kernel's weight + scale bytes (reads and
             writes them: ~2x the read floor);
  read       harness/read_floor.py's best plain reader of those bytes;
  S1 read    the production config's grid, tiles, split, pipeline and PDL
             prologue, reading only the weight (as int32 words, xor-ed;
             checked: the xor of every word) and scale tiles (BLOCK, SUB
             and NVFP4's one K block ahead as production, ACC_SCALE's
             row; xor-ed in their load layout; checked);
  S2 decode  S1 + the production decode (fused_gemm._weights) of every tile,
             kept live by one bf16 FMA per decoded pair (not a GEMM: run, not
             checked);
  S3 dot     S2 + x tiles and the wgmma (ACC_SCALE as configured), each
             split's partial added to one fp32 [M, N] plane by the same
             atomics as production, without its tile counter, last-program
             cast and store or zeroing (checked: one launch into zeros);
  S4 prod    the `triton` backend itself (registry prepare, the runner's
             measure.time_on_gpu; at M = 64 the H200 table runs the
             warp-specialized Gluon kernel, S1-S3 then mirror its fused_kernel
             config without WS);
  S4 kernel  (int4 with ACC_SCALE) fused_kernel itself at the S1-S3 config
             (FusedGemm over the rotating copies), timed as S1-S3 are;
  S4 fold    the same with FOLD (the decode's offset off each K block's
             product, fused_gemm's module docstring); checked over 3 calls;
  S4 halves  (int4 with ACC_SCALE, M <= 16) the same with HALVES (fused_gemm.halved:
             each K block as two half-K tiles) at 8 warps capped at 64 registers
             and at 4 warps r128; checked over 3 calls (the 8-warp split-K
             family wrong_on_sm90 refuses; runs only as asked for);
  S2 fold,   S2 and S3 with FOLD (S2: the decode without the offset's
  S3 fold    subtraction; S3: also the sums' correction);
  gemv       (int4, M <= 16) no tensor cores: each thread reads 16-byte runs
             of the K-major weights, decodes, FMAs with x in fp32; split-K by
             fp32 atomics finished by the tile's last program (split_k_parts);
             checked.
Then, int4 at M = 1, S2 and S3 of the production tile at 4 and 8 warps, with
and without the 128-register cap, without and with FOLD ("S2 sweep", "S3
sweep": 16 variants, every one checked over 3 calls first: int4 8-warp
split-K configs returned wrong sums on the H100, fused_gemm.wrong_on_sm90),
and of the production tile with a deeper ring, 4 and 5 stages ("S2 stages",
"S3 stages": whether more bytes in flight hide the decode), and S3 with
HALVES ("S3 halves": each K block decoded and multiplied in two half-K
tiles, 63 registers at 8 warps, so the 8-warp grid runs in one wave; at
8 warps capped at 64 registers and not, and at 4 warps r128).
Last (unless --no-sweep) S1 alone over deeper pipelines and other grids at
M = 1, int4: what a Triton loop of this shape can stream at best.
Columns: p50 us; % of floor (floor / p50; copy and read: M = 1's); GB/s of
the kernel's weight + scale bytes (NVFP4's scales as the bf16 it reads).
A variant whose result is wrong prints WRONG and is not timed; one that
fails prints one line and the rest go on; past --budget-s the rest print
"skipped". The H200 run takes about 2 minutes (compiles included). Exits 1
when a variant is WRONG (or, under --cpu-smoke, when any failed).

CPU smoke (every kernel once, K = 2048, N = 256, M = 1 and 3, float16, the
interpreter's non-PTX decode, results checked, nothing timed):
  PYTHONPATH=$PWD python scripts/decode_probe.py --cpu-smoke   (70-90 s on 2 cores)
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import os
import statistics
import sys
import time
from pathlib import Path

if "--cpu-smoke" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's qgemm_bench

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from qgemm_bench.backends.kmajor_layout import TILE  # noqa: E402
from qgemm_bench.backends.triton_kernels import decode, fused_gemm, split_k_parts  # noqa: E402
from qgemm_bench.errors import InputError, one_line  # noqa: E402
from qgemm_bench.harness import faults  # noqa: E402
from qgemm_bench.harness.args import Parser  # noqa: E402

READ, DECODE, DOT = 1, 2, 3  # stage_kernel's STAGE (literals there: a jit function reads no plain globals)
STAGE_NAMES = {READ: "S1 read", DECODE: "S2 decode", DOT: "S3 dot"}


@triton.jit(do_not_specialize=["M"])
def stage_kernel(x_ptr, w_ptr, w32_ptr, s_ptr, ts_ptr, out_ptr, M, N, K: tl.constexpr, stride_xm, stride_wn, stride_ww,
                 stride_sg, STAGE: tl.constexpr, FMT: tl.constexpr, GROUP: tl.constexpr, SCALE_MODE: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
                 LOOP_STAGES: tl.constexpr, DECODE_ASM: tl.constexpr, TILE_N: tl.constexpr, TILE_K: tl.constexpr,
                 ACC_SCALE: tl.constexpr, PDL: tl.constexpr, PF_LINES: tl.constexpr = 32, FOLD: tl.constexpr = False,
                 HALVES: tl.constexpr = False):
    """fused_gemm.fused_kernel's pointer-load split-K loop (tiled fragment-order
    weights, BLOCK_N >= TILE_N, K a multiple of BLOCK_K) cut after a stage:
    READ: out (int32, 2 per program) = the xor of the weight words read and
    of the 16-bit scales each K block reads (scale_xor), xor-ed in their
    load layout (a reduction across warps in the loop cost 2 barriers per K
    block); DECODE: out (fp32, 1 per program) = a sum of the decoded tiles;
    DOT: out (fp32 [M, N]) += the split's partial product (atomics; no
    counter, no cast: the caller zeroes out). FOLD as
    fused_kernel's (int4 with ACC_SCALE): S2 decodes without the offset's
    subtraction, S3 also takes it off each block's product. HALVES (S3,
    int4 with ACC_SCALE, BLOCK_K <= TILE_K): each K block's weights and x
    come as two half-K tiles, each decoded and multiplied in turn (one
    product, scaled once): half the decoded operand live at a time (docs/fused_gemm.md: at 8 warps
    the dot's registers, not its instructions, cost the grid its one wave)."""
    DT: tl.constexpr = x_ptr.dtype.element_ty
    USE_ASM: tl.constexpr = DECODE_ASM and DT == tl.bfloat16
    pid_mn, offs_m, offs_n, first, last = split_k_parts.tile_and_range(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    TB: tl.constexpr = TILE_K // 2  # a tile row's bytes
    TILE_BYTES: tl.constexpr = TILE_N * TB
    r = tl.arange(0, BLOCK_N)
    tile_n = (pid_mn % tl.cdiv(N, BLOCK_N)).to(tl.int64)
    w_rows = fused_gemm._weight_rows(w_ptr, pid_mn, offs_n, N, stride_wn, BLOCK_N, BLOCK_K, TILE_N, TILE_K)
    # The same bytes as int32 words (w32_ptr: the host's int32 view, stride_ww = stride_wn // 4): S1 xors
    # 16 words, not 64 bytes, per 16-byte load.
    rows_w = (r // TILE_N) * TILE_N * stride_ww + (r % TILE_N) * (TB // 4)
    w32_rows = w32_ptr + tile_n * BLOCK_N * stride_ww + rows_w[:, None]
    if BLOCK_K <= TILE_K:
        w32_rows += tl.arange(0, BLOCK_K // 8)[None, :]
    else:
        q = tl.arange(0, BLOCK_K // 8)
        w32_rows += ((q // (TB // 4)) * (TILE_BYTES // 4) + q % (TB // 4))[None, :]
    if PDL >= 2:  # fused_kernel's prologue: prefetch each tile row's first PF_LINES lines
        RT: tl.constexpr = BLOCK_N // TILE_N
        span = (last - first) * (BLOCK_K // 2) * TILE_N
        line = tl.minimum(tl.arange(0, PF_LINES) * 128, span - 128)
        pf = (w_ptr + (tile_n * (BLOCK_N // TILE_N) + tl.arange(0, RT)[:, None]) * TILE_N * stride_wn
              + (first * BLOCK_K // TILE_K) * TILE_BYTES + line[None, :])
        split_k_parts.pdl_prologue(pf, PDL)
    else:
        split_k_parts.pdl_prologue(w_ptr + tl.arange(0, 2), PDL)
    x_cols = x_ptr + offs_m[None, :] * stride_xm + offs_k[:, None]
    if HALVES:  # a tile row's half-K runs: bytes [0, BLOCK_K // 4) and [BLOCK_K // 4, BLOCK_K // 2) of its block
        w_half = fused_gemm._weight_rows(w_ptr, pid_mn, offs_n, N, stride_wn, BLOCK_N, BLOCK_K // 2, TILE_N, TILE_K)
        x_half = x_ptr + offs_m[None, :] * stride_xm + tl.arange(0, BLOCK_K // 2)[:, None]
    W_SCALE: tl.constexpr = 0 if ACC_SCALE and SCALE_MODE == 2 else SCALE_MODE
    FOLDED: tl.constexpr = FOLD and FMT == 0 and W_SCALE != SCALE_MODE
    sc = fused_gemm._scales(s_ptr, first, offs_n, stride_sg, GROUP, W_SCALE, BLOCK_K)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    accw = tl.zeros((BLOCK_N, BLOCK_K // 8), dtype=tl.int32)
    accd = tl.zeros((BLOCK_N, BLOCK_K // 2), dtype=DT)
    accs = tl.zeros((BLOCK_N, 1), dtype=tl.float32)
    accx = tl.zeros((BLOCK_N, max(BLOCK_K // GROUP, 2)), dtype=tl.int16)  # _scales' tile shape
    accr = tl.zeros((BLOCK_N, 1), dtype=tl.int16)  # ACC_SCALE's row
    if STAGE == 3 and FMT == 1 and ACC_SCALE:  # fused_kernel's NVFP4 ACC_SCALE: the tensor scale on each product
        t_scale = fused_gemm._tensor_scale(ts_ptr, USE_ASM)
    BLOCKS: tl.constexpr = K // BLOCK_K
    if BLOCKS % SPLIT_K == 0:
        steps = BLOCKS // SPLIT_K
    else:
        steps = last - first
    for i in tl.range(0, steps, num_stages=LOOP_STAGES):
        b = first + i
        sc_next = fused_gemm._scales(s_ptr, tl.minimum(b + 1, last - 1), offs_n, stride_sg, GROUP, W_SCALE, BLOCK_K)
        if W_SCALE != SCALE_MODE:
            s_raw = tl.load(s_ptr + (b * BLOCK_K // GROUP) * stride_sg + offs_n[:, None])
            s_row = s_raw.to(tl.float32)
            if STAGE == 1:
                accr = accr ^ s_raw.to(tl.int16, bitcast=True)
            elif STAGE == 2:
                accs += s_row
        if STAGE == 1:
            # The scale tiles' bits xor-ed in the load's layout, no reduction in the loop (in S2 and S3 the
            # decode reads them)
            if W_SCALE == 2 or W_SCALE == 3:
                accx = accx ^ sc.to(tl.int16, bitcast=True)
            if BLOCK_K < TILE_K:
                PER: tl.constexpr = TILE_K // BLOCK_K
                wq = tl.load(w32_rows + (b // PER) * (TILE_BYTES // 4) + (b % PER) * (BLOCK_K // 8))
            else:
                wq = tl.load(w32_rows + b * (BLOCK_K // TILE_K) * (TILE_BYTES // 4))
            accw = accw ^ wq
        elif STAGE == 3 and HALVES:
            tl.static_assert(W_SCALE != SCALE_MODE and not FOLDED, "HALVES: int4 with ACC_SCALE, without FOLD")
            HK: tl.constexpr = BLOCK_K // 2
            w_b = fused_gemm._block_ptr(w_half, b, BLOCK_K, TILE_N, TILE_K)
            acc += fused_gemm._halves_product(w_b, HK // 2, x_half + b * BLOCK_K, mask_m, K - b * BLOCK_K, USE_ASM,
                                              DT, BLOCK_N, BLOCK_M, BLOCK_K, True, True) * s_row
        else:
            wp = tl.load(fused_gemm._block_ptr(w_rows, b, BLOCK_K, TILE_N, TILE_K))
            lo, hi = fused_gemm._weights(wp, sc, s_ptr, b, offs_n, stride_sg, FMT, GROUP, W_SCALE, USE_ASM, DT,
                                         BLOCK_N, BLOCK_K, True, False, FOLDED)
            if STAGE == 2:
                accd += lo * hi
            else:
                x = tl.load(x_cols + b * BLOCK_K, mask=mask_m[None, :], other=0.0)
                w = fused_gemm._in_k_order(lo, hi, BLOCK_N, BLOCK_K, True)
                if W_SCALE != SCALE_MODE:
                    acc += fused_gemm._block_product(w, x, FOLDED) * s_row
                elif ACC_SCALE and FMT == 1:
                    acc += tl.dot(w, x) * t_scale
                else:
                    acc = tl.dot(w, x, acc)
        sc = sc_next
    split_k_parts.pdl_release(PDL)
    pid = pid_mn * SPLIT_K + tl.program_id(1)
    if STAGE == 1:
        tl.store(out_ptr + 2 * pid, tl.xor_sum(tl.xor_sum(accw, axis=1), axis=0))
        if BLOCK_K // GROUP < 2:  # _scales' two columns hold the same group row: one counts
            accx = tl.where(tl.arange(0, 2)[None, :] == 0, accx, 0)
        sx = tl.xor_sum(tl.xor_sum(accx, axis=1), axis=0) ^ tl.xor_sum(tl.xor_sum(accr, axis=1), axis=0)
        tl.store(out_ptr + 2 * pid + 1, sx.to(tl.int32) & 0xFFFF)
    elif STAGE == 2:
        tl.store(out_ptr + pid, tl.sum(accd.to(tl.float32)) + tl.sum(accs))
    else:
        if FMT == 1 and not ACC_SCALE:
            acc = acc * fused_gemm._tensor_scale(ts_ptr, USE_ASM)
        # split_k_parts.finish's atomics into one fp32 plane, without its counter and last-program store
        mask = mask_m[None, :] & (offs_n < N)[:, None]
        tl.atomic_add(out_ptr + offs_m[None, :] * N + offs_n[:, None], acc, mask=mask, sem="relaxed")


@triton.jit(do_not_specialize=["M"])
def gemv_kernel(x_ptr, w_ptr, s_ptr, out_ptr, ws_ptr, count_ptr, M, N, K: tl.constexpr, stride_xm, stride_wn,
                stride_sg, stride_om, GROUP: tl.constexpr, BM: tl.constexpr, BLOCK_N: tl.constexpr,
                SPLIT_K: tl.constexpr, LOOP_STAGES: tl.constexpr, DECODE_ASM: tl.constexpr, TILE_N: tl.constexpr,
                TILE_K: tl.constexpr):
    """int4 y = x @ dequant(w) for M <= BM without tensor cores: one K block
    per step is one tile column of the tiled fragment-order layout (each
    row's TILE_K // 2 contiguous bytes, 16 per thread), decoded, scaled per
    K block (GROUP a multiple of TILE_K) and FMA-ed with x in fp32, x read
    in the bytes' k order. Grid (cdiv(N, BLOCK_N), SPLIT_K); splits meet by
    split_k_parts.finish (fp32 atomics, the tile's last program stores)."""
    DT: tl.constexpr = x_ptr.dtype.element_ty
    USE_ASM: tl.constexpr = DECODE_ASM and DT == tl.bfloat16
    TB: tl.constexpr = TILE_K // 2
    pid_n = tl.program_id(0)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BM)
    BLOCKS: tl.constexpr = K // TILE_K
    per = tl.cdiv(BLOCKS, SPLIT_K)
    first = tl.program_id(1) * per
    last = tl.minimum(first + per, BLOCKS)
    rows = (offs_n // TILE_N) * TILE_N * stride_wn + (offs_n % TILE_N) * TB
    w_rows = w_ptr + rows[:, None] + tl.arange(0, TB)[None, :]
    # Byte p of each 16-byte run holds k = 8u + 2c + e (low nibble) and k + 16 (high), p = 4c + 2u + e.
    p = tl.arange(0, TB)
    k_lo = 32 * (p // 16) + 8 * ((p // 2) % 2) + 2 * ((p // 4) % 4) + p % 2
    acc = tl.zeros((BLOCK_N, BM), dtype=tl.float32)
    if BLOCKS % SPLIT_K == 0:
        steps = BLOCKS // SPLIT_K
    else:
        steps = last - first
    for i in tl.range(0, steps, num_stages=LOOP_STAGES):
        b = first + i
        wp = tl.load(w_rows + b * (TILE_N * TB))
        s = tl.load(s_ptr + (b * TILE_K // GROUP) * stride_sg + offs_n).to(tl.float32)
        if USE_ASM:
            lo, hi = decode.int4_nibbles_bf16x2(wp)
        else:
            lo, hi = decode.int4_nibbles(wp, DT)
        lo = lo.to(tl.float32)
        hi = hi.to(tl.float32)
        xb = x_ptr + b * TILE_K + k_lo
        if BM == 1:
            xl = tl.load(xb).to(tl.float32)
            xh = tl.load(xb + 16).to(tl.float32)
            acc += (tl.sum(lo * xl[None, :] + hi * xh[None, :], axis=1) * s)[:, None]
        else:
            part = tl.zeros((BLOCK_N, BM), dtype=tl.float32)
            for m in tl.static_range(BM):
                row = (p * 0 + m) < M
                xl = tl.load(xb + m * stride_xm, mask=row, other=0.0).to(tl.float32)
                xh = tl.load(xb + m * stride_xm + 16, mask=row, other=0.0).to(tl.float32)
                col = tl.sum(lo * xl[None, :] + hi * xh[None, :], axis=1)
                part += tl.where(offs_m[None, :] == m, col[:, None], 0.0)
            acc += part * s[:, None]
    split_k_parts.finish(tl.trans(acc), out_ptr, stride_om, ws_ptr, count_ptr, out_ptr, pid_n, offs_m, offs_n, M, N,
                         SPLIT_K, False, False)


# S1 alone at M = 1, int4 (BLOCK_N, BLOCK_K, SPLIT_K, warps, stages, PDL, loop stages or 0: the same as stages);
# loop stages 1: no software pipelining (plain loads into registers). The production tile first.
SWEEP = [(128, 128, 8, 4, 3, 2, 0)]
SWEEP += [(128, 128, 8, 4, s, 2, 0) for s in (4, 5, 6, 8)]
SWEEP += [(128, 128, sk, 4, 4, 2, 0) for sk in (4, 16, 32)]
SWEEP += [(64, 128, 8, 4, 4, 2, 0), (64, 128, 16, 4, 4, 2, 0), (64, 128, 16, 4, 6, 2, 0), (64, 128, 32, 4, 6, 2, 0)]
SWEEP += [(64, 256, 8, 4, 4, 2, 0), (64, 256, 16, 4, 4, 2, 0), (64, 256, 32, 4, 3, 2, 0)]
SWEEP += [(128, 256, 4, 4, 3, 2, 0), (128, 256, 8, 4, 3, 2, 0), (128, 256, 8, 4, 4, 2, 0), (128, 256, 16, 4, 4, 2, 0),
          (128, 256, 16, 4, 6, 2, 0)]
SWEEP += [(256, 128, 4, 4, 4, 2, 0), (256, 128, 8, 4, 3, 2, 0), (256, 128, 8, 4, 4, 2, 0), (256, 128, 16, 4, 4, 2, 0),
          (256, 128, 16, 4, 6, 2, 0)]
SWEEP += [(256, 256, 4, 4, 3, 2, 0), (256, 256, 8, 4, 3, 2, 0), (256, 256, 8, 4, 4, 2, 0), (256, 256, 16, 4, 3, 2, 0)]
SWEEP += [(128, 128, 8, 8, 4, 2, 0), (256, 128, 8, 8, 4, 2, 0), (256, 256, 8, 8, 3, 2, 0), (128, 256, 8, 8, 4, 2, 0),
          (256, 128, 16, 8, 6, 2, 0)]
SWEEP += [(128, 128, 8, 4, 3, 0, 0), (128, 128, 8, 4, 3, 2, 1), (256, 256, 16, 4, 3, 2, 1)]
# FOLD (fused_gemm's module docstring) at M = 1, int4: S2 and S3 of the production tile over warps and
# the register cap, without and with it (num_warps, maxnreg or 0), each checked over CHECK_CALLS calls
# (int4 8-warp split-K configs returned wrong sums on the H100 in some calls: fused_gemm.wrong_on_sm90).
FOLD_SWEEP = [(4, 128), (4, 0), (8, 128), (8, 0)]
# Deeper rings of the production tile at M = 1 (4 warps, its register cap): whether more weight bytes in
# flight let the loads stream while the warps decode (docs/fused_gemm.md).
STAGE_SWEEP = (4, 5)
# S3 with HALVES (stage_kernel) at M = 1, the production tile: (num_warps, maxnreg or 0). The 8-warp dot
# compiled for sm_90 needs 80-96 registers, so at most 3 of its 8-warp programs fit an SM and the grid's 512
# do not run in one wave; HALVES needs 63 (4 fit; docs/fused_gemm.md). w4 r128: the same loop at 4 warps.
HALVES_SWEEP = [(8, 64), (8, 0), (4, 128)]
CHECK_CALLS = 3
# fused_kernel with HALVES at 8 warps and split-K is wrong_on_sm90's family, whose wrong sums on the H100
# came in some calls only: its rows check more calls before they are timed.
HALVES_CHECK_CALLS = 30
SMEM_LIMIT = 220 * 1024  # a sweep tile's weight ring (stages x tile bytes) above this is left out
# GEMV configs by M: (BLOCK_N, SPLIT_K, warps, loop stages).
GEMV = {1: [(128, 8, 4, 4), (64, 16, 4, 4)], 16: [(64, 8, 4, 3), (32, 16, 4, 3)]}


def describe(c: dict) -> str:
    """split_k_configs.describe's label, and a stage kernel's loop stages."""
    from qgemm_bench.backends.triton_kernels.split_k_configs import describe as label

    s = label({k: v for k, v in c.items() if k not in ("LOOP_STAGES", "HALVES")})
    s = f"{s} halves" if c.get("HALVES") else s
    return f"{s} loop s{c['LOOP_STAGES']}" if c.get("LOOP_STAGES") else s


class Probe:
    """One run: the device, the floor's copy bandwidth, the budget, the rows."""

    def __init__(self, args):
        self.args, self.t0 = args, time.monotonic()
        self.smoke = args.cpu_smoke
        self.dev = torch.device("cpu" if self.smoke else "cuda")
        self.dtype = torch.float16 if self.smoke else torch.bfloat16
        self.rows, self.lines = [], []
        self.failed = 0  # variants or setups that raised: the smoke's exit counts them
        self.copy_GBps = args.copy_gbps
        self.l2 = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.lines.append(text)

    def over_budget(self) -> bool:
        return not self.smoke and self.elapsed() > self.args.budget_s

    def row(self, fmt: str, m, name: str, config: str, floor_us: float | None, nbytes: int, run,
            check=None) -> None:
        """check() -> error text or None (run first where given); run() ->
        the rotating-copy calls to time, or a p50 us it timed itself (on
        the CPU: the first call runs once)."""
        label = f"{fmt:>5} M={m!s:<3} {name:<10} {config:<46}"
        if self.over_budget():
            self.say(f"{label} skipped (past --budget-s {self.args.budget_s:g})")
            return
        try:
            if check is not None:
                wrong = check()
                if wrong:
                    self.say(f"{label} WRONG: {wrong}")
                    self.rows.append({"fmt": fmt, "M": m, "variant": name, "config": config, "wrong": wrong})
                    return
            got = run()
            if self.smoke:
                if not isinstance(got, float):
                    got[0]()
                self.say(f"{label} ok (interpreter, not timed)")
                return
            us = got if isinstance(got, float) else time_calls(got)
        except Exception as e:  # noqa: BLE001 - one variant's failure is its row's
            if faults.context_lost(e):
                raise
            self.say(f"{label} failed: {one_line(e, 160)}")
            self.failed += 1
            self.rows.append({"fmt": fmt, "M": m, "variant": name, "config": config, "error": type(e).__name__})
            return
        pct = 100 * floor_us / us if floor_us else float("nan")
        self.say(f"{label} {us:8.2f} us {pct:6.1f}% {nbytes / us / 1e3:7.0f} GB/s   t={self.elapsed():5.1f}s")
        self.rows.append({"fmt": fmt, "M": m, "variant": name, "config": config, "p50_us": round(us, 3),
                          "floor_us": floor_us, "pct_of_floor": round(pct, 1), "GBps": round(nbytes / us / 1e3)})


def time_calls(fns: list) -> float:
    """p50 us per call, graph timing over the rotating copies, the runner's windows."""
    from qgemm_bench.harness import timing
    from qgemm_bench.harness.measure import Settings

    s = Settings()
    return float(statistics.median(timing.time_graph(fns, s.warmup_ms, s.rep_ms).samples_us))


def n_copies(probe: Probe, touched: int) -> int:
    if probe.smoke:
        return 1
    from qgemm_bench.harness.measure import copies_for

    return copies_for(touched, touched, probe.l2, probe.dev)


def stage_launch(stage: int, x, wt, scales, ts, out, fg, c: dict, loop_stages: int = 0) -> None:
    """One stage_kernel launch with config c on FusedGemm fg's layout (wt,
    scales: its tensors or rotating copies of them)."""
    m, k = x.shape
    n = fg.n
    mode = fused_gemm.scale_mode(fg.fmt, fg.group, k, c["BLOCK_K"], True, fused_gemm.channel_block(c))
    extra = {"maxnreg": c["maxnreg"]} if c.get("maxnreg") and x.is_cuda else {}
    stage_kernel[split_k_parts.grid(m, n, c)](
        x, wt, wt.view(torch.int32), scales, ts, out, m, n, k, x.stride(0), wt.stride(0), wt.stride(0) // 4,
        scales.stride(0),
        STAGE=stage, FMT=fg.fmt, GROUP=fg.group, SCALE_MODE=mode, BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"],
        BLOCK_K=c["BLOCK_K"], SPLIT_K=c["SPLIT_K"], LOOP_STAGES=loop_stages or c["num_stages"],
        DECODE_ASM=c.get("DECODE_ASM", True), TILE_N=TILE[0], TILE_K=TILE[1], ACC_SCALE=bool(c.get("ACC_SCALE")),
        FOLD=bool(c.get("FOLD")), HALVES=bool(c.get("HALVES")), num_warps=c["num_warps"],
        num_stages=c["num_stages"], **extra,
        **split_k_parts.pdl_launch(c, x.device))


def stage_out(stage: int, m: int, n: int, c: dict, device) -> torch.Tensor:
    programs = split_k_parts.grid(m, n, c)
    programs = programs[0] * programs[1]
    if stage == READ:
        return torch.zeros(2 * programs, dtype=torch.int32, device=device)
    if stage == DECODE:
        return torch.zeros(programs, dtype=torch.float32, device=device)
    return torch.zeros(m, n, dtype=torch.float32, device=device)


def word_xor(t: torch.Tensor) -> int:
    """The xor of a tensor's bytes as int32 words."""
    return int(np.bitwise_xor.reduce(t.contiguous().view(torch.int32).flatten().cpu().numpy()))


def scale_xor(scales: torch.Tensor, k: int, group: int, n: int, block_n: int, block_k: int) -> int:
    """The xor of the 16-bit scales an S1 launch reads (its second int32 per
    program, xor-ed over programs), BLOCK or SUB scales (int4 with or
    without ACC_SCALE, NVFP4): each K block's group rows (one where a group
    spans the block, counted once per block that reads it), the columns of
    the grid's BLOCK_N tiles."""
    cols = triton.cdiv(n, block_n) * block_n
    starts = np.arange(k // block_k) * block_k
    rows = ((starts[:, None] + np.arange(0, block_k, min(group, block_k))[None, :]) // group).flatten()
    words = scales[torch.from_numpy(rows), :cols].contiguous().view(torch.int16).flatten().cpu().numpy()
    return int(np.bitwise_xor.reduce(words)) & 0xFFFF


class Layout:
    """One format's weights at K x N: the operator's inputs, the production
    FusedGemm (its K-major weights), the dequantized reference weights, and
    rotating copies of the K-major tensors."""

    def __init__(self, probe: Probe, fmt: str, k: int, n: int, max_m: int):
        from qgemm_bench.backends.triton_dispatch import make_weight_only
        from qgemm_bench.backends.triton_ops import weight_args
        from qgemm_bench.operators import int4_gemm, nvfp4_gemm
        from qgemm_bench.target import Target
        from qgemm_bench.types import Case, Shape

        self.probe, self.fmt, self.k, self.n = probe, fmt, k, n
        self.op = int4_gemm if fmt == "int4" else nvfp4_gemm
        self.settings = int4_gemm.Settings(128) if fmt == "int4" else nvfp4_gemm.Settings()
        self.target = Target.cpu() if probe.smoke else Target.from_device(probe.dev, {"copy_GBps": probe.copy_GBps})
        self.case0 = Case(self.op.NAME, Shape(max_m, k, n), probe.dtype, probe.dev, self.settings, self.target)
        self.inputs = self.op.make_inputs(self.case0, 0)
        self.wargs = weight_args(self.op.NAME, self.inputs)
        self.deq = self.op.dequantize(self.inputs)  # fp32 [K, N]
        self.gemm = make_weight_only(*self.wargs, target=self.target)
        self.fg = None
        self.copies = None

    def config(self, m: int) -> dict:
        """The production fused config at M (the H200 table's on the CPU), without WS and
        without SCALE8 (the stage kernels read the bf16 block scales)."""
        from qgemm_bench.operators.formats import INT4, NVFP4

        if self.probe.smoke:
            from qgemm_bench.backends.triton_kernels.weight_only_configs import lookup

            found = lookup(INT4 if self.fmt == "int4" else NVFP4, "fused", m, 8192, 8192, "h200")
            # (lookup without a table finds nothing: the H200's M = 1 and 16 tile, ACC_SCALE for int4)
            c = dict(found[0]) if found else fused_gemm.config(16, 128, 128, 8, 4, 3, acc=self.fmt == "int4")
            for key in ("WS", "maxnreg", "TMA", "TMA_W", "SCALE8"):
                c.pop(key, None)
            c["BLOCK_M"] = max(16, c["BLOCK_M"])
        else:
            c = dict(self.gemm.fused().config_for(m))
            c.pop("WS", None)
            c.pop("SCALE8", None)
            if c.get("TMA"):  # (none at M <= 64 in the tables) the stage kernel has pointer loads only
                c = dict(fused_gemm.tuned_config(INT4 if self.fmt == "int4" else NVFP4, m, tma=False))
        return c

    def fused(self):
        """The FusedGemm whose K-major weights the stage kernels read (made once)."""
        if self.fg is None:
            self.fg = self.gemm.fused()
            km = self.fg.kmajor
            ts = self.fg.ts if self.fg.ts is not None else torch.ones((), device=self.probe.dev)
            per = km.wt.nbytes + km.scales.nbytes
            n = n_copies(self.probe, per)
            self.copies = [(km.wt, km.scales, ts)] + [(km.wt.clone(), km.scales.clone(), ts.clone())
                                                      for _ in range(n - 1)]
        return self.fg

    def weight_xor(self) -> int:
        """word_xor of the K-major weights (every rotating copy holds the same bytes)."""
        if not hasattr(self, "_xor"):
            self._xor = word_xor(self.fused().kmajor.wt)
        return self._xor

    def weight_bytes(self) -> int:
        km = self.fused().kmajor
        return km.wt.nbytes + km.scales.nbytes

    def floor_us(self, m: int) -> float | None:
        from qgemm_bench.types import Shape

        if not self.probe.copy_GBps:
            return None
        return self.op.bytes(Shape(m, self.k, self.n), self.probe.dtype, self.settings) / (self.probe.copy_GBps * 1e3)

    def x(self, m: int) -> torch.Tensor:
        return self.inputs.x[:m].contiguous()

    def reference(self, m: int) -> torch.Tensor:
        return self.x(m).float() @ self.deq


def run_copy_and_read(probe: Probe, lay: Layout) -> None:
    nbytes = lay.weight_bytes()
    if probe.smoke:
        return
    n = n_copies(probe, 2 * nbytes)
    srcs = [torch.empty(nbytes, dtype=torch.uint8, device=probe.dev) for _ in range(n)]
    fns = [functools.partial(torch.Tensor.copy_, torch.empty_like(s), s) for s in srcs]
    probe.row(lay.fmt, "*", "copy", f"torch D2D copy of {nbytes / 2**20:.1f} MiB", lay.floor_us(1), nbytes,
              lambda: fns)
    from qgemm_bench.harness import read_floor

    def read_row():
        r = read_floor.measure(nbytes, probe.dev)
        probe.say(f"{lay.fmt:>5} M=*   {'read':<10} {'read_floor.py best reader ' + str(r['reader']):<46} "
                  f"{r['read_us']:8.2f} us {100 * lay.floor_us(1) / r['read_us']:6.1f}% {r['read_GBps']:7.0f} GB/s"
                  f"   (empty launch {r['empty_us']:.2f} us)   t={probe.elapsed():5.1f}s")
        probe.rows.append({"fmt": lay.fmt, "M": "*", "variant": "read", "config": str(r["reader"]),
                           "p50_us": round(r["read_us"], 3), "empty_us": round(r["empty_us"], 3)})

    if probe.over_budget():
        probe.say(f"{lay.fmt:>5} read skipped (past --budget-s)")
        return
    try:
        read_row()
    except Exception as e:  # noqa: BLE001
        if faults.context_lost(e):
            raise
        probe.say(f"{lay.fmt:>5} read failed: {one_line(e, 160)}")
        probe.failed += 1


def stage_row(probe: Probe, lay: Layout, m: int, stage: int, c: dict, name: str | None = None,
              loop_stages: int = 0) -> None:
    fg = lay.fused()
    x = lay.x(m)
    c = {**c, "LOOP_STAGES": loop_stages} if loop_stages else c
    outs = [stage_out(stage, m, fg.n, c, probe.dev) for _ in lay.copies]
    xs = [x] + [x.clone() for _ in lay.copies[1:]]

    def check():
        """CHECK_CALLS launches (one in the interpreter), each checked (an
        int4 8-warp split-K race, fused_gemm.wrong_on_sm90, showed in some
        calls only); S2's sums are per program: each call repeats the first."""
        wt, sc, ts = lay.copies[0]
        first = None
        for _ in range(1 if probe.smoke else CHECK_CALLS):
            outs[0].zero_()
            stage_launch(stage, x, wt, sc, ts, outs[0], fg, c, loop_stages)
            if stage == READ:
                got = word_xor(outs[0][0::2])
                want = lay.weight_xor()
                if got != want:
                    return f"the weight words' xor {got:#x}, torch {want:#x}"
                got = word_xor(outs[0][1::2])
                want = scale_xor(sc, lay.k, fg.group, fg.n, c["BLOCK_N"], c["BLOCK_K"])
                if got != want:
                    return f"the scales' xor {got:#x}, torch {want:#x}"
            elif stage == DOT:
                from qgemm_bench.operators.common import rel_error

                err = rel_error(outs[0], lay.reference(m))  # outs[0] zeroed: one launch's sum
                tol = lay.op.tolerance(probe.dtype)
                if not err <= tol:
                    return f"relative error {err:.3g} > {tol:g}"
            elif first is None:
                # (on the CPU float16 products of NVFP4 values overflow; bf16 on the GPU does not)
                if not probe.smoke and not torch.isfinite(outs[0]).all():
                    return "non-finite decode sums"
                first = outs[0].clone()
            elif not torch.allclose(outs[0], first, rtol=0, atol=0, equal_nan=True):
                return "decode sums differ between calls"
        return None

    def run():
        return [lambda xc=xc, cp=cp, o=o: stage_launch(stage, xc, *cp, o, fg, c, loop_stages)
                for xc, cp, o in zip(xs, lay.copies, outs, strict=True)]

    probe.row(lay.fmt, m, name or STAGE_NAMES[stage], describe(c), lay.floor_us(m), lay.weight_bytes(), run, check)


def prod_label(lay: Layout, m: int) -> str:
    """The path and config the backend runs at M (its dispatch's)."""
    try:
        path = lay.gemm.path(m)
        c = lay.gemm.tuned(m)[0] if path != "dequant" else None
    except Exception as e:  # noqa: BLE001 - the row itself will say what fails
        return f"? ({type(e).__name__})"
    if c and c.get("WS"):
        w = c["WS"]
        return "fused WS " + "x".join(str(w[key]) for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K")) + \
            f" s{w['num_stages']}" + (f" splits {w['SPLITS']}" if w.get("SPLITS") else "") + \
            (f" skew {w['SKEW']}" if w.get("SKEW") else "")
    return f"{path} " + (describe(c) if c else "")


def production_row(probe: Probe, lay: Layout, m: int) -> None:
    from qgemm_bench.backends.registry import get
    from qgemm_bench.harness import measure
    from qgemm_bench.operators.common import rel_error
    from qgemm_bench.types import Shape

    case = dataclasses.replace(lay.case0, shape=Shape(m, lay.k, lay.n))
    inputs = dataclasses.replace(lay.inputs, x=lay.x(m))
    backend = get(lay.op.NAME, "triton")
    state = {}
    label = "the backend's interpreter config" if probe.smoke else prod_label(lay, m)

    def check():
        state["prepared"] = backend.prepare(case, inputs)
        state["out"] = state["prepared"].fn()
        err = rel_error(state["out"], lay.reference(m))
        tol = lay.op.tolerance(probe.dtype)
        return None if err <= tol else f"relative error {err:.3g} > {tol:g}"

    def run():
        if probe.smoke:
            return [state["prepared"].fn]
        t = measure.time_on_gpu(case, backend, inputs, state["prepared"], state["out"], measure.Settings(),
                                probe.l2)
        return float(statistics.median(t.samples_us))

    probe.row(lay.fmt, m, "S4 prod", label[:46], lay.floor_us(m), lay.weight_bytes(), run, check)


def gemv_launch(x, wt, scales, out, ws, count, fg, bn: int, split: int, warps: int, stages: int) -> None:
    """One gemv_kernel launch on FusedGemm fg's layout (int4, groups of whole
    128-k blocks); ws: fp32 [M * N] zeros, count: int32 [cdiv(N, bn)] zeros
    (left zeroed by every launch)."""
    m, k = x.shape
    n = fg.n
    gemv_kernel[(triton.cdiv(n, bn), split)](
        x, wt, scales, out, ws, count, m, n, k, x.stride(0), wt.stride(0), scales.stride(0), out.stride(0),
        GROUP=fg.group, BM=triton.next_power_of_2(m), BLOCK_N=bn, SPLIT_K=split, LOOP_STAGES=stages,
        DECODE_ASM=True, TILE_N=TILE[0], TILE_K=TILE[1], num_warps=warps)


def gemv_row(probe: Probe, lay: Layout, m: int, bn: int, split: int, warps: int, stages: int) -> None:
    fg = lay.fused()
    x = lay.x(m)
    n = fg.n
    outs = [torch.empty(m, n, dtype=x.dtype, device=probe.dev) for _ in lay.copies]
    ws = torch.zeros(m * n, dtype=torch.float32, device=probe.dev)
    count = torch.zeros(triton.cdiv(n, bn), dtype=torch.int32, device=probe.dev)
    xs = [x] + [x.clone() for _ in lay.copies[1:]]

    def launch(xc, wt, sc, out):
        gemv_launch(xc, wt, sc, out, ws, count, fg, bn, split, warps, stages)

    def check():
        from qgemm_bench.operators.common import rel_error

        wt, sc, _ = lay.copies[0]
        errs = []
        for _ in range(3):  # the atomics' order varies: a race shows in some calls only
            launch(x, wt, sc, outs[0])
            errs.append(rel_error(outs[0], lay.reference(m)))
        tol = lay.op.tolerance(probe.dtype)
        return None if max(errs) <= tol else f"relative error {max(errs):.3g} > {tol:g}"

    def run():
        return [lambda xc=xc, cp=cp, o=o: launch(xc, cp[0], cp[1], o)
                for xc, cp, o in zip(xs, lay.copies, outs, strict=True)]

    label = f"{triton.next_power_of_2(m)}x{bn}x{TILE[1]} split {split} w{warps} loop s{stages} fp32 FMA"
    probe.row(lay.fmt, m, "gemv", label, lay.floor_us(m), lay.weight_bytes(), run, check)


def kernel_row(probe: Probe, lay: Layout, m: int, c: dict, name: str) -> None:
    """fused_kernel itself (FusedGemm.__call__: the tile counter, the last
    program's cast and store) at config c over the rotating copies, timed as
    the stage rows are (S4 prod times through the runner's measure)."""
    fg = lay.fused()
    x = lay.x(m)
    gemms = []
    for wt, sc, _ in lay.copies:
        g = copy.copy(fg)
        g.kmajor, g.config, g._workspace, g._w_desc = dataclasses.replace(fg.kmajor, wt=wt, scales=sc), c, {}, {}
        g.unchecked = bool(c.get("HALVES"))  # every call of the check below is compared with the reference
        gemms.append(g)
    xs = [x] + [x.clone() for _ in lay.copies[1:]]

    def check():
        from qgemm_bench.operators.common import rel_error

        tol = lay.op.tolerance(probe.dtype)
        calls = 1 if probe.smoke else HALVES_CHECK_CALLS if c.get("HALVES") else CHECK_CALLS
        errs = [rel_error(gemms[0](x), lay.reference(m)) for _ in range(calls)]
        return None if max(errs) <= tol else f"relative error {max(errs):.3g} > {tol:g}"

    def run():
        return [lambda g=g, xc=xc: g(xc) for g, xc in zip(gemms, xs, strict=True)]

    probe.row(lay.fmt, m, name, "fused " + describe(c), lay.floor_us(m), lay.weight_bytes(), run, check)


def fold_rows(probe: Probe, lay: Layout, m: int, c: dict) -> None:
    """int4 with ACC_SCALE: the kernel as configured and with FOLD (S4 kernel,
    S4 fold), then S2 and S3 with FOLD."""
    if lay.fmt != "int4" or not c.get("ACC_SCALE"):
        return
    kernel_row(probe, lay, m, c, "S4 kernel")
    kernel_row(probe, lay, m, {**c, "FOLD": True}, "S4 fold")
    if m <= 16:  # HALVES_SWEEP's capped variants, fused_kernel itself (the interpreter ignores warps and caps)
        for warps, reg in [(4, 0)] if probe.smoke else [(w, r) for w, r in HALVES_SWEEP if r]:
            base = {k: v for k, v in c.items() if k not in ("maxnreg", "FOLD")}
            kernel_row(probe, lay, m, {**base, "num_warps": warps, "HALVES": True, **({"maxnreg": reg} if reg else {})},
                       "S4 halves")
    stage_row(probe, lay, m, DECODE, {**c, "FOLD": True}, "S2 fold")
    stage_row(probe, lay, m, DOT, {**c, "FOLD": True}, "S3 fold")


def fold_sweep(probe: Probe, lay: Layout) -> None:
    """FOLD_SWEEP, then STAGE_SWEEP, then HALVES_SWEEP: S2 and S3 at M = 1 (the production tile, its PDL)."""
    base = {k: v for k, v in lay.config(1).items() if k not in ("maxnreg", "FOLD")}
    for warps, reg in FOLD_SWEEP:
        if probe.smoke and (warps == 8 or reg):
            continue  # the interpreter ignores both
        for fold in (False, True):
            c = {**base, "num_warps": warps, **({"maxnreg": reg} if reg else {}), **({"FOLD": True} if fold else {})}
            stage_row(probe, lay, 1, DECODE, c, "S2 sweep")
            stage_row(probe, lay, 1, DOT, c, "S3 sweep")
    for stages in STAGE_SWEEP:
        c = {**base, "num_warps": 4, "num_stages": stages, **({} if probe.smoke else {"maxnreg": 128})}
        stage_row(probe, lay, 1, DECODE, c, "S2 stages")
        stage_row(probe, lay, 1, DOT, c, "S3 stages")
    for warps, reg in [(4, 0)] if probe.smoke else HALVES_SWEEP:  # (the interpreter ignores both)
        c = {**base, "num_warps": warps, "HALVES": True, **({"maxnreg": reg} if reg else {})}
        stage_row(probe, lay, 1, DOT, c, "S3 halves")


def sweep(probe: Probe, lay: Layout) -> None:
    base = lay.config(1)
    for bn, bk, split, warps, stages, pdl, loop in SWEEP:
        c = fused_gemm.config(16, bn, bk, split, warps, stages, acc=True) | {"PDL": pdl}
        if (bn, bk, split, warps, stages, pdl, loop) == SWEEP[0]:
            c = dict(base)  # the production tile as configured (maxnreg included)
        if (loop or stages) * bn * bk // 2 > SMEM_LIMIT or bk > lay.k or bn > lay.n:
            continue
        if probe.smoke and (bk > 128 and bn > 128 or (lay.k // bk) % split or warps == 8):
            continue  # one of each code path is enough in the interpreter; no empty splits
        stage_row(probe, lay, 1, READ, c, "S1 sweep", loop)


def summary(probe: Probe, ms) -> None:
    """Per format and M, the p50s in order of the work added, each with its
    difference to the row before (docs/fused_gemm.md says how to read them)."""
    timed = [r for r in probe.rows if "p50_us" in r]
    if not timed:
        return
    probe.say("summary: p50 us (+ over the row before); floor = op bytes / copy GB/s")
    for fmt in dict.fromkeys(r["fmt"] for r in timed):
        mine = [r for r in timed if r["fmt"] == fmt]
        read = [r["p50_us"] for r in mine if r["variant"] == "read"]
        for m in ms:
            parts, before = [], read[0] if read else None
            floor = next((r["floor_us"] for r in mine if r["M"] == m and r.get("floor_us")), None)
            if floor:
                parts.append(f"floor {floor:.2f}")
            if read:
                parts.append(f"read {read[0]:.2f}")
            for name in ("S1 read", "S2 decode", "S3 dot", "S4 prod"):
                got = [r["p50_us"] for r in mine if r["M"] == m and r["variant"] == name]
                if got:
                    parts.append(f"{name.split()[0]} {got[0]:.2f}" + (f" ({got[0] - before:+.2f})" if before else ""))
                    before = got[0]
            for name in ("S4 kernel", "S4 fold", "S2 fold", "S3 fold"):
                got = [r["p50_us"] for r in mine if r["M"] == m and r["variant"] == name]
                if got:
                    parts.append(f"{name} {got[0]:.2f}")
            for name, label in (("gemv", "best gemv"), ("S1 sweep", "best S1 sweep"), ("S2 sweep", "best S2 sweep"),
                                ("S3 sweep", "best S3 sweep"), ("S2 stages", "best S2 stages"),
                                ("S3 stages", "best S3 stages"), ("S3 halves", "best S3 halves"),
                                ("S4 halves", "best S4 halves")):
                got = sorted((r["p50_us"], r["config"]) for r in mine if r["M"] == m and r["variant"] == name)
                if got:
                    parts.append(f"{label} {got[0][0]:.2f} ({got[0][1].strip()})")
            if len(parts) > 1:
                probe.say(f"  {fmt} M={m}: " + " | ".join(parts))


def parse_args(argv=None):
    p = Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="also write the table here (and its rows as PATH.json)")
    p.add_argument("--formats", default="int4,nvfp4", help="int4, nvfp4 or both (default int4,nvfp4)")
    p.add_argument("--budget-s", type=float, default=140.0,
                   help="variants not started by then print 'skipped' (default 140)")
    p.add_argument("--no-sweep", action="store_true", help="leave out the S1 sweep")
    p.add_argument("--copy-gbps", type=float, default=None,
                   help="the floor's copy GB/s (read + written; default: measured, environment.measure_ceilings)")
    p.add_argument("--k", type=int, default=8192, help="K, a multiple of 256 (default 8192)")
    p.add_argument("--n", type=int, default=8192, help="N, a multiple of 256 (default 8192)")
    p.add_argument("--cpu-smoke", action="store_true", help="no GPU: every kernel once in the interpreter, checked")
    args = p.parse_args(argv)
    if args.k < 256 or args.k % 256 or args.n < 256 or args.n % 256:
        raise InputError(f"--k {args.k} --n {args.n}: multiples of 256 (the layout's padding: S1 checks every word)")
    args.fmts = [f.strip() for f in args.formats.split(",") if f.strip()]
    bad = [f for f in args.fmts if f not in ("int4", "nvfp4")]
    if bad or not args.fmts:
        raise InputError(f"--formats {args.formats!r}: int4, nvfp4 or both")
    if args.out is not None and not args.out.resolve().parent.is_dir():
        raise InputError(f"--out {args.out}: its folder does not exist")
    return args


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
        if not args.cpu_smoke and not torch.cuda.is_available():
            raise InputError("decode_probe.py needs a CUDA GPU (or --cpu-smoke)")
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    probe = Probe(args)
    if args.cpu_smoke:  # K: every split of the H200 configs gets K blocks (an empty split reads past the scales)
        np.seterr(over="ignore", invalid="ignore")  # the interpreter's float16 NVFP4 scale products
        k, n, ms = 2048, 256, (1, 3)
    else:
        k, n, ms = args.k, args.n, (1, 16, 64)
        from qgemm_bench.harness import environment

        probe.l2 = torch.cuda.get_device_properties(probe.dev).L2_cache_size
        if probe.copy_GBps is None:
            probe.copy_GBps = environment.measure_ceilings(probe.dev)["copy_GBps"]
        probe.say(f"{torch.cuda.get_device_name(probe.dev)}, torch {torch.__version__}, triton {triton.__version__}, "
                  f"copy {probe.copy_GBps:.0f} GB/s, {probe.dtype}, K = {k}, N = {n}")
    probe.say("fmt   M     variant    config                                         p50 us  % floor  weight GB/s")
    int4 = None
    try:
        for fmt in args.fmts:
            try:
                lay = Layout(probe, fmt, k, n, max(ms))
                lay.fused()
            except Exception as e:  # noqa: BLE001 - one format's setup failing leaves the other
                if faults.context_lost(e):
                    raise
                probe.say(f"{fmt}: setup failed: {one_line(e, 160)}")
                probe.failed += 1
                continue
            probe.say(f"{fmt}: floor (op bytes / copy GB/s) " + ", ".join(
                f"M={m} {lay.floor_us(m):.2f} us" for m in ms if lay.floor_us(m)) +
                f"; {len(lay.copies)} rotating copies of {lay.weight_bytes() / 2**20:.1f} MiB")
            run_copy_and_read(probe, lay)
            for m in ms:
                try:
                    c = lay.config(m)
                except Exception as e:  # noqa: BLE001
                    probe.say(f"{fmt} M={m}: no stage config: {one_line(e, 160)}")
                    probe.failed += 1
                    c = None
                for stage in (READ, DECODE, DOT) if c else ():
                    stage_row(probe, lay, m, stage, c)
                production_row(probe, lay, m)
                if c:
                    fold_rows(probe, lay, m, c)
                if fmt == "int4" and m <= 16:
                    for g in GEMV[1 if m == 1 else 16]:
                        gemv_row(probe, lay, m, *g)
            if fmt == "int4":
                fold_sweep(probe, lay)
                int4 = lay  # for the sweep, last: past the budget it is what gets skipped
            del lay
        if int4 is not None and not args.no_sweep:
            sweep(probe, int4)
    except Exception as e:  # a lost CUDA context: nothing more can run
        probe.say(f"stopped: {one_line(e, 160)}")
        return 1
    finally:
        summary(probe, ms)
        probe.say(f"elapsed {probe.elapsed():.1f} s")
        if args.out is not None:
            args.out.write_text("\n".join(probe.lines) + "\n")
            args.out.with_suffix(args.out.suffix + ".json").write_text(json.dumps(probe.rows, indent=1))
    wrong = [r for r in probe.rows if r.get("wrong")]
    return 1 if wrong or (probe.smoke and probe.failed) else 0


if __name__ == "__main__":
    sys.exit(main())
