"""nvfp4_gemm: y[M, N] = x[M, K] @ dequant(w), NVFP4 weights.

Inputs: x [M, K] (bf16/fp16); w uint8 [K//2, N] E2M1 codes (formats.py layout);
block_scales float8_e4m3fn [K//16, N]; tensor_scale float32 0-dim.
Settings: unscaled = False (default) | True, the Helion example's form: random
E2M1 codes with every scale 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from qgemm_bench.errors import InputError
from qgemm_bench.operators import common, formats
from qgemm_bench.operators.common import (
    check_positive,
    decode_shapes,
    gemm_flops,
    gemm_tolerance,
    generator,
    llama_shapes,
    m_sweep_shapes,
)
from qgemm_bench.types import Case, Shape

NAME = "nvfp4_gemm"
SUMMARY = "bf16/fp16 activations x NVFP4 weights (E2M1, E4M3 block-16 scales, FP32 tensor scale)"
DEFAULT_BASELINE = "torch"
PLOT_X = "M"
WEIGHT_ONLY = True  # rows get the weight-read floor (harness/assemble.py)
PRESETS = {
    "smoke": [Shape(1, 64, 48), Shape(3, 160, 40), Shape(17, 384, 96), Shape(5, 256, 37)],
    "llama": llama_shapes(),
    "m-sweep": m_sweep_shapes(),
    "decode": decode_shapes(),
}
CPU_PRESET, GPU_PRESET = "smoke", "llama"


@dataclass(frozen=True)
class Settings:
    """unscaled: random E2M1 codes with every scale 1 (the Helion example's form)."""

    unscaled: bool = False

    def label(self) -> str:
        return "unscaled" if self.unscaled else "nvfp4"

    def as_dict(self) -> dict:
        return {"unscaled": self.unscaled}

    @classmethod
    def from_label(cls, label: str) -> Settings:
        if label not in ("unscaled", "nvfp4"):
            raise ValueError("expected 'nvfp4' or 'unscaled'")
        return cls(label == "unscaled")


FLAGS = {"unscaled": "--unscaled"}


def add_arguments(p) -> None:
    p.add_argument("--unscaled", action="store_true",
                   help="nvfp4_gemm: random E2M1 codes with all scales 1 (the Helion example's form)")


def settings_from_args(args) -> Settings:
    return Settings(bool(args.unscaled))


@dataclass
class Inputs(common.Inputs):
    x: torch.Tensor  # [M, K]
    w: torch.Tensor  # uint8 [K//2, N] E2M1 codes
    block_scales: torch.Tensor  # float8_e4m3fn [K//16, N]
    tensor_scale: torch.Tensor  # float32, 0-dim


def describe(settings: Settings) -> str:
    return settings.label()


def validate(shape: Shape, settings: Settings) -> None:
    check_positive(shape)
    if shape.K % formats.NVFP4_BLOCK:
        raise InputError(
            f"shape {shape}: K={shape.K} is not divisible by the NVFP4 block size {formats.NVFP4_BLOCK}"
        )


def make_inputs(case: Case, seed: int) -> Inputs:
    """x ~ N(0, 1); w quantized from a N(0, 1) weight (random codes when unscaled)."""
    m, k, n = case.shape
    dev = case.device
    gen = generator(dev, seed)
    x = torch.randn(m, k, generator=gen, device=dev).to(case.dtype)
    if case.settings.unscaled:
        codes = torch.randint(0, 16, (k, n), generator=gen, device=dev)
        ones = torch.ones(k // formats.NVFP4_BLOCK, n, device=dev).to(torch.float8_e4m3fn)
        return Inputs(x, formats.pack_nibbles(codes), ones, torch.ones((), device=dev))
    w = torch.randn(k, n, generator=gen, device=dev)
    return Inputs(x, *formats.quantize_nvfp4(w))


def dequantize(inputs: Inputs, dtype=torch.float32) -> torch.Tensor:
    return formats.dequantize_nvfp4(inputs.w, inputs.block_scales, inputs.tensor_scale, dtype)


def reference(inputs: Inputs) -> torch.Tensor:
    """fp32 math on exactly the dequantized weights."""
    return inputs.x.float() @ dequantize(inputs)


def flops(shape: Shape, settings: Settings) -> int:
    return gemm_flops(shape)


def bytes(shape: Shape, dtype: torch.dtype, settings: Settings) -> int:
    # I/O: x read once (M*K*e), E2M1 codes (K*N/2), E4M3 block scales (K/16*N),
    # the fp32 tensor scale (4), y written once (M*N*e).
    m, k, n = shape
    e = dtype.itemsize
    return m * k * e + k * n // 2 + (k // formats.NVFP4_BLOCK) * n + 4 + m * n * e


def tolerance(dtype: torch.dtype) -> float:
    return gemm_tolerance(dtype)
