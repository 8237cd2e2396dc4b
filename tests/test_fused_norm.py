"""FusedGemm's output parts (split_k_parts._store's RESIDUAL, NORM_W and
RMS_SCALE): h = residual + x @ w with each row's sums of squares per 32
columns and h times a norm weight, and a GEMM's rows scaled by 1 / RMS from
such sums: an RMSNorm between two GEMMs. Against fp64 on the dequantized
weights, the norm computed independently in fp64; ragged M, N and K,
split-K even and uneven, one split, int4 and NVFP4, TMA x loads, HALVES."""

import pytest
import torch

from qgemm_bench.operators import int4_gemm, nvfp4_gemm
from qgemm_bench.operators.formats import INT4, NVFP4
from tests.support import CUDA, DEV, DT, case, check, fp64, needs_gpu, seed, stored_target, target_for
from tests.support import triton_config as cfg

EPS = 1e-5
CHUNK = 32


def gemm_of(fmt, shape, c, s, group=128):
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm

    if fmt == INT4:  # group = K: one scale per output column (int4-channel)
        inputs = int4_gemm.make_inputs(case(int4_gemm, shape, group_size=group), s)
        g = FusedGemm(inputs.w, inputs.scales, None, INT4, group, c, target=target_for(inputs.w))
        return g, inputs, int4_gemm.dequantize(inputs)
    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, shape), s)
    g = FusedGemm(inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16, c,
                  target=target_for(inputs.w))
    return g, inputs, nvfp4_gemm.dequantize(inputs)


def chunk_sums(h: torch.Tensor) -> torch.Tensor:
    """Each row's fp64 sum of squares per 32 columns (the last chunk short)."""
    m, n = h.shape
    return torch.stack([(h[:, i:i + CHUNK].double() ** 2).sum(-1) for i in range(0, n, CHUNK)], dim=1)


# (fmt, shape, bm, bn, bk, split, extra): N 100 and 72 end mid-chunk; 11 K blocks over 3 splits; one split;
# TMA x loads; ACC_SCALE.
CASES = [(INT4, (3, 1408, 100), 16, 64, 128, 3, {}), (INT4, (7, 1024, 72), 16, 64, 128, 1, {}),
         (INT4, (5, 1280, 136), 16, 64, 128, 2, {"ACC_SCALE": True}),
         (INT4, (33, 1280, 72), 64, 64, 64, 1, {"TMA": True}), (NVFP4, (1, 1408, 100), 16, 64, 128, 3, {}),
         (NVFP4, (17, 640, 200), 16, 64, 128, 1, {"ACC_SCALE": True})]


@pytest.mark.parametrize("fmt,shape,bm,bn,bk,split,extra", CASES)
def test_residual_adds_once_and_leaves_each_rows_sums_of_squares(fmt, shape, bm, bn, bk, split, extra):
    s = seed()
    g, inputs, wd = gemm_of(fmt, shape, {**cfg(bm=bm, bn=bn, bk=bk, split=split), **extra}, s)
    gen = torch.Generator().manual_seed(s)
    res = torch.randn(shape[0], shape[2], dtype=DT, generator=gen).to(inputs.x.device)
    weight = (1 + 0.2 * torch.randn(shape[2], generator=gen)).to(DT).to(res.device)
    h, sq = g(inputs.x, residual=res)
    check(h, fp64(inputs.x, wd) + res.double())
    assert sq.dtype == torch.float32 and sq.shape == (shape[0], -(-shape[2] // CHUNK))
    torch.testing.assert_close(sq.double(), chunk_sums(h), rtol=1e-5, atol=0, msg=f"seed {s}")
    h2, xw, sq2 = g(inputs.x, residual=res, norm_weight=weight)  # and again: the split workspace left ready
    check(h2, fp64(inputs.x, wd) + res.double())
    torch.testing.assert_close(sq2.double(), chunk_sums(h2), rtol=1e-5, atol=0, msg=f"seed {s}")
    assert torch.equal(xw, (h2.float() * weight.float()).to(DT)), f"seed {s}"


def test_parts_with_per_channel_scales():
    """int4-channel (group = K, the model's default formats include it): the
    channel scale lands on the sum before the parts."""
    s = seed()
    shape = (3, 1024, 136)
    g, inputs, wd = gemm_of(INT4, shape, cfg(bm=16, bn=64, bk=128, split=2), s, group=shape[1])
    gen = torch.Generator().manual_seed(s)
    res = torch.randn(shape[0], shape[2], dtype=DT, generator=gen).to(inputs.x.device)
    h, sq = g(inputs.x, residual=res)
    check(h, fp64(inputs.x, wd) + res.double())
    torch.testing.assert_close(sq.double(), chunk_sums(h), rtol=1e-5, atol=0, msg=f"seed {s}")
    # Rows' sums of squares as if row i were (i + 1)^2 times larger: y's rows times 1 / RMS of that.
    grow = torch.arange(1, shape[0] + 1, dtype=torch.float64, device=inputs.x.device)[:, None] ** 4
    sums = (chunk_sums(inputs.x.double()) * grow).float()
    y = g(inputs.x, rms=(sums, EPS))
    rms = torch.rsqrt((inputs.x.double() ** 2).mean(-1, keepdim=True) * grow + EPS)
    check(y, fp64(inputs.x, wd) * rms)


@pytest.mark.parametrize("fmt,shape,bm,bn,bk,split,extra", CASES + [
    (INT4, (4, 1024, 136), 16, 64, 128, 2, {"ACC_SCALE": True, "HALVES": True})])
def test_rms_scale_is_the_rmsnorm_of_x_taken_after_the_gemm(fmt, shape, bm, bn, bk, split, extra):
    """x here is h * weight; the rows come out times 1 / RMS(h) from h's
    chunk sums: RMSNorm(h) @ w up to where the rounding falls."""
    s = seed()
    g, inputs, wd = gemm_of(fmt, shape, {**cfg(bm=bm, bn=bn, bk=bk, split=split), **extra}, s)
    gen = torch.Generator().manual_seed(s + 1)
    h = (3 * torch.randn(shape[:2], dtype=torch.float32, generator=gen)).to(DT).to(inputs.x.device)
    weight = (1 + 0.2 * torch.randn(shape[1], generator=gen)).to(DT).to(h.device)
    xw = (h.float() * weight.float()).to(DT)
    # Independently: each row's RMS in fp64 from the whole row, and transformers' RMSNorm.
    rms = torch.rsqrt((h.double() ** 2).mean(-1, keepdim=True) + EPS)
    xn = (weight.double() * (h.double() * rms).to(DT).double()).to(DT)
    y = g(xw, rms=(chunk_sums(h).float(), EPS))
    check(y, fp64(xn, wd))
    check(g(xw, rms=(chunk_sums(h).float(), EPS)), fp64(xn, wd))  # again: the split workspace left ready


@pytest.mark.skipif(DEV.type == "cuda", reason="the interpreter's atomics: a GPU's masked lanes cannot be set")
def test_the_sums_undefined_masked_lanes_never_reach_the_cast(monkeypatch):
    """The last program reads the split sum with a masked atomic, whose
    masked-out lanes are undefined (the interpreter returns whatever its
    buffer held). Filled with 1e30 here, they must not reach the fp16 cast
    (numpy's "overflow encountered in cast" in a CPU run) nor the output."""
    import warnings

    import numpy as np
    from triton.runtime import interpreter

    real = interpreter._interpreter

    class Garbage:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def atomic_rmw(op, ptr, val, mask, sem):
            out = real.atomic_rmw(op, ptr, val, mask, sem)
            return np.where(mask, out, np.asarray(1e30, dtype=out.dtype)) if out.dtype.kind == "f" else out

    monkeypatch.setattr(interpreter, "_interpreter", Garbage())
    s = seed()
    shape = (3, 1408, 100)  # 13 of the 16 rows and 28 of the last tile's 64 columns masked
    g, inputs, wd = gemm_of(INT4, shape, cfg(bm=16, bn=64, bk=128, split=3), s)
    sums = chunk_sums(inputs.x).float()
    rms = torch.rsqrt((inputs.x.double() ** 2).mean(-1, keepdim=True) + EPS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        y = g(inputs.x, rms=(sums, EPS))
    check(y, fp64(inputs.x, wd) * rms)


def test_a_residual_then_rms_chain_is_one_rmsnorm_between_two_gemms():
    """What a decoder layer does: h = residual + x @ w1 with h * weight and
    its sums, then the next GEMM on h * weight scaled by 1 / RMS(h), against
    fp64 with RMSNorm(h) recomputed from h (rows of 3 at N = K = 256)."""
    s = seed()
    g1, in1, wd1 = gemm_of(INT4, (3, 640, 256), cfg(bm=16, bn=64, bk=128, split=2), s)
    g2, _, wd2 = gemm_of(INT4, (3, 256, 72), cfg(bm=16, bn=32, bk=64, split=2), s + 1)
    res = torch.randn(3, 256, dtype=DT, generator=torch.Generator().manual_seed(s)).to(in1.x.device)
    weight = torch.full((256,), 0.5, dtype=DT, device=in1.x.device)
    h, xw, sq = g1(in1.x, residual=res, norm_weight=weight)
    y = g2(xw, rms=(sq, EPS))
    rms = torch.rsqrt((h.double() ** 2).mean(-1, keepdim=True) + EPS)
    check(y, fp64((weight.double() * (h.double() * rms).to(DT).double()).to(DT), wd2))


@pytest.mark.parametrize("path", ["fused", "split"])
@pytest.mark.parametrize("bad", ["residual", "rms", "norm_weight"])
def test_a_part_of_the_wrong_shape_is_one_value_error(bad, path):
    from qgemm_bench.backends.triton_dispatch import make_weight_only

    g, inputs, _ = gemm_of(INT4, (3, 256, 64), cfg(bm=16, bn=32, bk=64, split=1), seed())
    if path == "split":  # the triton backend's other paths check the parts the same way
        g = make_weight_only(inputs.w, inputs.scales, None, INT4, 128, cfg(bm=16, bn=32, bk=64), "split",
                             target=target_for(inputs.w))
    kw = {"residual": {"residual": torch.zeros(3, 63, dtype=DT)}, "rms": {"rms": (torch.zeros(3, 7), EPS)},
          "norm_weight": {"norm_weight": torch.ones(64, dtype=DT)}}[bad]  # norm_weight without a residual
    with pytest.raises(ValueError, match=bad):
        g(inputs.x, **kw)


def test_row_sums_of_squares_by_torch_match_chunk_by_chunk_and_take_no_rows():
    from qgemm_bench.backends.norm_parts import row_sumsq

    h = torch.randn(3, 100, dtype=DT)
    torch.testing.assert_close(row_sumsq(h).double(), chunk_sums(h), rtol=1e-6, atol=0)
    assert row_sumsq(h[:0]).shape == (0, 4)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("fmt", [INT4, NVFP4])
@pytest.mark.parametrize("shape", [(1, 4096, 6144), (1, 4096, 4096), (16, 4096, 6144), (16, 14336, 4096),
                                   (1, 4096, 28672)])
def test_the_stores_configs_do_both_parts_in_bf16(fmt, shape):
    """The triton backend at Llama-3-8B's decode shapes with the store's
    configs (PTX decodes, TMA, split-K; 16x4096x6144's entry has WS tiles,
    which a call with parts leaves for fused_kernel): both parts against
    fp64, three calls each (split-K atomics)."""
    from qgemm_bench.backends.triton_dispatch import make_weight_only
    from qgemm_bench.backends.triton_ops import weight_args

    m, k, n = shape
    s = seed()
    if fmt == INT4:
        inputs = int4_gemm.make_inputs(case(int4_gemm, shape, torch.bfloat16, CUDA, group_size=128), s)
        wd = int4_gemm.dequantize(inputs)
        gemm = make_weight_only(*weight_args("int4_gemm", inputs), target=stored_target())
    else:
        inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, shape, torch.bfloat16, CUDA), s)
        wd = nvfp4_gemm.dequantize(inputs)
        gemm = make_weight_only(*weight_args("nvfp4_gemm", inputs), target=stored_target())
    gen = torch.Generator(device=CUDA).manual_seed(s)
    res = torch.randn(m, n, dtype=torch.bfloat16, device=CUDA, generator=gen)
    weight = (1 + 0.2 * torch.randn(n, device=CUDA, generator=gen)).to(torch.bfloat16)
    h_prev = (3 * torch.randn(m, k, device=CUDA, generator=gen)).to(torch.bfloat16)
    w_prev = (1 + 0.2 * torch.randn(k, device=CUDA, generator=gen)).to(torch.bfloat16)
    rms = torch.rsqrt((h_prev.double() ** 2).mean(-1, keepdim=True) + EPS)
    xn = (w_prev.double() * (h_prev.double() * rms).to(torch.bfloat16).double()).to(torch.bfloat16)
    xw = (h_prev.float() * w_prev.float()).to(torch.bfloat16)
    for _ in range(3):
        h, hw, sq = gemm(inputs.x, residual=res, norm_weight=weight)
        check(h, fp64(inputs.x, wd) + res.double(), torch.bfloat16)
        torch.testing.assert_close(sq.double(), chunk_sums(h), rtol=1e-5, atol=0, msg=f"seed {s}")
        assert torch.equal(hw, (h.float() * weight.float()).to(torch.bfloat16)), f"seed {s}"
        check(gemm(xw, rms=(chunk_sums(h_prev).float(), EPS)), fp64(xn, wd), torch.bfloat16)
