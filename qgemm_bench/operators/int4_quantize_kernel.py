"""Triton int4 quantization: fp16/bf16/fp32 weight [K, N] -> packed int4 + scales
in one kernel, bit-for-bit equal to formats.quantize_int4 (IEEE division,
round half to even, scales rounded to their dtype before use).

Used by int4_gemm.make_inputs on CUDA, where the llama shapes' weights (up to
8192 x 57344) would otherwise take many torch passes. Imports triton: load it
lazily (on CPU it needs TRITON_INTERPRET=1 before triton's first import).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from qgemm_bench.errors import FormatError
from qgemm_bench.operators.formats import check_group_size, require_even_k, require_finite_2d


@triton.jit
def _round_half_even(v):
    f = tl.floor(v)
    d = v - f
    f_odd = (f - 2.0 * tl.floor(f * 0.5)) != 0.0
    return tl.where(d > 0.5, f + 1.0, tl.where(d < 0.5, f, tl.where(f_odd, f + 1.0, f)))


@triton.jit
def int4_quantize_kernel(w_ptr, q_ptr, s_ptr, K, N, stride_wk, stride_qk, stride_sk,
                         GROUP: tl.constexpr, CHUNK: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program: one group of K rows x BLOCK_N columns, in chunks of CHUNK rows."""
    g = tl.program_id(0)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = offs_n < N
    half = tl.arange(0, CHUNK // 2)
    amax = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for c in range(0, GROUP, CHUNK):
        rows = g * GROUP + c + tl.arange(0, CHUNK)
        w = tl.load(w_ptr + rows[:, None] * stride_wk + offs_n[None, :], mask=mask_n[None, :], other=0.0)
        amax = tl.maximum(amax, tl.max(tl.abs(w.to(tl.float32)), axis=0))
    scale = tl.math.div_rn(amax, tl.full((BLOCK_N,), 7.0, tl.float32)).to(s_ptr.dtype.element_ty)
    tl.store(s_ptr + g * stride_sk + offs_n, scale, mask=mask_n)
    s = scale.to(tl.float32)
    s = tl.where(s == 0.0, 1.0, s)
    for c in range(0, GROUP, CHUNK):
        even = g * GROUP + c + 2 * half
        we = tl.load(w_ptr + even[:, None] * stride_wk + offs_n[None, :], mask=mask_n[None, :], other=0.0)
        wo = tl.load(w_ptr + (even + 1)[:, None] * stride_wk + offs_n[None, :], mask=mask_n[None, :], other=0.0)
        qe = tl.minimum(tl.maximum(_round_half_even(tl.math.div_rn(we.to(tl.float32), s[None, :])), -8.0), 7.0)
        qo = tl.minimum(tl.maximum(_round_half_even(tl.math.div_rn(wo.to(tl.float32), s[None, :])), -8.0), 7.0)
        packed = (qe.to(tl.int32) & 0xF) | ((qo.to(tl.int32) & 0xF) << 4)
        rows = (g * GROUP + c) // 2 + half
        tl.store(q_ptr + rows[:, None] * stride_qk + offs_n[None, :], packed.to(tl.uint8).to(tl.int8, bitcast=True),
                 mask=mask_n[None, :])


def quantize_int4(w: torch.Tensor, group_size: int, scale_dtype=torch.bfloat16, block_n: int = 64):
    """As formats.quantize_int4 (scaled variants), in one Triton kernel."""
    require_finite_2d(w, "weight")
    k, n = w.shape
    require_even_k(k)
    check_group_size(k, group_size)
    if w.stride(1) != 1:
        raise FormatError("the weight must be contiguous along N (row-major [K, N])")
    packed = torch.empty(k // 2, n, device=w.device, dtype=torch.int8)
    scales = torch.empty(k // group_size, n, device=w.device, dtype=scale_dtype)
    chunk = next(c for c in (256, 128, 64, 32, 16, 8, 4, 2) if group_size % c == 0)
    grid = (k // group_size, triton.cdiv(n, block_n))
    int4_quantize_kernel[grid](w, packed, scales, k, n, w.stride(0), packed.stride(0), scales.stride(0),
                               GROUP=group_size, CHUNK=chunk, BLOCK_N=block_n)
    return packed, scales
