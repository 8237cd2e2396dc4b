"""torch backends for nvfp4_gemm."""

from __future__ import annotations

from qgemm_bench.backends import Backend, Prepared
from qgemm_bench.backends.pytorch import compiled
from qgemm_bench.operators import formats
from qgemm_bench.operators import nvfp4_gemm as op


def dequant_matmul(x, w, block_scales, tensor_scale):
    return x @ formats.dequantize_nvfp4(w, block_scales, tensor_scale, x.dtype)


def _args(inputs):
    return inputs["x"], inputs["w"], inputs["block_scales"], inputs["tensor_scale"]


def prepare_eager(case, inputs):
    x, w, bs, ts = _args(inputs)
    return Prepared(lambda: dequant_matmul(x, w, bs, ts), resident=(w, bs, ts))


def prepare_dense(case, inputs):
    x, wd = inputs["x"], op.dequantize(inputs, inputs["x"].dtype)
    return Prepared(lambda: x @ wd, resident=(wd,))


def prepare_compile(case, inputs):
    x, w, bs, ts = _args(inputs)
    f = compiled(dequant_matmul)
    return Prepared(lambda: f(x, w, bs, ts), resident=(w, bs, ts))


BACKENDS = [
    Backend("nvfp4_gemm", "torch", "eager E2M1 decode + scales + torch.matmul (baseline)", prepare_eager),
    Backend("nvfp4_gemm", "cublas", "torch.matmul on pre-dequantized weights in x's dtype "
            "(cuBLAS on CUDA): the bar quantization must beat", prepare_dense),
    Backend("nvfp4_gemm", "torch_compile", "torch.compile of the eager decode + matmul", prepare_compile),
]
