"""Triton weight-only GEMM for the int4 and NVFP4 formats: y = x @ dequant(w).

One kernel for both formats (FMT), streaming each packed weight byte once:
- the packed [K//2, N] tile is split into its low nibbles (even k) and high
  nibbles (odd k), which multiply x's even and odd columns: two tl.dot per
  K block, no interleaving;
- decoding avoids int->float conversions (I2F/F2F issue at 1/8 of the FMA rate
  on Hopper): an int4 nibble u = q + 8 ORed into the exponent of a magic
  constant is exactly 128 + u in bf16 (1024 + u in fp16), minus 136 (1032);
  an E2M1 code's 3 magnitude bits shifted into an fp16's exponent/mantissa
  are exactly value * 2^-14, subnormal 0.5 included;
- int4 group scales are applied to the fp32 partial product of a K block when
  the block lies in one group (fewer multiplies, fp32 accuracy), else per
  element; NVFP4 applies its E4M3 block scale per element (exact: E2M1 x E4M3
  has at most 5 significant bits) and the FP32 tensor scale once at the end.

Small M (memory-bound) uses split-K: partial sums are atomically added into a
zeroed fp32 buffer, then cast. Large M stores the output tile directly.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from backends.triton_kernels import autotune_bench

INT4, NVFP4 = 0, 1
SPLIT_PATH_MAX_M = 64  # M up to this goes through split-K (fp32 buffer + cast)


@triton.jit
def _int4_nibbles(w, DT: tl.constexpr):
    """int8 bytes -> (even-k values, odd-k values) in DT, exactly q in [-8, 7]."""
    b = w.to(tl.int32) & 0xFF
    if DT == tl.bfloat16:
        lo = (((b & 0xF) ^ 0x8) | 0x4300).to(tl.int16).to(tl.bfloat16, bitcast=True) - 136.0
        hi = (((b >> 4) ^ 0x8) | 0x4300).to(tl.int16).to(tl.bfloat16, bitcast=True) - 136.0
    else:
        lo = (((b & 0xF) ^ 0x8) | 0x6400).to(tl.int16).to(tl.float16, bitcast=True) - 1032.0
        hi = (((b >> 4) ^ 0x8) | 0x6400).to(tl.int16).to(tl.float16, bitcast=True) - 1032.0
    return lo.to(DT), hi.to(DT)


@triton.jit
def _e2m1_fp16(c):
    """E2M1 codes (int32, 0..15) -> fp16 holding value * 2^-14, exactly."""
    return (((c & 7) << 9) | ((c & 8) << 12)).to(tl.int16).to(tl.float16, bitcast=True)


@triton.jit
def weight_only_kernel(
    x_ptr, w_ptr, s_ptr, ts_ptr, out_ptr,
    M, N, K, stride_xm, stride_wk, stride_sk, stride_om,
    M_BUCKET,  # autotuning key only
    FMT: tl.constexpr, GROUP: tl.constexpr, HAS_SCALES: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
    ATOMIC: tl.constexpr,
):
    DT: tl.constexpr = x_ptr.dtype.element_ty
    HALF: tl.constexpr = BLOCK_K // 2
    pid_mn = tl.program_id(0)
    pid_k = tl.program_id(1)
    n_tiles = tl.cdiv(N, BLOCK_N)
    pid_m = pid_mn // n_tiles
    pid_n = pid_mn % n_tiles
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_h = tl.arange(0, HALF)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N
    # This split's contiguous range of K blocks.
    blocks = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(blocks, SPLIT_K)
    first = pid_k * per_split
    last = tl.minimum(first + per_split, blocks)
    SCALE_AFTER: tl.constexpr = FMT == 0 and HAS_SCALES and GROUP % BLOCK_K == 0

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(first, last):
        k_even = kb * BLOCK_K + 2 * offs_h
        rows = kb * HALF + offs_h  # packed rows
        mask_k = k_even < K
        w = tl.load(w_ptr + rows[:, None] * stride_wk + offs_n[None, :],
                    mask=mask_k[:, None] & mask_n[None, :], other=0)
        # One contiguous (vectorizable) x tile, split into even and odd k in
        # registers. Two stride-2 loads instead measured 4x slower at M=4096
        # and 1.8x at M=16 (H100, 8192x8192, int4 g128: 7318 -> 1825 us,
        # 50.0 -> 27.2 us).
        k = kb * BLOCK_K + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k[None, :], mask=mask_m[:, None] & (k < K)[None, :],
                    other=0.0)
        xe, xo = tl.split(tl.reshape(x, (BLOCK_M, HALF, 2)))
        if FMT == 0:
            lo, hi = _int4_nibbles(w, DT)
            if SCALE_AFTER:
                s = tl.load(s_ptr + (kb * BLOCK_K // GROUP) * stride_sk + offs_n, mask=mask_n, other=0.0)
                part = tl.dot(xe, lo) + tl.dot(xo, hi)
                acc += part * s.to(tl.float32)[None, :]
            else:
                if HAS_SCALES:
                    s = tl.load(s_ptr + (k_even // GROUP)[:, None] * stride_sk + offs_n[None, :],
                                mask=mask_k[:, None] & mask_n[None, :], other=0.0).to(DT)
                    lo = lo * s
                    hi = hi * s
                acc += tl.dot(xe, lo)
                acc += tl.dot(xo, hi)
        else:
            b = w.to(tl.int32) & 0xFF
            bs = tl.load(s_ptr + (k_even // 16)[:, None] * stride_sk + offs_n[None, :],
                         mask=mask_k[:, None] & mask_n[None, :], other=0)
            scale = bs.to(tl.float8e4nv, bitcast=True).to(tl.float32) * 16384.0
            lo = (_e2m1_fp16(b & 0xF).to(tl.float32) * scale).to(DT)
            hi = (_e2m1_fp16(b >> 4).to(tl.float32) * scale).to(DT)
            acc += tl.dot(xe, lo)
            acc += tl.dot(xo, hi)
    if FMT == 1:
        acc = acc * tl.load(ts_ptr)
    out = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :]
    mask = mask_m[:, None] & mask_n[None, :]
    if ATOMIC:
        tl.atomic_add(out, acc, mask=mask, sem="relaxed")
    else:
        tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=mask)


def _cfg(bm, bn, bk, split, warps, stages):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split},
                         num_warps=warps, num_stages=stages)


# Curated configs (BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, warps, stages).
# Small M streams weights: enough CTAs (N tiles x splits) to cover the 132 SMs
# several times, wide K blocks so each load is deep. Large M is a tiled GEMM.
# BLOCK_K=512 configs are gone: they used 255 registers and spilled 22-28
# (scripts/triton_diag.py on the H100) and never won.
SMALL_M_CONFIGS = [_cfg(16, bn, bk, sk, 4, st) for bn, bk, sk, st in [
    (32, 256, 1, 4), (64, 256, 1, 4), (64, 256, 2, 4), (128, 256, 1, 4),
    (128, 256, 2, 3), (64, 128, 4, 4), (128, 128, 4, 4), (64, 128, 8, 4), (128, 128, 2, 4)]]
MID_M_CONFIGS = [_cfg(bm, bn, bk, sk, w, st) for bm, bn, bk, sk, w, st in [
    (32, 64, 256, 1, 4, 4), (32, 128, 128, 2, 4, 4), (64, 64, 128, 1, 4, 4), (64, 128, 128, 1, 4, 3),
    (64, 64, 256, 2, 4, 3), (64, 128, 128, 2, 8, 3)]]
LARGE_M_CONFIGS = [_cfg(bm, bn, bk, 1, w, st) for bm, bn, bk, w, st in [
    (128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (128, 128, 128, 8, 3), (64, 256, 64, 4, 4),
    (256, 128, 64, 8, 3), (128, 64, 64, 4, 4)]]


def m_bucket(m: int) -> int:
    return min(triton.next_power_of_2(m), 4096)


def _prune(configs, named_args, **kwargs):
    """Only the configs of M's bucket (small, mid: split-K; large: tiled)."""
    m = named_args["M"]
    pool = SMALL_M_CONFIGS if m <= 16 else MID_M_CONFIGS if m <= SPLIT_PATH_MAX_M else LARGE_M_CONFIGS
    return [c for c in configs if c in pool] or configs[:1]


_tuned = None


def tuned_kernel():
    """The autotuned kernel (built on first use: no work at import)."""
    global _tuned
    if _tuned is None:
        _tuned = triton.autotune(
            configs=SMALL_M_CONFIGS + MID_M_CONFIGS + LARGE_M_CONFIGS,
            key=["M_BUCKET", "N", "K", "FMT", "GROUP", "HAS_SCALES", "ATOMIC"],
            prune_configs_by={"early_config_prune": _prune},
            reset_to_zero=["out_ptr"], do_bench=autotune_bench, cache_results=True,
        )(weight_only_kernel)
    return _tuned


def check_inputs(x, w, scales, fmt: int, group: int) -> None:
    """Refuse what the kernel cannot take, in one line (ValueError)."""
    if x.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"x must be float16 or bfloat16, not {x.dtype}")
    if x.dim() != 2 or w.dim() != 2 or x.shape[1] != 2 * w.shape[0]:
        raise ValueError(f"x {tuple(x.shape)} and packed w {tuple(w.shape)} do not match: need x [M, K], w [K//2, N]")
    if x.stride(1) != 1 or w.stride(1) != 1:
        raise ValueError("x and w must be contiguous in their last dimension")
    if w.dtype not in (torch.int8, torch.uint8):
        raise ValueError(f"packed weights must be int8/uint8, not {w.dtype}")
    k = x.shape[1]
    if fmt == INT4 and scales is not None and (k % group or scales.shape != (k // group, w.shape[1])):
        raise ValueError(f"int4 scales {tuple(scales.shape)} do not fit K={k} in groups of {group}")
    if fmt == NVFP4 and (k % 16 or scales.shape != (k // 16, w.shape[1])):
        raise ValueError(f"NVFP4 block scales {tuple(scales.shape)} do not fit K={k} in blocks of 16")


def weight_only_gemm(x, w, scales, tensor_scale, fmt: int, group: int, config: dict | None = None):
    """y = x @ dequant(w) for FMT INT4 (scales [K//group, N] or None) or NVFP4
    (scales = E4M3 block scales viewed as uint8, tensor_scale fp32 0-dim).
    config: explicit {BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages}
    (tests, the interpreter); None autotunes per M bucket, N and K."""
    check_inputs(x, w, scales, fmt, group)
    m, k = x.shape
    n = w.shape[1]
    atomic = m <= SPLIT_PATH_MAX_M
    out = torch.zeros(m, n, device=x.device, dtype=torch.float32) if atomic else \
        torch.empty(m, n, device=x.device, dtype=x.dtype)
    s = scales if scales is not None else w  # never read when HAS_SCALES is False
    ts = tensor_scale if tensor_scale is not None else out
    args = (x, w, s, ts, out, m, n, k, x.stride(0), w.stride(0), s.stride(0), out.stride(0), m_bucket(m))
    meta = {"FMT": fmt, "GROUP": group, "HAS_SCALES": scales is not None, "ATOMIC": atomic}
    if config is None:
        def grid(c):
            return (triton.cdiv(m, c["BLOCK_M"]) * triton.cdiv(n, c["BLOCK_N"]), c["SPLIT_K"])
        tuned_kernel()[grid](*args, **meta)
    else:
        c = dict(config)
        if not atomic:
            c["SPLIT_K"] = 1
        grid = (triton.cdiv(m, c["BLOCK_M"]) * triton.cdiv(n, c["BLOCK_N"]), c["SPLIT_K"])
        weight_only_kernel[grid](*args, **meta, **c)
    return out.to(x.dtype) if atomic else out
