"""torch backends for split_k_gemm."""

from __future__ import annotations

import torch

from qgemm_bench.backends import Backend, Prepared
from qgemm_bench.backends.pytorch import compiled


def matmul(a, b, bias):
    return a @ b if bias is None else torch.addmm(bias, a, b)


def prepare_eager(case, inputs):
    a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
    return Prepared(lambda: matmul(a, b, bias), resident=(b,) if bias is None else (b, bias))


def prepare_compile(case, inputs):
    a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
    f = compiled(matmul)
    return Prepared(lambda: f(a, b, bias), resident=(b,) if bias is None else (b, bias))


BACKENDS = [
    Backend("split_k_gemm", "torch", "torch.matmul / addmm (cuBLAS on CUDA; baseline)", prepare_eager),
    Backend("split_k_gemm", "torch_compile", "torch.compile of the matmul (+ bias)", prepare_compile),
]
