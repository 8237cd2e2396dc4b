"""PERSISTENT (fused_gemm.fused_persistent_kernel): a fixed grid of programs
(PERSISTENT per SM) taking the fused kernel's (tile, split) work items in
turn in one flattened loop. Against fp64 on the dequantized weights and
against fused_kernel at the same config (ragged M, N and K, splits of
unequal length and empty ones, int4 group 128, 32, per channel and
ACC_SCALE/FOLD, NVFP4 with and without SCALE8), with a made-up SM count
small enough that every program takes several items; the split workspace
and counters left zeroed (two calls, the same answer); the configs it is
refused in. On the CPU the interpreter's non-PTX path in fp16, on a GPU the
PTX decode in bf16."""

import pytest
import torch

from qgemm_bench.backends.kmajor_layout import TILE
from qgemm_bench.backends.triton_kernels import fused_gemm
from qgemm_bench.backends.triton_kernels.split_k_configs import describe
from qgemm_bench.backends.triton_kernels.weight_only_configs import check_config
from qgemm_bench.operators import int4_gemm, nvfp4_gemm
from qgemm_bench.operators.common import rel_error
from qgemm_bench.operators.formats import INT4, NVFP4
from tests.support import DEV, DT, TOL, case, check, fake_target, fp64, seed
from tests.support import triton_config as cfg


def int4_case(shape, group, s):
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, group_size=group), s)
    return inputs, inputs.scales, None, INT4, inputs.group_size, int4_gemm.dequantize(inputs)


def nvfp4_case(shape, s):
    inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, shape), s)
    return (inputs, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16,
            nvfp4_gemm.dequantize(inputs))


def gemm(made, config, sms, frag=True, tile=TILE):
    inputs, scales, ts, fmt, group, _ = made
    # A few SMs: several items per program.
    return fused_gemm.FusedGemm(inputs.w, scales, ts, fmt, group, config, frag, tile, target=fake_target(sms=sms))


def check_calls(g, x, ref, s):
    """Two calls, each right, the same bits on the CPU (one order of the
    splits' atomics), the split workspace and counters zero after each."""
    first = g(x)
    check(first, ref)
    for ws, count in g._workspace.values():
        assert not ws.any() and not count.any(), f"seed {s}: split workspace or counters not left zeroed"
    second = g(x)
    check(second, ref)
    if DEV.type == "cpu":
        assert torch.equal(first, second), f"seed {s}"
    return first


# (shape, group, bn, bk, split, persistent, sms, flags): M 1, 3 and 16; K 256 and 384 (3 K blocks of 128 in
# 2 splits of 2 and 1, in 4 of 1, 1, 1 and none; 384 in BLOCK_K 256: x masked past K); N 72 and 136 (ragged
# tiles); int4 group 128 (BLOCK), 32 and 64 (SUB), 48 (GATHER), per channel (CHANNEL) and unscaled, ACC_SCALE
# and FOLD.
INT4_CASES = [((1, 256, 72), 128, 64, 128, 1, 1, 1, {}), ((3, 384, 136), 128, 64, 128, 2, 1, 2, {}),
              ((16, 384, 72), 128, 32, 128, 4, 2, 1, {}), ((1, 384, 136), 32, 64, 64, 4, 2, 2, {}),
              ((3, 256, 72), 32, 64, 128, 2, 1, 1, {}), ((16, 384, 136), "channel", 64, 128, 2, 1, 2, {}),
              ((3, 384, 72), None, 64, 128, 3, 2, 1, {}), ((1, 384, 72), 128, 64, 256, 2, 1, 1, {}),
              ((3, 384, 136), 128, 64, 128, 2, 2, 1, {"ACC_SCALE": True}),
              ((16, 256, 72), 128, 32, 64, 4, 1, 2, {"ACC_SCALE": True, "FOLD": True}),
              ((3, 384, 72), 48, 64, 128, 2, 1, 1, {}),  # GATHER: a scale per weight
              ((5, 384, 72), 64, 64, 128, 3, 2, 1, {"ACC_SCALE": True})]  # SUB: ACC_SCALE ignored


@pytest.mark.parametrize("shape,group,bn,bk,split,persistent,sms,flags", INT4_CASES)
def test_int4_persistent_vs_fp64_and_fused_kernel(shape, group, bn, bk, split, persistent, sms, flags):
    s = seed()
    made = int4_case(shape, group, s)
    x, ref = made[0].x, fp64(made[0].x, made[-1])
    c = cfg(bm=16, bn=bn, bk=bk, split=split, **flags)
    g = gemm(made, {**c, "PERSISTENT": persistent}, sms)
    out = check_calls(g, x, ref, s)
    plain = gemm(made, c, sms)(x)
    assert rel_error(out, plain.double()) <= TOL[DT] / 3, f"seed {s}"


# NVFP4 (SUB scales of 16, the tensor scale at the end), with SCALE8 (the E4M3 bytes); K order untiled too.
NVFP4_CASES = [((1, 256, 72), 64, 128, 2, 1, 1, False, True), ((3, 384, 136), 64, 128, 2, 2, 1, True, True),
               ((16, 384, 72), 32, 64, 4, 1, 2, False, True), ((3, 384, 136), 64, 128, 3, 2, 1, False, False),
               ((1, 256, 136), 128, 128, 1, 1, 1, True, True)]


@pytest.mark.parametrize("shape,bn,bk,split,persistent,sms,scale8,frag", NVFP4_CASES)
def test_nvfp4_persistent_vs_fp64_and_fused_kernel(shape, bn, bk, split, persistent, sms, scale8, frag):
    s = seed()
    made = nvfp4_case(shape, s)
    x, ref = made[0].x, fp64(made[0].x, made[-1])
    c = cfg(bm=16, bn=bn, bk=bk, split=split, **({"SCALE8": True} if scale8 else {}))
    tile = TILE if frag else None
    g = gemm(made, {**c, "PERSISTENT": persistent}, sms, frag, tile)
    out = check_calls(g, x, ref, s)
    plain = gemm(made, c, sms, frag, tile)(x)
    assert rel_error(out, plain.double()) <= TOL[DT] / 3, f"seed {s}"


def test_every_item_is_taken_once_whatever_the_grid():
    # 3 x 2 tiles x 3 splits = 18 items over grids of 1, 2, 5 and 18+ programs (SMs 1, 2, 5 and 64 at one
    # program per SM): the same answer each time, every tile's splits met (a lost or doubled item shows as
    # a wrong sum, a leftover count as a wrong second call).
    s = seed()
    made = int4_case((40, 768, 72), 128, s)
    x, ref = made[0].x, fp64(made[0].x, made[-1])
    c = cfg(bm=16, bn=64, bk=128, split=3, PERSISTENT=1)
    outs = [check_calls(gemm(made, c, sms), x, ref, s) for sms in (1, 2, 5, 64)]
    for out in outs[1:]:
        assert rel_error(out, outs[0].double()) <= TOL[DT] / 3, f"seed {s}"


@pytest.mark.parametrize("extra", [{"TMA": True}, {"WS": fused_gemm.ws_tiles(16, 64, 128, 8, splits=2)},
                                   {"ACC_SCALE": True, "HALVES": True}, {"PERSISTENT": 0},
                                   {"PERSISTENT": True}, {"PERSISTENT": "2"}, {"FLATTEN": 0}])
def test_refused_configs(extra):
    made = int4_case((3, 256, 72), 128, 1)
    c = {**cfg(bm=16, bn=64, bk=128, split=2), "PERSISTENT": 1, **extra}
    with pytest.raises(ValueError, match="PERSISTENT"):
        gemm(made, c, 2)(made[0].x)
    with pytest.raises(ValueError, match="PERSISTENT"):
        check_config(c, "the config", INT4)


def test_flatten_only_with_persistent():
    c = {**cfg(bm=16, bn=64, bk=128, split=2), "FLATTEN": False}
    with pytest.raises(ValueError, match="FLATTEN is PERSISTENT's"):
        check_config(c, "the config", INT4)
    with pytest.raises(ValueError, match="FLATTEN is PERSISTENT's"):
        made = int4_case((3, 256, 72), 128, 1)
        gemm(made, c, 2)(made[0].x)


def test_nested_loop_vs_fp64():
    # FLATTEN false: the plain persistent nest (the item loop around fused_kernel's K loop), finished by
    # finish's branch as fused_kernel is.
    s = seed()
    made = int4_case((16, 384, 136), 128, s)
    x, ref = made[0].x, fp64(made[0].x, made[-1])
    c = cfg(bm=16, bn=64, bk=128, split=2, ACC_SCALE=True, PERSISTENT=1, FLATTEN=False)
    assert describe(c).endswith("acc persistent 1 nested")
    check_calls(gemm(made, c, 2), x, ref, s)


def test_label_and_config_key():
    c = fused_gemm.config(16, 128, 128, 8, 4, 3, acc=True, maxnreg=128, persistent=2)
    assert c["PERSISTENT"] == 2 and "PERSISTENT" not in fused_gemm.config(16, 128, 128, 8)
    assert describe(c) == "16x128x128 split 8 w4 s3 acc persistent 2 r128"
    check_config(c, "the config", INT4)
    assert all("PERSISTENT" not in p for p in fused_gemm.pool(1) + fused_gemm.pool(16, NVFP4))  # not tuned yet
