"""Helion kernels: int4 / NVFP4 weight-only GEMM and split-K GEMM.

The weight-only kernel is the same design as the Triton one
(backends/triton_kernels/weight_only.py), written in Helion:
- x arrives viewed as [M, K//2, 2]: one contiguous tile load, then hl.split
  into even-k and odd-k halves, which meet the low and high nibbles of the
  packed [K//2, N] weight in two hl.dot calls (no interleaving, no stack);
- nibbles decode without int->float conversions (magic-exponent bit tricks);
- int4 group scales multiply the fp32 block product when a K block lies in
  one group (SCALE_AFTER), else each element; NVFP4 applies its E4M3 block
  scale per element (exact) and the FP32 tensor scale once;
- split-K over an outer K tile (the `split_k` tunable): partials are added
  atomically into a zeroed fp32 output (ATOMIC), for small M; with split_k 1
  and ATOMIC off the tile is stored directly in the activation dtype.

The kernels never autotune by themselves (autotune_effort="none"): configs come
from the checked-in files (configs.py) or from an explicit --autotune.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch
from helion.autotuner import PowerOfTwoFragment


def _int4_nibbles(b, dtype):
    """Bytes (int32, 0..255) -> (low, high) nibbles as exact q in [-8, 7]:
    u = q + 8 ORed into a magic exponent is 128 + u (bf16) or 1024 + u (fp16)."""
    if dtype == torch.bfloat16:
        lo = (((b & 0xF) ^ 0x8) | 0x4300).to(torch.int16).view(torch.bfloat16) - 136.0
        hi = (((b >> 4) ^ 0x8) | 0x4300).to(torch.int16).view(torch.bfloat16) - 136.0
    else:
        lo = (((b & 0xF) ^ 0x8) | 0x6400).to(torch.int16).view(torch.float16) - 1032.0
        hi = (((b >> 4) ^ 0x8) | 0x6400).to(torch.int16).view(torch.float16) - 1032.0
    return lo, hi


def _e2m1_scaled(code, scale, dtype):
    """E2M1 code (int32, 0..15) x fp32 scale: the 3 magnitude bits shifted into
    an fp16 make value * 2^-14 exactly (the scale carries the 2^14)."""
    v = (((code & 7) << 9) | ((code & 8) << 12)).to(torch.int16).view(torch.float16)
    return (v.to(torch.float32) * scale).to(dtype)


@helion.kernel(static_shapes=True, autotune_effort="none")
def weight_only(
    x3: torch.Tensor,  # [M, K//2, 2] activations
    w: torch.Tensor,  # [K//2, N] packed nibbles (int8 / uint8)
    scales: torch.Tensor,  # int4: [K//group, N]; NVFP4: E4M3 [K//16, N]
    tensor_scale: torch.Tensor,  # NVFP4: fp32 [1]; int4: unused
    fmt: hl.constexpr,
    group: hl.constexpr,  # int4 group size (even)
    scale_after: hl.constexpr,  # int4: every K block lies in one group
    max_bk: hl.constexpr,  # the largest packed K block (scale_after: one that stays in a group)
    atomic: hl.constexpr,  # split-K into a zeroed fp32 output; else one split, stored directly
) -> torch.Tensor:
    m, kp, _ = x3.size()
    n = w.size(1)
    bk = hl.register_block_size(16, max_bk)  # packed rows per step; tl.dot needs K >= 16
    split_k = hl.register_tunable("split_k", PowerOfTwoFragment(1, 64))
    if atomic:
        out = torch.zeros([m, n], dtype=torch.float32, device=x3.device)
        chunk = helion.next_power_of_2(helion.cdiv(kp, split_k))
    else:
        out = torch.empty([m, n], dtype=x3.dtype, device=x3.device)
        chunk = helion.next_power_of_2(kp)
    for tile_m, tile_n, outer in hl.tile([m, n, kp], block_size=[None, None, chunk]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tk in hl.tile(outer.begin, outer.end, block_size=bk):
            b = w[tk, tile_n].to(torch.int32) & 0xFF
            xe, xo = hl.split(x3[tile_m, tk, :])
            if fmt == 0:
                lo, hi = _int4_nibbles(b, x3.dtype)
                if scale_after:
                    part = hl.dot(xe, lo)
                    part = hl.dot(xo, hi, acc=part)
                    s_row = scales[(tk.begin * 2) // group, tile_n].to(torch.float32)
                    acc = acc + part * s_row[None, :]
                else:
                    s_el = scales[(tk.index * 2) // group, tile_n].to(x3.dtype)
                    acc = hl.dot(xe, lo * s_el, acc=acc)
                    acc = hl.dot(xo, hi * s_el, acc=acc)
            else:
                sc = scales[tk.index // 8, tile_n].to(torch.float32) * 16384.0
                acc = hl.dot(xe, _e2m1_scaled(b & 0xF, sc, x3.dtype), acc=acc)
                acc = hl.dot(xo, _e2m1_scaled(b >> 4, sc, x3.dtype), acc=acc)
        if fmt == 1:
            acc = acc * tensor_scale[0]
        if atomic:
            hl.atomic_add(out, [tile_m, tile_n], acc)
        else:
            out[tile_m, tile_n] = acc.to(x3.dtype)
    return out


@helion.kernel(static_shapes=True, autotune_effort="none")
def split_k(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, has_bias: hl.constexpr) -> torch.Tensor:
    """fp32 [M, N] = a @ b (+ bias, added by the first K split only), partials
    added atomically into a zeroed fp32 output."""
    m, k = a.size()
    n = b.size(1)
    out = torch.zeros([m, n], dtype=torch.float32, device=a.device)
    splits = hl.register_tunable("split_k", PowerOfTwoFragment(1, 256))
    chunk = helion.next_power_of_2(helion.cdiv(k, splits))
    for tile_m, tile_n, outer in hl.tile([m, n, k], block_size=[None, None, chunk]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tk in hl.tile(outer.begin, outer.end):
            acc = hl.dot(a[tile_m, tk], b[tk, tile_n], acc=acc)
        if has_bias:
            if outer.begin == 0:
                acc = acc + bias[tile_n].to(torch.float32)[None, :]
        hl.atomic_add(out, [tile_m, tile_n], acc)
    return out
