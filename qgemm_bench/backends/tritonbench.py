"""tritonbench / Helion benchmark-runner entry points.

Each `*_tritonbench(tb_op, ...)` takes the inputs as tritonbench hands them,
does all preparation here (packing, quantizing, Helion config lookup,
compilation) and returns the zero-argument callable that gets timed. They go
through the same backend `prepare` as `runner.py`, so the kernels, configs and
checks are the ones the harness measures.

- int4_gemm: x [..., K] bf16/fp16; w [K, N] holding int4 values in [-8, 7]
  (any integer dtype). Packed two per byte along K, no scales (the raw-int4
  variant, as tritonbench's int4_gemm and the Helion example use it).
- nvfp4_gemm: x [..., K]; w [K, N] float weight, quantized here to NVFP4
  (E2M1, E4M3 scale per 16 along K, FP32 tensor scale).
- matmul_split_k: a [M, K], b [K, N], bias [N] or None.
Outputs are 2-D [rows of x, N].

KERNEL_MAPPINGS has the shape of Helion's benchmarks/run.py table
(op -> (tritonbench module, [(module, function), ...])).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from qgemm_bench.operators import formats
from qgemm_bench.operators.common import Case, Shape

MODULE = "qgemm_bench.backends.tritonbench"
KERNEL_MAPPINGS: dict[str, tuple] = {
    "int4_gemm": ("tritonbench.operators.int4_gemm.int4_gemm",
                  [(MODULE, "int4_gemm_tritonbench"), (MODULE, "triton_int4_gemm_tritonbench")]),
    "nvfp4_gemm": ("tritonbench.operators.nvfp4_gemm.operator",
                   [(MODULE, "nvfp4_gemm_tritonbench"), (MODULE, "triton_nvfp4_gemm_tritonbench")]),
    "gemm": ("tritonbench.operators.gemm.operator",
             [(MODULE, "matmul_split_k_tritonbench"), (MODULE, "triton_matmul_split_k_tritonbench")]),
}


def _backend(op: str, name: str):
    from qgemm_bench.backends import for_op

    return next(b for b in for_op(op) if b.name == name)


def _prepare(op: str, backend: str, inputs: dict, shape: Shape, dtype, device, settings: dict) -> Callable:
    b = _backend(op, backend)
    case = Case(op, shape, dtype, device, settings)
    if reason := b.why_not(case):
        raise RuntimeError(f"{op} {backend} cannot run here: {reason}")
    return b.prepare(case, inputs).fn


def _activation(x: torch.Tensor) -> torch.Tensor:
    if x.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"x must be float16 or bfloat16, not {x.dtype}")
    return x.reshape(-1, x.shape[-1]).contiguous()


def _int4(backend: str, x: torch.Tensor, w: torch.Tensor) -> Callable:
    x2 = _activation(x)
    if w.dim() != 2 or w.dtype.is_floating_point or w.dtype == torch.bool:
        raise ValueError(f"w must be an integer [K, N] tensor of int4 values, not {w.dtype} {tuple(w.shape)}")
    k, n = w.shape
    inputs = {"x": x2, "w": formats.pack_int4(w.to(x2.device)), "scales": None, "group_size": None}
    return _prepare("int4_gemm", backend, inputs, Shape(x2.shape[0], k, n), x2.dtype, x2.device,
                    {"group_size": None})


def _nvfp4(backend: str, x: torch.Tensor, w: torch.Tensor) -> Callable:
    x2 = _activation(x)
    if w.dim() != 2 or not w.dtype.is_floating_point:
        raise ValueError(f"w must be a floating-point [K, N] weight, not {w.dtype} {tuple(w.shape)}")
    k, n = w.shape
    packed, block_scales, tensor_scale = formats.quantize_nvfp4(w.to(x2.device))
    inputs = {"x": x2, "w": packed, "block_scales": block_scales, "tensor_scale": tensor_scale}
    return _prepare("nvfp4_gemm", backend, inputs, Shape(x2.shape[0], k, n), x2.dtype, x2.device,
                    {"unscaled": False})


def _split_k(backend: str, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> Callable:
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"a and b must be 2-D, not {tuple(a.shape)} and {tuple(b.shape)}")
    inputs = {"a": a, "b": b, "bias": bias}
    return _prepare("split_k_gemm", backend, inputs, Shape(a.shape[0], a.shape[1], b.shape[1]), a.dtype,
                    a.device, {"bias": bias is not None})


def int4_gemm_tritonbench(tb_op, x: torch.Tensor, w: torch.Tensor) -> Callable:
    return _int4("helion", x, w)


def nvfp4_gemm_tritonbench(tb_op, x: torch.Tensor, w: torch.Tensor) -> Callable:
    return _nvfp4("helion", x, w)


def matmul_split_k_tritonbench(tb_op, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> Callable:
    return _split_k("helion", a, b, bias)


def triton_int4_gemm_tritonbench(tb_op, x: torch.Tensor, w: torch.Tensor) -> Callable:
    return _int4("triton", x, w)


def triton_nvfp4_gemm_tritonbench(tb_op, x: torch.Tensor, w: torch.Tensor) -> Callable:
    return _nvfp4("triton", x, w)


def triton_matmul_split_k_tritonbench(tb_op, a: torch.Tensor, b: torch.Tensor,
                                      bias: torch.Tensor | None = None) -> Callable:
    return _split_k("triton", a, b, bias)
