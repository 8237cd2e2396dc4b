"""torch backends for int4_gemm."""

from __future__ import annotations

import torch

from qgemm_bench.backends import Backend, Prepared, cuda_only
from qgemm_bench.backends.pytorch import compiled
from qgemm_bench.operators import formats
from qgemm_bench.operators import int4_gemm as op


def dequant_matmul(x, w, scales, group_size):
    return x @ formats.dequantize_int4(w, scales, group_size, x.dtype)


def prepare_eager(case, inputs):
    x, w, s, g = inputs["x"], inputs["w"], inputs["scales"], inputs["group_size"]
    return Prepared(lambda: dequant_matmul(x, w, s, g), resident=(w, s))


def prepare_dense(case, inputs):
    x, wd = inputs["x"], op.dequantize(inputs, inputs["x"].dtype)
    return Prepared(lambda: x @ wd, resident=(wd,))


def prepare_compile(case, inputs):
    x, w, s, g = inputs["x"], inputs["w"], inputs["scales"], inputs["group_size"]
    f = compiled(dequant_matmul)
    return Prepared(lambda: f(x, w, s, g), resident=(w, s))


TINYGEMM_GROUPS = (32, 64, 128, 256)


def tinygemm_group(case) -> int:
    g = op.group_size(case)
    # Unscaled weights run as scale-1 groups of the largest size that divides K.
    return g if g is not None else next(s for s in reversed(TINYGEMM_GROUPS) if case.shape.K % s == 0)


def tinygemm_why_not(case):
    if reason := cuda_only(case):
        return reason
    if case.dtype != torch.bfloat16:
        return "tinygemm takes bfloat16 activations only"
    if case.shape.N % 8:
        return f"tinygemm needs N % 8 == 0 (N={case.shape.N})"
    if case.shape.K % 32:
        return f"tinygemm needs K % 32 == 0 (K={case.shape.K})"
    g = op.group_size(case)
    if g is not None and g not in TINYGEMM_GROUPS:
        return f"tinygemm supports group sizes {TINYGEMM_GROUPS}, not {g}"
    return None


def prepare_tinygemm(case, inputs):
    """Repack to tinygemm's format: [N, K//2] uint8 with the EVEN k in the HIGH
    nibble, codes q + 8 in [0, 15] meaning (code - 8) * scale + zero, zero = 0;
    then its tensor-core tile layout; scales_and_zeros [K//g, N, 2] bf16."""
    x = inputs["x"]
    k, n = case.shape.K, case.shape.N
    codes = (formats.unpack_int4(inputs["w"]).to(torch.int16) + 8).to(torch.uint8).t()
    nk2 = ((codes[:, 0::2] << 4) | codes[:, 1::2]).contiguous()
    inner_k_tiles = next(t for t in (8, 4, 2) if k % (16 * t) == 0)
    wt = torch.ops.aten._convert_weight_to_int4pack(nk2, inner_k_tiles)
    g = tinygemm_group(case)
    scales = inputs["scales"]
    if scales is None:
        scales = torch.ones(k // g, n, device=x.device)
    sz = torch.stack((scales.to(torch.bfloat16), torch.zeros_like(scales, dtype=torch.bfloat16)), dim=-1)
    sz = sz.contiguous()
    return Prepared(lambda: torch.ops.aten._weight_int4pack_mm(x, wt, g, sz), resident=(wt, sz))


BACKENDS = [
    Backend("int4_gemm", "torch", "eager unpack + dequantize + torch.matmul (baseline)", prepare_eager),
    Backend("int4_gemm", "cublas", "torch.matmul on pre-dequantized weights in x's dtype "
            "(cuBLAS on CUDA): the bar quantization must beat", prepare_dense),
    Backend("int4_gemm", "torch_compile", "torch.compile of the eager dequant + matmul", prepare_compile),
    Backend("int4_gemm", "tinygemm", "torch._weight_int4pack_mm (CUDA, bf16, groups 32-256)",
            prepare_tinygemm, tinygemm_why_not),
]
