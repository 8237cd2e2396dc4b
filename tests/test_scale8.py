"""SCALE8 (fused_gemm.fused_kernel): NVFP4 block scales read as their E4M3
bytes and converted in the kernel, on the small scale tile, to the bf16 x
2^118 values FusedGemm otherwise stores. The conversion over every byte
against torch's; the fused kernel against fp64 on the dequantized weights
and bit for bit against the same config without SCALE8 (ragged shapes,
split-K, fragment and K order, zero and subnormal scales); the configs it is
refused in; its twins in the tuner's pool. On the CPU the interpreter's
non-PTX path in fp16, on a GPU the PTX decode in bf16."""

import pytest
import torch
import triton
import triton.language as tl

from qgemm_bench.backends.kmajor_layout import TILE, to_kmajor
from qgemm_bench.backends.triton_kernels import decode, fused_gemm
from qgemm_bench.backends.triton_kernels.split_k_configs import describe
from qgemm_bench.operators import nvfp4_gemm
from qgemm_bench.operators.common import rel_error
from qgemm_bench.operators.formats import INT4, NVFP4
from tests.support import DEV, DT, TOL, case, check, fp64, seed, target_for
from tests.support import triton_config as cfg


@triton.jit
def _convert(b_ptr, out_ptr, BF16: tl.constexpr):
    v = decode.e4m3_x2_118(tl.load(b_ptr + tl.arange(0, 256)))
    if BF16:
        tl.store(out_ptr + tl.arange(0, 256), v.to(tl.bfloat16))
    else:
        tl.store(out_ptr + tl.arange(0, 256), v)


def host_scales(b: torch.Tensor) -> torch.Tensor:
    """FusedGemm's bf16 x 2^118 block scales of E4M3 bytes b (without SCALE8)."""
    return (b.view(torch.float8_e4m3fn).float() * decode.EXP2_118).to(torch.bfloat16)


def test_conversion_of_every_e4m3_byte_is_exact():
    # Every byte: zero and -0, the subnormals (0x01-0x07), 448 (0x7E), negatives, NaN (0x7F, 0xFF). The
    # fp32 result is the bf16 value itself (no rounding left); on a GPU its bf16 bits are the host's. NaN
    # stays NaN on the GPU (the hardware conversion); the interpreter's E4M3 emulation has no NaN (it reads
    # 0x7F as 480), so there only the other 254 bytes are checked.
    b = torch.arange(256, dtype=torch.int32).to(torch.uint8).to(DEV)
    want = host_scales(b.cpu())
    out = torch.empty(256, dtype=torch.float32, device=DEV)
    _convert[(1,)](b, out, BF16=False)
    nan = want.isnan()
    assert nan.nonzero().flatten().tolist() == [0x7F, 0xFF]
    assert torch.equal(out.cpu()[~nan].view(torch.int32), want[~nan].float().view(torch.int32))
    if DEV.type == "cuda":
        assert torch.equal(out.cpu().isnan(), nan)
    assert out.cpu()[0x80].item() == 0.0 and out.cpu()[0x80].signbit() and out.cpu()[0x01].item() == 2.0**109
    if DEV.type == "cuda":
        out16 = torch.empty(256, dtype=torch.bfloat16, device=DEV)
        _convert[(1,)](b, out16, BF16=True)
        assert torch.equal(out16.cpu()[~nan].view(torch.int16), want[~nan].view(torch.int16))
        assert out16.cpu().isnan().equal(nan)


def inputs_with_small_scales(shape, s):
    """nvfp4_gemm inputs with some block scales zero, -0 and E4M3 subnormals."""
    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, shape), s)
    bs = inputs.block_scales.view(torch.uint8).clone()
    g = torch.Generator().manual_seed(s)
    pick = torch.randint(0, 4, bs.shape, generator=g).to(bs.device)
    small = torch.randint(1, 8, bs.shape, generator=g, dtype=torch.int32).to(torch.uint8).to(bs.device)
    bs = torch.where(pick == 0, small, torch.where(pick == 1, torch.zeros_like(bs), bs))
    bs[0, 0] = 0x80  # -0
    return nvfp4_gemm.Inputs(inputs.x, inputs.w, bs.view(torch.float8_e4m3fn), inputs.tensor_scale)


def gemm(inputs, config, frag=True, tile=TILE):
    return fused_gemm.FusedGemm(inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16,
                                config, frag, tile, target=target_for(inputs.w))


# (shape, bn, bk, split, frag, tiled): M 1, 3 and 16 at K 256 and 384 (3 K blocks of 128 in 2 splits of
# unequal length; 6 of 64), N 72 and 136 (ragged tiles), fragment order tiled, and K order untiled.
CASES = [((1, 256, 72), 64, 128, 2, True, True), ((3, 384, 136), 128, 128, 2, True, True),
         ((16, 384, 72), 64, 64, 4, True, True), ((3, 256, 136), 64, 128, 1, False, False),
         ((1, 384, 72), 64, 128, 3, False, False)]


@pytest.mark.parametrize("shape,bn,bk,split,frag,tiled", CASES)
def test_scale8_vs_fp64_and_the_bf16_scales(shape, bn, bk, split, frag, tiled):
    s = seed()
    inputs = inputs_with_small_scales(shape, s)
    ref = fp64(inputs.x, nvfp4_gemm.dequantize(inputs))
    c = cfg(bm=16, bn=bn, bk=bk, split=split)
    g8 = gemm(inputs, {**c, "SCALE8": True}, frag, TILE if tiled else None)
    out = g8(inputs.x)
    check(out, ref)
    check(g8(inputs.x), ref)  # the split workspace left ready
    assert g8._scales8 is not None and g8._scales8.dtype == torch.uint8
    # The same scale values in the same loop: the same sums, bit for bit (on a GPU where one program sums
    # each tile: split-K's atomics add the splits in any order).
    plain = gemm(inputs, c, frag, TILE if tiled else None)(inputs.x)
    if DEV.type == "cpu" or split == 1:
        assert torch.equal(out, plain), f"seed {s}"
    else:
        assert rel_error(out, plain.double()) <= TOL[DT] / 3, f"seed {s}"


def test_scale8_bytes_are_the_layouts_and_only_they_are_read():
    # FusedGemm.scales8 (from the bf16 scales) is the K-major layout's own bytes; resident_at(m) names
    # what the config for M reads: the bytes with SCALE8 (half the bf16 scales' size), else the bf16.
    s = seed()
    inputs = inputs_with_small_scales((3, 384, 72), s)
    c = cfg(bm=16, bn=64, bk=128, split=2)
    g = gemm(inputs, lambda m: {**c, "SCALE8": True} if m == 1 else c)
    assert g._scales8 is None and len(g.resident) == 3  # not made until a SCALE8 config asks
    plain = g.resident_at(3)
    assert plain[1] is g.kmajor.scales and g._scales8 is None
    s8 = g.resident_at(1)[1]
    want = to_kmajor(inputs.w, inputs.block_scales.view(torch.uint8), 16, True, TILE).scales
    assert s8.dtype == torch.uint8 and torch.equal(s8, want), f"seed {s}"
    assert s8.nbytes * 2 == g.kmajor.scales.nbytes and g.resident[2] is s8
    g.config = lambda m: {**c, "SCALE8": True, "WS": fused_gemm.ws_tiles(16, 64, 128, 8, splits=2)}
    assert [t.dtype for t in g.resident_at(1)[1:3]] == [g.kmajor.scales.dtype, torch.uint8]  # WS reads bf16


def test_scale8_is_refused_outside_nvfp4_pointer_loads():
    from qgemm_bench.backends.triton_kernels import weight_only_configs as woc
    from qgemm_bench.operators import int4_gemm

    s = seed()
    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, (3, 256, 64)), s)
    for c in (fused_gemm.config(64, 128, 128, 1, 4, 3, tma=True, scale8=True),
              fused_gemm.config(64, 128, 128, 1, 4, 3, tma="x", scale8=True)):
        with pytest.raises(ValueError, match="SCALE8 is for NVFP4 with pointer loads only"):
            gemm(inputs, c)(inputs.x)
    i4 = int4_gemm.make_inputs(case(int4_gemm, (3, 256, 64), group_size=128), s)
    g = fused_gemm.FusedGemm(i4.w, i4.scales, None, INT4, 128, cfg(bm=16, bn=64, bk=128, SCALE8=True),
                             target=target_for(i4.w))
    with pytest.raises(ValueError, match="SCALE8 is for NVFP4 with pointer loads only"):
        g(i4.x)
    # The table files: in NVFP4's fused entries only, a bool, never with TMA.
    ok = fused_gemm.config(16, 128, 128, 8, 4, 3, scale8=True)

    def table(kernel, config):
        return {"gpu": "h200", "kernels": {kernel: {"M1_K8192_N8192": {"config": config, "us": 9.0}}}}

    woc.check_table(table("nvfp4_gemm_fused", ok), "t")
    for kernel, config, why in (("int4_gemm_fused", ok, "SCALE8 is for NVFP4"),
                                ("nvfp4_gemm", ok, "SCALE8 is the fused kernel's only"),
                                ("nvfp4_gemm_fused", {**ok, "TMA": True}, "SCALE8 is for NVFP4"),
                                ("nvfp4_gemm_fused", {**ok, "SCALE8": 1}, "SCALE8=1 must be true or false")):
        with pytest.raises(ValueError, match=why):
            woc.check_table(table(kernel, config), "t")


def test_scale8_twins_in_the_nvfp4_pool_and_their_label():
    # Each NVFP4 candidate up to SPLIT_POOL_MAX_M right before its SCALE8 twin; none for int4 or above;
    # the tuner's whole pools (--full, the table mode) time them, a prior table without them prunes them.
    from qgemm_bench.tuning import candidates as cands

    for m in (1, 16, 64):
        pool = fused_gemm.pool(m, NVFP4)
        plain = [c for c in pool if not c.get("SCALE8")]
        assert plain and [c for c in pool if c.get("SCALE8")] == [{**c, "SCALE8": True} for c in plain]
        assert all(pool.index({**c, "SCALE8": True}) == pool.index(c) + 1 for c in plain)
        assert not any(c.get("SCALE8") for c in fused_gemm.pool(m, INT4))
    assert not any(c.get("SCALE8") for c in fused_gemm.pool(128, NVFP4) + fused_gemm.pool(1024, NVFP4))
    won = fused_gemm.config(16, 128, 128, 8, 4, 3)
    assert describe({**won, "SCALE8": True}) == "16x128x128 split 8 w4 s3 scale8"
    assert {**won, "SCALE8": True, "PDL": 2} in cands.unit_pool(NVFP4, "fused", 1, None)
    prior = {"M1_K8192_N8192": {"config": {**won, "PDL": 2}, "us": 16.0}}
    assert not any(c.get("SCALE8") for c in cands.unit_pool(NVFP4, "fused", 1, prior, {**won, "PDL": 2}))
