"""Helion backend for nvfp4_gemm (kernel: kernels.weight_only)."""

from __future__ import annotations

import torch

from qgemm_bench.backends import Backend
from qgemm_bench.backends.helion_kernels import why_not
from qgemm_bench.backends.helion_kernels.weight_only import prepare
from qgemm_bench.backends.triton_kernels.weight_only import NVFP4


def _prepare(case, inputs):
    bs = inputs["block_scales"].contiguous()
    if bs.dtype != torch.float8_e4m3fn:
        raise ValueError(f"NVFP4 block scales must be float8_e4m3fn, not {bs.dtype}")
    return prepare(case, "nvfp4_gemm", inputs["x"], inputs["w"], bs, inputs["tensor_scale"], NVFP4, None)


BACKENDS = [Backend("nvfp4_gemm", "helion", "Helion weight-only GEMM with in-register E2M1 decode and "
                    "E4M3 block scales; checked-in configs per GPU and shape bucket", _prepare, why_not)]
