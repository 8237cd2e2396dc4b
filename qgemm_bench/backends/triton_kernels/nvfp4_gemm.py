"""Triton backend for nvfp4_gemm (kernel: weight_only.py)."""

from __future__ import annotations

import torch

from qgemm_bench.backends import Backend, Prepared
from qgemm_bench.backends.triton_kernels import WEIGHT_ONLY_INTERPRETER_CONFIG, interpreter_note, why_not
from qgemm_bench.backends.triton_kernels.weight_only import NVFP4, WeightOnlyGemm


def prepare(case, inputs):
    x, w = inputs["x"].contiguous(), inputs["w"].contiguous()
    bs = inputs["block_scales"].contiguous().view(torch.uint8)  # E4M3 bits, decoded in the kernel
    ts = inputs["tensor_scale"].float()
    cfg = WEIGHT_ONLY_INTERPRETER_CONFIG if case.device.type == "cpu" else None
    gemm = WeightOnlyGemm(x, w, bs, ts, NVFP4, 16, cfg)
    return Prepared(gemm, resident=(w, bs, ts),
                    notes="; ".join(filter(None, (interpreter_note(case), gemm.note))))


BACKENDS = [Backend("nvfp4_gemm", "triton", "Triton weight-only GEMM with in-register E2M1 decode and "
                    "E4M3 block scales, one-launch split-K for small M (autotuned per M bucket); for large M "
                    "a Triton dequantize, then cuBLAS", prepare, why_not)]
