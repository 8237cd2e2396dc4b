"""fbgemm's CUTLASS int4 kernel (torch.ops.fbgemm.bf16i4bf16_shuffled, from
fbgemm_gpu_genai): the strongest int4 kernel a user could install instead.

It computes w = bf16(bf16(q * scale) + zero) from SIGNED int4 codes q, with
scale and zero [K//g, N] in bf16 (CUTLASS's ConvertAndScaleWithZero; fbgemm
v1.6.0 src/quantize/cutlass_extensions/bf16i4bf16.cu). With our codes, our
scales and zero = 0 that is bf16(q * s): exactly our dequantization in bf16
(checked bit for bit on the H100 with x = identity rows). Its weights are our
packed bytes transposed to [N, K//2] (the same nibble order), then reordered
on the GPU by preshuffle_i4. We never go through fbgemm's own quantizer: it
uses absmax / 8 and would change the weights.
"""

from __future__ import annotations

import torch

from qgemm_bench.backends.checks import cuda_only, missing
from qgemm_bench.backends.registry import Prepared, backend

INSTALL = 'pip install -e ".[peers]" (fbgemm_gpu_genai==1.6.0)'
# CUTLASS's sm90 mixed-input mainloop steps K by 64 for bf16 and needs a group
# to be K or a multiple of it; fbgemm never checks (group 32 runs and is wrong).
TILE_K = 64
K_ALIGN = 32  # 16-byte rows of int4 for TMA
N_ALIGN = 16  # the preshuffle's 16 x 16 atom


def group_for(k: int, group_size: int | None) -> int:
    return k if group_size is None else group_size  # unscaled: one group of K with scale 1


def why_not(case) -> str | None:
    if reason := cuda_only(case) or missing("fbgemm_gpu", INSTALL):
        return reason
    k, n = case.shape.K, case.shape.N
    if case.dtype != torch.bfloat16:
        return "fbgemm's bf16i4bf16 takes bfloat16 activations only"
    if k % K_ALIGN or n % N_ALIGN:
        return f"fbgemm needs K % {K_ALIGN} == 0 and N % {N_ALIGN} == 0 (K={k}, N={n})"
    g = group_for(k, case.settings.resolve(k))
    if g != k and g % TILE_K:
        return f"fbgemm needs a group size of K or a multiple of {TILE_K}, not {g}"
    return None


def operands(w: torch.Tensor, scales: torch.Tensor | None, k: int, n: int):
    """Our packed [K//2, N] int4 (+ scales) -> (wq [N, K//2] int8, a fresh copy
    for the in-place preshuffle; scale [K//g, N] bf16; zero, zeros like it)."""
    wq = w.view(torch.int8).t().contiguous()
    scale = torch.ones(1, n, dtype=torch.bfloat16, device=w.device) if scales is None else scales
    scale = scale.to(torch.bfloat16).contiguous()
    return wq, scale, torch.zeros_like(scale)


@backend("int4_gemm", "fbgemm", "fbgemm_gpu_genai's CUTLASS bf16i4bf16_shuffled (sm90, bf16; groups of K or "
         "multiples of 64) on our codes and scales", why_not)
def prepare(case, inputs):
    import fbgemm_gpu.experimental.gen_ai  # noqa: F401  (registers torch.ops.fbgemm)

    k, n = case.shape.K, case.shape.N
    wq, scale, zero = operands(inputs.w, inputs.scales, k, n)
    wq, scale = torch.ops.fbgemm.preshuffle_i4(wq, scale)

    def apply(x):
        return torch.ops.fbgemm.bf16i4bf16_shuffled(x.contiguous(), wq, scale, zero)

    x = inputs.x
    return Prepared(lambda: apply(x), resident=(wq, scale, zero), apply=apply)
