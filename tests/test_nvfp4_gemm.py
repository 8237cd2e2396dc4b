"""nvfp4_gemm: the operator against independent fp64 math, every backend
against the reference, our Triton and Helion kernels on ragged shapes (every
E2M1 code, subnormal E4M3 scales), and the tritonbench entry points. GPU
variants are marked `gpu`."""

import dataclasses

import numpy as np
import pytest
import torch

from qgemm_bench.backends import registry
from qgemm_bench.errors import InputError
from qgemm_bench.integrations import tritonbench as tb
from qgemm_bench.operators import formats, nvfp4_gemm
from qgemm_bench.operators.common import rel_error
from qgemm_bench.operators.formats import INT4, NVFP4
from qgemm_bench.types import Shape
from tests.support import (
    ASM,
    CPU,
    DEV,
    DT,
    E2M1,
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
    target_for,
    triton_config,
)

# ------------------------------------------------------------------ the operator


@pytest.mark.parametrize("shape", [(1, 64, 48), (3, 160, 40), (17, 256, 37)])
@pytest.mark.parametrize("unscaled", [False, True])
def test_reference_vs_fp64(shape, unscaled):
    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, shape, torch.float16, CPU, unscaled=unscaled), seed())
    codes = np_unpack(inputs.w.numpy())
    mag = np.array(E2M1)[codes & 7]
    w = np.where(codes >= 8, -mag, mag) * np.repeat(inputs.block_scales.float().double().numpy(), 16, axis=0)
    w = w * float(inputs.tensor_scale)
    expected = inputs.x.double().numpy() @ w
    assert rel_np(nvfp4_gemm.reference(inputs).double().numpy(), expected) < 1e-6


def test_validate_refuses_k_off_the_block():
    with pytest.raises(InputError, match="block size 16"):
        nvfp4_gemm.validate(Shape(1, 40, 8), nvfp4_gemm.Settings())


def test_settings_labels_round_trip():
    for u in (False, True):
        assert nvfp4_gemm.Settings.from_label(nvfp4_gemm.Settings(u).label()) == nvfp4_gemm.Settings(u)


def test_minimum_bytes():
    s = Shape(16, 8192, 8192)
    assert nvfp4_gemm.bytes(s, torch.bfloat16, nvfp4_gemm.Settings()) == (
        16 * 8192 * 4 + 8192 * 8192 // 2 + 512 * 8192 + 4)


# ------------------------------------------------------------------ every backend


BACKENDS = [b.name for b in registry.for_op("nvfp4_gemm")]


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("shape", [(1, 64, 48), (17, 384, 96), (5, 256, 37)])
@pytest.mark.parametrize("unscaled", [False, True])
def test_every_backend_vs_reference(name, shape, unscaled):
    c = case(nvfp4_gemm, shape, unscaled=unscaled)
    if reason := registry.get("nvfp4_gemm", name).why_not(c):
        pytest.skip(reason)
    out, inputs, prepared = run_backend(nvfp4_gemm, name, c)
    check(out, nvfp4_gemm.reference(inputs))
    x2 = torch.randn(3, shape[1], device=c.device).to(c.dtype)
    check(prepared.apply(x2), x2.float() @ nvfp4_gemm.dequantize(inputs))


def every_code_inputs():
    """Every E2M1 code in every row, block scales down to E4M3 subnormals, and
    x = I, so y is the dequantized weight itself."""
    k, n = 32, 16
    codes = torch.arange(16, dtype=torch.uint8).repeat(2)[:, None].expand(k, n).contiguous()
    bs = torch.tensor([0x01, 0x07, 0x08, 0x38, 0x7E] * 7, dtype=torch.uint8)[:2 * n].reshape(2, n)
    return nvfp4_gemm.Inputs(torch.eye(k, dtype=DT, device=DEV), formats.pack_nibbles(codes).to(DEV),
                             bs.view(torch.float8_e4m3fn).to(DEV), torch.tensor(0.5, device=DEV))


# ------------------------------------------------------------------ our Triton kernel


cfg = triton_config



def weight_only(inputs, config=None, path="auto"):
    from qgemm_bench.backends.triton_dispatch import make_weight_only

    return make_weight_only(inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16, config,
                            path, target=target_for(inputs.w))


@pytest.mark.parametrize("shape", [(1, 64, 40), (3, 160, 96), (17, 384, 37), (80, 128, 48)])
@pytest.mark.parametrize("unscaled", [False, True])
@pytest.mark.parametrize("config", [cfg(bk=32, split=1), cfg(bn=64, bk=128, split=2)] +
                         [cfg(bk=32, split=2, DECODE_ASM=a) for a in ASM])
def test_triton_kernel_vs_fp64(shape, unscaled, config):
    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, shape, unscaled=unscaled), seed())
    check(weight_only(inputs, config)(inputs.x), fp64(inputs.x, nvfp4_gemm.dequantize(inputs)))


def test_triton_kernel_decodes_every_code_and_subnormal_scales():
    inputs = every_code_inputs()
    for flags in [{}] + [{"DECODE_ASM": a} for a in ASM]:
        out = weight_only(inputs, cfg(bk=32, **flags))(inputs.x)
        assert torch.equal(out.float(), nvfp4_gemm.dequantize(inputs).to(DT).float()), flags


@pytest.mark.parametrize("path", ["split", "fused", "dequant"])
@pytest.mark.parametrize("shape", [(3, 384, 40), (19, 192, 37)])
def test_triton_every_path_vs_fp64_and_repeatable(path, shape):
    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, shape), seed())
    ref = fp64(inputs.x, nvfp4_gemm.dequantize(inputs))
    gemm = weight_only(inputs, cfg(bn=32, bk=32, split=3), path)
    check(gemm(inputs.x), ref)
    check(gemm(inputs.x), ref)


@pytest.mark.parametrize("shape,bk,split", [((65, 640, 100), 128, 1), ((7, 1408, 72), 64, 3), ((33, 256, 40), 256, 2)])
def test_fused_kernel_vs_fp64(shape, bk, split):
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm

    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, shape), seed())
    gemm = FusedGemm(inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16,
                     cfg(bm=16, bn=64, bk=bk, split=split), target=target_for(inputs.w))
    check(gemm(inputs.x), fp64(inputs.x, nvfp4_gemm.dequantize(inputs)))


@pytest.mark.parametrize("shape,bn,bk,split,scale8", [((1, 1408, 100), 64, 128, 3, False),
                                                      ((7, 1280, 72), 128, 64, 4, True),
                                                      ((17, 640, 200), 64, 128, 1, False)])
def test_fused_kernel_acc_scale_vs_fp64(shape, bn, bk, split, scale8):
    # NVFP4 ACC_SCALE: each K block's dot on its own (the block scales in the decode), its fp32 product times
    # the tensor scale, added up; ragged M, N and K (split-K uneven at K = 1408: 11 blocks over 3 splits).
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm

    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, shape), seed())
    c = cfg(bm=16, bn=bn, bk=bk, split=split, ACC_SCALE=True, **({"SCALE8": True} if scale8 else {}))
    gemm = FusedGemm(inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16, c,
                     target=target_for(inputs.w))
    assert gemm.config_for(shape[0])["ACC_SCALE"]
    check(gemm(inputs.x), fp64(inputs.x, nvfp4_gemm.dequantize(inputs)))


def test_short_decode_is_a_config_key_and_runs_right():
    # SHORT_DECODE picks the shorter PTX decode (tests/test_decode_ptx.py: the same bits); on the interpreter
    # (no PTX) the config runs as without it. A value that is not a bool ends in one ValueError line.
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm
    from qgemm_bench.backends.triton_kernels.split_k_configs import describe
    from qgemm_bench.backends.triton_kernels.weight_only_configs import check_config

    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, (5, 640, 72)), seed())
    c = cfg(bm=16, bn=64, bk=128, split=2, SHORT_DECODE=True, ACC_SCALE=True)
    check_config(c, "c", NVFP4)
    assert describe(c).endswith(" acc short")
    gemm = FusedGemm(inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16, c,
                     target=target_for(inputs.w))
    check(gemm(inputs.x), fp64(inputs.x, nvfp4_gemm.dequantize(inputs)))
    with pytest.raises(ValueError, match="SHORT_DECODE=1 must be true or false"):
        check_config({**c, "SHORT_DECODE": 1}, "c", NVFP4)


def test_rot_decode_is_a_config_key_runs_right_and_reads_the_permuted_weights_only_where_it_runs():
    # ROT_DECODE: the PTX decode of words whose bits decode.nvfp4_rot_words permuted (tests/test_decode_ptx.py:
    # the same bits before each fma). On the interpreter (fp16, no PTX) the config runs as without it, on the
    # plain weights; rot_runs says where the permuted copy is read (NVFP4 in fragment order, pointer loads, the
    # PTX decode of bf16 x), and resident_at counts that copy where it is.
    from qgemm_bench.backends import kmajor_layout
    from qgemm_bench.backends.triton_kernels.decode import nvfp4_rot_words
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm
    from qgemm_bench.backends.triton_kernels.split_k_configs import describe
    from qgemm_bench.backends.triton_kernels.weight_only_configs import check_config

    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, (5, 640, 72)), seed())
    c = cfg(bm=16, bn=64, bk=128, split=2, ROT_DECODE=True)
    check_config(c, "c", NVFP4)
    assert describe(c).endswith(" rot")
    gemm = FusedGemm(inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16, c,
                     target=target_for(inputs.w))
    check(gemm(inputs.x), fp64(inputs.x, nvfp4_gemm.dequantize(inputs)))
    assert gemm._wt_rot is None  # never made where it does not run
    bf16 = torch.zeros(1, 640, dtype=torch.bfloat16)
    assert gemm.rot_runs(bf16, c) and not gemm.rot_runs(bf16.half(), c)
    assert not gemm.rot_runs(bf16, {**c, "TMA": True}) and not gemm.rot_runs(bf16, {**c, "DECODE_ASM": False})
    assert not gemm.rot_runs(bf16, {k: v for k, v in c.items() if k != "ROT_DECODE"})
    weights = gemm.resident_at(5)[0]
    assert weights is gemm._wt_rot and not torch.equal(weights, gemm.kmajor.wt) and gemm.kmajor.wt in gemm.resident
    # The words are a decode call's 4 bytes as the wgmma A-operand registers hold them: row r bytes 2p, 2p + 1,
    # then row r + 8's, r mod 16 < 8 (a loop over the untiled bytes, against fused_gemm's reshapes).
    plain, rot = kmajor_layout.untiled(gemm.kmajor), kmajor_layout.untiled(dataclasses.replace(gemm.kmajor,
                                                                                               wt=weights))
    for r in (0, 5, 16 + 7, plain.shape[0] - 9):
        for q in (0, 3, plain.shape[1] // 2 - 1):
            rows, cols = [r, r, r + 8, r + 8], [2 * q, 2 * q + 1, 2 * q, 2 * q + 1]
            assert torch.equal(rot[rows, cols], nvfp4_rot_words(plain[rows, cols].reshape(1, 4)).reshape(4)), (r, q)
    with pytest.raises(ValueError, match="ROT_DECODE=1 must be true or false"):
        check_config({**c, "ROT_DECODE": 1}, "c", NVFP4)


def test_fused_configs_wrong_on_the_h100_are_refused_and_left_out_of_the_pools():
    from qgemm_bench.backends.triton_kernels.fused_gemm import FUSED_CONFIGS, FusedGemm, config, pool, wrong_on_sm90
    from qgemm_bench.backends.triton_kernels.split_k_configs import describe

    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, (3, 256, 64)), seed())
    for c in (config(64, 128, 128, 2, 8, 3), config(256, 64, 128, 1, 4, 3, tma=True),
              config(256, 128, 64, 1, 8, 3, tma=True), config(256, 64, 128, 1, 4, 3, tma="x")):
        FusedGemm(inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16, c,
                  target=target_for(inputs.w)).config_for(3)
    assert wrong_on_sm90(INT4, config(64, 128, 128, 2, 8, 3))  # int4 with 8 warps and split-K
    assert not wrong_on_sm90(INT4, config(64, 128, 128, 1, 8, 3)) and not wrong_on_sm90(INT4, config(64, 128, 128, 2))
    # NVFP4 with TMA (scales after a unit-scale decode): the int4 TMA tiles and x alone in 256x64x128.
    assert {describe(c) for c in pool(1024, NVFP4) if c.get("TMA")} == \
        {describe(c) for c in pool(1024, INT4) if c.get("TMA")} | {"256x64x128 split 1 w4 s3 tma-x"}
    assert not [c for c in FUSED_CONFIGS[NVFP4].values() if c.get("TMA")]
    assert [c for c in pool(1024, INT4) if c.get("TMA") and c["BLOCK_M"] > 128]
    assert not [c for c in pool(16, INT4) + pool(256, INT4) if c["num_warps"] == 8 and c["SPLIT_K"] > 1]
    # ACC_SCALE in both formats' split-K pools (NVFP4: one dot a K block), with its SCALE8 twins in NVFP4's.
    assert [c for c in pool(16, INT4) if c.get("ACC_SCALE")] and [c for c in pool(16, NVFP4) if c.get("ACC_SCALE")]
    assert [c for c in pool(1, NVFP4) if c.get("ACC_SCALE") and c.get("SCALE8") and c.get("maxnreg") == 128]
    assert all(bool(c.get("SHORT_DECODE")) == bool(c.get("ACC_SCALE")) for c in pool(16, NVFP4))  # short decode too
    assert not [c for c in pool(16, INT4) if c.get("SHORT_DECODE")]
    assert [c for c in pool(1, INT4) if c.get("maxnreg") == 128 and c["BLOCK_N"] == 128 and c["SPLIT_K"] == 8]


@pytest.mark.parametrize("shape,bm,bk,split", [((33, 1408, 100), 32, 128, 1), ((65, 768, 200), 64, 64, 2),
                                              ((7, 1280, 72), 16, 128, 3), ((260, 1280, 72), 256, 128, 1)])
def test_fused_kernel_tma_loads_of_x_only_vs_fp64(shape, bm, bk, split):
    # TMA_W False: x's tiles by TMA, rows past M and columns past K as zeros;
    # the weights and block scales by pointer loads. No weight descriptor is
    # made.
    from qgemm_bench.backends.triton_kernels import fused_gemm

    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, shape), seed())
    gemm = fused_gemm.FusedGemm(inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16,
                                fused_gemm.config(bm, 64, bk, split, 4, 3, tma="x"), target=target_for(inputs.w))
    assert set(gemm.descriptors(inputs.x, gemm.config)) == {"x_desc"}
    ref = fp64(inputs.x, nvfp4_gemm.dequantize(inputs))
    check(gemm(inputs.x), ref)
    check(gemm(inputs.x), ref)
    assert not gemm._w_desc


def test_fused_kernel_decodes_every_code_and_subnormal_scales():
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm

    inputs = every_code_inputs()
    for flags in [{}] + [{"DECODE_ASM": a} for a in ASM]:
        gemm = FusedGemm(inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16,
                         cfg(bm=16, bn=64, bk=64, **flags), target=target_for(inputs.w))
        assert torch.equal(gemm(inputs.x).float(), nvfp4_gemm.dequantize(inputs).to(DT).float()), flags


def test_the_direct_shift_ptx_is_the_shift_first_one_without_its_shifts_right():
    # decode.NVFP4_DIRECT_BF16X2_PTX is derived from NVFP4_BF16X2_PTX by text
    # replacement: every replacement applied (no shift right, no read of the
    # shifted registers h0 / h1), the rest unchanged.
    from qgemm_bench.backends.triton_kernels import decode

    old, new = decode.NVFP4_BF16X2_PTX, decode.NVFP4_DIRECT_BF16X2_PTX
    body = new.split(";", 1)[1]  # past the register declarations
    assert "shr" not in new and "h0" not in body and "h1" not in body
    assert new.count("shl.b32") == old.count("shl.b32") == 8 and new.count("fma.rn.bf16x2") == 4
    assert {"shl.b32 a, t0, 2;", "shl.b32 b, t0, 8;", "shl.b32 a, t1, 2;", "shl.b32 b, t1, 8;"} <= \
        {line.strip() for line in new.splitlines()}
    assert decode.NVFP4_SPLIT_BF16X2_PTX.count("$7") == decode.NVFP4_SPLIT_BF16X2_PTX.count("$8") == 1


def fused_nv(inputs, config):
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm

    return FusedGemm(inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16, config,
                     target=target_for(inputs.w))


def test_ws_config_runs_nvfp4_on_its_layout_else_its_fused_kernel_tiles(monkeypatch):
    # FusedGemm.runs_ws for NVFP4 (bf16 block scales, fragment-order 64-row
    # tiles) on a CUDA x (faked: the attributes read) on sm_90; on the CPU
    # the rest of the config runs in fused_kernel, right.
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm, ws_tiles

    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, (9, 768, 200)), seed())
    c = cfg(bm=16, bn=64, bk=64, split=3, WS=ws_tiles(128, 128, 64, 3))
    gemm = fused_nv(inputs, c)
    assert not gemm.runs_ws(inputs.x, gemm.config)
    check(gemm(inputs.x), fp64(inputs.x, nvfp4_gemm.dequantize(inputs)))
    gemm.target = fake_target(capability=(9, 0))  # an sm_90 Target decides, not the machine the test runs on
    x = type("X", (), {"is_cuda": True, "dtype": torch.bfloat16, "shape": (9, 768), "device": None,
                       "stride": lambda self, d: (768, 1)[d], "data_ptr": lambda self: 0})()
    assert gemm.runs_ws(x, c) and gemm.kmajor.scales.dtype == torch.bfloat16
    assert gemm.runs_ws(x, {**c, "WS": ws_tiles(128, 128, 128, 2)})  # 128-k blocks: the 64 x 128 tiles hold them
    k_order = FusedGemm(inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16, c, frag=False,
                        target=gemm.target)
    assert not k_order.runs_ws(x, c)
    assert not gemm.runs_ws(x, {**c, "DECODE_ASM": False})


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("tiles", [(256, 128, 64, 3), (128, 128, 128, 2), (128, 64, 64, 4), (64, 64, 128, 3),
                                   (64, 64, 64, 6, 2), (128, 64, 128, 2, 2), (256, 128, 64, 4, 1, 2),
                                   (64, 64, 128, 3, 1, 3), (128, 128, 64, 4, 1, 4, 3), (128, 128, 128, 3, 1, 2, 2),
                                   (64, 64, 64, 6, 2, 1, 0, False, 2), (128, 128, 64, 4, 1, 2, 4, False, 2)])
@pytest.mark.parametrize("shape", [(257, 5248, 1000), (1000, 4096, 520), (33, 5008, 1000), (7, 2048, 8192),
                                   (600, 8192, 136)])
@pytest.mark.parametrize("unscaled", [False, True])
def test_ws_kernel_vs_fp64(shape, tiles, unscaled):
    # ws_gemm.py's NVFP4 path on ragged shapes: x rows past M (TMA zeros), N
    # off the tile (the store clips), K off the K block (zero codes and
    # scales, zero x); block scales per 16 k, the tensor scale at the end.
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the WS kernel is Hopper's (sm_90)")
    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, shape, torch.bfloat16, torch.device("cuda"), unscaled=unscaled),
                                    seed())
    gemm = fused_nv(inputs, cfg(bm=16, bn=64, bk=128, split=2, WS=ws_tiles(*tiles)))
    assert gemm.runs_ws(inputs.x, gemm.config)
    check_ws_calls(gemm, inputs.x, nvfp4_gemm.dequantize(inputs))


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("programs", [None, 5])
@pytest.mark.parametrize("shape", [(257, 5248, 1000), (1000, 4096, 520)])
def test_ws_kernel_stream_k_vs_fp64(shape, programs, monkeypatch):
    # STREAM_K (ws_gemm._sk_consumer) with NVFP4's block scales and tensor scale.
    from qgemm_bench.backends.triton_kernels import ws_gemm
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the WS kernel is Hopper's (sm_90)")
    monkeypatch.setattr(ws_gemm, "STREAM_K_PROGRAMS", programs)
    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, shape, torch.bfloat16, torch.device("cuda")), seed())
    gemm = fused_nv(inputs, cfg(bm=16, bn=64, bk=128, split=2, WS=ws_tiles(256, 128, 64, 3, stream_k=True)))
    assert gemm.runs_ws(inputs.x, gemm.config)
    check_ws_calls(gemm, inputs.x, nvfp4_gemm.dequantize(inputs))


@pytest.mark.gpu
@needs_gpu
def test_ws_kernel_decodes_every_code_and_subnormal_scales():
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the WS kernel is Hopper's (sm_90)")
    inputs = every_code_inputs()
    inputs = dataclasses.replace(inputs, x=inputs.x.to("cuda", torch.bfloat16), w=inputs.w.cuda(),
                                 block_scales=inputs.block_scales.cuda(), tensor_scale=inputs.tensor_scale.cuda())
    gemm = fused_nv(inputs, cfg(bm=16, bn=64, bk=64, WS=ws_tiles(64, 64, 64, 2)))
    assert gemm.runs_ws(inputs.x, gemm.config)
    assert torch.equal(gemm(inputs.x).float(), nvfp4_gemm.dequantize(inputs).to(torch.bfloat16).float())


@pytest.mark.gpu
@needs_gpu
def test_rot_decode_gives_the_split_decode_s_output_bit_for_bit_on_gpu():
    # Every code, subnormal block scales, x = I: the fused kernel with ROT_DECODE (the permuted words' PTX
    # decode) returns the plain decode's output bit for bit (the same products summed in the same order),
    # and on ragged random inputs with split-K it is right against fp64.
    inputs = every_code_inputs()
    inputs = dataclasses.replace(inputs, x=inputs.x.to("cuda", torch.bfloat16), w=inputs.w.cuda(),
                                 block_scales=inputs.block_scales.cuda(), tensor_scale=inputs.tensor_scale.cuda())
    c = cfg(bm=16, bn=64, bk=64)
    plain, rot = fused_nv(inputs, c), fused_nv(inputs, {**c, "ROT_DECODE": True})
    assert rot.rot_runs(inputs.x, rot.config) and not plain.rot_runs(inputs.x, plain.config)
    assert torch.equal(rot(inputs.x), plain(inputs.x))
    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, (7, 1280, 200), torch.bfloat16, torch.device("cuda")), seed())
    for split in (1, 3):
        gemm = fused_nv(inputs, cfg(bm=16, bn=128, bk=128, split=split, ROT_DECODE=True))
        check(gemm(inputs.x), fp64(inputs.x, nvfp4_gemm.dequantize(inputs)), torch.bfloat16)


@pytest.mark.parametrize("m,path", [(64, "split"), (65, "fused"), (1025, "dequant")])
def test_triton_auto_path_by_m(m, path):
    # The measured crossovers (weight_only.FUSED_MAX_M).
    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, (m, 64, 32)), 0)
    gemm = weight_only(inputs, cfg(bm=64, bn=32, bk=32, split=2))
    assert gemm.path(m) == path
    check(gemm(inputs.x), fp64(inputs.x, nvfp4_gemm.dequantize(inputs)))


def test_triton_above_fused_max_m_nvfp4_keeps_dequantize():
    # NVFP4's default configs (no table here) take no TMA loads, so it
    # keeps dequantize + cuBLAS above FUSED_MAX_M.
    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, (1025, 64, 40)), seed())
    gemm = weight_only(inputs)
    assert gemm.path(1025) == "dequant" and gemm.path(1024) == "fused"
    check(gemm(inputs.x), fp64(inputs.x, nvfp4_gemm.dequantize(inputs)))


def test_triton_dequantize_matches_the_formats_module():
    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, (2, 96, 24)), 1)
    assert torch.equal(weight_only(inputs, path="dequant").dequantize(DT), nvfp4_gemm.dequantize(inputs).to(DT))


# ------------------------------------------------------------------ our Helion kernel (interpreter configs)


HELION_CONFIGS = [{"block_sizes": [32, 16, 32], "split_k": 2, "num_warps": 4, "num_stages": 1},
                  {"block_sizes": [64, 32, 16], "split_k": 4, "num_warps": 4, "num_stages": 1}]


# M = 80 takes the fused path (M 65..1024), whose config is
# FUSED_INTERPRETER_CONFIG, not these: one case there (the two configs ran
# the same compiled kernel on it), each config on the split path.
@interpreter
@pytest.mark.parametrize("shape,config", [(shape, config) for shape in [(1, 64, 40), (3, 160, 96), (17, 384, 37)]
                                          for config in range(len(HELION_CONFIGS))] + [((80, 128, 48), None)])
@pytest.mark.parametrize("unscaled", [False, True])
def test_helion_kernel_vs_fp64(shape, unscaled, config, monkeypatch):
    from qgemm_bench.backends import helion_ops

    if config is not None:
        monkeypatch.setattr(helion_ops, "WEIGHT_ONLY_INTERPRETER_CONFIG", HELION_CONFIGS[config])
    out, inputs, prepared = run_backend(nvfp4_gemm, "helion", case(nvfp4_gemm, shape, unscaled=unscaled))
    check(out, fp64(inputs.x, nvfp4_gemm.dequantize(inputs)))
    kmajor = prepared.resident[0].shape != inputs.w.shape  # the fused path reads its K-major copy
    assert kmajor == (config is None)


@interpreter
def test_helion_kernel_decodes_every_code_exactly():
    inputs = every_code_inputs()
    out, _, _ = run_backend(nvfp4_gemm, "helion", case(nvfp4_gemm, (32, 32, 16)), inputs)
    assert torch.equal(out.float(), nvfp4_gemm.dequantize(inputs).to(DT).float())


@interpreter
@pytest.mark.parametrize("shape,unscaled,bk,acc", [((65, 768, 100), False, 128, False),
                                                   ((80, 1408, 100), False, 256, False),
                                                   ((65, 768, 300), True, 256, False),
                                                   ((80, 160, 48), False, 64, False),
                                                   ((65, 768, 100), False, 128, True),
                                                   ((80, 160, 48), False, 64, True)])
def test_helion_fused_kernel_vs_fp64(shape, unscaled, bk, acc, monkeypatch):
    """The fused path (M 65..512): E4M3 block scales as SUB tiles loaded a
    step ahead, ragged M and N, K off the step (1408 = 5.5 x 256, 160);
    acc_scale: each step's dot on its own, times the tensor scale."""
    from qgemm_bench.backends import helion_ops

    monkeypatch.setattr(helion_ops, "FUSED_INTERPRETER_CONFIG",
                        {"block_sizes": [128 if shape[2] > 100 else 64, 64], "block_k": bk, "num_warps": 4,
                         "num_stages": 1, **({"acc_scale": True} if acc else {})})
    out, inputs, prepared = run_backend(nvfp4_gemm, "helion", case(nvfp4_gemm, shape, unscaled=unscaled))
    check(out, fp64(inputs.x, nvfp4_gemm.dequantize(inputs)))
    assert prepared.resident[0].shape[0] % 256 == 0  # the K-major weights
    assert prepared.resident[2].dtype == torch.float32 and prepared.resident[2].numel() == 1  # the tensor scale


@interpreter
@pytest.mark.parametrize("shape,bk,acc,split", [((65, 768, 100), 128, False, 1), ((80, 1408, 37), 256, True, 1),
                                                ((80, 160, 48), 64, True, 3), ((70, 768, 300), 128, False, 2)])
def test_helion_fused_bf16_scales_vs_fp64(shape, bk, acc, split, monkeypatch):
    """bf16_scales: the fused path reads FusedGemm's block scales, bf16 E4M3 x
    2^118 (decode.bf16_x2_118), held in place of the E4M3 bytes; ragged M
    and N, K off the step (1408, 160), split-K, acc_scale or not."""
    from qgemm_bench.backends import helion_ops

    monkeypatch.setattr(helion_ops, "FUSED_INTERPRETER_CONFIG",
                        {"block_sizes": [64, 32], "block_k": bk, "split_k": split, "num_warps": 4, "num_stages": 1,
                         "bf16_scales": True, **({"acc_scale": True} if acc else {})})
    out, inputs, prepared = run_backend(nvfp4_gemm, "helion", case(nvfp4_gemm, shape))
    check(out, fp64(inputs.x, nvfp4_gemm.dequantize(inputs)))
    k, n = shape[1:]
    scales = prepared.resident[1]  # [K // 16, N] padded, the values times 2^118 exactly
    assert scales.dtype == torch.bfloat16 and len(prepared.resident) == 3
    assert torch.equal(scales[: k // 16, :n].float() * 2.0**-118, inputs.block_scales.float())


@interpreter
def test_helion_bf16_scales_decode_every_code_exactly(monkeypatch):
    """x = I stacked (M = 96, the fused path) with bf16_scales: the
    dequantized weights exactly, E4M3 subnormal scales included."""
    from qgemm_bench.backends import helion_ops

    monkeypatch.setattr(helion_ops, "FUSED_INTERPRETER_CONFIG", {**helion_ops.FUSED_INTERPRETER_CONFIG,
                                                                 "bf16_scales": True})
    inputs = every_code_inputs()
    stacked = dataclasses.replace(inputs, x=inputs.x.repeat(3, 1))
    out, _, prepared = run_backend(nvfp4_gemm, "helion", case(nvfp4_gemm, (96, 32, 16)), stacked)
    assert prepared.resident[1].dtype == torch.bfloat16
    assert torch.equal(out.float(), nvfp4_gemm.dequantize(inputs).to(DT).float().repeat(3, 1))


@interpreter
def test_helion_every_path_decodes_every_code_exactly():
    """x = I stacked: every path (split M=32, fused M=96, dequantize M=544)
    returns the dequantized weights exactly."""
    inputs = every_code_inputs()
    want = nvfp4_gemm.dequantize(inputs).to(DT).float()
    for copies in (1, 3, 17):
        stacked = dataclasses.replace(inputs, x=inputs.x.repeat(copies, 1))
        out, _, prepared = run_backend(nvfp4_gemm, "helion", case(nvfp4_gemm, (32 * copies, 32, 16)), stacked)
        assert torch.equal(out.float(), want.repeat(copies, 1)), copies


# ------------------------------------------------------------------ tritonbench entry points


@interpreter
@pytest.mark.parametrize("entry", [tb.nvfp4_gemm_tritonbench, tb.triton_nvfp4_gemm_tritonbench])
def test_tritonbench_entry(entry):
    x = torch.randn(5, 128).to(DT)
    w = torch.randn(128, 48)
    out = entry(None, x, w)()
    packed, bs, ts = formats.quantize_nvfp4(w)
    ref = x.double() @ formats.dequantize_nvfp4(packed, bs, ts, torch.float64)
    assert out.shape == (5, 48) and rel_error(out, ref) <= TOL[DT]


def test_tritonbench_entry_refuses_bad_weights():
    with pytest.raises(ValueError, match="block size 16"):
        tb.nvfp4_gemm_tritonbench(None, torch.randn(2, 40).to(DT), torch.randn(40, 8))
    with pytest.raises(ValueError, match="floating-point"):
        tb.nvfp4_gemm_tritonbench(None, torch.randn(2, 64).to(DT), torch.zeros(64, 8, dtype=torch.int32))


# ------------------------------------------------------------------ GPU (bf16, larger and ragged shapes)


def check_gpu(name, shape, dtype=torch.bfloat16, **settings):
    check_on_gpu(nvfp4_gemm, name, shape, dtype, **settings)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("name", ["torch", "cublas", "torch_compile"])
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (17, 2048, 1000), (256, 1024, 3072)])
@pytest.mark.parametrize("unscaled", [False, True])
def test_torch_backends_bf16(name, shape, unscaled):
    check_gpu(name, shape, unscaled=unscaled)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("shape", [(256, 8192, 8192), (128, 8192, 57344), (2048, 8192, 8192)])
def test_triton_tma_entries_in_bf16_and_float16(shape):
    # The table's TMA entries (scales after the decode) in bf16; float16 x
    # (no PTX decode) loads the same tiles by pointer: with TMA it returned
    # NaN on the H100 (FusedGemm.descriptors).
    check_gpu("triton", shape)
    check_gpu("triton", shape, torch.float16)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("shape,unscaled", [((1, 4096, 4096), False), ((256, 1024, 3072), True)])
def test_triton_through_the_autotuner_bf16(shape, unscaled):
    check_gpu("triton", shape, unscaled=unscaled)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("shape,unscaled", [((1, 4096, 4096), False), ((256, 1024, 3072), True),
                                            ((17, 2048, 1000), False)])
def test_helion_checked_in_configs_bf16(shape, unscaled):
    check_gpu("helion", shape, unscaled=unscaled)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("shape", [(5, 2048, 1000), (200, 5248, 1000), (512, 1024, 3072), (600, 1024, 2048)])
def test_helion_every_path_bf16(shape):
    # Split (M 5: 16-row tiles), fused (K off the step), dequantize + cuBLAS.
    check_gpu("helion", shape)
