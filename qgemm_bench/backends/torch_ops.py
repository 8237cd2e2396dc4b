"""torch backends: eager dequant+matmul (the baseline), dense matmul on the
unquantized weights (cuBLAS on CUDA: the bar quantization must beat), and
torch.compile of the eager code, for every operator."""

from __future__ import annotations

import functools

import torch

from qgemm_bench.backends.registry import Prepared, backend
from qgemm_bench.operators import formats, int4_gemm, nvfp4_gemm

# One static compilation per shape: in a real model every layer's weight shape
# is a constant of its graph. (Automatic-dynamic shapes, torch's default, went
# fully dynamic after the second shape and ran 16x4096x6144 int4 at 336 us vs
# eager's 274 us on the H100.) A sweep compiles once per shape and dtype.
RECOMPILE_LIMIT = 1024


@functools.cache
def compiled(fn):
    """torch.compile(fn, dynamic=False), shared by every shape of a sweep.

    Past dynamo's recompile limit torch.compile silently runs eager code; we
    raise the limit and make hitting it an error, so an eager number is never
    labelled torch_compile.
    """
    cfg = torch._dynamo.config
    cfg.recompile_limit = max(cfg.recompile_limit, RECOMPILE_LIMIT)
    cfg.fail_on_recompile_limit_hit = True
    return torch.compile(fn, dynamic=False)


def _weight_only(inputs, apply, resident) -> Prepared:
    x = inputs.x
    return Prepared(lambda: apply(x), resident=resident, apply=apply)


# ---------------------------------------------------------------- int4_gemm

def int4_dequant_matmul(x, w, scales, group_size):
    return x @ formats.dequantize_int4(w, scales, group_size, x.dtype)


@backend("int4_gemm", "torch", "eager unpack + dequantize + torch.matmul (baseline)")
def int4_eager(case, inputs):
    w, s, g = inputs.w, inputs.scales, inputs.group_size
    return _weight_only(inputs, lambda x: int4_dequant_matmul(x, w, s, g), (w, s))


@backend("int4_gemm", "cublas", "torch.matmul on pre-dequantized weights in x's dtype "
         "(cuBLAS on CUDA): the bar quantization must beat")
def int4_dense(case, inputs):
    wd = int4_gemm.dequantize(inputs, inputs.x.dtype)
    return _weight_only(inputs, lambda x: x @ wd, (wd,))


@backend("int4_gemm", "torch_compile", "torch.compile of the eager dequant + matmul", compiles=True)
def int4_compile(case, inputs):
    w, s, g = inputs.w, inputs.scales, inputs.group_size
    f = compiled(int4_dequant_matmul)
    return _weight_only(inputs, lambda x: f(x, w, s, g), (w, s))


# --------------------------------------------------------------- nvfp4_gemm

def nvfp4_dequant_matmul(x, w, block_scales, tensor_scale):
    return x @ formats.dequantize_nvfp4(w, block_scales, tensor_scale, x.dtype)


@backend("nvfp4_gemm", "torch", "eager E2M1 decode + scales + torch.matmul (baseline)")
def nvfp4_eager(case, inputs):
    w, bs, ts = inputs.w, inputs.block_scales, inputs.tensor_scale
    return _weight_only(inputs, lambda x: nvfp4_dequant_matmul(x, w, bs, ts), (w, bs, ts))


@backend("nvfp4_gemm", "cublas", "torch.matmul on pre-dequantized weights in x's dtype "
         "(cuBLAS on CUDA): the bar quantization must beat")
def nvfp4_dense(case, inputs):
    wd = nvfp4_gemm.dequantize(inputs, inputs.x.dtype)
    return _weight_only(inputs, lambda x: x @ wd, (wd,))


@backend("nvfp4_gemm", "torch_compile", "torch.compile of the eager decode + matmul", compiles=True)
def nvfp4_compile(case, inputs):
    w, bs, ts = inputs.w, inputs.block_scales, inputs.tensor_scale
    f = compiled(nvfp4_dequant_matmul)
    return _weight_only(inputs, lambda x: f(x, w, bs, ts), (w, bs, ts))


# ------------------------------------------------------------- split_k_gemm

def matmul(a, b, bias):
    return a @ b if bias is None else torch.addmm(bias, a, b)


def _resident(inputs) -> tuple:
    return (inputs.b,) if inputs.bias is None else (inputs.b, inputs.bias)


@backend("split_k_gemm", "torch", "torch.matmul / addmm (cuBLAS on CUDA; baseline)")
def split_k_eager(case, inputs):
    a, b, bias = inputs.a, inputs.b, inputs.bias
    return Prepared(lambda: matmul(a, b, bias), resident=_resident(inputs))


@backend("split_k_gemm", "torch_compile", "torch.compile of the matmul (+ bias)", compiles=True)
def split_k_compile(case, inputs):
    a, b, bias = inputs.a, inputs.b, inputs.bias
    f = compiled(matmul)
    return Prepared(lambda: f(a, b, bias), resident=_resident(inputs))
