"""int4_gemm: the operator against independent fp64 math, every backend
against the reference, our Triton and Helion kernels on ragged shapes and
every group size, and the tritonbench entry points. GPU variants are marked
`gpu` (run with -m gpu on a CUDA machine)."""

import re

import numpy as np
import pytest
import torch

from qgemm_bench.backends import fbgemm, gemlite, registry, tinygemm
from qgemm_bench.errors import InputError
from qgemm_bench.integrations import tritonbench as tb
from qgemm_bench.operators import formats, int4_gemm
from qgemm_bench.operators.common import rel_error
from qgemm_bench.operators.formats import INT4, NVFP4
from qgemm_bench.types import Shape
from tests.support import (
    ASM,
    CPU,
    CUDA,
    DEV,
    DT,
    TOL,
    case,
    check,
    check_on_gpu,
    check_ws_calls,
    fake_target,
    fp64,
    interpreter,
    needs_gpu,
    np_unpack,
    rel_np,
    run_backend,
    seed,
    stored_target,
    target_for,
    triton_config,
)

# ------------------------------------------------------------------ the operator


@pytest.mark.parametrize("shape", [(1, 128, 64), (3, 384, 40), (17, 256, 37)])
@pytest.mark.parametrize("group", [32, 128, "channel", None])
def test_reference_vs_fp64(shape, group):
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, torch.float16, CPU, group_size=group), seed())
    codes = np_unpack(inputs.w.numpy().view(np.uint8))
    q = np.where(codes >= 8, codes - 16, codes).astype(np.float64)
    if inputs.scales is not None:
        q = q * np.repeat(inputs.scales.double().numpy(), inputs.group_size, axis=0)
    expected = inputs.x.double().numpy() @ q
    got = int4_gemm.reference(inputs)
    assert got.dtype == torch.float32 and got.shape == (shape[0], shape[2])
    assert rel_np(got.double().numpy(), expected) < 1e-6


def test_make_inputs_is_seeded():
    c = case(int4_gemm, (3, 256, 40), torch.float16, CPU)
    a, b, d = (int4_gemm.make_inputs(c, s) for s in (1, 1, 2))
    assert torch.equal(a.x, b.x) and torch.equal(a.w, b.w) and torch.equal(a.scales, b.scales)
    assert not torch.equal(a.w, d.w)


def test_scales_take_the_activation_dtype_and_group_is_resolved():
    assert int4_gemm.make_inputs(case(int4_gemm, (1, 128, 8), torch.bfloat16, CPU), 0).scales.dtype == torch.bfloat16
    assert int4_gemm.make_inputs(case(int4_gemm, (1, 128, 8), torch.float16, CPU), 0).scales.dtype == torch.float16
    per_channel = int4_gemm.make_inputs(case(int4_gemm, (1, 256, 8), torch.float16, CPU, group_size="channel"), 0)
    assert per_channel.group_size == 256 and per_channel.scales.shape == (1, 8)


@pytest.mark.parametrize("shape,settings,message", [
    ((1, 129, 8), {}, "odd"),
    ((1, 192, 8), {"group_size": 128}, "not divisible by group_size=128"),
    ((0, 128, 8), {}, "must be positive"),
])
def test_validate_refuses_bad_shapes(shape, settings, message):
    with pytest.raises(InputError, match=message):
        int4_gemm.validate(Shape(*shape), int4_gemm.Settings(**settings))


def test_settings_labels_round_trip():
    for g in (128, 32, "channel", None):
        s = int4_gemm.Settings(g)
        assert int4_gemm.Settings.from_label(s.label()) == s
    assert int4_gemm.Settings().as_dict() == {"group_size": 128}
    assert int4_gemm.parse_group_size("channel") == "channel" and int4_gemm.parse_group_size("none") is None
    with pytest.raises(InputError, match="positive even"):
        int4_gemm.parse_group_size("3")


def test_flops_and_minimum_bytes():
    s = Shape(16, 8192, 8192)
    assert int4_gemm.flops(s, int4_gemm.Settings()) == 2 * 16 * 8192 * 8192
    # x + int4 weights + bf16 scales per 128 + y
    assert int4_gemm.bytes(s, torch.bfloat16, int4_gemm.Settings(128)) == (
        16 * 8192 * 2 + 8192 * 8192 // 2 + 64 * 8192 * 2 + 16 * 8192 * 2)
    assert int4_gemm.bytes(s, torch.bfloat16, int4_gemm.Settings(None)) == 16 * 8192 * 4 + 8192 * 8192 // 2
    assert int4_gemm.bytes(s, torch.bfloat16, int4_gemm.Settings("channel")) == (
        16 * 8192 * 4 + 8192 * 8192 // 2 + 8192 * 2)


def test_tolerance_catches_plausible_kernel_bugs():
    """The accuracy check must fail the bugs a kernel actually makes."""
    inputs = int4_gemm.make_inputs(case(int4_gemm, (17, 384, 96), torch.float16, CPU), 0)
    ref, tol = int4_gemm.reference(inputs), int4_gemm.tolerance(torch.float16)
    x, w, s = inputs.x, inputs.w, inputs.scales
    q = formats.unpack_int4(w).half()
    swapped = torch.stack((q[1::2], q[0::2]), 1).reshape(q.shape)  # nibble order swapped
    last_k_tile_dropped = q.clone()
    last_k_tile_dropped[-16:] = 0
    wrong_group = q * s.half()[torch.arange(384) // 128 % 2]  # scale of the wrong group
    for bad in (swapped * s.half().repeat_interleave(128, 0), last_k_tile_dropped * s.half().repeat_interleave(128, 0),
                wrong_group):
        assert rel_error(x @ bad, ref) > tol
    y = x @ (q * s.half().repeat_interleave(128, 0))
    y[-1] = 0  # one row of M unwritten
    assert rel_error(y, ref) > tol


# ------------------------------------------------------------------ every backend


BACKENDS = [b.name for b in registry.for_op("int4_gemm")]


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("shape", [(1, 128, 64), (17, 384, 96), (5, 256, 37)])
@pytest.mark.parametrize("group", [64, 128, "channel", None])
def test_every_backend_vs_reference(name, shape, group):
    c = case(int4_gemm, shape, group_size=group)
    if reason := registry.get("int4_gemm", name).why_not(c):
        pytest.skip(reason)
    out, inputs, prepared = run_backend(int4_gemm, name, c)
    check(out, int4_gemm.reference(inputs))
    assert prepared.apply is not None  # weight-only backends apply their weights to any activation
    x2 = torch.randn(3, shape[1], device=c.device).to(c.dtype)
    check(prepared.apply(x2), x2.float() @ int4_gemm.dequantize(inputs))


def test_tinygemm_says_why_not():
    tiny = registry.get("int4_gemm", "tinygemm")
    assert tiny.why_not(case(int4_gemm, (1, 256, 64), torch.bfloat16, CPU)) == "needs a CUDA device"
    cuda = torch.device("cuda", 0)  # why_not only reads the case, it never touches the device
    mk = lambda shape, dtype=torch.bfloat16, g=128: case(int4_gemm, shape, dtype, cuda, group_size=g)
    assert tiny.why_not(mk((1, 256, 64))) is None
    assert "bfloat16" in tiny.why_not(mk((1, 256, 64), torch.float16))
    assert "N % 8" in tiny.why_not(mk((1, 256, 37)))
    assert "group sizes" in tiny.why_not(mk((1, 512, 64), g=512))
    assert tiny.why_not(mk((1, 256, 64), g=None)) is None
    assert tinygemm.group_for(384, None) == 128 and tinygemm.group_for(256, None) == 256


# ------------------------------------------------------------------ the peers' layouts (pure tensor code)


def bf16_dequant_fp64(codes_kn, scales_kn):
    """Independent: signed codes x scales in float64 (exact), rounded once to bf16."""
    return torch.from_numpy(codes_kn * scales_kn).to(torch.bfloat16)


def signed(codes):
    return np.where(codes >= 8, codes - 16, codes).astype(np.float64)


@pytest.mark.parametrize("group", [64, 128, "channel", None])
def test_fbgemm_operands_hold_our_weights(group):
    k, n = 512, 48
    inputs = int4_gemm.make_inputs(case(int4_gemm, (1, k, n), torch.bfloat16, CPU, group_size=group), seed())
    wq, scale, zero = fbgemm.operands(inputs.w, inputs.scales, k, n)
    assert wq.shape == (n, k // 2) and wq.dtype == torch.int8 and wq.data_ptr() != inputs.w.data_ptr()
    assert scale.dtype == torch.bfloat16 and scale.shape[1] == n and not zero.any()
    codes = signed(np_unpack(wq.numpy().view(np.uint8).T))  # its [N, K//2] bytes: low nibble = even k
    g = k // scale.shape[0]
    s = np.repeat(scale.double().numpy(), g, axis=0)
    assert torch.equal(bf16_dequant_fp64(codes, s), int4_gemm.dequantize(inputs, torch.bfloat16))


@pytest.mark.parametrize("group", [32, 128, "channel", None])
def test_gemlite_operands_hold_our_weights(group):
    k, n = 256, 128
    inputs = int4_gemm.make_inputs(case(int4_gemm, (1, k, n), torch.bfloat16, CPU, group_size=group), seed())
    u, s, z = gemlite.operands(inputs.w, inputs.scales, k, n)
    assert u.shape == (n, k) and u.dtype == torch.uint8 and int(u.max()) <= 15
    assert s.shape[0] == n and s.dtype == torch.bfloat16 and torch.equal(z, torch.full_like(s, 8))
    g = k // s.shape[1]
    # gemlite's dequantization: (u - zero) * scale, per group of K
    w = (u.double().numpy() - z.double().numpy().repeat(g, axis=1)) * s.double().numpy().repeat(g, axis=1)
    assert torch.equal(torch.from_numpy(w.T.copy()).to(torch.bfloat16), int4_gemm.dequantize(inputs, torch.bfloat16))


def test_gemlite_scales_keep_zero_rows_past_the_end():
    t = torch.arange(6.0).reshape(3, 2)
    p = gemlite.padded(t, 4)
    assert isinstance(p, torch.nn.Parameter) and torch.equal(p, t) and p.stride() == t.stride()
    tail = torch.as_strided(p, (7, 2), p.stride())  # what an unmasked read past the last group sees
    assert torch.equal(tail[3:], torch.zeros(4, 2))


def test_peers_say_why_not():
    cuda = torch.device("cuda", 0)  # why_not reads the case only
    mk = lambda shape, g=128, dtype=torch.bfloat16: case(int4_gemm, shape, dtype, cuda, group_size=g)
    for b, bad_group in ((fbgemm, 32), (gemlite, 96)):
        reason = b.why_not(mk((1, 4096, 4096)))
        if reason is not None:  # not installed here: it says so, with the install command
            assert "not installed" in reason and "[peers]" in reason
            continue
        assert "group size" in b.why_not(mk((1, 4096, 4096), bad_group))
        assert "bfloat16" in b.why_not(mk((1, 4096, 4096), 128, torch.float16))
    assert fbgemm.why_not(case(int4_gemm, (1, 256, 64), torch.bfloat16, CPU)) == "needs a CUDA device"


# ------------------------------------------------------------------ our Triton kernel


cfg = triton_config

SHAPES = [(1, 128, 40), (3, 384, 96), (17, 384, 37), (80, 128, 96)]  # M=80 takes the fused path


def weight_only(inputs, config=None, path="auto"):
    from qgemm_bench.backends.triton_dispatch import make_weight_only

    return make_weight_only(inputs.w, inputs.scales, None, INT4, inputs.group_size or 2, config, path,
                            target=target_for(inputs.w))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("group", [32, 64, 128, "channel", None])
@pytest.mark.parametrize("config", [cfg(bk=64, split=1), cfg(bn=64, bk=128, split=2), cfg(bk=32, split=3)] +
                         [cfg(bk=32, split=3, DECODE_ASM=a) for a in ASM])
def test_triton_kernel_vs_fp64(shape, group, config):
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, group_size=group), seed())
    check(weight_only(inputs, config)(inputs.x), fp64(inputs.x, int4_gemm.dequantize(inputs)))


@pytest.mark.parametrize("group,bk", [(96, 64), (96, 128), (2, 32), (32, 128), (384, 256)])
def test_triton_kernel_any_group_vs_block(group, bk):
    # Groups that split a K block, span blocks, or neither (96 vs 64: scales per element).
    inputs = int4_gemm.make_inputs(case(int4_gemm, (5, 384, 40), group_size=group), seed())
    check(weight_only(inputs, cfg(bk=bk, split=2))(inputs.x), fp64(inputs.x, int4_gemm.dequantize(inputs)))


@pytest.mark.parametrize("path", ["split", "fused", "dequant"])
@pytest.mark.parametrize("group", [64, None])
@pytest.mark.parametrize("shape", [(3, 384, 40), (19, 192, 37)])
def test_triton_every_path_vs_fp64_and_repeatable(path, group, shape):
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, group_size=group), seed())
    ref = fp64(inputs.x, int4_gemm.dequantize(inputs))
    gemm = weight_only(inputs, cfg(bn=32, bk=32, split=3), path)
    check(gemm(inputs.x), ref)
    check(gemm(inputs.x), ref)  # the split path left its workspace and counters ready for the next call
    if path == "split":
        ws, count = gemm._workspace[shape[0]]
        assert float(ws.abs().sum()) == 0.0 and int(count.abs().sum()) == 0
    x2 = torch.randn(7, shape[1], device=DEV).to(DT)  # another M through the same prepared weights
    check(gemm(x2), fp64(x2, int4_gemm.dequantize(inputs)))


@pytest.mark.parametrize("m,path", [(64, "split"), (65, "fused"), (1024, "fused"), (1025, "dequant")])
def test_triton_auto_path_by_m(m, path):
    # The measured crossovers (weight_only.SPLIT_PATH_MAX_M, FUSED_MAX_M).
    inputs = int4_gemm.make_inputs(case(int4_gemm, (m, 64, 32), group_size=32), 0)
    gemm = weight_only(inputs, cfg(bm=64, bn=32, bk=32, split=2))
    assert gemm.path(m) == path
    check(gemm(inputs.x), fp64(inputs.x, int4_gemm.dequantize(inputs)))


@pytest.mark.parametrize("group,path", [(128, "fused"), (256, "fused"), (32, "fused"), (64, "fused"),
                                        ("channel", "fused"), (None, "fused"), (96, "dequant")])
def test_triton_above_fused_max_m_the_fused_path_only_with_tma(group, path):
    # Above FUSED_MAX_M the checked-in configs (FUSED_CONFIGS on the CPU) take
    # TMA loads with the groups fused_gemm.tma_usable takes (whole K blocks,
    # per channel and unscaled over whole K blocks among them, or tiling one
    # in these 256-row x tiles): there the fused kernel runs, elsewhere
    # (GATHER's 96) dequantize + cuBLAS. M and N ragged.
    if group == 96:
        inputs = int4_gemm.make_inputs(case(int4_gemm, (1025, 576, 72), group_size=96), seed())
        assert weight_only(inputs).path(1025) == "dequant"
        return
    inputs = int4_gemm.make_inputs(case(int4_gemm, (1025, 512, 72), group_size=group), seed())
    gemm = weight_only(inputs)
    assert gemm.path(1025) == path
    assert bool(gemm.tuned(1025, "fused")[0].get("TMA")) == (path == "fused")
    check(gemm(inputs.x), fp64(inputs.x, int4_gemm.dequantize(inputs)))


def test_triton_above_fused_max_m_an_explicit_config_decides_by_its_tma_key():
    from qgemm_bench.backends.triton_kernels.fused_gemm import config

    inputs = int4_gemm.make_inputs(case(int4_gemm, (1030, 256, 40), group_size=128), seed())
    with_tma = weight_only(inputs, config(256, 64, 64, 1, 4, 3, asm=False, tma=True))
    assert with_tma.path(1030) == "fused"
    check(with_tma(inputs.x), fp64(inputs.x, int4_gemm.dequantize(inputs)))
    assert weight_only(inputs, config(256, 64, 64, 1, 4, 3, asm=False)).path(1030) == "dequant"
    # GATHER scales take no TMA: above FUSED_MAX_M they stay on dequantize + cuBLAS.
    g96 = int4_gemm.make_inputs(case(int4_gemm, (4, 192, 40), group_size=96), 0)
    assert weight_only(g96, config(256, 64, 64, 1, 4, 3, tma=True)).path(1030) == "dequant"
    # Group 32, four to a 128-k block, takes TMA in 256-row x tiles only: the explicit config's own tiles decide.
    g32 = int4_gemm.make_inputs(case(int4_gemm, (4, 256, 40), group_size=32), 0)
    assert weight_only(g32, config(128, 64, 128, 1, 4, 3, tma=True)).path(1030) == "dequant"
    assert weight_only(g32, config(256, 64, 128, 1, 4, 3, tma=True)).path(1030) == "fused"
    assert weight_only(g32, config(128, 64, 64, 1, 4, 3, tma=True)).path(1030) == "fused"  # two to a 64-k block


@interpreter
def test_helion_keeps_dequantize_above_fused_max_m_where_triton_goes_fused():
    # Helion's fused kernel has no TMA loads: above FUSED_MAX_M it stays on
    # dequantize + cuBLAS even with group 128, where the Triton backend does not.
    from qgemm_bench.backends.helion_ops import WeightOnly

    inputs = int4_gemm.make_inputs(case(int4_gemm, (4, 256, 40), group_size=128), 0)
    assert WeightOnly("int4_gemm", inputs.w, inputs.scales, None, INT4, 128).path(1025) == "dequant"
    assert weight_only(inputs).path(1025) == "fused"


def test_triton_dequantize_matches_the_formats_module():
    inputs = int4_gemm.make_inputs(case(int4_gemm, (2, 96, 24), group_size=32), 1)
    assert torch.equal(weight_only(inputs, path="dequant").dequantize(DT), int4_gemm.dequantize(inputs).to(DT))


def fused(inputs, config):
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm

    return FusedGemm(inputs.w, inputs.scales, None, INT4, inputs.group_size, config, target=target_for(inputs.w))


@pytest.mark.parametrize("group,bk", [(32, 128), (64, 128), (128, 128), (128, 64), (256, 128), (96, 128),
                                      ("channel", 128), (None, 256)])
@pytest.mark.parametrize("shape,bm,split", [((65, 768, 100), 32, 1), ((7, 1408, 72), 16, 3), ((9, 2048, 40), 16, 4)])
def test_fused_kernel_every_scale_mode_vs_fp64(shape, bm, split, group, bk):
    # Groups a K block holds (SUB), that span blocks (BLOCK), neither (GATHER:
    # 96), one group (CHANNEL), none; ragged M, N, and K off the K block
    # (1408 = 11 x 128, 5.5 x 256, in splits of 4, 4, 3 blocks; 1440 = 15 x
    # 96 = 11.25 x 128; groups of 256 need K = 6 x 256). 2048 = 16 x 128:
    # splits of equal length, the kernel's constant trip count (1536 = 16 x 96).
    if shape[1] == 1408 and group in (96, 256):
        shape = (shape[0], 1440 if group == 96 else 1536, shape[2])
    if shape[1] == 2048 and group == 96:
        shape = (shape[0], 1536, shape[2])
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, group_size=group), seed())
    gemm = fused(inputs, cfg(bm=bm, bn=64, bk=bk, split=split))
    ref = fp64(inputs.x, int4_gemm.dequantize(inputs))
    check(gemm(inputs.x), ref)
    check(gemm(inputs.x), ref)  # the split workspace was left ready


@pytest.mark.parametrize("extra", [{}, {"ACC_SCALE": True, "SCALE_AHEAD": True}])
def test_fused_kernel_with_more_splits_than_k_blocks_vs_fp64(extra):
    # 1152 = 9 blocks of 128: splits of 4 leave one program no block, of 16 seven. They add nothing, and
    # their scale loads before the loop now read a row that exists (on the GPU one past the last stopped a
    # graph with an illegal address; the interpreter reads host memory, so only the sums are checked here).
    inputs = int4_gemm.make_inputs(case(int4_gemm, (3, 1152, 72), group_size=128), seed())
    ref = fp64(inputs.x, int4_gemm.dequantize(inputs))
    for split in (4, 16):
        gemm = fused(inputs, {**cfg(bm=16, bn=64, bk=128, split=split), **extra})
        check(gemm(inputs.x), ref)
        check(gemm(inputs.x), ref)  # the split workspace and counters left ready


@pytest.mark.parametrize("group,k,bk,bm,tma,mode", [
    ("channel", 1000, 128, 128, False, "BLOCK"), (None, 1000, 128, 128, False, "BLOCK"),
    ("channel", 1152, 256, 128, False, "BLOCK"), ("channel", 1024, 128, 16, False, "CHANNEL"),
    (None, 1000, 128, 16, False, "CHANNEL"), ("channel", 1024, 64, 16, True, "BLOCK"),
    (None, 1000, 64, 32, True, "BLOCK"), ("channel", 1000, 64, 32, True, "BLOCK"),
    ("channel", 1000, 128, 16, "acc", "BLOCK"), (None, 1024, 64, 32, "acc", "BLOCK")])
def test_fused_kernel_per_channel_and_unscaled_vs_fp64(group, k, bk, bm, tma, mode):
    # Per channel and unscaled (as scales of one) take BLOCK scales, one row
    # for every K block, K off the K block too (the CHANNEL loop returned
    # garbage on the H100 at 256x128x64 w8 s4, fused_gemm.scale_mode), but
    # in small pointer-load tiles (fused_gemm.channel_block), where CHANNEL
    # scales the fp32 tile at the end, unless the tile takes ACC_SCALE ("acc":
    # BLOCK's ACC path, each block's fp32 product scaled; CHANNEL's loop there
    # wrote registers pending wgmmas read and was wrong on the H100). Ragged
    # M and N, split and not.
    from qgemm_bench.backends.triton_kernels import fused_gemm

    inputs = int4_gemm.make_inputs(case(int4_gemm, (33, k, 72), group_size=group), seed())
    c = cfg(bm=bm, bn=64, bk=bk, split=2, TMA=tma is True, **({"ACC_SCALE": True} if tma == "acc" else {}))
    tma = tma is True
    gemm = fused(inputs, c)
    assert fused_gemm.scale_mode(INT4, gemm.group, k, bk, True, fused_gemm.channel_block(c)) == \
        getattr(fused_gemm, mode)
    assert gemm.group == k and gemm.kmajor.scales is not None
    assert set(gemm.descriptors(inputs.x, c)) == ({"x_desc", "w_desc"} if tma else set())
    ref = fp64(inputs.x, int4_gemm.dequantize(inputs))
    check(gemm(inputs.x), ref)
    check(fused(inputs, {**c, "SPLIT_K": 1})(inputs.x), ref)


ACC_SHAPES = [((7, 1536, 100), 16, 64, 3, False), ((65, 768, 200), 32, 128, 2, False),
              ((33, 1280, 72), 64, 64, 1, True)]


@pytest.mark.parametrize("group,bk,shape,bm,bn,split,tma", [
    (g, bk, *s) for g, bk in ((128, 128), (128, 64), (256, 128)) for s in ACC_SHAPES] + [
    (g, 128, *ACC_SHAPES[i]) for i, g in enumerate((64, "channel", None))])
def test_fused_kernel_acc_scale_vs_fp64(shape, bm, bn, split, tma, group, bk):
    # ACC_SCALE: BLOCK scales (groups of one or two K blocks) on each block's
    # fp32 product, with pointer and TMA loads, ragged M and N, 1536 = 12 x
    # 128 in 3 splits; other scale modes ignore it (the same results as
    # without: checked bit for bit).
    from qgemm_bench.backends.triton_kernels.fused_gemm import BLOCK, channel_block, scale_mode

    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, group_size=group), seed())
    g = shape[1] if group in ("channel", None) else group  # FusedGemm: unscaled as scales of one per channel
    ref = fp64(inputs.x, int4_gemm.dequantize(inputs))
    c = cfg(bm=bm, bn=bn, bk=bk, split=split, TMA=tma, ACC_SCALE=True, maxnreg=128)
    gemm = fused(inputs, c)
    out = gemm(inputs.x)
    check(out, ref)
    check(gemm(inputs.x), ref)
    plain = fused(inputs, cfg(bm=bm, bn=bn, bk=bk, split=split, TMA=tma))(inputs.x)
    # Other scale modes ignore ACC_SCALE: bit for bit the same. BLOCK rounds elsewhere, but after the
    # fp16 store the two can still agree on some draws, so only its accuracy (above) is asserted.
    if scale_mode(INT4, g, shape[1], bk, True, channel_block(c)) != BLOCK or group is None:
        assert torch.equal(out, plain)


@pytest.mark.parametrize("shape,group,bk", [((17, 768, 40), 48, 128), ((9, 512, 72), 16, 64), ((33, 640, 100), 32, 64)])
def test_fused_kernel_groups_that_split_a_byte_vs_fp64(shape, group, bk):
    # Fragment order puts k and k + 16 in one byte: groups that are not a
    # multiple of 32 give its nibbles two scales (GATHER), 32 one (SUB).
    from qgemm_bench.backends.triton_kernels.fused_gemm import GATHER, SUB, scale_mode

    assert scale_mode(INT4, group, shape[1], bk, frag=True) == (SUB if group == 32 else GATHER)
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, group_size=group), seed())
    check(fused(inputs, cfg(bm=16 if shape[0] < 32 else 32, bn=64, bk=bk, split=2))(inputs.x),
          fp64(inputs.x, int4_gemm.dequantize(inputs)))


@pytest.mark.parametrize("group", [64, 48])
def test_fused_kernel_reads_k_order_bytes_too(group):
    # frag=False: the layout Helion's int4 kernel reads and the K-order
    # baseline the fragment order was timed against (docs/fused_gemm.md).
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm

    inputs = int4_gemm.make_inputs(case(int4_gemm, (17, 768, 40), group_size=group), seed())
    gemm = FusedGemm(inputs.w, inputs.scales, None, INT4, group, cfg(bm=16, bn=64, bk=128, split=2), frag=False,
                     target=target_for(inputs.w))
    assert not gemm.kmajor.frag
    check(gemm(inputs.x), fp64(inputs.x, int4_gemm.dequantize(inputs)))


@pytest.mark.parametrize("bn,bk,split", [(128, 64, 2), (256, 256, 1), (128, 32, 3), (32, 128, 2)])
def test_fused_kernel_on_tiled_weights_spanning_tiles_vs_fp64(bn, bk, split):
    # The default tiled layout (64 x 128 tiles): a program's tile spans
    # several tile rows or half of one, its K block half a tile, two tiles or
    # a quarter.
    inputs = int4_gemm.make_inputs(case(int4_gemm, (19, 1280, 300), group_size=64), seed())
    gemm = fused(inputs, cfg(bm=16, bn=bn, bk=bk, split=split))
    assert gemm.kmajor.tile == (64, 128)
    check(gemm(inputs.x), fp64(inputs.x, int4_gemm.dequantize(inputs)))


@pytest.mark.parametrize("group,bk", [(128, 128), (128, 64), (32, 64), (64, 128), (32, 128), (96, 128),
                                      ("channel", 64), (None, 128)])
@pytest.mark.parametrize("shape,bm,bn,split", [((7, 1408, 100), 16, 64, 1), ((65, 768, 200), 32, 128, 2),
                                              ((33, 1280, 72), 64, 64, 1)])
def test_fused_kernel_tma_loads_vs_fp64(shape, bm, bn, split, group, bk):
    # TMA tiles (FusedGemm.descriptors): x rows past M and columns past K come
    # back as zeros, weight tiles through the 3-D view of the tiled layout
    # (a tile row or two, half a tile or a whole one along K). Groups of
    # whole K blocks (BLOCK) and groups tiling one (SUB) two to a block (in
    # these tiles of fewer than 256 rows; fused_gemm.tma_usable); the
    # other scale modes load by pointer.
    if group == 96:
        shape = (shape[0], 1440 if shape[1] == 1408 else 1152, shape[2])
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, group_size=group), seed())
    gemm = fused(inputs, cfg(bm=bm, bn=bn, bk=bk, split=split, TMA=True))
    by_tma = group in (128, "channel", None) and shape[1] % bk == 0 or group in (32, 64) and bk // group == 2
    expected = {"x_desc", "w_desc"} if by_tma else {"TMA"}
    assert set(gemm.descriptors(inputs.x, gemm.config)) == expected
    ref = fp64(inputs.x, int4_gemm.dequantize(inputs))
    check(gemm(inputs.x), ref)
    check(gemm(inputs.x), ref)


@pytest.mark.parametrize("shape,bm,bn,bk,split", [((130, 512, 300), 64, 256, 32, 1), ((20, 1408, 100), 16, 64, 128, 3),
                                                 ((40, 1280, 136), 16, 128, 64, 5)])
def test_fused_kernel_tma_loads_more_tiles_vs_fp64(shape, bm, bn, bk, split):
    # Several M tiles, a box of four tile rows (BLOCK_N 256), the 16-byte box
    # of BLOCK_K 32, and splits of unequal length (11 K blocks in 3; 20 in 5).
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, group_size=128), seed())
    gemm = fused(inputs, cfg(bm=bm, bn=bn, bk=bk, split=split, TMA=True))
    assert set(gemm.descriptors(inputs.x, gemm.config)) == {"x_desc", "w_desc"}
    check(gemm(inputs.x), fp64(inputs.x, int4_gemm.dequantize(inputs)))


def test_fused_kernel_tma_config_takes_an_empty_x():
    inputs = int4_gemm.make_inputs(case(int4_gemm, (3, 256, 64), group_size=128), seed())
    gemm = fused(inputs, cfg(bm=16, bn=64, bk=128, TMA=True))
    x = inputs.x[:0]
    assert gemm.descriptors(x, gemm.config) == {"TMA": False}
    assert gemm(x).shape == (0, 64)


def test_fused_kernel_tma_config_loads_by_pointer_where_x_rows_are_unaligned():
    inputs = int4_gemm.make_inputs(case(int4_gemm, (9, 768, 64), group_size=128), seed())
    gemm = fused(inputs, cfg(bm=16, bn=64, bk=128, TMA=True))
    x = torch.zeros(9, 772, device=DEV, dtype=DT)[:, :768]  # rows 1544 bytes apart: not 16-byte aligned
    x.copy_(inputs.x)
    assert gemm.descriptors(x, gemm.config) == {"TMA": False}
    check(gemm(x), fp64(inputs.x, int4_gemm.dequantize(inputs)))


@pytest.mark.parametrize("bn,bk,tile", [(96, 64, (64, 128)), (64, 256, (64, 128)), (64, 64, None)])
def test_fused_kernel_refuses_tma_tiles_the_layout_cannot_give(bn, bk, tile):
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm

    inputs = int4_gemm.make_inputs(case(int4_gemm, (9, 768, 64), group_size=64), seed())
    gemm = FusedGemm(inputs.w, inputs.scales, None, INT4, 64, cfg(bm=16, bn=bn, bk=bk, TMA=True), tile=tile,
                     target=target_for(inputs.w))
    with pytest.raises(ValueError, match="TMA loads need tiled weights"):
        gemm(inputs.x)


WS64 = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "num_stages": 4}


@pytest.mark.parametrize("extra", [{"PERSISTENT": 1}, {"FLATTEN": False}, {"PERSISTENT": 2, "FLATTEN": True},
                                   {"num_warp": 4}, {"PERSISTENT": 1, "WS": WS64}])
def test_fused_kernel_refuses_keys_it_does_not_take(extra):
    # A key no kernel takes (here the removed persistent kernel's) ends in one line naming it, before any
    # launch (with WS tiles too, which would otherwise run and ignore it).
    inputs = int4_gemm.make_inputs(case(int4_gemm, (3, 256, 64), group_size=128), seed())
    gemm = fused(inputs, cfg(bm=16, bn=64, bk=128, split=2, **extra))
    names = ", ".join(x for x in extra if x != "WS")
    with pytest.raises(ValueError, match=f"{names}: not a config key of these kernels") as e:
        gemm(inputs.x)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("group", [128, "channel"])
def test_fused_ws_config_runs_its_fused_kernel_tiles_where_ws_cannot(group):
    # A config with WS tiles (ws_gemm.py, Hopper only; no CPU interpreter
    # for Gluon) runs the rest of it in fused_kernel where the kernel does
    # not run (test_ws_runs_only_where_usable_and_on_its_layout says where):
    # on the CPU, here split-K.
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    inputs = int4_gemm.make_inputs(case(int4_gemm, (9, 768, 200), group_size=group), seed())
    gemm = fused(inputs, cfg(bm=16, bn=64, bk=64, split=3, WS=ws_tiles(128, 128, 64, 3)))
    assert not gemm.runs_ws(inputs.x, gemm.config)
    ref = fp64(inputs.x, int4_gemm.dequantize(inputs))
    check(gemm(inputs.x), ref)


@pytest.mark.parametrize("tiles,message", [((256, 256, 64, 3), "BLOCK_N 64 or 128"),
                                           ((256, 128, 32, 3), "BLOCK_K 64 or 128"),
                                           ((256, 128, 128, 3), "shared memory"), ((64, 64, 128, 1), "2 to 8 stages"),
                                           ((64, 128, 64, 4, 2), "takes BLOCK_N 64 and an even"),
                                           ((64, 64, 64, 3, 2), "an even number of stages"),
                                           ((64, 64, 64, 4, 3), "K_SPLIT is 1 or 2"),
                                           ((64, 64, 64, 4, 2, 2), "above 1 takes K_SPLIT 1"),
                                           ((64, 64, 64, 4, 1, 5), "SPLITS .* is 1 to 4"),
                                           ((64, 64, 64, 4, 1, 0), "SPLITS .* is 1 to 4"),
                                           ((64, 64, 64, 4, 1, 2, 65), "SKEW .* 0 to 64"),
                                           ((64, 64, 64, 4, 1, 2, -1), "SKEW .* 0 to 64"),
                                           ((64, 64, 64, 8, 1, 2, 2), "SKEW takes at most 6 stages"),
                                           ((64, 64, 64, 4, 1, 1, 0, True), "STREAM_K .* BLOCK_N 128"),
                                           ((256, 128, 64, 4, 1, 2, 0, True), "neither K_SPLIT nor SPLITS"),
                                           ((64, 64, 64, 4, 2, 1, 0, True), "neither K_SPLIT nor SPLITS")])
def test_fused_ws_config_refuses_tiles_the_kernel_lacks(tiles, message):
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    inputs = int4_gemm.make_inputs(case(int4_gemm, (9, 768, 200), group_size=128), seed())
    gemm = fused(inputs, cfg(bm=16, bn=64, bk=64, WS=ws_tiles(*tiles)))
    with pytest.raises(ValueError, match=message):
        gemm(inputs.x)


def test_ws_skew_needs_splits_and_split_blocks_cover_k_once():
    # SKEW without SPLITS is refused; split_blocks gives every split at least
    # one K block and the last the rest (at most one split per block), so the
    # splits' ranges cover the K blocks exactly once.
    from qgemm_bench.backends.triton_kernels import ws_gemm
    from qgemm_bench.backends.triton_kernels.split_k_configs import ws_label

    with pytest.raises(ValueError, match="with SPLITS above 1"):
        ws_gemm.check({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "num_stages": 4, "SKEW": 2})
    for blocks in (1, 2, 3, 7, 64, 129):
        for splits in (1, 2, 3, 4):
            for skew in (0, 1, 4, 64):
                n, per = ws_gemm.split_blocks(blocks, {"SPLITS": splits, "SKEW": skew})
                last = blocks - (n - 1) * per
                assert n == min(splits, blocks) and per >= 1 and last >= 1, (blocks, splits, skew)
                assert last >= per or n == 1 or skew == 0 and blocks % n, (blocks, splits, skew)
    assert ws_gemm.split_blocks(128, {"SPLITS": 2, "SKEW": 4}) == (2, 62)  # the last 66
    assert ws_label({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 128, "num_stages": 4, "SPLITS": 2, "SKEW": 2}) == \
        "64x64x128 s4 split 2 skew 2"


def test_ws_pdl_is_one_or_two_and_labelled():
    # WS PDL: 1 (ws_gemm._pdl_wait), 2 (the first weights before the wait: _producer; not with STREAM_K) or
    # absent; the label and ws_tiles say it.
    from qgemm_bench.backends.triton_kernels import ws_gemm
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles
    from qgemm_bench.backends.triton_kernels.split_k_configs import ws_label

    tiles = ws_tiles(256, 128, 64, 4, pdl=True)
    assert tiles == {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 4, "PDL": 1}
    ws_gemm.check(tiles)
    assert ws_label(tiles) == "256x128x64 s4 pdl" and "PDL" not in ws_tiles(256, 128, 64, 4)
    early = ws_tiles(256, 128, 64, 4, pdl=2)
    ws_gemm.check(early)
    assert early["PDL"] == 2 and ws_label(early) == "256x128x64 s4 pdl2"
    for bad in ({**tiles, "PDL": 0}, {**tiles, "PDL": 3}, {**tiles, "PDL": True},
                ws_tiles(256, 128, 64, 4, stream_k=True, pdl=2)):
        with pytest.raises(ValueError, match="PDL is 1|integers"):
            ws_gemm.check(bad)


def test_ws_acc_is_checked_labelled_and_runs_on_whole_block_groups_only():
    # WS ACC: 1 or absent, int4 only, x tiles of at most MAX_ACC_BLOCK_M rows,
    # not with STREAM_K; `usable` takes it with groups of whole K blocks only
    # (not per channel, unscaled or groups of 32: their scales are not one a
    # row per block).
    from qgemm_bench.backends.triton_kernels import ws_gemm
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles
    from qgemm_bench.backends.triton_kernels.split_k_configs import ws_label

    tiles = ws_tiles(16, 64, 128, 8, splits=2, acc=True)
    ws_gemm.check(tiles)
    assert ws_label(tiles) == "16x64x128 s8 split 2 acc" and "ACC" not in ws_tiles(16, 64, 128, 8)
    for bad, fmt in (({**tiles, "ACC": 2}, INT4), (tiles, NVFP4), (ws_tiles(128, 128, 64, 4, acc=True), INT4),
                     (ws_tiles(64, 128, 64, 4, stream_k=True, acc=True), INT4)):
        with pytest.raises(ValueError, match="ACC"):
            ws_gemm.check(bad, fmt)
    class X:  # the attributes usable reads, as a CUDA tensor would have them
        is_cuda, dtype, shape = True, torch.bfloat16, (16, 4096)

        def stride(self, d):
            return (4096, 1)[d]

        def data_ptr(self):
            return 0

    sm90 = fake_target(capability=(9, 0))
    plain = {k: v for k, v in tiles.items() if k != "ACC"}
    for group, takes in ((128, True), (256, True), (64, False), (32, False), (4096, False)):
        assert ws_gemm.usable(INT4, group, 4096, 512, X(), tiles, sm90) is takes, group
        assert ws_gemm.usable(INT4, group, 4096, 512, X(), plain, sm90) is (group != 64), group
        # FusedGemm runs the tiles without ACC where it does not apply (the table's ACC tiles, tuned at 128)
        assert ws_gemm.tiles_for(INT4, group, 4096, tiles) == (tiles if takes else plain), group
    assert not ws_gemm.acc_runs(NVFP4, 16, 4096, tiles) and ws_gemm.tiles_for(NVFP4, 16, 4096, plain) == plain


def test_ws_m_group_is_checked_and_labelled():
    # WS M_GROUP: tiles in groups of that many x-row blocks (ws_gemm._grouped),
    # 1 to MAX_M_GROUP, not with STREAM_K (its own order); ws_tiles and the
    # label say it, and a group of 1 is no key at all.
    from qgemm_bench.backends.triton_kernels import ws_gemm
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles
    from qgemm_bench.backends.triton_kernels.split_k_configs import ws_label

    tiles = ws_tiles(256, 128, 64, 4, pdl=True, m_group=4)
    assert tiles == {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 4, "PDL": 1, "M_GROUP": 4}
    ws_gemm.check(tiles)
    assert ws_label(tiles) == "256x128x64 s4 group 4 pdl" and "M_GROUP" not in ws_tiles(256, 128, 64, 4, m_group=1)
    for bad in (0, ws_gemm.MAX_M_GROUP + 1):
        with pytest.raises(ValueError, match="M_GROUP"):
            ws_gemm.check({**tiles, "M_GROUP": bad})
    with pytest.raises(ValueError, match="without STREAM_K"):
        ws_gemm.check(ws_tiles(256, 128, 64, 4, stream_k=True, m_group=2))


def test_ws_runs_only_where_usable_and_on_its_layout():
    # FusedGemm.runs_ws: a CUDA x (faked: the attributes read) on sm_90, and
    # the layout the kernel reads: fragment-order bytes in 64-row tiles of
    # whole K blocks, bf16 scales; else fused_kernel runs.
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm, ws_tiles

    sm90 = fake_target(capability=(9, 0))  # the Target decides, not the machine the test runs on
    inputs = int4_gemm.make_inputs(case(int4_gemm, (9, 512, 256), torch.float32, group_size=128), seed())
    x = type("X", (), {"is_cuda": True, "dtype": torch.bfloat16, "shape": (9, 512), "device": None,
                       "stride": lambda self, d: (512, 1)[d], "data_ptr": lambda self: 0})()
    c = cfg(bm=16, bn=64, bk=64, WS=ws_tiles(64, 64, 128, 4))
    bf16 = inputs.scales.to(torch.bfloat16)
    assert FusedGemm(inputs.w, bf16, None, INT4, 128, c, target=sm90).runs_ws(x, c)
    assert not FusedGemm(inputs.w, bf16, None, INT4, 128, c,
                         target=target_for(inputs.w)).runs_ws(x, c)  # the CPU's Target: not sm_90
    assert not FusedGemm(inputs.w, inputs.scales, None, INT4, 128, c, target=sm90).runs_ws(x, c)  # fp32 scales
    assert not FusedGemm(inputs.w, bf16, None, INT4, 128, c, frag=False, target=sm90).runs_ws(x, c)  # K-order bytes
    assert not FusedGemm(inputs.w, bf16, None, INT4, 128, c, tile=None, target=sm90).runs_ws(x, c)
    assert not FusedGemm(inputs.w, bf16, None, INT4, 128, c, tile=(128, 128), target=sm90).runs_ws(x, c)
    assert not FusedGemm(inputs.w, bf16, None, INT4, 128, c, target=sm90).runs_ws(x, {**c, "DECODE_ASM": False})
    assert not FusedGemm(inputs.w, bf16, None, INT4, 128, c, target=sm90).runs_ws(x, {k: v for k, v in c.items()
                                                                                     if k != "WS"})


def test_triton_row_names_the_ws_kernel_where_it_runs(monkeypatch):
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm, ws_tiles

    inputs = int4_gemm.make_inputs(case(int4_gemm, (80, 256, 128), group_size=128), seed())
    gemm = weight_only(inputs, cfg(bm=32, bn=64, bk=64, WS=ws_tiles(64, 64, 128, 4)), path="fused")
    assert "warp-specialized" not in gemm.note(80, inputs.x)  # the CPU runs fused_kernel
    monkeypatch.setattr(FusedGemm, "runs_ws", lambda self, x, c: True)
    assert "warp-specialized" in gemm.note(80, inputs.x) and "workspace" not in gemm.note(80, inputs.x)
    # Two programs per tile: the fp32 planes it keeps (80 rows -> 2 x-tiles of 64, 2 of the 64 weight rows) and
    # the counters, in the note (neither weight_mib nor peak_extra_mib sees them).
    split = weight_only(inputs, cfg(bm=32, bn=64, bk=64, WS=ws_tiles(64, 64, 128, 4, splits=2)), path="fused")
    kept = 4 * (2 * 2 + 2 * 2 * 64 * 64)
    assert split.note(80, inputs.x).endswith(f", {kept / 2**20:.1f} MiB split workspace kept between calls")
    assert split.fused().ws_workspace_bytes(inputs.x, split.fused().config_for(80)) == kept
    # Stream-K: a 64 x BLOCK_M plane per consumer warpgroup of each program
    # (3 here, at most one per K block of all tiles; one per SM on a GPU)
    # and a counter per tile warpgroup (80 x 128: one 128 x 128 tile).
    from qgemm_bench.backends.triton_kernels import ws_gemm

    monkeypatch.setattr(ws_gemm, "STREAM_K_PROGRAMS", 3)
    sk = weight_only(inputs, cfg(bm=32, bn=64, bk=64, WS=ws_tiles(128, 128, 64, 3, stream_k=True)), path="fused")
    kept = 4 * (2 + 3 * 2 * 64 * 128)
    assert sk.note(80, inputs.x).endswith(f", {kept / 2**20:.1f} MiB split workspace kept between calls")
    assert sk.fused().ws_workspace_bytes(inputs.x, sk.fused().config_for(80)) == kept
    monkeypatch.setattr(ws_gemm, "STREAM_K_PROGRAMS", 132)  # 256 / 64 = 4 K blocks, one tile: 4 programs
    assert sk.fused().ws_workspace_bytes(inputs.x, sk.fused().config_for(80)) == 4 * (2 + 4 * 2 * 64 * 128)


def test_ws_usable_takes_block_scales_bf16_aligned_rows_on_sm90_only():
    from qgemm_bench.backends.triton_kernels import ws_gemm

    sm90 = fake_target(capability=(9, 0))
    # The kernel's GROUP: per channel and unscaled (a group of all K, K off the block too) scale the sum.
    assert ws_gemm.kernel_group(INT4, 4096, 4096) == ws_gemm.kernel_group(INT4, 5000, 5000) == ws_gemm.CHANNEL
    assert ws_gemm.kernel_group(INT4, 128, 4096) == 128 and ws_gemm.kernel_group(NVFP4, 16, 16) == 16

    class X:  # the attributes usable reads, as a CUDA tensor would have them
        def __init__(self, m=256, k=4096, dtype=torch.bfloat16, ptr=0, row=None):
            self.is_cuda, self.dtype, self.shape, self.device = True, dtype, (m, k), None
            self._ptr, self._row = ptr, row or k

        def stride(self, d):
            return (self._row, 1)[d]

        def data_ptr(self):
            return self._ptr

    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    c = ws_tiles(256, 128, 64, 3)
    ok = lambda group, n=1000, x=None, k=4096, c=c, t=sm90: ws_gemm.usable(INT4, group, k, n, x or X(k=k), c, t)  # noqa: E731
    assert ok(128) and ok(64) and ok(4096) and ok(5000, k=5000)  # group K: per channel and unscaled
    assert ok(32) and ok(32, c=ws_tiles(64, 64, 128, 4))  # a 32-k run's scale (ws_gemm.block_scale_layout)
    assert not ok(96) and not ok(16)  # other groups off the K block
    # Groups of 32 add BLOCK_K // 32 - 1 rows of BLOCK_N bf16 scales per
    # stage: a ring that fills shared memory with one row does not take them.
    full = ws_tiles(256, 128, 128, 2)
    assert ws_gemm.shared_bytes(full, INT4, 32) - ws_gemm.shared_bytes(full, INT4) == 2 * 3 * 128 * 2
    small = fake_target(smem_per_block=ws_gemm.shared_bytes(full, INT4))  # the Target's shared memory decides
    assert ok(128, c=full, t=small) and not ok(32, c=full, t=small)
    assert not ok(128, n=1001)  # y's rows not 16-byte aligned for its TMA store
    assert not ok(128, x=X(dtype=torch.float16)) and not ok(128, x=X(m=0))
    assert not ok(128, x=X(ptr=8)) and not ok(128, x=X(row=4100)) and not ok(128, x=X(row=4088))
    assert ok(128, x=X(row=4160))  # a padded row stride, 16-byte aligned
    assert ws_gemm.usable(formats.NVFP4, 16, 4096, 1000, X(), c, sm90)  # blocks of 16 tile every K block
    assert not ws_gemm.usable(formats.NVFP4, 16, 4096, 1000, X(dtype=torch.float16), c, sm90)
    assert not ok(128, t=fake_target(capability=(10, 0)))


def test_fused_kernel_reads_untiled_k_major_weights_too():
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm

    inputs = int4_gemm.make_inputs(case(int4_gemm, (17, 768, 100), group_size=128), seed())
    gemm = FusedGemm(inputs.w, inputs.scales, None, INT4, 128, cfg(bm=16, bn=128, bk=64, split=2), tile=None,
                     target=target_for(inputs.w))
    assert gemm.kmajor.tile is None
    check(gemm(inputs.x), fp64(inputs.x, int4_gemm.dequantize(inputs)))


@pytest.mark.parametrize("frag", [False, True])
def test_tiled_layout_puts_each_tile_in_one_contiguous_run(frag):
    """kmajor_layout's tiled order, from its definition: byte (n, j) of the
    K-major bytes at (n // TN) * TN * Kp/2 + (j // (TK/2)) * TN * TK/2 +
    (n % TN) * TK/2 + j % (TK/2)."""
    from qgemm_bench.backends.kmajor_layout import from_kmajor, to_kmajor

    inputs = int4_gemm.make_inputs(case(int4_gemm, (1, 640, 300), group_size=64), seed())
    plain = to_kmajor(inputs.w, inputs.scales, 64, frag=frag).wt.numpy()
    p = to_kmajor(inputs.w, inputs.scales, 64, frag=frag, tile=(64, 128))
    flat, (np_, kh) = p.wt.numpy().reshape(-1), plain.shape
    n, j = np.meshgrid(np.arange(np_), np.arange(kh), indexing="ij")
    at = (n // 64) * 64 * kh + (j // 64) * 64 * 64 + (n % 64) * 64 + j % 64
    assert np.array_equal(flat[at], plain)
    assert torch.equal(from_kmajor(p), inputs.w.view(torch.uint8))


def test_fragment_order_puts_each_threads_k_pairs_in_one_byte_run():
    """kmajor_layout's fragment order, from its definition: byte 4c + 2u + e
    of each 16-byte run holds k = 8u + 2c + e (low nibble) and k + 16 (high)."""
    from qgemm_bench.backends.kmajor_layout import from_kmajor, to_kmajor

    inputs = int4_gemm.make_inputs(case(int4_gemm, (1, 320, 37), group_size=32), seed())
    codes = np_unpack(inputs.w.numpy().view(np.uint8))  # [K, N] codes in K order
    p = to_kmajor(inputs.w, inputs.scales, 32, frag=True)
    wt = p.wt.numpy()
    for run in range(320 // 32):
        for byte in range(16):
            c, u, e = byte // 4, (byte // 2) % 2, byte % 2
            k = 32 * run + 8 * u + 2 * c + e
            assert np.array_equal(wt[:37, 16 * run + byte] & 0xF, codes[k])
            assert np.array_equal(wt[:37, 16 * run + byte] >> 4, codes[k + 16])
    assert torch.equal(from_kmajor(p), inputs.w.view(torch.uint8))


def test_kmajor_layout_round_trips_and_pads_with_zero_codes():
    from qgemm_bench.backends.kmajor_layout import K_ALIGN, N_ALIGN, from_kmajor, to_kmajor

    inputs = int4_gemm.make_inputs(case(int4_gemm, (1, 5248, 1000), group_size=64), seed())
    p = to_kmajor(inputs.w, inputs.scales, 64)
    assert p.wt.shape == (1024, 5376 // 2) and p.wt.shape[0] % N_ALIGN == 0 and 2 * p.wt.shape[1] % K_ALIGN == 0
    assert torch.equal(from_kmajor(p), inputs.w.view(torch.uint8))
    assert int(p.wt[1000:].abs().sum()) == 0 and int(p.wt[:, 5248 // 2:].abs().sum()) == 0
    assert torch.equal(p.scales[:82, :1000], inputs.scales) and float(p.scales[82:].abs().sum()) == 0


def test_fused_path_reports_the_k_major_weights_it_reads():
    inputs = int4_gemm.make_inputs(case(int4_gemm, (80, 256, 40), group_size=64), seed())
    gemm = weight_only(inputs, cfg(bm=16, bn=64, bk=128, split=2))
    assert gemm.path(80) == "fused"
    wt = gemm.resident(80)[0]
    assert wt.shape == (256, 128) and wt.dtype == torch.uint8
    assert gemm.resident(16)[0] is inputs.w


@pytest.mark.parametrize("kw,message", [({"path": "fast"}, "path 'fast'"),
                                        ({"config": cfg(bn=16)}, "at least 16 x 32")])
def test_triton_refuses_bad_options(kw, message):
    inputs = int4_gemm.make_inputs(case(int4_gemm, (2, 64, 32), group_size=32), 0)
    with pytest.raises(ValueError, match=message):
        weight_only(inputs, **kw)


@pytest.mark.parametrize("bad,message", [
    (lambda x, w, s: (x.float(), w, s), "float16 or bfloat16"),
    (lambda x, w, s: (x[:, :-2], w, s), "do not match"),
    (lambda x, w, s: (x, w, s[:-1]), "do not fit K"),
    (lambda x, w, s: (x.t().contiguous().t(), w, s), "contiguous"),
])
def test_triton_refuses_bad_inputs(bad, message):
    from qgemm_bench.backends.triton_dispatch import make_weight_only

    inputs = int4_gemm.make_inputs(case(int4_gemm, (16, 256, 32), group_size=64), 0)
    x, w, s = bad(inputs.x, inputs.w, inputs.scales)
    with pytest.raises(ValueError, match=message):
        make_weight_only(w, s, None, INT4, 64, cfg(), target=target_for(x))(x)


@pytest.mark.parametrize("k,n,group,wdt", [(256, 40, 128, torch.float16), (384, 37, 32, torch.float16),
                                           (96, 5, 96, torch.float32), (64, 3, 2, torch.float16)])
def test_quantize_kernel_is_bit_identical_to_formats(k, n, group, wdt):
    from qgemm_bench.operators.int4_quantize_kernel import quantize_int4

    sdt = torch.float16  # the interpreter has no bf16; test_quantize_kernel_bf16 covers it
    w = torch.randn(k, n) * torch.rand(1, n) * 3
    w[:group, 0] = 0.0  # a zero group
    w[0, 1], w[1, 1] = 3.5, -3.5 / 7 * 2.5  # an exact tie after scaling: q = -2.5 -> -2
    w = w.to(wdt).to(DEV)
    p, s = quantize_int4(w, group, sdt)
    p_ref, s_ref = formats.quantize_int4(w, group, sdt)
    assert torch.equal(p, p_ref) and torch.equal(s, s_ref)


# ------------------------------------------------------------------ our Helion kernel (interpreter configs)


# block_sizes: [K step in packed rows, M, N]
HELION_CONFIGS = [{"block_sizes": [32, 16, 32], "split_k": 2, "num_warps": 4, "num_stages": 1},
                  {"block_sizes": [16, 16, 64], "split_k": 1, "num_warps": 4, "num_stages": 1},
                  {"block_sizes": [64, 32, 16], "split_k": 4, "num_warps": 4, "num_stages": 1}]
# M = 80 takes the fused path (M 65..1024), whose config is
# FUSED_INTERPRETER_CONFIG, not these: one case per group there (the three
# configs ran the same compiled kernel on it), each config on the split path.
HELION_CASES = [(shape, group, config) for shape in [(1, 128, 40), (3, 384, 96), (17, 384, 37), (80, 256, 96)]
                for group in [32, 64, 128, 96, "channel", None]  # 96: per-element scales
                if not (group == 96 and shape[1] % 96)
                for config in (range(len(HELION_CONFIGS)) if shape[0] <= 64 else [None])]


@interpreter
@pytest.mark.parametrize("shape,group,config", HELION_CASES)
def test_helion_kernel_vs_fp64(shape, group, config, monkeypatch):
    from qgemm_bench.backends import helion_ops

    if config is not None:
        monkeypatch.setattr(helion_ops, "WEIGHT_ONLY_INTERPRETER_CONFIG", HELION_CONFIGS[config])
    out, inputs, prepared = run_backend(int4_gemm, "helion", case(int4_gemm, shape, group_size=group))
    check(out, fp64(inputs.x, int4_gemm.dequantize(inputs)))
    kmajor = prepared.resident[0].shape != inputs.w.shape  # the fused path reads its K-major copy
    assert kmajor == (config is None)


@interpreter
def test_helion_refuses_bad_inputs_in_one_line():
    import dataclasses

    c = case(int4_gemm, (16, 256, 32), group_size=64)
    inputs = int4_gemm.make_inputs(c, 0)
    helion = registry.get("int4_gemm", "helion")
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        helion.prepare(c, dataclasses.replace(inputs, x=inputs.x.float()))
    with pytest.raises(ValueError, match="do not fit K"):
        helion.prepare(c, dataclasses.replace(inputs, scales=inputs.scales[:-1]))


# The fused path (M 65..512): FUSED_INTERPRETER_CONFIG replaced per test.
# block_sizes [N, M], block_k: the K step.
def helion_fused_config(bn=64, bm=64, bk=128):
    return {"block_sizes": [bn, bm], "block_k": bk, "num_warps": 4, "num_stages": 1}


@interpreter
@pytest.mark.parametrize("shape,group,bk", [
    ((65, 768, 100), 32, 128), ((65, 768, 100), 64, 256), ((80, 768, 100), 128, 64),  # SUB, SUB, BLOCK
    ((65, 768, 100), "channel", 128), ((80, 768, 100), None, 128), ((65, 960, 100), 96, 128),  # GATHER: 96
    ((80, 1408, 100), 128, 256),  # K off the 256 step (11 x 128)
    ((65, 768, 300), 128, 256),  # N over two 256-column pads
    ((65, 768, 100), 48, 128), ((65, 512, 100), 16, 64)])  # GATHER: a byte's k and k + 16 in two groups
def test_helion_fused_kernel_vs_fp64(shape, group, bk, monkeypatch):
    """The Helion fused kernel on the K-major weights: every scale mode
    (fused_gemm.scale_mode), ragged M and N, K that the step does not divide."""
    from qgemm_bench.backends import helion_ops

    monkeypatch.setattr(helion_ops, "FUSED_INTERPRETER_CONFIG", helion_fused_config(bn=128 if shape[2] > 100 else 64,
                                                                                    bk=bk))
    out, inputs, prepared = run_backend(int4_gemm, "helion", case(int4_gemm, shape, group_size=group))
    check(out, fp64(inputs.x, int4_gemm.dequantize(inputs)))
    wt = prepared.resident[0]  # the fused path reads the K-major copy (kmajor_layout.py), made in prepare
    assert wt.dtype == torch.uint8 and wt.shape[0] % 256 == 0 and 2 * wt.shape[1] >= shape[1]


@interpreter
@pytest.mark.parametrize("m,path", [(64, "split"), (65, "fused"), (1024, "fused"), (1025, "dequant")])
def test_helion_auto_path_by_m(m, path):
    """The Triton backend's boundaries (weight_only.SPLIT_PATH_MAX_M,
    FUSED_MAX_M); the K-major copy only where the fused path runs; every path
    correct, and the prepared weights applied to another M take its path."""
    from qgemm_bench.backends.triton_kernels.weight_only import FUSED_MAX_M, SPLIT_PATH_MAX_M

    assert (SPLIT_PATH_MAX_M, FUSED_MAX_M) == (64, 1024)
    c = case(int4_gemm, (m, 64, 32), group_size=32)
    out, inputs, prepared = run_backend(int4_gemm, "helion", c)
    check(out, fp64(inputs.x, int4_gemm.dequantize(inputs)))
    kmajor = prepared.resident[0].shape != inputs.w.shape
    assert kmajor == (path == "fused")
    assert ("dequantize + cuBLAS" in prepared.notes) == (path == "dequant")
    x2 = torch.randn(3, 64, device=DEV).to(DT)  # the split path, through the same prepared weights
    check(prepared.apply(x2), fp64(x2, int4_gemm.dequantize(inputs)))


@interpreter
def test_helion_weight_only_paths_and_split_workspace():
    """helion_ops.WeightOnly: the path by M, the K-major copy made on first
    use only, the split path's workspace and counters left zeroed (one launch,
    the tile's last program finishes it), repeatable results."""
    from qgemm_bench.backends.helion_ops import WeightOnly

    inputs = int4_gemm.make_inputs(case(int4_gemm, (19, 384, 40), group_size=64), seed())
    gemm = WeightOnly("int4_gemm", inputs.w, inputs.scales, None, INT4, 64)
    assert [gemm.path(m) for m in (1, 64, 65, 1024, 1025)] == ["split", "split", "fused", "fused", "dequant"]
    ref = fp64(inputs.x, int4_gemm.dequantize(inputs))
    check(gemm(inputs.x), ref)
    check(gemm(inputs.x), ref)  # the workspace and counters were left ready
    # no K-major copy of either byte order: M = 19 took the split path
    assert not gemm._kmajor and gemm.resident(19) == (inputs.w, inputs.scales)
    for ws, count in gemm._workspace.values():
        assert float(ws.abs().sum()) == 0.0 and int(count.abs().sum()) == 0
    assert torch.equal(gemm.dequantize(DT), int4_gemm.dequantize(inputs).to(DT))


def test_helion_ptx_decodes_are_decode_py_s():
    """kernels.py's PTX strings are decode.py's (one decode, two languages:
    Helion cannot call a @triton.jit helper), and the int4 one still ends
    in its offset fmas (FOLD's biased text is the same without them)."""
    from qgemm_bench.backends.helion_kernels import kernels
    from qgemm_bench.backends.triton_kernels import decode

    assert kernels.INT4_BF16X2_PTX == decode.INT4_BF16X2_PTX
    assert kernels.NVFP4_BF16X2_PTX == decode.NVFP4_BF16X2_PTX
    assert kernels.INT4_BF16X2_PTX.count("fma.rn.bf16x2") == 4


def helion_definition(code: str, name: str) -> str:
    """The right-hand sides that define `name` in generated code, recursively."""
    rhs = re.search(rf"^\s*{name} = (.*)$", code, re.M)
    if rhs is None:
        return ""
    names = set(re.findall(r"\b[A-Za-z_]\w*\b", rhs.group(1))) - {name}
    return rhs.group(1) + "".join(helion_definition(code, v) for v in sorted(names))


def test_helion_generated_code_has_the_triton_kernels_structure():
    """What the speed rests on, in the Triton that Helion emits (bf16, the
    H100 configs' tiles, K = N = 1024): the fused kernel's weight tile is
    loaded at the loop variable's offset (alignment known: vector loads,
    cp.async), unmasked, decoded by the PTX, joined back into K order and fed
    to one dot as its first operand; the split kernel is one launch (no
    zeroing or cast kernels), finished by the tile's last program."""
    import helion

    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels import kernels, tuning

    m, k, n = 256, 1024, 1024
    x = torch.zeros(m, k, dtype=torch.bfloat16)
    s = torch.ones(k // 128, n, dtype=torch.bfloat16)
    cfg = tuning.helion_settings(helion_ops.default_config(INT4, "fused", m)[0])
    code = kernels.fused.bind((x.t(), torch.zeros(n, k // 2, dtype=torch.uint8), s.t(), torch.ones(1), n, INT4,
                               "block", 128, 128, True)).to_triton_code(helion.Config(**cfg))
    body = code[code.index("for offset_"):code.index("def fused(")]
    wload = next(line for line in body.splitlines() if "tl.load(wt +" in line)
    assert wload.rstrip().endswith(", None)")  # no mask
    assert "div_floor" not in "".join(helion_definition(body, name) for name in re.findall(r"v_\d+", wload))
    assert body.count("tl.dot(") == 1 and "tl.join(" in body and "tl.inline_asm_elementwise(" in body
    assert "tl.dot(tl.cast(w_tile" in body  # the decoded weights: the dot's first operand
    cfg = tuning.helion_settings(helion_ops.default_config(INT4, "split", 16)[0])
    for xs, small in ((x[:16], 0), (x[:1].expand(2, k), 1), (x[:3], 3)):  # M = 16, 1 (a stride-0 view), 3
        args = (xs, torch.zeros(k // 2, n, dtype=torch.int8), s, torch.ones(1), torch.zeros(16, n),
                torch.zeros(1, 4, dtype=torch.int32), INT4, "after", 128, 128, True, small)
        code = kernels.weight_only.bind(args).to_triton_code(helion.Config(**cfg))
        host = code[code.index("def weight_only("):]
        assert host.count("_launcher(") == 1 and "torch.zeros" not in host and ".to(" not in host
        assert "tl.debug_barrier()" in code and "sem='acq_rel'" in code
        # 16-row tiles below M = 16: no padding of the dot's operands, masked atomics for the M rows.
        assert "zeros_like" not in code and "tl.constexpr(16)" in code, small
        assert ("mask=None, sem='relaxed')" in code.split("tl.debug_barrier()")[0]) == (small == 0)


# ------------------------------------------------------------------ tritonbench entry points


class TbOp:  # what tritonbench passes: the entry points must not need anything from it
    pass


@interpreter
@pytest.mark.parametrize("entry", [tb.int4_gemm_tritonbench, tb.triton_int4_gemm_tritonbench])
def test_tritonbench_entry(entry):
    x = torch.randn(2, 3, 256).to(DT)  # [..., K]: rows are flattened
    w = torch.randint(-8, 8, (256, 40), dtype=torch.int32)
    fn = entry(TbOp(), x, w)
    out = fn()
    assert out.shape == (6, 40) and rel_error(out, x.reshape(-1, 256).double() @ w.double()) <= TOL[DT]
    assert torch.equal(fn(), out)


def test_tritonbench_entry_refuses_bad_weights():
    x = torch.randn(2, 64).to(DT)
    with pytest.raises(ValueError, match=r"\[-8, 7\]"):
        tb.int4_gemm_tritonbench(TbOp(), x, torch.full((64, 8), 9))
    with pytest.raises(ValueError, match="integer"):
        tb.int4_gemm_tritonbench(TbOp(), x, torch.randn(64, 8))
    with pytest.raises(ValueError, match="do not match"):
        tb.int4_gemm_tritonbench(TbOp(), x, torch.zeros(32, 8, dtype=torch.int32))
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        tb.int4_gemm_tritonbench(TbOp(), x.double(), torch.zeros(64, 8, dtype=torch.int32))


# ------------------------------------------------------------------ GPU (bf16, larger and ragged shapes)


def check_gpu(name, shape, dtype=torch.bfloat16, **settings):
    check_on_gpu(int4_gemm, name, shape, dtype, **settings)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("name", ["torch", "cublas", "torch_compile", "tinygemm"])
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (17, 2048, 1000), (256, 1024, 3072)])
@pytest.mark.parametrize("group", [32, 128, 256, None])
def test_torch_backends_bf16(name, shape, group):
    check_gpu(name, shape, group_size=group)


@pytest.mark.gpu
@needs_gpu
def test_tinygemm_per_channel_when_k_is_a_supported_group():
    check_gpu("tinygemm", (5, 256, 512), group_size="channel")


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("programs", [None, 1, 3, 7])
@pytest.mark.parametrize("tiles", [(256, 128, 64, 3), (128, 128, 128, 2), (64, 128, 128, 4)])
@pytest.mark.parametrize("shape,group", [((257, 5248, 1000), 128), ((1000, 4096, 520), "channel"),
                                         ((65, 5024, 520), 32)])
def test_ws_kernel_stream_k_vs_fp64(shape, group, tiles, programs, monkeypatch):
    # STREAM_K: one program per SM (here up to 132 over 16-40 tiles: every
    # tile shared by several), or a few (each running several segments, the
    # output tile's buffer reused), or one (no fixups); planes NaN before
    # each call, counters zero after (check_ws_calls).
    from qgemm_bench.backends.triton_kernels import ws_gemm
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the WS kernel is Hopper's (sm_90)")
    monkeypatch.setattr(ws_gemm, "STREAM_K_PROGRAMS", programs)
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, torch.bfloat16, CUDA, group_size=group), seed())
    gemm = fused(inputs, cfg(bm=16, bn=64, bk=128, split=2, WS=ws_tiles(*tiles, stream_k=True)))
    assert gemm.runs_ws(inputs.x, gemm.config)
    check_ws_calls(gemm, inputs.x, int4_gemm.dequantize(inputs))


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("shape", [(128, 8192, 8192), (64, 4096, 14336), (520, 4096, 14336)])
def test_triton_group_32_through_the_table_ws_tiles(shape):
    # Groups of 32 (four to fused_kernel's 128-k blocks: its TMA config gives
    # way to pointer loads, WeightOnlyGemm.tuned) keep the entry's WS tiles.
    from qgemm_bench.backends.triton_dispatch import make_weight_only

    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, torch.bfloat16, CUDA, group_size=32), 0)
    gemm = make_weight_only(inputs.w, inputs.scales, None, INT4, 32, target=stored_target())
    assert gemm.path(shape[0]) == "fused" and gemm.fused().runs_ws(inputs.x, gemm.fused().config_for(shape[0]))
    check_gpu("triton", shape, group_size=32)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("shape", [(256, 8192, 8192), (512, 4096, 4096), (1024, 8192, 8192)])
def test_triton_float16_where_the_table_takes_tma_loads(shape):
    # Float16 x has no PTX decode: TMA configs then returned wrong sums on
    # the H100 (10 of 10 calls), so FusedGemm.descriptors loads by pointer.
    check_gpu("triton", shape, torch.float16, group_size=128)
    check_gpu("triton", shape, group_size=128)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("group", [32, 64])
@pytest.mark.parametrize("shape", [(128, 8192, 8192), (257, 4096, 4096), (1024, 8192, 8192), (2048, 4096, 1000)])
def test_triton_groups_that_tile_a_k_block_take_tma_loads(shape, group):
    # fused_gemm.tma_usable: groups 32 and 64 take the table's TMA entries
    # (group 32 only in 256-row x tiles; at M = 128 its pointer config), in
    # bf16 and, by pointer, float16; above FUSED_MAX_M the fused kernel.
    from qgemm_bench.backends.triton_dispatch import make_weight_only, weight_only_entry
    from qgemm_bench.backends.triton_kernels import weight_only_configs

    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, torch.bfloat16, CUDA, group_size=group), 0)
    target = stored_target()  # the store entry this GPU's runs use, named
    gemm = make_weight_only(inputs.w, inputs.scales, None, INT4, group, target=target)
    e = weight_only_entry(target)
    raw = weight_only_configs.lookup(INT4, "fused", *shape, e.gpu, e.table)[0]  # these shapes' entries take TMA
    c = gemm.tuned(shape[0])[0]
    assert gemm.path(shape[0]) == "fused" and raw.get("TMA")
    assert bool(c.get("TMA")) == (group == 64 or raw["BLOCK_M"] >= 256 or raw["BLOCK_K"] // group <= 2)
    assert bool(gemm.fused().descriptors(inputs.x, c).get("x_desc")) == bool(c.get("TMA"))
    check_gpu("triton", shape, group_size=group)
    check_gpu("triton", shape, torch.float16, group_size=group)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("tiles", [(256, 128, 64, 3), (128, 128, 128, 2), (128, 64, 64, 4), (64, 64, 128, 3),
                                   (64, 64, 64, 6, 2), (128, 64, 128, 2, 2), (256, 128, 64, 4, 1, 2),
                                   (64, 64, 128, 3, 1, 3), (128, 128, 64, 4, 1, 4, 3), (128, 128, 128, 3, 1, 2, 2),
                                   (256, 128, 64, 4, 1, 1, 0, False, True), (128, 128, 64, 4, 1, 2, 4, False, True),
                                   (256, 128, 64, 4, 1, 1, 0, False, True, 4),
                                   (128, 128, 64, 3, 1, 2, 2, False, False, 3),
                                   (16, 64, 128, 8, 1, 2, 0, False, False, 1, True),
                                   (16, 64, 128, 8, 2, 1, 0, False, True, 1, True),
                                   (64, 128, 64, 4, 1, 1, 0, False, False, 1, True),
                                   (256, 128, 64, 4, 1, 2, 4, False, 2), (64, 64, 64, 6, 2, 1, 0, False, 2),
                                   (16, 64, 128, 8, 1, 2, 0, False, 2, 1, True), (16, 64, 128, 8, 1, 4, 0, False, 2),
                                   (128, 128, 64, 4, 1, 1, 0, False, 2)])
@pytest.mark.parametrize("shape,group", [((257, 5248, 1000), 128), ((1000, 4096, 520), 64),
                                         ((33, 5000, 1000), "channel"), ((520, 4096, 256), None),
                                         ((7, 2048, 8192), 128), ((600, 8192, 136), 256),
                                         ((257, 5248, 1000), 32), ((65, 5024, 520), 32),
                                         ((600, 8192, 136), "channel")])
def test_ws_kernel_vs_fp64(shape, group, tiles):
    # ws_gemm.py on ragged shapes: x rows past M (TMA zeros), N off the
    # 128-row tile (the store clips), K off the K block and the layout's
    # padding (zero codes, zero x), per channel and unscaled (the scales on
    # the sum, ws_gemm.CHANNEL; N 136 ends in a tile past the scales' row), groups of 32
    # (a scale per 32-k run; K 5024 ends mid-block) and of
    # 64..256 (64 in 128-k blocks: fused_kernel's tiles instead); with PDL
    # (back-to-back calls overlap: the splits' counters are reused), and with
    # the first weights loaded before the PDL wait (PDL 2: ws_gemm._producer;
    # splits of fewer K blocks than stages at K 2048); tiles in groups of
    # x-row blocks (M_GROUP 4, and 3 with splits: a last group of
    # fewer blocks at M 257 and 1000); ACC (the scales on each block's
    # product: groups of whole K blocks only, elsewhere fused_kernel's tiles).
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the WS kernel is Hopper's (sm_90)")
    bk = tiles[2]
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, torch.bfloat16, CUDA, group_size=group), seed())
    gemm = fused(inputs, cfg(bm=16, bn=64, bk=128, split=2, WS=ws_tiles(*tiles)))
    # (ACC tiles where ACC does not apply run as their twin without it: ws_gemm.tiles_for)
    assert gemm.runs_ws(inputs.x, gemm.config) == (group != 64 or bk == 64)
    check_ws_calls(gemm, inputs.x, int4_gemm.dequantize(inputs))


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("tiles", [(256, 128, 64, 4, 1, 2, 4, False, True), (64, 64, 64, 6, 2), (64, 64, 128, 4)])
def test_ws_kernel_stamps(tiles):
    # ws_gemm.run(stamps=) (STAMPS 1, scripts/ws_ab.py --stamps): the same bits as without, and each
    # consumer's timeline in order: start < loop end <= ... <= end, %clock64 moving over the loop; with
    # SPLITS the first split stores then counts, the last waits, adds, then stores y.
    from qgemm_bench.backends.triton_kernels import ws_gemm
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the WS kernel is Hopper's (sm_90)")
    inputs = int4_gemm.make_inputs(case(int4_gemm, (257, 5248, 1000), torch.bfloat16, CUDA, group_size=128), seed())
    gemm = fused(inputs, cfg(bm=16, bn=64, bk=128, split=2, WS=ws_tiles(*tiles)))
    c, p = gemm.config["WS"], gemm.kmajor
    descs, cache = ws_gemm.weight_descriptors(p, c, gemm.fmt, gemm.group), {}
    plain = ws_gemm.run(p, gemm.fmt, gemm.group, gemm.ts, inputs.x, c, descs, cache)
    programs = ws_gemm.launch_programs(p, 257, p.n, c)
    st = torch.zeros(ws_gemm.stamp_slots(programs), dtype=torch.int64, device=CUDA)
    assert torch.equal(ws_gemm.run(p, gemm.fmt, gemm.group, gemm.ts, inputs.x, c, descs, cache, stamps=st), plain)
    check(plain, fp64(inputs.x, int4_gemm.dequantize(inputs)), torch.bfloat16)
    splits = ws_gemm.launch_splits(p, c)[0]
    used = st.view(programs, 2, ws_gemm.STAMP_SLOTS)[:, :c["BLOCK_N"] // 64 * c.get("K_SPLIT", 1)].cpu()
    start, loop, mid, late, y, end, clk0, clk1 = used.unbind(-1)
    assert (start > 0).all() and (start < loop).all() and (loop <= end).all() and (clk1 > clk0).all()
    if splits == 1:
        assert not mid.any() and not late.any() and (c.get("K_SPLIT", 1) == 2 or ((loop <= y) & (y <= end)).all())
    else:
        first, last = slice(0, None, splits), slice(splits - 1, None, splits)
        assert (loop[first] <= mid[first]).all() and (mid[first] <= late[first]).all() and not y[first].any()
        assert ((loop[last] <= mid[last]) & (mid[last] <= late[last]) & (late[last] <= y[last]) &
                (y[last] <= end[last])).all()
    with pytest.raises(ValueError, match="stamps: contiguous int64 on x's device of at least"):
        ws_gemm.run(p, gemm.fmt, gemm.group, gemm.ts, inputs.x, c, descs, cache, stamps=st[:-1])


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("shape,group", [((1, 4096, 4096), 128), ((17, 2048, 1000), None), ((256, 1024, 3072), 64)])
def test_triton_through_the_autotuner_bf16(shape, group):
    # Each new shape autotunes (~9 s on the H100): a few representative cases.
    check_gpu("triton", shape, group_size=group)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("shape,group", [((1, 4096, 4096), 128), ((17, 2048, 1000), None), ((256, 1024, 3072), 64),
                                         ((100, 960, 520), 96)])
def test_helion_checked_in_configs_bf16(shape, group):
    check_gpu("helion", shape, group_size=group)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("shape,group", [((3, 2048, 1000), 32), ((64, 4096, 4096), 128), ((65, 5248, 1000), 64),
                                         ((300, 1024, 2048), "channel"), ((512, 2048, 1000), None),
                                         ((600, 1024, 2048), 128)])
def test_helion_every_path_bf16(shape, group):
    # Split (M 3: 16-row tiles, masked atomics; 64), fused (65..512, every
    # scale mode, K off the step), dequantize + cuBLAS (600); the PTX decodes.
    check_gpu("helion", shape, group_size=group)


@pytest.mark.gpu
@needs_gpu
def test_helion_stored_wide_frag_tiles_right_over_30_calls():
    """Each stored Helion int4 fused config whose tile runs fragment order
    on 8 warps wider than FRAG_MAX_BLOCK_M rows (TMA loads with x
    K-innermost: helion_ops.tma_k_inner; on pointer loads that tile gave
    wrong sums in some calls), at a ragged M of its bucket: 30 calls over
    two input sets, each against the reference."""
    from qgemm_bench.backends.config_buckets import bucket, parse
    from qgemm_bench.backends.helion_ops import FRAG_MAX_BLOCK_M
    from qgemm_bench.configs import store
    from qgemm_bench.types import Case

    target = stored_target()
    fused = store.load(target, "helion").table.get("kernels", {}).get("int4_gemm_fused", {})
    wide = {key: e["config"] for key, e in fused.items() if e["config"].get("frag") and
            e["config"].get("num_warps", 4) > 4 and e["config"]["block_sizes"][1] > FRAG_MAX_BLOCK_M}
    if not wide:
        pytest.skip(f"no 8-warp wide fragment-order tile in {target.name}'s Helion entries")
    helion = registry.get("int4_gemm", "helion")
    for key in sorted(wide):
        m, k, n = parse(key)
        shape = Shape(m - 5, k, n)
        assert bucket(*shape) == key
        c = Case("int4_gemm", shape, torch.bfloat16, CUDA, int4_gemm.Settings(group_size=128), target)
        runs = [(helion.prepare(c, i).fn, int4_gemm.reference(i)) for i in (int4_gemm.make_inputs(c, seed()),
                                                                           int4_gemm.make_inputs(c, seed()))]
        for call in range(30):
            fn, ref = runs[call % 2]
            check(fn(), ref, torch.bfloat16)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("name", ["fbgemm", "gemlite"])
@pytest.mark.parametrize("shape", [(7, 5248, 1024), (1, 4096, 4096), (300, 1024, 2048)])
@pytest.mark.parametrize("group", [32, 64, 128, "channel", None])
def test_peers_bf16(name, shape, group):
    # Ragged M and K; N the nearest size both libraries take (N % 128).
    check_gpu(name, shape, group_size=group)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("k,n,group", [(4096, 1000, 128), (1024, 264, 32), (256, 72, 256)])
def test_quantize_kernel_bf16_bit_identical(k, n, group):
    from qgemm_bench.operators.int4_quantize_kernel import quantize_int4

    w = (torch.randn(k, n, device=CUDA) * torch.rand(1, n, device=CUDA) * 10).to(torch.bfloat16)
    w[:group, 0] = 0
    for a, b in zip(quantize_int4(w, group, torch.bfloat16), formats.quantize_int4(w, group, torch.bfloat16),
                    strict=True):
        assert torch.equal(a, b)


@pytest.mark.gpu
@needs_gpu
def test_tritonbench_entries_on_gpu():
    x = torch.randn(16, 4096, device=CUDA, dtype=torch.bfloat16)
    w = torch.randint(-8, 8, (4096, 4096), device=CUDA, dtype=torch.int32)
    for entry in (tb.int4_gemm_tritonbench, tb.triton_int4_gemm_tritonbench):
        assert rel_error(entry(None, x, w)(), x.double() @ w.double()) <= 1e-2


@pytest.mark.parametrize("programs,tiles,blocks", [(132, 64, 128), (132, 320, 128), (132, 1024, 128), (7, 3, 5),
                                                   (13, 13, 1), (132, 1, 132), (5, 40, 3), (132, 80, 256),
                                                   (132, 264, 64), (3, 16, 82)])
def test_stream_k_segments_cover_every_block_once_and_meet_in_order(programs, tiles, blocks):
    # ws_gemm's STREAM_K schedule as the kernel runs it: whole tiles in all
    # but the last full wave, then each program a share of the other tiles'
    # K blocks, end to end, its segments from its last tile back; only its
    # first shared segment can stop short of its tile's last block (a plane
    # per program suffices), only its last can start past its tile's first
    # (the one that adds the others' planes), and a tile's
    # programs are stream_k_first's .. the one with its last block.
    from qgemm_bench.backends.triton_kernels import ws_gemm

    seen = {}
    for pid in range(programs):
        segs = ws_gemm.stream_k_segments(pid, programs, tiles, blocks)
        assert segs and all(k0 < k1 for _, k0, k1 in segs)
        shared = segs[max(tiles // programs - 1, 0):]
        assert [t for t, _, _ in shared] == sorted({t for t, _, _ in shared}, reverse=True)
        assert all(k1 == blocks for _, _, k1 in shared[1:]) and all(k0 == 0 for _, k0, _ in shared[:-1])
        for t, k0, k1 in segs:
            for k in range(k0, k1):
                assert (t, k) not in seen
                seen[t, k] = pid
    assert len(seen) == tiles * blocks
    base = max(tiles // programs - 1, 0) * programs  # whole tiles before: program t % programs, none shared
    assert all(seen[t, k] == t % programs for t in range(base) for k in range(blocks))
    for t in range(base, tiles):
        holders = sorted({seen[t, k] for k in range(blocks)})
        assert holders == list(range(holders[0], holders[-1] + 1)) and seen[t, blocks - 1] == holders[-1]
        assert ws_gemm.stream_k_first(t, programs, tiles, blocks) == holders[0] == seen[t, 0]
