"""SCALE_AHEAD (fused_gemm.fused_kernel, int4 with ACC_SCALE): each K
block's scale row loaded one block ahead. The same loads in another order,
so the same bits as without it; and against fp64 on the dequantized
weights. Ragged shapes, unequal splits (the last block of a split reloads
its own row), groups of one and two K blocks, with FOLD and HALVES, TMA
loads; without ACC_SCALE it changes nothing."""

import pytest
import torch

from qgemm_bench.operators import int4_gemm
from qgemm_bench.operators.formats import INT4
from tests.support import case, check, fp64, seed, target_for
from tests.support import triton_config as cfg


def fused(inputs, config):
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm

    return FusedGemm(inputs.w, inputs.scales, None, INT4, inputs.group_size, config, target=target_for(inputs.w))


# (shape, bm, bn, bk, split, group, extra): 12 and 9 blocks in 5 and 4 splits, groups of two K
# blocks (256 at 128), FOLD, HALVES, TMA loads.
CASES = [((7, 1536, 100), 16, 64, 128, 5, 128, {}), ((3, 1152, 72), 16, 64, 128, 4, 128, {}),
         ((9, 1536, 72), 16, 64, 128, 3, 256, {}), ((5, 1536, 72), 16, 64, 128, 4, 128, {"FOLD": True}),
         ((4, 1024, 136), 16, 64, 128, 2, 128, {"HALVES": True}), ((33, 1280, 72), 64, 64, 64, 1, 128, {"TMA": True})]


@pytest.mark.parametrize("shape,bm,bn,bk,split,group,extra", CASES)
def test_scale_ahead_is_bit_for_bit_the_kernel_without_it(shape, bm, bn, bk, split, group, extra):
    s = seed()
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, group_size=group), s)
    c = {**cfg(bm=bm, bn=bn, bk=bk, split=split, ACC_SCALE=True), **extra}
    ahead = fused(inputs, {**c, "SCALE_AHEAD": True})
    out = ahead(inputs.x)
    check(out, fp64(inputs.x, int4_gemm.dequantize(inputs)))
    assert torch.equal(out, fused(inputs, c)(inputs.x)), f"seed {s}"
    assert torch.equal(ahead(inputs.x), out), f"seed {s}"  # the split workspace left ready


def test_scale_ahead_is_ignored_without_acc_scale():
    s = seed()
    inputs = int4_gemm.make_inputs(case(int4_gemm, (5, 768, 72), group_size=128), s)
    c = cfg(bm=16, bn=64, bk=128, split=2)
    assert torch.equal(fused(inputs, {**c, "SCALE_AHEAD": True})(inputs.x), fused(inputs, c)(inputs.x)), f"seed {s}"
