"""The layout of an RMSNorm's parts between two GEMMs (Prepared.apply_parts):
each row's fp32 sum of squares per SUMSQ_CHUNK output columns, [M, chunks],
as a residual GEMM leaves them and an rms GEMM reads them
(triton_kernels/split_k_parts._store; the model: model/fused_norm.py).
Torch only, so the model can use the layout without importing Triton."""

from __future__ import annotations

import torch

SUMSQ_CHUNK = 32  # output columns per sum of squares


def sumsq_chunks(n: int) -> int:
    """How many sums of squares a row of N columns has."""
    return -(-n // SUMSQ_CHUNK)


def row_sumsq(h: torch.Tensor) -> torch.Tensor:
    """h's [M, N] rows' fp32 sums of squares per SUMSQ_CHUNK columns,
    [M, sumsq_chunks(N)] (the last chunk short): what a residual GEMM leaves."""
    m, n = h.shape
    sq = torch.nn.functional.pad(h.float() ** 2, (0, sumsq_chunks(n) * SUMSQ_CHUNK - n))
    return sq.view(m, sumsq_chunks(n), SUMSQ_CHUNK).sum(-1)


def weighted_and_sums(h: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(h * weight in h's dtype, row_sumsq of h's rows): what a residual GEMM
    with a norm weight leaves beside h, by torch."""
    return (h.float() * weight.float()).to(h.dtype), row_sumsq(h.reshape(-1, h.shape[-1]))
