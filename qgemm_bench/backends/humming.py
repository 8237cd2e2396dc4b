"""humming's JIT-compiled weight-only GEMMs (humming-kernels 0.1.19, vLLM's
successor to Marlin): a peer a user could install instead, for int4 and NVFP4.

What humming takes (humming 0.1.19: schema/humming.py, utils/weight.py
dequantize_weight, include/humming/kernel/pack_weight.cuh):
- weights int32 [N, K * bits / 32]; code i of a row sits at bits 4 * (i % 8)
  of word i // 8, so in bytes the even k is the low nibble: our packed
  [K//2, N] bytes transposed, viewed as int32.
- integer weights are offset binary, value = (u - 8) * scale with no zero
  point ("uint4"): u = q + 8, which is each nibble xor 8.
- int4 scales [N, K//g] in the activation dtype (group) or [N, 1] (group 0:
  per channel, applied to the output); unscaled = per-channel ones.
- NVFP4 is its modelopt nvfp4 form: float4e2m1 codes (bit 3 = sign, our
  codes), float8_e4m3fn scales [N, K//16] and a float32 tensor scale [1]
  ("weight_scale_2"), applied to the output.
HummingLayer.transform() then lays them out for its kernels (and re-encodes
int4 as sign-magnitude when no code is -8); nothing is requantized.
N is padded to a multiple of 128 and K to 32 (its layout needs N % 64 and
K % 32, its WGMMA heuristics four warp tiles of N); x and y stay unpadded
(its launcher takes the padding as part of the layer's config).

Each call launches the kernel humming's own heuristic table picks for its M
(the interval lookup its default forward does), compiled on first use: its
default forward compiles the whole table at the first call (92 M intervals,
33 distinct kernels, for int4 g128 8192 x 8192 on sm_90: its heuristics run
on the CPU with an H200's device facts).
"""

from __future__ import annotations

import time

import torch

from qgemm_bench.backends.checks import cuda_only, missing
from qgemm_bench.backends.registry import Prepared, backend

INSTALL = 'pip install -e ".[peers]" (humming-kernels==0.1.19; it JIT-compiles with NVRTC, else nvcc)'
ALIGN = 8  # whole int32 words of codes along K; its N padding must be a multiple of 8
PAD_N, PAD_K = 128, 32
MIN_GROUP = 16  # one MMA K step for 16-bit activations (its schema refuses smaller groups)

NVFP4_SCHEMA = {"dtype": "float4e2m1", "scale_dtype": "float8e4m3", "group_size": 16, "scale_2_type": "tensor"}


def _shape_reason(case) -> str | None:
    k, n = case.shape.K, case.shape.N
    if k % ALIGN or n % ALIGN:
        return f"humming needs K % {ALIGN} == 0 and N % {ALIGN} == 0 (K={k}, N={n})"
    return None


def int4_why_not(case) -> str | None:
    if reason := cuda_only(case) or missing("humming", INSTALL) or _shape_reason(case):
        return reason
    k = case.shape.K
    if k % PAD_K:
        # Its own K padding asserted in the layer for int4 per channel (H200, K = 4112).
        return f"humming's int4 layer needs K % {PAD_K} == 0 (K={k}): its K padding fails there"
    g = case.settings.resolve(k)
    # Its K tiles (powers of two) must hold whole groups or whole tiles of a group.
    if g is not None and g != k and (g < MIN_GROUP or g & (g - 1)):
        return f"humming needs a group size of K or a power of two >= {MIN_GROUP}, not {g}"
    return None


def nvfp4_why_not(case) -> str | None:
    return cuda_only(case) or missing("humming", INSTALL) or _shape_reason(case)


def _words(packed: torch.Tensor) -> torch.Tensor:
    """Our [K//2, N] bytes -> its [N, K//8] int32 words (same nibble order)."""
    return packed.view(torch.uint8).t().contiguous().view(torch.int32)


def int4_operands(w: torch.Tensor, scales: torch.Tensor | None, dtype: torch.dtype) -> tuple[dict, dict]:
    """Our packed int4 (+ scales [K//g, N]) -> (humming weight schema, its tensors)."""
    n = w.shape[1]
    weight = _words(w.view(torch.uint8) ^ 0x88)  # q + 8 in each nibble
    if scales is None or scales.shape[0] == 1:  # unscaled or one group of K: per channel
        s = torch.ones(n, 1, dtype=dtype, device=w.device) if scales is None else scales.t()
        return {"dtype": "uint4", "group_size": 0}, {"weight": weight, "weight_scale": s.to(dtype).contiguous()}
    g = 2 * w.shape[0] // scales.shape[0]
    return {"dtype": "uint4", "group_size": g}, {"weight": weight, "weight_scale": scales.t().to(dtype).contiguous()}


def nvfp4_operands(w: torch.Tensor, block_scales: torch.Tensor, tensor_scale: torch.Tensor) -> tuple[dict, dict]:
    """Our NVFP4 codes, E4M3 block scales [K//16, N] and FP32 tensor scale ->
    (humming weight schema, its tensors)."""
    return dict(NVFP4_SCHEMA), {"weight": _words(w),
                                "weight_scale": block_scales.t().contiguous(),
                                "weight_scale_2": tensor_scale.float().reshape(1).clone()}


def _prepare(case, x: torch.Tensor, schema: dict, tensors: dict) -> Prepared:
    from humming.layer import HummingLayer
    from humming.tune import get_heuristics_config

    k, n = case.shape.K, case.shape.N
    with x.device:  # its parameters are made with torch.empty: on the GPU, not copied there
        layer = HummingLayer(shape_n=n, shape_k=k, weight_config=schema, torch_dtype=case.dtype,
                             pad_n_to_multiple=PAD_N, pad_k_to_multiple=PAD_K).to(x.device)
    layer.load_from_tensors(tensors)
    layer.transform()
    # Its table: [lo, hi, config] for M in (lo, hi]; its default forward compiles every config on
    # the first call, we compile the one an M looks up, as that forward would.
    table = get_heuristics_config(layer.humming_config, device=x.device)

    def apply(xi):
        m = xi.shape[0]
        return layer(xi, tuning_config=next(c for lo, hi, c in table if lo < m <= hi))

    t0 = time.perf_counter()
    apply(x)  # JIT-compiles here, never in the timed calls
    torch.cuda.synchronize(x.device)
    compile_s = time.perf_counter() - t0
    resident = tuple(layer.parameters()) + tuple(layer.buffers())
    return Prepared(lambda: apply(x), resident=resident, apply=apply, compile_s=compile_s)


@backend("int4_gemm", "humming", "humming-kernels 0.1.19 (vLLM's Marlin successor; JIT-compiled tensor-core "
         "kernels) on our codes and scales; groups of K or powers of two >= 16; K % 8, N % 8", int4_why_not,
         compiles=True)
def prepare_int4(case, inputs):
    return _prepare(case, inputs.x, *int4_operands(inputs.w, inputs.scales, case.dtype))


@backend("nvfp4_gemm", "humming", "humming-kernels 0.1.19 on our E2M1 codes, E4M3 block-16 scales and FP32 tensor "
         "scale (its modelopt nvfp4 form, dequantized in software on sm_90); K % 8, N % 8", nvfp4_why_not,
         compiles=True)
def prepare_nvfp4(case, inputs):
    return _prepare(case, inputs.x, *nvfp4_operands(inputs.w, inputs.block_scales, inputs.tensor_scale))
