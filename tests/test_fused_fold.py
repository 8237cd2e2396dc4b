"""FOLD (fused_gemm.fused_kernel): int4 weights decoded as q + offset (136 in
bf16, 1032 in fp16), the offset times each K block's x sums subtracted from
that block's fp32 product before its scale (ACC_SCALE configs). Against
fp64 on the dequantized weights and against the same config without FOLD;
ragged shapes, every group mode that takes it, adversarial x. On the CPU
the interpreter's non-PTX decode in fp16, on a GPU the PTX one in bf16."""

import dataclasses

import pytest
import torch

from qgemm_bench.operators import int4_gemm
from qgemm_bench.operators.common import rel_error
from qgemm_bench.operators.formats import INT4
from tests.support import DT, TOL, case, check, fp64, seed, target_for
from tests.support import triton_config as cfg


def fused(inputs, config):
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm

    return FusedGemm(inputs.w, inputs.scales, None, INT4, inputs.group_size, config, target=target_for(inputs.w))


# (shape, bm, bn, bk, split, TMA, group): K off the K block (1000), splits of unequal length (1536 = 12 x 128
# in 5), groups of one and two K blocks, per channel, unscaled (scales of one per channel), TMA loads.
CASES = [((7, 1536, 100), 16, 64, 128, 5, False, 128), ((65, 768, 200), 32, 128, 64, 2, False, 128),
         ((9, 1536, 72), 16, 64, 128, 3, False, 256), ((33, 1000, 72), 64, 64, 128, 2, False, "channel"),
         ((3, 1024, 40), 16, 64, 64, 4, False, None), ((33, 1280, 72), 64, 64, 64, 1, True, 128)]


@pytest.mark.parametrize("shape,bm,bn,bk,split,tma,group", CASES)
def test_fold_vs_fp64_and_unfolded(shape, bm, bn, bk, split, tma, group):
    s = seed()
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, group_size=group), s)
    ref = fp64(inputs.x, int4_gemm.dequantize(inputs))
    c = cfg(bm=bm, bn=bn, bk=bk, split=split, TMA=tma, ACC_SCALE=True)
    folded = fused(inputs, {**c, "FOLD": True})
    out = folded(inputs.x)
    check(out, ref)
    check(folded(inputs.x), ref)  # the split workspace left ready
    plain = fused(inputs, c)(inputs.x)
    # Both within the tolerance; the fold's own cost (the offset's sums cancelling) well under it.
    assert rel_error(out, plain.double()) <= TOL[DT] / 3, f"seed {s}"


def test_fold_is_ignored_without_acc_scale():
    # Without ACC_SCALE (and in scale modes other than BLOCK) FOLD changes nothing: bit for bit.
    s = seed()
    for group, bk in ((128, 64), (32, 128)):
        inputs = int4_gemm.make_inputs(case(int4_gemm, (5, 768, 72), group_size=group), s)
        for acc in (False, True):
            if acc and group == 128:
                continue
            c = cfg(bm=16, bn=64, bk=bk, split=2, **({"ACC_SCALE": True} if acc else {}))
            assert torch.equal(fused(inputs, {**c, "FOLD": True})(inputs.x), fused(inputs, c)(inputs.x)), f"seed {s}"


@pytest.mark.parametrize("kind", ["large", "positive", "cancelling"])
def test_fold_on_adversarial_x(kind):
    # large: x as large as the output allows (the offset's products 136-1039 x larger than q x, in fp32);
    # positive: every x of one sign and size, so a block's sum of (q + offset) x is offset / |q| ~ 200
    # (fp16) times its sum of q x; cancelling: also each group's codes summing to zero (+q, -q pairs),
    # so y is the small variation of x against the large x sums the offset multiplies. Each checked
    # against fp64 with the operator's tolerance, beside the unfolded kernel's error (both printed).
    s = seed()
    g = torch.Generator().manual_seed(s)
    m, k, n = 9, 1024, 72
    inputs = int4_gemm.make_inputs(case(int4_gemm, (m, k, n), group_size=128), s)
    if kind == "large":  # y's largest near a quarter of fp16's top, 2^60 in bf16 (whose block sums of (q + 136) x
        # reach fp32's top near |x| = 2e34, 18x sooner than without FOLD: docs/fused_gemm.md)
        x = torch.randn(m, k, generator=g)
        y = (x.double() @ int4_gemm.dequantize(inputs).double().cpu()).abs().max().item()
        x = x * 2.0 ** int(torch.tensor(min(torch.finfo(DT).max / 4, 2.0**60) / y).log2().floor())
    else:
        x = 16.0 + torch.rand(m, k, generator=g) * 16.0
    if kind == "cancelling":  # codes of k and k + 1 opposite (a packed byte's two nibbles: q and -q)
        lo = inputs.w.to(torch.int32) & 0xF
        q = torch.where(lo > 7, lo - 16, lo).clamp(-7, 7)
        inputs = dataclasses.replace(inputs, w=((q & 0xF) | ((-q & 0xF) << 4)).to(torch.uint8).view(torch.int8))
    x = x.to(DT).to(inputs.x.device)
    ref = fp64(x, int4_gemm.dequantize(inputs))
    c = cfg(bm=16, bn=64, bk=128, split=2, ACC_SCALE=True)
    out = fused(inputs, {**c, "FOLD": True})(x)
    plain = fused(inputs, c)(x)
    err, err_plain = rel_error(out, ref), rel_error(plain, ref)
    print(f"{kind}: seed {s}, FOLD {err:.3g}, without {err_plain:.3g}")
    assert torch.isfinite(out).all() and err <= TOL[DT], f"seed {s}: FOLD {err:.3g}, without {err_plain:.3g}"


def test_fold_twins_in_the_pool_and_the_tuner():
    # FOLD twins of every int4 pointer-load ACC_SCALE candidate up to SPLIT_POOL_MAX_M, each right after
    # its own; none for NVFP4 or above. The tuner times them with the whole pools (--full: prior None);
    # pruned by a prior table, where they won there (its entries predate FOLD: none yet), which keeps
    # the H200 bring-up plan in its budget (test_tune.py; one twin per unit took it past).
    from qgemm_bench.backends.triton_kernels import fused_gemm
    from qgemm_bench.operators.formats import NVFP4
    from qgemm_bench.tuning import candidates as cands

    for m in (1, 16, 64):
        pool = fused_gemm.pool(m, INT4)
        acc = [c for c in pool if c.get("ACC_SCALE") and not c.get("FOLD")]
        assert acc and [c for c in pool if c.get("FOLD")] == [{**c, "FOLD": True} for c in acc]
        assert all(pool.index({**c, "FOLD": True}) == pool.index(c) + 1 for c in acc)
        assert not any(c.get("FOLD") for c in fused_gemm.pool(m, NVFP4))
    assert not any(c.get("FOLD") for c in fused_gemm.pool(128, INT4))
    full = cands.unit_pool(INT4, "fused", 1, None)
    won = fused_gemm.config(16, 128, 128, 8, 4, 3, acc=True, maxnreg=128)
    assert {**won, "FOLD": True} in full and {**won, "FOLD": True, "PDL": 2} in full
    prior = {"M1_K8192_N8192": {"config": {**won, "PDL": 2}, "us": 16.0},
             "M1_K8192_N4096": {"config": {**won, "FOLD": True}, "us": 9.0}}
    unit = cands.unit_pool(INT4, "fused", 1, prior, {**won, "PDL": 2})
    assert unit[0] == {**won, "PDL": 2} and {**won, "FOLD": True} in unit
    unfolded = {"M1_K8192_N8192": prior["M1_K8192_N8192"]}
    assert not any(c.get("FOLD") for c in cands.unit_pool(INT4, "fused", 1, unfolded))


# HALVES (fused_kernel: each K block's weights and x as two half-K tiles, decoded and multiplied in turn):
# (shape, bm, bn, bk, split, group, frag, tile): K off the K block (1000, per channel), unequal splits,
# split 1, a K block of two layout tiles (256), K-order and untiled bytes.
HALVES_CASES = [((7, 1000, 100), 16, 64, 128, 3, "channel", True, True),
                ((5, 1536, 72), 16, 64, 128, 1, 128, True, True), ((3, 768, 130), 16, 128, 64, 2, 128, True, True),
                ((9, 1024, 64), 16, 64, 256, 2, 256, True, True),
                ((17, 1000, 40), 32, 64, 128, 2, "channel", False, False)]


@pytest.mark.parametrize("shape,bm,bn,bk,split,group,frag,tile", HALVES_CASES)
def test_halves_vs_fp64(shape, bm, bn, bk, split, group, frag, tile):
    from qgemm_bench.backends.kmajor_layout import TILE
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm, halved

    s = seed()
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, group_size=group), s)
    ref = fp64(inputs.x, int4_gemm.dequantize(inputs))
    c = cfg(bm=bm, bn=bn, bk=bk, split=split, ACC_SCALE=True)
    for fold in (False, True):
        g = FusedGemm(inputs.w, inputs.scales, None, INT4, inputs.group_size, {**c, "HALVES": True, "FOLD": fold},
                      frag, TILE if tile else None, target=target_for(inputs.w))
        # the case runs HALVES' loop (else the plain loop would give the same sums and the test nothing)
        assert halved(INT4, g.group, g.k, g.config_for(shape[0]), g.kmajor.frag)
        out = g(inputs.x)
        print(f"seed {s}: fold {fold} error {rel_error(out, ref):.3g}")
        check(out, ref)
        check(g(inputs.x), ref)  # the split workspace left ready


def test_halves_only_where_asked():
    # HALVES runs its loop only in int4 ACC_SCALE BLOCK pointer-load configs; only there, and only when told
    # its calls are checked, does FusedGemm take an int4 8-warp split-K config (wrong_on_sm90's family). No
    # pool proposes it.
    from qgemm_bench.backends.triton_kernels import fused_gemm
    from qgemm_bench.operators.formats import NVFP4

    w8 = fused_gemm.config(16, 128, 128, 8, 8, 3, acc=True, maxnreg=64)
    assert fused_gemm.halved(INT4, 128, 8192, {**w8, "HALVES": True})
    assert not fused_gemm.halved(INT4, 128, 8192, w8)
    assert not fused_gemm.halved(INT4, 128, 8192, {**w8, "HALVES": True, "ACC_SCALE": False})
    assert not fused_gemm.halved(INT4, 64, 8192, {**w8, "HALVES": True})  # SUB scales
    assert not fused_gemm.halved(INT4, 128, 8192, {**w8, "HALVES": True, "TMA": True})
    assert not fused_gemm.halved(NVFP4, 16, 8192, {**w8, "HALVES": True})
    inputs = int4_gemm.make_inputs(case(int4_gemm, (3, 1024, 64), group_size=128), seed())
    g = fused(inputs, {**w8, "HALVES": True})
    with pytest.raises(ValueError, match="wrong sums on sm_90"):  # unchecked on a GPU: refused by default
        g.config_for(3)
    g.unchecked = True  # a caller that checks every call (decode_probe's S4 halves rows)
    assert g.config_for(3)["HALVES"]
    with pytest.raises(ValueError, match="wrong sums on sm_90"):
        fused(inputs, w8).config_for(3)
    for fmt in (INT4, NVFP4):
        for m in (1, 16, 64, 128, 1024):
            assert not any(c.get("HALVES") for c in fused_gemm.pool(m, fmt))
