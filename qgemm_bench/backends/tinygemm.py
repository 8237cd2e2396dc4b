"""torch's tinygemm int4 kernel (torch.ops.aten._weight_int4pack_mm)."""

from __future__ import annotations

import torch

from qgemm_bench.backends.checks import cuda_only
from qgemm_bench.backends.registry import Prepared, backend
from qgemm_bench.operators import formats

GROUPS = (32, 64, 128, 256)


def group_for(k: int, group_size: int | None) -> int:
    """Unscaled weights run as scale-1 groups of the largest size that divides K."""
    return group_size if group_size is not None else next(s for s in reversed(GROUPS) if k % s == 0)


def why_not(case):
    if reason := cuda_only(case):
        return reason
    if case.dtype != torch.bfloat16:
        return "tinygemm takes bfloat16 activations only"
    if case.shape.N % 8:
        return f"tinygemm needs N % 8 == 0 (N={case.shape.N})"
    if case.shape.K % 32:
        return f"tinygemm needs K % 32 == 0 (K={case.shape.K})"
    g = case.settings.resolve(case.shape.K)
    if g is not None and g not in GROUPS:
        return f"tinygemm supports group sizes {GROUPS}, not {g}"
    return None


def repack(w: torch.Tensor, scales: torch.Tensor | None, group: int, k: int, n: int):
    """Our packed int4 -> tinygemm's operands. Its format: [N, K//2] uint8 with
    the EVEN k in the HIGH nibble, codes q + 8 in [0, 15] meaning (code - 8) *
    scale + zero, zero = 0; then its tensor-core tile layout; scales_and_zeros
    [K//g, N, 2] bf16."""
    codes = (formats.unpack_int4(w).to(torch.int16) + 8).to(torch.uint8).t()
    nk2 = ((codes[:, 0::2] << 4) | codes[:, 1::2]).contiguous()
    inner_k_tiles = next(t for t in (8, 4, 2) if k % (16 * t) == 0)
    wt = torch.ops.aten._convert_weight_to_int4pack(nk2, inner_k_tiles)
    if scales is None:
        scales = torch.ones(k // group, n, device=w.device)
    sz = torch.stack((scales.to(torch.bfloat16), torch.zeros_like(scales, dtype=torch.bfloat16)), dim=-1)
    return wt, sz.contiguous()


@backend("int4_gemm", "tinygemm", "torch._weight_int4pack_mm (CUDA, bf16, groups 32-256)", why_not)
def prepare(case, inputs):
    k, n = case.shape.K, case.shape.N
    g = group_for(k, inputs.group_size)
    wt, sz = repack(inputs.w, inputs.scales, g, k, n)

    def apply(x):
        return torch.ops.aten._weight_int4pack_mm(x, wt, g, sz)

    x = inputs.x
    return Prepared(lambda: apply(x), resident=(wt, sz), apply=apply)
