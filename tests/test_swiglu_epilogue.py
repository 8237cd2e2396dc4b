"""The SwiGLU epilogue (fused_gemm.fused_kernel's SWIGLU_OUT,
split_k_parts._store): a gate_up GEMM whose weight columns come in (gate,
up) pairs returns silu(gate) * up [M, N // 2], from the rounded pair in fp32
and rounded once. Against fp64 on the dequantized weights (a tolerance the
two likeliest wrong epilogues fail: gate and up swapped, the columns taken
as halves); ragged M and N, K off the K block, split-K even and uneven,
TMA, ACC_SCALE, NVFP4, after the RMS scale; the triton backend's other
paths by torch after the GEMM (fused_gemm.silu_mul_pairs)."""

import pytest
import torch

from qgemm_bench.operators import int4_gemm, nvfp4_gemm
from qgemm_bench.operators.common import rel_error
from qgemm_bench.operators.formats import INT4, NVFP4
from tests.support import CUDA, DT, TOL, case, check, fp64, needs_gpu, seed, stored_target, ulp
from tests.support import triton_config as cfg
from tests.test_fused_norm import EPS, chunk_sums, gemm_of
from tests.test_swiglu_prologue import triton_gemm

# tl.sigmoid(g) is 1 / (1 + exp(-g)): the interpreter's numpy exp overflows to
# inf for gates below about -88 (sums of K = 1408 int4 weights reach them) and
# warns; the sigmoid is then 0, as on the GPU, and each output is still
# checked against fp64.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning:triton.runtime.interpreter")


def pairs64(y: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up in fp64 for y [M, 2I] with columns in (gate, up) pairs."""
    g, u = y.double().unflatten(-1, (-1, 2)).unbind(-1)
    return torch.nn.functional.silu(g) * u


def check_epilogue(out, y64, dtype=DT):
    """out against fp64 of the pairs' silu(gate) * up, and far from the two
    likeliest wrong epilogues (so the tolerance can fail)."""
    check(out, pairs64(y64), dtype)
    g, u = y64.unflatten(-1, (-1, 2)).unbind(-1)
    halves = y64.chunk(2, dim=-1)
    for wrong in (torch.nn.functional.silu(u) * g, torch.nn.functional.silu(halves[0]) * halves[1]):
        assert rel_error(out, wrong) > 3 * TOL[dtype]


# (fmt, shape (M, K, N), bm, bn, bk, split, extra): N 100 ends mid-tile; 11 K blocks over 3 splits; K off the
# K block; TMA; ACC_SCALE; NVFP4.
CASES = [(INT4, (3, 1408, 100), 16, 64, 128, 3, {}), (INT4, (5, 1408, 72), 16, 32, 256, 2, {}),
         (INT4, (33, 1280, 136), 64, 64, 64, 1, {"TMA": True}),
         (INT4, (5, 1280, 136), 16, 64, 128, 2, {"ACC_SCALE": True}),
         (NVFP4, (3, 1008, 100), 16, 64, 128, 3, {})]


@pytest.mark.parametrize("fmt,shape,bm,bn,bk,split,extra", CASES)
def test_the_epilogue_multiplies_silu_gate_times_up_of_each_pair(fmt, shape, bm, bn, bk, split, extra):
    s = seed()
    g, inputs, wd = gemm_of(fmt, shape, {**cfg(bm=bm, bn=bn, bk=bk, split=split), **extra}, s)
    x = inputs.x
    out = g(x, swiglu_out=True)
    assert out.shape == (shape[0], shape[2] // 2), f"seed {s}"
    check_epilogue(out, fp64(x, wd))
    assert torch.equal(g(x, swiglu_out=True), out), f"seed {s}"  # again: the split workspace left ready
    # The torch form (the other paths') rounds as the kernel does, from an fp32 silu that may differ in its
    # last bit: the same GEMM, each output at most one rounding step apart.
    from qgemm_bench.backends.triton_kernels.fused_gemm import silu_mul_pairs

    alt = silu_mul_pairs(g(x))
    assert ((out.double() - alt.double()).abs() <= ulp(alt)).all(), f"seed {s}"


def test_the_epilogue_follows_the_rms_scale():
    """gate_up in a --fused-norms layer: the rows scaled by 1 / RMS, then the pairs' silu(gate) * up."""
    s = seed()
    m, k, n = 3, 1408, 100
    g, inputs, wd = gemm_of(INT4, (m, k, n), cfg(bm=16, bn=64, bk=128, split=3), s)
    x = inputs.x
    grow = torch.arange(1, m + 1, dtype=torch.float64, device=x.device)[:, None] ** 2
    x_rows = x.double() * grow  # sums of squares of rows i + 1 times x's: each row's RMS
    rms = torch.rsqrt((x_rows ** 2).mean(-1, keepdim=True) + EPS)
    out = g(x, rms=(chunk_sums(x_rows).float(), EPS), swiglu_out=True)
    check_epilogue(out, fp64(x, wd) * rms)


@pytest.mark.parametrize("path", ["split", "dequant", "fused"])
def test_the_triton_backends_other_paths_compute_the_pairs_by_torch_after(path):
    gemm, inputs = triton_gemm((3, 768, 72), path, cfg(bm=16, bn=32, bk=128, split=2), seed())
    wd = int4_gemm.dequantize(inputs)
    check_epilogue(gemm(inputs.x, swiglu_out=True), fp64(inputs.x, wd))


@pytest.mark.parametrize("path", ["split", "fused"])
def test_an_odd_n_or_a_residual_is_one_value_error(path):
    gemm, inputs = triton_gemm((3, 256, 64), path, cfg(bm=16, bn=32, bk=64), seed())
    res = torch.zeros(3, 64, dtype=inputs.x.dtype, device=inputs.x.device)
    with pytest.raises(ValueError, match="swiglu_out"):
        gemm(inputs.x, residual=res, swiglu_out=True)
    with pytest.raises(ValueError, match="swiglu_out"):
        gemm.fused()(inputs.x, residual=res, swiglu_out=True)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("op", [int4_gemm, nvfp4_gemm], ids=["int4", "nvfp4"])
@pytest.mark.parametrize("m", [1, 16, 33, 64, 512])
def test_the_stores_gate_up_configs_take_the_epilogue_in_bf16(op, m):
    """The triton backend at Llama-3-8B's gate_up (K = 4096, N = 28672) with
    the store's configs, after the RMS scale as a --fused-norms layer calls
    it, ten calls each (split-K atomics; and the NVFP4 M = 64 tile, whose
    epilogue adds writes to a pending wgmma's A-operand registers under
    Triton 3.6's schedule: fused_gemm.wrong_on_sm90's hazard)."""
    from qgemm_bench.backends.triton_dispatch import make_weight_only
    from qgemm_bench.backends.triton_ops import weight_args

    s = seed()
    shape = (m, 4096, 28672)
    settings = {"group_size": 128} if op is int4_gemm else {}
    inputs = op.make_inputs(case(op, shape, torch.bfloat16, CUDA, **settings), s)
    wd = op.dequantize(inputs)
    gemm = make_weight_only(*weight_args(op.NAME, inputs), target=stored_target())
    x = inputs.x
    grow = torch.arange(1, m + 1, dtype=torch.float64, device=CUDA)[:, None] ** 0.5
    x_rows = x.double() * grow
    rms = torch.rsqrt((x_rows ** 2).mean(-1, keepdim=True) + EPS)
    want = fp64(x, wd) * rms
    for _ in range(10):
        check_epilogue(gemm(x, rms=(chunk_sums(x_rows).float(), EPS), swiglu_out=True), want, torch.bfloat16)
