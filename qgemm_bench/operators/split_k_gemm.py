"""split_k_gemm: y = a[M, K] @ b[K, N] (+ bias[N]) in fp16/bf16, for skinny
shapes (small M and N, large K) where split-K pays.

Inputs: a [M, K], b [K, N], bias [N] or None, all in the activation dtype.
Settings: bias = False (default) | True; the bias is added exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from qgemm_bench.operators import common
from qgemm_bench.operators.common import check_positive, gemm_flops, gemm_tolerance, generator
from qgemm_bench.types import Case, Shape

NAME = "split_k_gemm"
SUMMARY = "fp16/bf16 GEMM for skinny shapes (small M, N; large K), optional bias"
DEFAULT_BASELINE = "torch"
PLOT_X = "K"
# LoRA projections of real models: x [M, K] @ A [K, r], K = 4096 (Llama-3-8B /
# Mistral-7B hidden size) or 14336 (their MLP width, the down projection's
# input), rank r = N in {16, 64, 128}, M = 1 (decode) .. 256 tokens. Twelve of
# the 24 combinations: every M with both K and all three ranks, none of the
# M = N shapes already in the grid.
LORA_SHAPES = [Shape(1, 4096, 16), Shape(1, 14336, 64), Shape(1, 4096, 128),
               Shape(16, 4096, 64), Shape(16, 14336, 16), Shape(16, 14336, 128),
               Shape(64, 4096, 16), Shape(64, 14336, 64), Shape(64, 4096, 128),
               Shape(256, 4096, 16), Shape(256, 14336, 128), Shape(256, 4096, 64)]
PRESETS = {
    "smoke": [Shape(16, 1024, 16), Shape(5, 1000, 7), Shape(64, 2048, 33), Shape(3, 4096, 64)],
    "skinny": [Shape(mn, k, mn) for mn in (16, 32, 64, 128, 256)
               for k in (4096, 8192, 16384, 32768, 65536)] + LORA_SHAPES,
}
CPU_PRESET, GPU_PRESET = "smoke", "skinny"


@dataclass(frozen=True)
class Settings:
    """bias: add a bias vector [N], exactly once."""

    bias: bool = False

    def label(self) -> str:
        return "bias" if self.bias else "no-bias"

    def as_dict(self) -> dict:
        return {"bias": self.bias}

    @classmethod
    def from_label(cls, label: str) -> Settings:
        if label not in ("bias", "no-bias"):
            raise ValueError("expected 'bias' or 'no-bias'")
        return cls(label == "bias")


FLAGS = {"bias": "--bias"}


def add_arguments(p) -> None:
    p.add_argument("--bias", action="store_true", help="split_k_gemm: add a bias vector (exactly once)")


def settings_from_args(args) -> Settings:
    return Settings(bool(args.bias))


@dataclass
class Inputs(common.Inputs):
    a: torch.Tensor  # [M, K]
    b: torch.Tensor  # [K, N]
    bias: torch.Tensor | None  # [N]


def describe(settings: Settings) -> str:
    return settings.label()


def validate(shape: Shape, settings: Settings) -> None:
    check_positive(shape)


def make_inputs(case: Case, seed: int) -> Inputs:
    m, k, n = case.shape
    gen = generator(case.device, seed)
    a = torch.randn(m, k, generator=gen, device=case.device).to(case.dtype)
    b = torch.randn(k, n, generator=gen, device=case.device).to(case.dtype)
    bias = None
    if case.settings.bias:
        # Large enough that a bias added twice (or never) fails the tolerance.
        bias = (16 * torch.randn(n, generator=gen, device=case.device)).to(case.dtype)
    return Inputs(a, b, bias)


def reference(inputs: Inputs) -> torch.Tensor:
    y = inputs.a.float() @ inputs.b.float()
    return y if inputs.bias is None else y + inputs.bias.float()


def flops(shape: Shape, settings: Settings) -> int:
    return gemm_flops(shape) + (shape.M * shape.N if settings.bias else 0)


def bytes(shape: Shape, dtype: torch.dtype, settings: Settings) -> int:
    # I/O: a and b read once, bias read once, y written once; no partials.
    m, k, n = shape
    e = dtype.itemsize
    return (m * k + k * n + m * n + (n if settings.bias else 0)) * e


def tolerance(dtype: torch.dtype) -> float:
    return gemm_tolerance(dtype)
