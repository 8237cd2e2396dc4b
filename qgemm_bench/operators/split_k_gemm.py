"""split_k_gemm: y = a[M, K] @ b[K, N] (+ bias[N]) in fp16/bf16, for skinny
shapes (small M and N, large K) where split-K pays.

Inputs: a [M, K], b [K, N], bias [N] or None, all in the activation dtype.
Settings: bias = False (default) | True; the bias is added exactly once.
"""

from __future__ import annotations

import torch

from qgemm_bench.operators.common import Case, Shape, check_positive, gemm_flops, gemm_tolerance, generator

NAME = "split_k_gemm"
SUMMARY = "fp16/bf16 GEMM for skinny shapes (small M, N; large K), optional bias"
DEFAULT_SETTINGS = {"bias": False}
DEFAULT_BASELINE = "torch"
PLOT_X = "K"
PRESETS = {
    "smoke": [Shape(16, 1024, 16), Shape(5, 1000, 7), Shape(64, 2048, 33), Shape(3, 4096, 64)],
    "skinny": [Shape(mn, k, mn) for mn in (16, 32, 64, 128, 256)
               for k in (4096, 8192, 16384, 32768, 65536)],
}
CPU_PRESET, GPU_PRESET = "smoke", "skinny"


def describe(settings: dict) -> str:
    return "bias" if settings.get("bias") else "no-bias"


def validate(shape: Shape, settings: dict) -> None:
    check_positive(shape)


def make_inputs(case: Case, seed: int) -> dict:
    m, k, n = case.shape
    gen = generator(case.device, seed)
    a = torch.randn(m, k, generator=gen, device=case.device).to(case.dtype)
    b = torch.randn(k, n, generator=gen, device=case.device).to(case.dtype)
    bias = None
    if case.settings.get("bias"):
        # Large enough that a bias added twice (or never) fails the tolerance.
        bias = (16 * torch.randn(n, generator=gen, device=case.device)).to(case.dtype)
    return {"a": a, "b": b, "bias": bias}


def reference(inputs: dict) -> torch.Tensor:
    y = inputs["a"].float() @ inputs["b"].float()
    return y if inputs["bias"] is None else y + inputs["bias"].float()


def flops(shape: Shape, settings: dict) -> int:
    return gemm_flops(shape) + (shape.M * shape.N if settings.get("bias") else 0)


def bytes(shape: Shape, dtype: torch.dtype, settings: dict) -> int:
    # I/O: a and b read once, bias read once, y written once; no partials.
    m, k, n = shape
    e = dtype.itemsize
    return (m * k + k * n + m * n + (n if settings.get("bias") else 0)) * e


def tolerance(dtype: torch.dtype) -> float:
    return gemm_tolerance(dtype)
