"""The K-major weight layout the fused mixed-input kernels read (Triton's
fused_gemm.py), arranged once in a backend's prepare(), never per call.

Canonical packed weights (formats.py) are [K//2, N] with N contiguous. The
fused kernels compute y^T = W^T x^T so that the dequantized weight tile is
the MMA's register operand (Hopper's wgmma takes only its first operand from
registers), which wants each output channel's K contiguous:

    wt[n, j] = code(k = 2j) | code(k = 2j + 1) << 4      (uint8, [Np, Kp // 2])

the same bytes as the canonical layout, transposed. A [BLOCK_N, BLOCK_K // 2]
byte tile decodes to (even-k, odd-k) halves that tl.join interleaves back
into [BLOCK_N, BLOCK_K] in K order, in registers: each thread of the MMA
operand layout holds k pairs (2j, 2j + 1), so no shuffle is needed.
K is zero-padded to a multiple of K_ALIGN (code 0 is the value 0 in int4 and
E2M1) and N to a multiple of N_ALIGN, so weight tiles load unmasked.
Scales keep their canonical [groups, N] orientation (a tile's BLOCK_N scales
of one group are contiguous), zero-padded to the padded K and N.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

K_ALIGN = 256  # the deepest BLOCK_K any config uses
N_ALIGN = 256  # the widest BLOCK_N any config uses


@dataclass(frozen=True)
class KMajorWeights:
    """wt uint8 [Np, Kp // 2]; scales [Gp, Np] or None; k and n the true sizes."""

    wt: torch.Tensor
    scales: torch.Tensor | None
    k: int
    n: int


def _round_up(v: int, m: int) -> int:
    return -(-v // m) * m


def _padded(t: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    out = torch.zeros(rows, cols, dtype=t.dtype, device=t.device)
    out[: t.shape[0], : t.shape[1]] = t
    return out


def to_kmajor(w: torch.Tensor, scales: torch.Tensor | None, group: int | None) -> KMajorWeights:
    """Canonical packed [K//2, N] weights (int8 or uint8) and [K//group, N]
    scales (or NVFP4's [K//16, N] block scales, group 16) -> the K-major layout."""
    k, n = 2 * w.shape[0], w.shape[1]
    kp, np_ = _round_up(k, K_ALIGN), _round_up(n, N_ALIGN)
    wt = _padded(w.view(torch.uint8).t(), np_, kp // 2)
    if scales is not None:
        scales = _padded(scales, _round_up(kp, group) // group, np_)
    return KMajorWeights(wt, scales, k, n)


def from_kmajor(p: KMajorWeights) -> torch.Tensor:
    """The canonical [K//2, N] uint8 bytes back (tests)."""
    return p.wt[: p.n, : p.k // 2].t().contiguous()
