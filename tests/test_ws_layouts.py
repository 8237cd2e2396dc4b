"""The warp-specialized kernel's weight layouts (ws_gemm.packed_layout and
the layouts derived from it), checked on CPU against the fragment-order
bytes kmajor_layout writes and the PTX ISA's wgmma register operand: the
Gluon kernel itself runs on the GPU only."""

import itertools

import pytest
import torch

pytest.importorskip("triton.experimental.gluon")

from qgemm_bench.backends import kmajor_layout  # noqa: E402
from qgemm_bench.backends.triton_kernels import ws_gemm  # noqa: E402


def _where(layout, reg: int, lane: int, warp: int) -> tuple:
    """The tensor position a linear layout gives register reg of (lane, warp)."""
    pos = [0] * len(layout.shape)
    for bases, index in ((layout.reg_bases, reg), (layout.lane_bases, lane), (layout.warp_bases, warp)):
        for bit, basis in enumerate(bases):
            if index >> bit & 1:
                pos = [p ^ b for p, b in zip(pos, basis, strict=True)]
    return tuple(pos)


def _held(layout, lane: int, warp: int) -> list:
    """The positions a thread's registers hold, in register order."""
    return [_where(layout, r, lane, warp) for r in range(1 << len(layout.reg_bases))]


def _k_of_nibble(block_k: int) -> dict:
    """(byte, nibble) of a fragment-order row -> its k, from kmajor_layout's
    own permutation: one code at a time through _fragment_order."""
    where = {}
    for k in range(block_k):
        wt = torch.zeros(1, block_k // 2, dtype=torch.uint8)
        wt[0, k // 2] = 1 << (4 * (k % 2))  # K order: even k in the low nibble
        frag = kmajor_layout._fragment_order(wt)[0]
        (byte,) = frag.nonzero().flatten().tolist()
        where[(byte, 0 if frag[byte] & 0xF else 1)] = k
    assert len(where) == block_k
    return where


@pytest.mark.parametrize("block_k", [64, 128, 256])
def test_each_decode_instance_is_one_row_word_whose_pairs_are_the_threads_wgmma_fragment(block_k):
    layout = ws_gemm.packed_layout(block_k)
    rows, row_bytes = layout.shape
    assert (rows, row_bytes) == (ws_gemm.WG_ROWS, block_k // 2)
    k_of = _k_of_nibble(block_k)
    seen = set()
    for warp, lane in itertools.product(range(4), range(32)):
        held = _held(layout, lane, warp)
        seen.update(held)
        pairs = set()
        for i in range(0, len(held), 4):  # an instance of the decode's asm: 4 elements, one 32-bit register
            (row, first), *rest = held[i:i + 4]
            assert first % 4 == 0 and rest == [(row, first + j) for j in (1, 2, 3)], held[i:i + 4]
            # The asm's outputs: bytes 0, 1 and 2, 3 low nibbles, then the same high nibbles, each a bf16x2 of
            # (its first byte's value, its second's).
            for nib, (a, b) in itertools.product((0, 1), ((0, 1), (2, 3))):
                lo_k, hi_k = k_of[(first + a, nib)], k_of[(first + b, nib)]
                assert lo_k % 2 == 0 and hi_k == lo_k + 1, (row, first, nib)
                pairs.add((row, lo_k))
        # wgmma's register operand (PTX ISA, m64nNk16 bf16 A): warp w's rows 16w + lane // 4 and + 8, k pairs
        # 2 (lane % 4) and + 8 of every 16.
        g, t = lane // 4, lane % 4
        want = {(16 * warp + g + dr, 16 * s + 2 * t + dk)
                for dr, dk, s in itertools.product((0, 8), (0, 8), range(block_k // 16))}
        assert pairs == want, (warp, lane)
    assert len(seen) == rows * row_bytes  # every byte of the tile, once


@pytest.mark.parametrize("block_k", [64, 128])
def test_the_run_layout_is_the_packed_layout_reshaped(block_k):
    packed, chunk = ws_gemm.packed_layout(block_k), ws_gemm.chunk_layout(block_k)
    assert chunk.shape == [ws_gemm.WG_ROWS, block_k // 32, 16]
    for warp, lane in itertools.product(range(4), range(32)):
        assert _held(chunk, lane, warp) == [(row, byte // 16, byte % 16) for row, byte in _held(packed, lane, warp)]


@pytest.mark.parametrize("block_k,per_run", [(64, 2), (128, 2), (64, 1), (128, 1)])
def test_block_scales_reach_the_threads_that_decode_their_rows_and_runs(block_k, per_run):
    """NVFP4 (2 blocks of 16 to a 32-k run) and int4 groups of 32 (1): each
    thread loads the scales of exactly the (row, run)s whose bytes it holds."""
    packed = ws_gemm.packed_layout(block_k)
    scales = ws_gemm.block_scale_layout(block_k, per_run)
    assert scales.shape == [block_k // 32 * per_run, ws_gemm.WG_ROWS]
    for warp, lane in itertools.product(range(4), range(32)):
        runs = {(row, byte // 16) for row, byte in _held(packed, lane, warp)}
        loaded = set(_held(scales, lane, warp))
        assert loaded == {(per_run * run + j, row) for row, run in runs for j in range(per_run)}, (warp, lane)
