"""int4_gemm: y[M, N] = x[M, K] @ dequant(w), int4 weights with group scales.

Inputs: x [M, K] (bf16/fp16); w int8 [K//2, N] (formats.py layout); scales
[K//group_size, N] in x's dtype, or None for the unscaled variant.
Settings: group_size = int (default 128) | "channel" (= K) | None (unscaled).
"""

from __future__ import annotations

import torch

from qgemm_bench.operators import formats
from qgemm_bench.operators.common import (
    Case,
    InputError,
    Shape,
    check_positive,
    gemm_flops,
    gemm_tolerance,
    generator,
    llama_shapes,
    m_sweep_shapes,
)

NAME = "int4_gemm"
SUMMARY = "bf16/fp16 activations x int4 weights, symmetric group scales"
DEFAULT_SETTINGS = {"group_size": 128}
DEFAULT_BASELINE = "torch"
PLOT_X = "M"
PRESETS = {
    # tiny and ragged: N not a multiple of 8/16, M odd; K a multiple of 128.
    "smoke": [Shape(1, 128, 64), Shape(3, 256, 40), Shape(17, 384, 96), Shape(5, 256, 37)],
    "llama": llama_shapes(),
    "m-sweep": m_sweep_shapes(),
}
CPU_PRESET, GPU_PRESET = "smoke", "llama"


def parse_group_size(text: str) -> int | str | None:
    t = text.strip().lower()
    if t == "none":
        return None
    if t == "channel":
        return "channel"
    try:
        g = int(t)
    except ValueError:
        raise InputError(f"--group-size {text!r}: expected an even integer, 'channel' or 'none'") from None
    if g <= 0 or g % 2:
        raise InputError(f"--group-size {g}: must be a positive even integer")
    return g


def group_size(case: Case) -> int | None:
    g = case.settings.get("group_size", 128)
    return case.shape.K if g == "channel" else g


def describe(settings: dict) -> str:
    g = settings.get("group_size", 128)
    return "unscaled" if g is None else f"group={g}"


def validate(shape: Shape, settings: dict) -> None:
    check_positive(shape)
    if shape.K % 2:
        raise InputError(f"shape {shape}: K={shape.K} is odd; int4 packs two values per byte along K")
    g = settings.get("group_size", 128)
    if isinstance(g, int) and shape.K % g:
        raise InputError(f"shape {shape}: K={shape.K} is not divisible by group_size={g}")


def make_inputs(case: Case, seed: int) -> dict:
    """x ~ N(0, 1); w quantized from a N(0, 1) weight (raw int4 when unscaled)."""
    m, k, n = case.shape
    gen = generator(case.device, seed)
    x = torch.randn(m, k, generator=gen, device=case.device).to(case.dtype)
    g = group_size(case)
    if g is None:
        q = torch.randint(-8, 8, (k, n), generator=gen, device=case.device)
        return {"x": x, "w": formats.pack_int4(q), "scales": None, "group_size": None}
    w = torch.randn(k, n, generator=gen, device=case.device)
    if case.device.type == "cuda":  # one kernel instead of many torch passes; bit-identical
        from qgemm_bench.operators.int4_quantize_kernel import quantize_int4
    else:
        quantize_int4 = formats.quantize_int4
    packed, scales = quantize_int4(w, g, scale_dtype=case.dtype)
    return {"x": x, "w": packed, "scales": scales, "group_size": g}


def dequantize(inputs: dict, dtype=torch.float32) -> torch.Tensor:
    return formats.dequantize_int4(inputs["w"], inputs["scales"], inputs["group_size"], dtype)


def reference(inputs: dict) -> torch.Tensor:
    """fp32 math on exactly the dequantized weights."""
    return inputs["x"].float() @ dequantize(inputs)


def flops(shape: Shape, settings: dict) -> int:
    return gemm_flops(shape)


def bytes(shape: Shape, dtype: torch.dtype, settings: dict) -> int:
    # I/O: x read once (M*K*e), packed weights (K*N/2), scales (K/g*N*e),
    # y written once (M*N*e).
    m, k, n = shape
    e = dtype.itemsize
    g = settings.get("group_size", 128)
    g = k if g == "channel" else g
    scales = 0 if g is None else (k // g) * n * e
    return m * k * e + k * n // 2 + scales + m * n * e


def tolerance(dtype: torch.dtype) -> float:
    return gemm_tolerance(dtype)
