"""What every operator shares: typed inputs, presets, tolerances, errors."""

from __future__ import annotations

import dataclasses

import torch

from qgemm_bench.errors import InputError
from qgemm_bench.types import Shape


class Inputs:
    """Base of the operators' input dataclasses. The first field is the
    activation (the operand a new call brings); the rest are weights."""

    def tensors(self) -> list[torch.Tensor]:
        return [v for f in dataclasses.fields(self) if isinstance(v := getattr(self, f.name), torch.Tensor)]

    @property
    def activation(self) -> torch.Tensor:
        return getattr(self, dataclasses.fields(self)[0].name)

    def clone(self):
        """A copy with every tensor cloned (rotating input copies)."""
        return dataclasses.replace(self, **{f.name: v.clone() for f in dataclasses.fields(self)
                                            if isinstance(v := getattr(self, f.name), torch.Tensor)})


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
DECODE_M = (1, 2, 4, 8, 16, 32, 64)  # decode batch sizes: the weights-read-bound regime


def llama_shapes() -> list[Shape]:
    return [Shape(m, k, n) for k, n in LLAMA3_8B_KN + LLAMA3_70B_KN for m in LLAMA_M]


def decode_shapes() -> list[Shape]:
    """Every Llama-3-8B and -70B layer at decode batch sizes (M <= 64)."""
    return [Shape(m, k, n) for k, n in LLAMA3_8B_KN + LLAMA3_70B_KN for m in DECODE_M]


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
    unwritten row) land far above (tests/test_int4_gemm.py)."""
    return {torch.bfloat16: 1e-2, torch.float16: 3e-3}[dtype]


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Relative Frobenius error ||out - ref|| / ||ref||, in float64."""
    if out.shape != ref.shape:
        raise ValueError(f"output shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    ref64 = ref.double()
    denom = torch.linalg.vector_norm(ref64).item()
    num = torch.linalg.vector_norm(out.double() - ref64).item()
    return num / denom if denom else num


def cycled_errors(calls: list, refs: list, n: int) -> list[float]:
    """rel_error of n calls taking calls[i] (no arguments: each its own
    inputs) against refs[i] in turn: a call that returns an earlier call's
    output misses its own reference (some tiles were wrong in some calls only)."""
    return [rel_error(calls[c % len(calls)](), refs[c % len(calls)]) for c in range(n)]
