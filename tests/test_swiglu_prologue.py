"""The SwiGLU prologue (fused_gemm.fused_kernel's SWIGLU): the GEMM takes
h = [gate | up] and multiplies silu(gate) * up, computed in fp32 as it loads
its x tiles and rounded once to h's dtype. Against fp64 on the dequantized
weights with the activation in fp64 (a tolerance a wrong prologue fails:
gate and up swapped, or silu left out, are checked to fail it); ragged M and
N, K off the K block, split-K even and uneven, TMA weight loads, ACC_SCALE,
HALVES, NVFP4, with the output parts (residual, norm weight, RMS scale); the
triton backend's other paths by torch first (fused_gemm.silu_mul)."""

import pytest
import torch

from qgemm_bench.operators import int4_gemm
from qgemm_bench.operators.common import rel_error
from qgemm_bench.operators.formats import INT4, NVFP4
from tests.support import CUDA, DT, TOL, case, check, fp64, needs_gpu, seed, stored_target, target_for, ulp
from tests.support import triton_config as cfg
from tests.test_fused_norm import EPS, chunk_sums, gemm_of


def act64(h: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up in fp64, unrounded."""
    g, u = h.double().chunk(2, dim=-1)
    return torch.nn.functional.silu(g) * u


def gate_up(m: int, k: int, s: int, device, dtype=DT) -> torch.Tensor:
    """h [m, 2k]: gates spread over silu's bend (about -6..6), ups around 1."""
    gen = torch.Generator().manual_seed(s)
    return torch.cat([2 * torch.randn(m, k, generator=gen), 1 + torch.randn(m, k, generator=gen)], 1).to(dtype) \
        .to(device)


def check_prologue(out, h, wd, dtype=DT):
    """out against fp64 of silu(gate) * up, and far from the two likeliest
    wrong prologues (so the tolerance can fail)."""
    check(out, fp64(act64(h), wd), dtype)
    g, u = h.double().chunk(2, dim=-1)
    for wrong in (torch.nn.functional.silu(u) * g, g * u):
        assert rel_error(out, wrong @ wd.double()) > 3 * TOL[dtype]


# (fmt, shape (M, K, N), bm, bn, bk, split, extra): 11 K blocks over 3 splits; K off the K block (1408 in
# 256-k blocks, NVFP4 1008 in 128); TMA (the weights by TMA, x by pointers); ACC_SCALE; HALVES.
CASES = [(INT4, (3, 1408, 100), 16, 64, 128, 3, {}), (INT4, (5, 1408, 72), 16, 64, 256, 2, {}),
         (INT4, (33, 1280, 72), 64, 64, 64, 1, {"TMA": True}),
         (INT4, (5, 1280, 136), 16, 64, 128, 2, {"ACC_SCALE": True}),
         (INT4, (4, 1024, 136), 16, 64, 128, 2, {"ACC_SCALE": True, "HALVES": True}),
         (NVFP4, (3, 1008, 100), 16, 64, 128, 3, {})]


@pytest.mark.parametrize("fmt,shape,bm,bn,bk,split,extra", CASES)
def test_the_prologue_multiplies_silu_gate_times_up(fmt, shape, bm, bn, bk, split, extra):
    from qgemm_bench.backends.triton_kernels.fused_gemm import silu_mul

    s = seed()
    g, inputs, wd = gemm_of(fmt, shape, {**cfg(bm=bm, bn=bn, bk=bk, split=split), **extra}, s)
    h = gate_up(shape[0], shape[1], s, inputs.x.device)
    out = g(h, swiglu=True)
    check_prologue(out, h, wd)
    assert torch.equal(g(h, swiglu=True), out), f"seed {s}"  # again: the split workspace left ready
    # The torch form (the other paths') rounds the activation as the kernel does, from an fp32 silu whose last
    # bit may differ: the same GEMM, a few activations one rounding step apart at most (seed 774945344's NVFP4
    # case: one step of one activation moved an output 0.002, rel err 1.4e-4 over all, past a TOL / 30 bound).
    a = silu_mul(h)
    alt = g(a)
    step = (ulp(a)[:, :, None] * wd.double().abs()[None]).amax(1)  # [M, N]: one activation's step, the largest
    bound = 4 * step + ulp(out) + ulp(alt) + 2**-20 * (a.double().abs() @ wd.double().abs())
    assert ((out.double() - alt.double()).abs() <= bound).all(), f"seed {s}"


@pytest.mark.parametrize("fmt,shape,bm,bn,bk,split,extra", [CASES[0], CASES[2], CASES[5]])
def test_the_prologue_combines_with_the_output_parts(fmt, shape, bm, bn, bk, split, extra):
    """down_proj in a --fused-norms layer: silu(gate) * up in, h = residual + y
    with h * norm weight and h's sums of squares out; and the rows scaled by
    1 / RMS (the other output part)."""
    s = seed()
    g, inputs, wd = gemm_of(fmt, shape, {**cfg(bm=bm, bn=bn, bk=bk, split=split), **extra}, s)
    m, k, n = shape
    h = gate_up(m, k, s, inputs.x.device)
    gen = torch.Generator().manual_seed(s + 1)
    res = torch.randn(m, n, dtype=DT, generator=gen).to(h.device)
    weight = (1 + 0.2 * torch.randn(n, generator=gen)).to(DT).to(h.device)
    y, xw, sq = g(h, residual=res, norm_weight=weight, swiglu=True)
    check(y, fp64(act64(h), wd) + res.double())
    torch.testing.assert_close(sq.double(), chunk_sums(y), rtol=1e-5, atol=0, msg=f"seed {s}")
    assert torch.equal(xw, (y.float() * weight.float()).to(DT)), f"seed {s}"
    grow = torch.arange(1, m + 1, dtype=torch.float64, device=h.device)[:, None] ** 2
    x_rows = act64(h) * grow  # sums of squares of rows i + 1 times silu(gate) * up's: each row's RMS
    rms = torch.rsqrt((x_rows ** 2).mean(-1, keepdim=True) + EPS)
    check(g(h, rms=(chunk_sums(x_rows).float(), EPS), swiglu=True), fp64(act64(h), wd) * rms)


def triton_gemm(shape, path: str, c: dict, s: int):
    """(the triton backend's WeightOnlyGemm on `path` at config c, its int4
    g128 inputs) of shape (M, K, N), seed s."""
    from qgemm_bench.backends.triton_dispatch import make_weight_only

    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, group_size=128), s)
    return make_weight_only(inputs.w, inputs.scales, None, INT4, 128, c, path, target=target_for(inputs.w)), inputs


@pytest.mark.parametrize("path", ["split", "dequant", "fused"])
def test_the_triton_backends_other_paths_compute_silu_times_up_by_torch_first(path):
    s = seed()
    gemm, inputs = triton_gemm((3, 768, 72), path, cfg(bm=16, bn=32, bk=128, split=2), s)
    wd = int4_gemm.dequantize(inputs)
    h = gate_up(3, 768, s, inputs.x.device)
    check_prologue(gemm(h, swiglu=True), h, wd)
    res = torch.randn(3, 72, dtype=DT, generator=torch.Generator().manual_seed(s)).to(h.device)
    y, sq = gemm(h, residual=res, swiglu=True)
    check(y, fp64(act64(h), wd) + res.double())
    torch.testing.assert_close(sq.double(), chunk_sums(y), rtol=1e-5, atol=0, msg=f"seed {s}")


@pytest.mark.parametrize("path", ["split", "fused"])
def test_an_h_of_the_wrong_width_is_one_value_error(path):
    gemm, inputs = triton_gemm((3, 256, 64), path, cfg(bm=16, bn=32, bk=64), seed())
    with pytest.raises(ValueError, match=r"swiglu: h must be \[M, 512\]"):
        gemm(inputs.x, swiglu=True)  # x [M, K]: gate and up not there
    with pytest.raises(ValueError, match="swiglu: h must be"):
        gemm.fused()(inputs.x, swiglu=True)


def test_silu_mul_rounds_once_from_fp32():
    """fused_gemm.silu_mul: silu and the product in fp32, one rounding (the
    kernel's, Inductor's); eager F.silu(gate) * up rounds twice and so
    differs from it in the last bit somewhere."""
    from qgemm_bench.backends.triton_kernels.fused_gemm import silu_mul

    h = gate_up(64, 512, seed(), "cpu", torch.bfloat16)
    got = silu_mul(h)
    exact = act64(h)
    ulp = torch.finfo(torch.bfloat16).eps * exact.abs().clamp_min(torch.finfo(torch.bfloat16).tiny)
    assert ((got.double() - exact).abs() <= ulp).all()  # one rounding of an fp32 value: within an ulp
    once = exact.to(torch.bfloat16)  # fp64 rounded once: fp32's error crosses a rounding edge rarely
    assert (got != once).float().mean() < 1e-3
    gb, ub = h.chunk(2, dim=-1)
    assert not torch.equal(torch.nn.functional.silu(gb) * ub, got)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("m", [1, 16, 64, 512])
def test_the_stores_down_proj_configs_take_the_prologue_in_bf16(m):
    """The triton backend at Llama-3-8B's down_proj (K = 14336, N = 4096)
    with the store's configs (int4 TMA weight loads with split-K at M = 1
    and 16, WS tiles at 64, which the prologue leaves for fused_kernel; at a
    prefill's 512 silu_mul by torch first, SWIGLU_MAX_M): with the residual
    part too, three calls each (split-K atomics)."""
    from qgemm_bench.backends.triton_dispatch import make_weight_only
    from qgemm_bench.backends.triton_ops import weight_args

    s = seed()
    shape = (m, 14336, 4096)
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, torch.bfloat16, CUDA, group_size=128), s)
    wd = int4_gemm.dequantize(inputs)
    gemm = make_weight_only(*weight_args("int4_gemm", inputs), target=stored_target())
    h = gate_up(m, shape[1], s, CUDA, torch.bfloat16)
    res = torch.randn(m, shape[2], dtype=torch.bfloat16, device=CUDA)
    weight = torch.full((shape[2],), 1.5, dtype=torch.bfloat16, device=CUDA)
    for _ in range(3):
        check_prologue(gemm(h, swiglu=True), h, wd, torch.bfloat16)
        y, _, sq = gemm(h, residual=res, norm_weight=weight, swiglu=True)
        check(y, fp64(act64(h), wd) + res.double(), torch.bfloat16)
        torch.testing.assert_close(sq.double(), chunk_sums(y), rtol=1e-5, atol=0, msg=f"seed {s}")
