"""What every operator shares: the shape type, the input error, dtypes, presets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import torch


class InputError(ValueError):
    """Bad input from the user (shape, dtype, setting): reported in one line."""


class Shape(NamedTuple):
    M: int
    K: int
    N: int

    def __str__(self) -> str:
        return f"{self.M}x{self.K}x{self.N}"


@dataclass(frozen=True)
class Case:
    """One thing to measure: an operator at a shape, dtype, device and settings."""

    op: str
    shape: Shape
    dtype: torch.dtype
    device: torch.device
    settings: dict = field(default_factory=dict)
    # Backend options from the CLI: autotune ("none" | "quick" | "full"),
    # autotune_budget_s, save_configs, helion_configs (a config file); and
    # helion_config (one explicit config, scripts/tune_helion.py).
    options: dict = field(default_factory=dict)


DTYPES = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16, "half": torch.float16}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def parse_dtype(name: str) -> torch.dtype:
    try:
        return DTYPES[name.lower()]
    except KeyError:
        raise InputError(f"unsupported dtype {name!r}; choose bfloat16 or float16") from None


def check_positive(shape: Shape) -> None:
    if min(shape) <= 0:
        raise InputError(f"shape {shape}: M, K and N must be positive")


def generator(device: torch.device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


# Llama-3 linear layers as (K, N) = (in_features, out_features); qkv and the
# fused gate+up projection as one GEMM each (8 KV heads of 128).
LLAMA3_8B_KN = [(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096)]
LLAMA3_70B_KN = [(8192, 10240), (8192, 8192), (8192, 57344), (28672, 8192)]
LLAMA_M = (1, 16, 64, 256, 1024, 4096)
SWEEP_M = tuple(2**i for i in range(13))  # 1 .. 4096


def llama_shapes() -> list[Shape]:
    return [Shape(m, k, n) for k, n in LLAMA3_8B_KN + LLAMA3_70B_KN for m in LLAMA_M]


def m_sweep_shapes(k: int = 8192, n: int = 8192) -> list[Shape]:
    return [Shape(m, k, n) for m in SWEEP_M]


def gemm_flops(shape: Shape) -> int:
    return 2 * shape.M * shape.N * shape.K


def gemm_tolerance(dtype: torch.dtype) -> float:
    """Relative Frobenius error allowed for an M x K x N GEMM with fp32
    accumulation and output in `dtype`. For bf16, dequantizing in bf16 (q * s
    rounded to 8 bits) and the output rounding each add ~1e-3 rms (the torch
    backends measure 2.2e-3 on the H100); fp16 has 3 more mantissa bits. Bugs
    kernels make (a dropped K tile, swapped nibbles, a wrong group's scale, an
    unwritten row) land far above (tests/test_backends.py)."""
    return {torch.bfloat16: 1e-2, torch.float16: 3e-3}[dtype]


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Relative Frobenius error ||out - ref|| / ||ref||, in float64."""
    if out.shape != ref.shape:
        raise ValueError(f"output shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    ref64 = ref.double()
    denom = torch.linalg.vector_norm(ref64).item()
    num = torch.linalg.vector_norm(out.double() - ref64).item()
    return num / denom if denom else num
