"""The K-major weight layout the fused mixed-input kernels read (Triton's
fused_gemm.py, Helion's kernels.fused), arranged once in a backend's
prepare(), never per call.

Canonical packed weights (formats.py) are [K//2, N] with N contiguous. The
fused kernels compute y^T = W^T x^T so that the dequantized weight tile is
the MMA's register operand (Hopper's wgmma takes only its first operand from
registers), which wants each output channel's K contiguous:

    wt[n, j] = code(k = 2j) | code(k = 2j + 1) << 4      (uint8, [Np, Kp // 2])

the same bytes as the canonical layout, transposed. A [BLOCK_N, BLOCK_K // 2]
byte tile decodes to (low-nibble, high-nibble) halves that tl.join
interleaves back into [BLOCK_N, BLOCK_K] in K order.

Fragment order (frag=True): the same codes, each run of 32 k of a row (16
bytes) permuted so that a thread's share of the wgmma register operand is
contiguous and each decoded 32-bit register is one of its k pairs:

    byte 4c + 2u + e of a run holds k = 8u + 2c + e (low nibble) and k + 16 (high)

(c = lane % 4 of the MMA operand layout, which holds k = 2c, 2c + 1, 2c + 8,
2c + 9 of every 16). In K order a thread's bytes are 1 of every 4 and each
decoded register pairs two bytes' low nibbles, so Triton read the tile from
shared memory a byte at a time and re-paired halves with PRMT; in fragment
order it uses ldmatrix and no byte loads, fewer instructions and faster on
the H100 (docs/fused_gemm.md). Any BLOCK_K that is a multiple of 32 reads it.

Tiled (tile=(TN, TK), the fused Triton kernel's default TILE): the same
bytes (fragment order or not) stored tile by tile, each TN rows x TK k a
contiguous TN * TK // 2 bytes, K-major within, tiles K-major per TN rows:

    byte (n, j) at (n // TN) * TN * Kp/2 + (j // (TK/2)) * TN * TK/2 + (n % TN) * TK/2 + j % (TK/2)

so a program's K block is a few contiguous 4 KB runs instead of TN rows of
64 bytes 4 KB apart (faster at M = 1..64 on the H100: docs/fused_gemm.md).
The 2-D tensor keeps its [Np, Kp // 2] shape and row stride Kp // 2.

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
TILE = (64, 128)  # (rows, k) of the tiled layout: the narrowest BLOCK_N and the common BLOCK_K


@dataclass(frozen=True)
class KMajorWeights:
    """wt uint8 [Np, Kp // 2]; scales [Gp, Np] or None; k and n the true sizes."""

    wt: torch.Tensor
    scales: torch.Tensor | None
    k: int
    n: int
    frag: bool = False
    tile: tuple[int, int] | None = None


def _round_up(v: int, m: int) -> int:
    return -(-v // m) * m


def _padded(t: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    out = torch.zeros(rows, cols, dtype=t.dtype, device=t.device)
    out[: t.shape[0], : t.shape[1]] = t
    return out


def _fragment_order(wt: torch.Tensor) -> torch.Tensor:
    """[Np, Kp // 2] K-major bytes -> the same codes in fragment order: the
    codes of each 32-k run, indexed (nibble, u, c, e) by k = 16 nibble + 8u +
    2c + e, go to byte 4c + 2u + e, nibble `nibble`."""
    codes = torch.stack((wt & 0xF, wt >> 4), dim=-1).reshape(wt.shape[0], -1, 2, 2, 4, 2)  # chunk, nibble, u, c, e
    codes = codes.permute(0, 1, 4, 3, 5, 2).reshape(wt.shape[0], -1, 2)
    return (codes[..., 0] | (codes[..., 1] << 4)).reshape(wt.shape)


def _k_order(wt: torch.Tensor) -> torch.Tensor:
    """_fragment_order's inverse."""
    codes = torch.stack((wt & 0xF, wt >> 4), dim=-1).reshape(wt.shape[0], -1, 4, 2, 2, 2)  # chunk, c, u, e, nibble
    codes = codes.permute(0, 1, 5, 3, 2, 4).reshape(wt.shape[0], -1, 2)
    return (codes[..., 0] | (codes[..., 1] << 4)).reshape(wt.shape)


def _tiled(wt: torch.Tensor, tile: tuple[int, int], inverse: bool = False) -> torch.Tensor:
    """[Np, Kp // 2] K-major bytes <-> the tiled order (module doc)."""
    (np_, kh), (tn, tk) = wt.shape, tile
    if np_ % tn or kh % (tk // 2):
        raise ValueError(f"tile {tile} does not divide the padded [{np_}, {2 * kh}] weights")
    dims = (np_ // tn, tn, kh // (tk // 2), tk // 2)
    if inverse:
        return wt.reshape(dims[0], dims[2], dims[1], dims[3]).permute(0, 2, 1, 3).reshape(np_, kh)
    return wt.reshape(dims).permute(0, 2, 1, 3).reshape(np_, kh)


def to_kmajor(w: torch.Tensor, scales: torch.Tensor | None, group: int | None, frag: bool = False,
              tile: tuple[int, int] | None = None) -> KMajorWeights:
    """Canonical packed [K//2, N] weights (int8 or uint8) and [K//group, N]
    scales (or NVFP4's [K//16, N] block scales, group 16) -> the K-major layout
    (frag: its bytes in fragment order; tile: stored tile by tile)."""
    k, n = 2 * w.shape[0], w.shape[1]
    kp, np_ = _round_up(k, K_ALIGN), _round_up(n, N_ALIGN)
    wt = _padded(w.view(torch.uint8).t(), np_, kp // 2)
    if frag:
        wt = _fragment_order(wt)
    if tile is not None:
        wt = _tiled(wt, tile)
    if scales is not None:
        scales = _padded(scales, _round_up(kp, group) // group, np_)
    return KMajorWeights(wt, scales, k, n, frag, tile)


def untiled(p: KMajorWeights) -> torch.Tensor:
    """p's [Np, Kp // 2] bytes in p's byte order (fragment order or not), not
    tiled; retiled puts such bytes back as p stores them."""
    return _tiled(p.wt, p.tile, inverse=True) if p.tile is not None else p.wt


def retiled(p: KMajorWeights, wt: torch.Tensor) -> torch.Tensor:
    """untiled's inverse for bytes laid out as p's."""
    return _tiled(wt, p.tile) if p.tile is not None else wt


def from_kmajor(p: KMajorWeights) -> torch.Tensor:
    """The canonical [K//2, N] uint8 bytes back (tests)."""
    wt = _k_order(untiled(p)) if p.frag else untiled(p)
    return wt[: p.n, : p.k // 2].t().contiguous()
