"""Warp-specialized int4 and NVFP4 GEMM for Hopper, in Gluon (Triton's
lower-level language): a fused config with "WS" tiles (fused_gemm.ws_tiles) runs them
here where `usable` says so, else FusedGemm runs the rest of the config in
fused_gemm.fused_kernel. In this module a config `c` is such "WS" tiles:
BLOCK_M, BLOCK_N, BLOCK_K, num_stages, optionally K_SPLIT, SPLITS, SKEW,
STREAM_K, PDL, M_GROUP and ACC (int4: the scales on each K block's fp32
product, _block). docs/ws_gemm.md has the
measurements behind each choice and what was tried and dropped.

Same operands as fused_kernel (swapped: a [BLOCK_N, BLOCK_M] tile of y^T =
W^T x^T, the weights in the tiled fragment-order K-major layout,
kmajor_layout.py), split into partitions of one program:
- a producer warp TMA-loads each K block's x tile [BLOCK_M, BLOCK_K], weight
  tile (BLOCK_N // 64 tile rows of BLOCK_K // 2 bytes) and scales (int4:
  a row of BLOCK_N bf16, with groups of 32 the block's BLOCK_K // 32 rows,
  per channel none; NVFP4: its BLOCK_K // 16 rows)
  into a ring of `num_stages` buffers, waiting on an `empty` mbarrier per
  stage and signalling a `ready` one;
- BLOCK_N // 64 consumer warpgroups (one or two), 64 weight rows each: wait
  `ready`, ldmatrix their bytes (each 32-bit register 4 bytes whose
  decoded pairs are wgmma fragment registers, `packed_layout`), decode with
  the PTX of decode.py and the scales in the same asm (NVFP4: a 32-k run's
  low nibbles take its first block's scale, the high ones its second's;
  int4 groups of 32: both take the run's; int4 per channel: no scale),
  register-A wgmma against the shared x tile, wait for it, arrive on
  `empty`; at the end (NVFP4: times the tensor scale; int4 per channel:
  times the rows' scales, `CHANNEL`) TMA-store their
  [BLOCK_M, 64] part of y;
- or, K_SPLIT 2 (BLOCK_N 64), two consumer warpgroups on the same 64 rows,
  one taking the even K blocks, the other the odd ones, so one decodes
  while the other's wgmmas run in the same program; the second's fp32 sum
  reaches the first through shared memory (the output tiles' buffer) at
  the end. With an even number of stages each stage has one consumer,
  which waits on its phases in order; with an odd number a stage
  alternates between them, and the consumer of block i + STAGES waits for
  a parity its stage has already completed (on the first lap at once), so
  it would read a stage not yet loaded and free one the other still reads
  (NVFP4 128x64x128 with 3 stages failed its launch on the H100): `check`
  refuses odd ones. The handover relies on the arrive on `done` coming
  after a barrier of the warpgroup's 128 threads, which Triton (3.6 and
  3.9) puts before an mbarrier arrive; fused_sass.py --ws --ws-split 2
  --out shows it in the PTX.
- or, SPLITS 2 (to 4), several programs per output tile, each a
  contiguous range of its K blocks, the last SKEW blocks more than the
  others: they store their fp32 sums and count them in, the last (the
  tile's highest program id) waits for the count, adds them in split
  order (the same bits every call) and stores y (`_splits_meet`). For M
  up to 256, where a tile per program leaves SMs idle or (64-row weight
  tiles) reads x from L2 too often.
- or, STREAM_K (256x128 tiles, one program per SM, _sk_consumer): whole
  tiles in all but the last full wave, the rest shared end to end by K
  blocks, so that a part-empty last wave costs its share only; a tile's
  programs meet as SPLITS' do (an fp32 plane and one count per
  warpgroup).
M_GROUP orders the tiles in groups of M_GROUP x-row blocks (_grouped), so
that the programs running at once share weight blocks as well as x rows;
PDL 1 launches with programmatic dependent launch (_pdl_wait); PDL 2 too,
but the producer loads the first STAGES blocks' weights and scales before
it waits (_producer), x only after: it assumes no kernel before it on the
stream writes the weights or scales (FusedGemm lays them out once, at
construction).

No CTA-wide barrier in the loop: fused_kernel's TMA loop (Triton's software
pipeline, the same tiles) has three per K block and sends the scale row
through shared memory (scripts/fused_sass.py, 256x128x64 w8 s3 TMA: 208
SASS instructions per K block; here 114 per warpgroup, fused_sass.py --ws;
docs/ws_gemm.md's counts predate packed_layout's register order, which took 4 off each).

Each warpgroup waits for its own wgmmas before decoding the next block
(wgmma.wait_group 0), so nothing writes the A registers of a pending wgmma
(the hazard fused_gemm.wrong_on_sm90 describes): the other warpgroup's
wgmmas (with one consumer, the other program's on the SM) keep the tensor
cores busy meanwhile.

Where it runs (`usable`): NVFP4 (blocks of 16 tile every K block); int4
with scales of whole K blocks (a group a multiple of BLOCK_K, per channel,
unscaled as scales of one) or groups of 32 (ACC: groups of whole K blocks;
elsewhere FusedGemm runs ACC tiles without it, tiles_for), bf16 x with
16-byte aligned rows, N a multiple of 8 (y's rows, by TMA), on sm_90 (the
wgmma instructions are Hopper's). Gluon kernels do not run in the CPU
interpreter: CPU tests cover the selection, the GPU tests the kernel.
"""

from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from qgemm_bench.backends.triton_kernels.decode import INT4_BF16X2_PTX, NVFP4_SPLIT_BF16X2_PTX
from qgemm_bench.backends.triton_kernels.split_k_parts import pdl_launch
from qgemm_bench.operators.formats import INT4, NVFP4, NVFP4_BLOCK

WG_ROWS = 64  # weight rows per consumer warpgroup (wgmma's M)
_WG_ROWS = gl.constexpr(WG_ROWS)  # as @gluon.jit code reads globals
# TMA copies under their Triton 3.6 names (the GPU machine's) or the later
# ones (3.9, this repository's CPU test machine, renamed them).
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
# A shared buffer's view as another type: `_reinterpret` in Triton 3.6, `reinterpret` in 3.9.
_REINTERPRET_NAMED = gl.constexpr(hasattr(gl.shared_memory_descriptor, "reinterpret"))
# STAMPS 1: int64 slots per consumer warpgroup of each program (`stamp_slots`).
STAMP_NAMES = ("start", "loop end", "stored / waited", "counted / added", "y start", "end", "clock at start",
               "clock at loop end")
STAMP_SLOTS = gl.constexpr(len(STAMP_NAMES))
# A barrier of the threads running the code (a partition's warps): `thread_barrier` in Triton 3.6, `barrier` in 3.9.
_barrier = getattr(gl, "thread_barrier", None) or gl.barrier
TILE_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages")
# K_SPLIT 1 or 2, SPLITS 1-4, ACC 1 (int4 scales on each block's product): `check`
OPTIONAL_KEYS = ("K_SPLIT", "SPLITS", "SKEW", "STREAM_K", "PDL", "M_GROUP", "ACC")
MAX_M_GROUP = 16  # M_GROUP: x-row blocks per group of tiles (_grouped)
# ACC keeps a block's product besides the sum (_block): x tiles of up to this many rows.
MAX_ACC_BLOCK_M = 64
# x-row tiles: 16 and 32 are decode sizes (wgmma n16 / n32; they compile for sm_90, scripts/fused_sass.py
# --ws; the 16-row ones are fused_gemm.WS_POOL[16]).
BLOCK_MS = (16, 32, 64, 128, 256)
MAX_SPLITS, MAX_SKEW = 4, 64  # more splits than 2 lost everywhere measured (docs/ws_gemm.md)
# SKEW with more stages than this hung some tiles on the H100; likely the store over
# `done` that 8c8229e removed (docs/ws_gemm.md), not re-run since: `check` refuses it.
MAX_SKEW_STAGES = 6
# Registers per thread: the kernel starts at MAXNREG over its 12 warps, the
# producer gives back to PRODUCER_REGS and the second consumer takes
# CONSUMER_REGS (setmaxnreg); the first keeps what is left (232). The
# accumulator of a 64 x 256 fp32 tile is 128 of them.
MAXNREG, CONSUMER_REGS, PRODUCER_REGS = 168, 232, 40
_CONSUMER_REGS, _PRODUCER_REGS = gl.constexpr(CONSUMER_REGS), gl.constexpr(PRODUCER_REGS)

# The decode of int4_nibbles_bf16x2 (exact q = code - 8 per value), then each
# pair times its row's scale in one rounding (an fma with -0, ptxas's HMUL2):
# $5 the scales of the instance's first two bytes' row, $6 of the last two's.
INT4_SCALED_PTX = INT4_BF16X2_PTX.replace("        }", """        mov.b32 one, 0x80008000;
        fma.rn.bf16x2 $0, $0, $5, one;
        fma.rn.bf16x2 $1, $1, $6, one;
        fma.rn.bf16x2 $2, $2, $5, one;
        fma.rn.bf16x2 $3, $3, $6, one;
        }""")
_INT4_SCALED_PTX = gl.constexpr(INT4_SCALED_PTX)
_INT4_PTX = gl.constexpr(INT4_BF16X2_PTX)
# ws_kernel's GROUP for int4 with one scale per channel (a group of all K):
# the weights decode to q alone and the sum takes the scales once, in fp32
# (_store_y), with no scale loads in the loop.
CHANNEL = 0
_CHANNEL = gl.constexpr(CHANNEL)
_NVFP4_PTX = gl.constexpr(NVFP4_SPLIT_BF16X2_PTX)
_NVFP4, _NVFP4_BLOCK = gl.constexpr(NVFP4), gl.constexpr(NVFP4_BLOCK)


@gluon.constexpr_function
def packed_layout(BLOCK_K):
    """One consumer's [64, BLOCK_K // 2] weight bytes as its four warps hold
    them: rows r and r + 8 of the warp's 16, bytes 4c..4c+3 of every
    16-byte run, c = lane % 4 (the bytes Triton gives a thread of
    fused_kernel's same tile), in the register order byte + 1, byte + 2,
    row + 8, byte + 16, ...: an instance of the decode's asm (4 elements)
    is one ldmatrix register, 4 bytes of one row, whose decoded pairs are
    wgmma fragment registers. In fused_kernel's order (row + 8 before
    byte + 2) an instance took half of two rows' registers, gathered by a
    PRMT per 4 bytes: more SASS instructions, level or slower (docs/ws_gemm.md)."""
    half = gl._unwrap_if_constexpr(BLOCK_K) // 2
    reg = [[0, 1], [0, 2], [8, 0], [0, 16]]
    b = 32
    while b < half:
        reg.append([0, b])
        b *= 2
    return gl.DistributedLinearLayout(reg_bases=reg, lane_bases=[[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]],
                                      warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[WG_ROWS, half])


@gluon.constexpr_function
def packed_layout3(BLOCK_K):
    """packed_layout over the shared buffer's [1, 64, BLOCK_K // 2] tile row."""
    p = packed_layout(BLOCK_K)
    return gl.DistributedLinearLayout(reg_bases=[[0] + b for b in p.reg_bases],
                                      lane_bases=[[0] + b for b in p.lane_bases],
                                      warp_bases=[[0] + b for b in p.warp_bases], block_bases=[],
                                      shape=[1] + list(p.shape))


@gluon.constexpr_function
def chunk_layout(BLOCK_K):
    """packed_layout as [64, BLOCK_K // 32, 16]: row, run of 32 k (16 bytes,
    fragment order: low nibbles its first 16 k, high nibbles the last 16;
    kmajor_layout.py), byte in the run; NVFP4's block scales broadcast
    over the last axis."""
    p = packed_layout(BLOCK_K)
    split = lambda b: [b[0], b[1] // 16, b[1] % 16]  # noqa: E731
    return gl.DistributedLinearLayout(reg_bases=[split(b) for b in p.reg_bases],
                                      lane_bases=[split(b) for b in p.lane_bases],
                                      warp_bases=[split(b) for b in p.warp_bases], block_bases=[],
                                      shape=[WG_ROWS, gl._unwrap_if_constexpr(BLOCK_K) // 32, 16])


@gluon.constexpr_function
def block_scale_layout(BLOCK_K, PER_RUN):
    """A consumer's block scales as it loads them from the stage's [BLOCK_K //
    GROUP, BLOCK_N] tile (PER_RUN = 32 // GROUP of them to a 32-k run:
    NVFP4's 2, int4 group 32's 1): [BLOCK_K // GROUP, 64] (block, row),
    each thread its rows' blocks, a run's two adjacent; permuted in
    registers to [64, BLOCK_K // GROUP], then (NVFP4) split into the low
    and high nibbles' scales (chunk_layout's rows and runs). Loaded
    through the shared view permuted instead, Triton 3.6 read it with a
    transposing ldmatrix that gave the wrong blocks' scales (H100)."""
    c = chunk_layout(BLOCK_K)
    per = gl._unwrap_if_constexpr(PER_RUN)
    t = lambda b: [per * b[1], b[0]]  # noqa: E731  (row, run) -> (the run's first block, row)
    return gl.DistributedLinearLayout(reg_bases=[[1, 0]] * (per == 2) + [t(b) for b in c.reg_bases if b[2] == 0],
                                      lane_bases=[t(b) for b in c.lane_bases], warp_bases=[t(b) for b in c.warp_bases],
                                      block_bases=[], shape=[gl._unwrap_if_constexpr(BLOCK_K) // 32 * per, WG_ROWS])


@gluon.jit
def _producer(x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, m0, tile_row, n0, NP, kb0, nb,
              STAGES: gl.constexpr, BLOCK_K: gl.constexpr, TILE_N: gl.constexpr,
              TILE_K: gl.constexpr, GROUP: gl.constexpr, FMT: gl.constexpr, PDL: gl.constexpr = 0):
    """K blocks kb0 .. kb0 + nb - 1 (this program's split) into the ring.
    PDL 2: the first STAGES blocks' weights and scales (no kernel writes
    them) while the kernel before finishes, their x (it may) after the wait."""
    first = 0
    if PDL == 2:
        for j in gl.static_range(STAGES):
            if j < nb:
                _load(x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, j, kb0 + j, m0, tile_row, n0, NP,
                      STAGES, BLOCK_K, TILE_N, TILE_K, GROUP, X=False)
        _gdc_wait()
        for j in gl.static_range(STAGES):
            if j < nb:
                _load(x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, j, kb0 + j, m0, tile_row, n0, NP,
                      STAGES, BLOCK_K, TILE_N, TILE_K, GROUP, W=False)
        first = STAGES
    for j in range(first, nb):
        _load(x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, j, kb0 + j, m0, tile_row, n0, NP,
              STAGES, BLOCK_K, TILE_N, TILE_K, GROUP)


@gluon.jit
def _load(x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, j, i, m0, tile_row, n0, NP,
          STAGES: gl.constexpr, BLOCK_K: gl.constexpr, TILE_N: gl.constexpr, TILE_K: gl.constexpr,
          GROUP: gl.constexpr, X: gl.constexpr = True, W: gl.constexpr = True):
    """K block i of the tile at (m0, n0) into the ring's j-th stage, once
    the consumers have freed it. _producer's PDL 2 splits a stage in two:
    X False (the wait, the whole stage's expected bytes, the weights and
    scales), then W False (x alone, which completes it)."""
    PER_T: gl.constexpr = TILE_K // BLOCK_K  # K blocks per tile of the layout
    s = j % STAGES
    if W:
        mbarrier.wait(empty.index(s), ((j // STAGES) & 1) ^ 1)  # passes at once on the first lap
        if GROUP == _CHANNEL:  # the scales on the sum (_store_y)
            mbarrier.expect(ready.index(s), x_desc.block_type.nbytes + w_desc.block_type.nbytes)
        else:
            mbarrier.expect(ready.index(s),
                            x_desc.block_type.nbytes + w_desc.block_type.nbytes + s_desc.block_type.nbytes)
    if X:
        _tma_load(x_desc, [m0, i * BLOCK_K], ready.index(s), x_bufs.index(s))
    if W:
        _tma_load(w_desc, [tile_row, (i // PER_T) * TILE_N, (i % PER_T) * (BLOCK_K // 2)], ready.index(s),
                  w_bufs.index(s))
        if GROUP != _CHANNEL:
            if GROUP < BLOCK_K:  # NVFP4, int4 group 32: the K block's BLOCK_K // GROUP rows of block scales
                _tma_load(s_desc, [i * (BLOCK_K // GROUP), n0], ready.index(s), s_bufs.index(s))
            else:
                _tma_load(s_desc, [((i * BLOCK_K) // GROUP) * NP + n0], ready.index(s), s_bufs.index(s))


@gluon.jit
def _fence_acq_rel():
    """A gpu-scope acquire-release fence: after a volatile (strong) read that
    saw a count, the later loads see what the counted programs stored (a
    plain load would not pair with the fence: keep _wait_count's volatile)."""
    gl.inline_asm_elementwise("fence.acq_rel.gpu; // $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _stamp(sb, i: gl.constexpr, STAMPS: gl.constexpr):
    """STAMPS 1: %globaltimer (ns) into slot i of the consumer's stamps (sb;
    `stamp_slots`), and at the loop's two ends %clock64 too (slots 6, 7)."""
    if STAMPS:
        gl.store(sb + i, gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=gl.int64,
                                                   is_pure=False, pack=1))
        if i < 2:
            gl.store(sb + 6 + i, gl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=gl.int64,
                                                           is_pure=False, pack=1))


@gluon.jit
def _count_in(counter):
    """A warpgroup's plane is stored: once all its threads are past their
    stores (a barrier of the warpgroup), one release add of 1 to the
    counter, which makes all of them visible to whoever acquires the count
    (one add per warpgroup: an add per thread queued on the counters'
    cache lines, docs/ws_gemm.md)."""
    _barrier()
    gl.atomic_add(counter, 1, sem="release", scope="gpu")


@gluon.jit
def _wait_count(counter, want):
    """Spin until the counter reaches want, then acquire (a fence): the
    counted warpgroups' planes are visible to every thread after it."""
    seen = gl.load(counter, volatile=True)
    while seen < want:
        seen = gl.load(counter, volatile=True)
    _fence_acq_rel()


@gluon.jit
def _count_reset(counter):
    """Zero the counter for the next launch once every thread of the
    warpgroup has read it (a barrier)."""
    _barrier()
    gl.store(counter, 0)


@gluon.jit
def _plane_view(acc, BLOCK_M: gl.constexpr):
    """A warpgroup's [64, BLOCK_M] fp32 sum (wgmma's accumulator layout) as
    [16 * BLOCK_M, 4], a register permutation: row i holds thread
    i % 128's four registers of its (i // 128)-th 8-column chunk (row,
    row + 8 x two columns), so the plane offsets 4 i + e (_plane_offsets)
    give each thread 16 bytes and a warp 512 contiguous ones per access.
    In the accumulator's own order a warp's access was 8 rows' 32 bytes, 8
    cache lines for 256 bytes: half the wide stores and loads, stream-K's
    spills gone, and faster on the H100 (docs/ws_gemm.md)."""
    v = gl.reshape(acc, (4, 2, 8, BLOCK_M // 8, 4, 2))  # warp, row + 8, row, chunk, column pair, column
    v = gl.permute(v, (3, 0, 2, 4, 1, 5))
    return gl.reshape(v, (16 * BLOCK_M, 4))


@gluon.jit
def _plane_offsets(v):
    """Offsets into a plane for _plane_view's v: row i at 4 i."""
    L: gl.constexpr = v.type.layout
    rows = gl.arange(0, v.shape[0], layout=gl.SliceLayout(1, L))
    return gl.expand_dims(rows, 1) * 4 + gl.expand_dims(gl.arange(0, 4, layout=gl.SliceLayout(0, L)), 0)


@gluon.jit
def _plane_sum(v, BLOCK_M: gl.constexpr, mma: gl.constexpr):
    """_plane_view inverted: back to [64, BLOCK_M] in the accumulator's layout."""
    v = gl.permute(gl.reshape(v, (BLOCK_M // 8, 4, 8, 4, 2, 2)), (1, 4, 2, 0, 3, 5))
    return gl.convert_layout(gl.reshape(v, (_WG_ROWS, BLOCK_M)), mma)


@gluon.jit
def _splits_meet(acc, part_ptr, count_ptr, split, slot, BLOCK_M: gl.constexpr, SPLITS: gl.constexpr,
                 mma: gl.constexpr, sb, STAMPS: gl.constexpr):
    """SPLITS > 1: the programs of a tile meet in global memory, one consumer
    warpgroup (slot) at a time. Splits 0 .. SPLITS - 2 store their fp32
    sums (planes of `part_ptr`, in _plane_view's order) and count
    in on the slot's counter (_count_in); the last split waits until the
    counter holds all of them (_wait_count), adds the planes in split
    order to its own sum (the same order, so the same bits, every call),
    and zeroes the counter for the next launch.
    Returns the sum (the last split's; the others' is unused). The wait
    assumes the GPU starts programs in id order (as CUTLASS's serial
    split-K does; CUDA does not promise it): the last split has the
    tile's highest id, and the others never wait. STAMPS: _stamp's slots 2
    and 3 (stored, counted; the last split: through the wait, planes added)."""
    PLANE: gl.constexpr = _WG_ROWS * BLOCK_M
    planes = part_ptr + (slot * (SPLITS - 1)).to(gl.int64) * PLANE  # past 2^31 elements at large M x N
    v = _plane_view(acc, BLOCK_M)
    offs = _plane_offsets(v)
    if split < SPLITS - 1:
        gl.store(planes + split * PLANE + offs, v)
        _stamp(sb, 2, STAMPS)
        _count_in(count_ptr + slot)
        _stamp(sb, 3, STAMPS)
    else:
        _wait_count(count_ptr + slot, SPLITS - 1)
        _stamp(sb, 2, STAMPS)
        for p in gl.static_range(SPLITS - 1):  # in place: no second 128-register sum
            v = v + gl.load(planes + p * PLANE + offs, cache_modifier=".cg")
        if STAMPS:  # once every load has landed: a reduction of the sum (its barrier orders the stamp after)
            d = gl.max(gl.max(v.to(gl.int32, bitcast=True), 1), 0)
            gl.store(sb + 3, gl.inline_asm_elementwise("mov.u64 $0, %globaltimer; // $1", "=l,r", [d],
                                                       dtype=gl.int64, is_pure=False, pack=1))
        _count_reset(count_ptr + slot)
        acc = _plane_sum(v, BLOCK_M, mma)
    return acc


@gluon.jit
def _decoded(w_bufs, s_bufs, ready, i, WG: gl.constexpr, STAGES: gl.constexpr, BLOCK_M: gl.constexpr,
             BLOCK_K: gl.constexpr, FMT: gl.constexpr, GROUP: gl.constexpr, ACC: gl.constexpr):
    """The ring's i-th K block's weights for consumer WG, once its stage is
    loaded: decoded with their scales (ACC: int4 q alone, the scales go on
    the block's fp32 product, _block), in the wgmma A operand's layout."""
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    P3: gl.constexpr = packed_layout3(BLOCK_K)
    P: gl.constexpr = packed_layout(BLOCK_K)
    C3: gl.constexpr = chunk_layout(BLOCK_K)
    SB: gl.constexpr = block_scale_layout(BLOCK_K, 32 // GROUP if GROUP > 0 and GROUP < BLOCK_K else 1)
    s = i % STAGES
    mbarrier.wait(ready.index(s), (i // STAGES) & 1)
    wp = gl.reshape(w_bufs.index(s).slice(WG, 1, dim=0).load(P3), (_WG_ROWS, BLOCK_K // 2))
    if FMT == _NVFP4:
        # NVFP4: a run's low nibbles take its first block's scale, the
        # high ones its second's (bf16 E4M3 x 2^118, FusedGemm).
        sb = gl.permute(s_bufs.index(s).slice(WG * _WG_ROWS, _WG_ROWS, dim=1).load(SB), (1, 0))
        s_lo, s_hi = gl.split(gl.reshape(sb, (_WG_ROWS, BLOCK_K // 32, 2)))
        s_lo = gl.expand_dims(gl.convert_layout(s_lo, gl.SliceLayout(2, C3)), 2)
        s_hi = gl.expand_dims(gl.convert_layout(s_hi, gl.SliceLayout(2, C3)), 2)
        wp = gl.convert_layout(gl.reshape(wp, (_WG_ROWS, BLOCK_K // 32, 16)), C3)
        _, s_lo = gl.broadcast(wp, s_lo)
        _, s_hi = gl.broadcast(wp, s_hi)
        lo, hi = gl.inline_asm_elementwise(_NVFP4_PTX, "=r,=r,=r,=r,r,r,r,r,r", [wp, s_lo, s_hi],
                                           dtype=(gl.bfloat16, gl.bfloat16), is_pure=True, pack=4)
    elif GROUP == _CHANNEL or ACC:  # q alone, exact; the scales on the sum (_store_y) or block product
        lo, hi = gl.inline_asm_elementwise(_INT4_PTX, "=r,=r,=r,=r,r", [wp], dtype=(gl.bfloat16, gl.bfloat16),
                                           is_pure=True, pack=4)
    elif GROUP < BLOCK_K:  # int4 groups of 32: a run's scale for both its nibbles
        sb = gl.permute(s_bufs.index(s).slice(WG * _WG_ROWS, _WG_ROWS, dim=1).load(SB), (1, 0))
        sg = gl.expand_dims(gl.convert_layout(sb, gl.SliceLayout(2, C3)), 2)
        wp = gl.convert_layout(gl.reshape(wp, (_WG_ROWS, BLOCK_K // 32, 16)), C3)
        _, sg = gl.broadcast(wp, sg)
        lo, hi = gl.inline_asm_elementwise(_INT4_SCALED_PTX, "=r,=r,=r,=r,r,r,r", [wp, sg],
                                           dtype=(gl.bfloat16, gl.bfloat16), is_pure=True, pack=4)
    else:
        sc = gl.expand_dims(s_bufs.index(s).slice(WG * _WG_ROWS, _WG_ROWS).load(gl.SliceLayout(1, P)), 1)
        _, sc = gl.broadcast(wp, sc)
        lo, hi = gl.inline_asm_elementwise(_INT4_SCALED_PTX, "=r,=r,=r,=r,r,r,r", [wp, sc],
                                           dtype=(gl.bfloat16, gl.bfloat16), is_pure=True, pack=4)
    # K order, a register permutation (fused_gemm._in_k_order).
    w = gl.reshape(gl.join(lo, hi), (_WG_ROWS, BLOCK_K // 32, 4, 2, 2, 2))  # n, chunk, c, u, e, nibble
    w = gl.permute(w, (0, 1, 5, 3, 2, 4))  # k = 32 chunk + 16 nibble + 8 u + 2 c + e
    return gl.convert_layout(gl.reshape(w, (_WG_ROWS, BLOCK_K)), a_layout)


@gluon.jit
def _block(acc, x_bufs, w_bufs, s_bufs, ready, empty, i, WG: gl.constexpr, STAGES: gl.constexpr,
           BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr, FMT: gl.constexpr, GROUP: gl.constexpr,
           ACC: gl.constexpr = 0):
    """The ring's i-th K block into consumer WG's sum acc: wait for its
    stage, decode the weights with their scales, wgmma against the x tile,
    wait for it, free the stage. ACC 1 (int4, groups of whole K blocks):
    the block's product is its own (use_acc false) and joins the sum times
    its rows' scales, so the decode has no multiplies."""
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16])
    s = i % STAGES
    w = _decoded(w_bufs, s_bufs, ready, i, WG, STAGES, BLOCK_M, BLOCK_K, FMT, GROUP, ACC)
    if ACC:
        sc = s_bufs.index(s).slice(WG * _WG_ROWS, _WG_ROWS).load(gl.SliceLayout(1, mma)).to(gl.float32)
        p = warpgroup_mma(w, x_bufs.index(s).permute((1, 0)), gl.zeros((_WG_ROWS, BLOCK_M), gl.float32, mma),
                          use_acc=False, is_async=True)
        p, w = warpgroup_mma_wait(num_outstanding=0, deps=(p, w))
        acc = acc + p * gl.expand_dims(sc, 1)
    else:
        acc = warpgroup_mma(w, x_bufs.index(s).permute((1, 0)), acc, is_async=True)
        acc, w = warpgroup_mma_wait(num_outstanding=0, deps=(acc, w))
    mbarrier.arrive(empty.index(s))
    return acc


@gluon.jit
def _consumer(x_bufs, w_bufs, s_bufs, c_bufs, ready, empty, done, out_desc, ts_ptr, part_ptr, count_ptr, st_ptr,
              m0, n0, NP, nb, split, slot, WG: gl.constexpr, STAGES: gl.constexpr, BLOCK_M: gl.constexpr,
              BLOCK_K: gl.constexpr, FMT: gl.constexpr, PART: gl.constexpr, K_SPLIT: gl.constexpr,
              SPLITS: gl.constexpr, GROUP: gl.constexpr, STAMPS: gl.constexpr, ACC: gl.constexpr,
              PDL: gl.constexpr = 0):
    """Weight rows WG * 64.. of the tile over the program's nb K blocks
    (each K block by _block, ACC as it says);
    with K_SPLIT 2 blocks PART, PART + 2, ... of them (the other consumer's
    the rest; their sums meet in shared memory at the end, `done`). With
    SPLITS > 1 the tile's other programs' sums meet in global memory
    (`_splits_meet`; slot: the tile's consumer's counter and planes).
    STAMPS 1: the consumer's timeline into st_ptr (`stamp_slots`). PDL 2:
    first wait for the kernel before (_gdc_wait)."""
    if PDL == 2:
        _gdc_wait()
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16])
    sb = st_ptr + (gl.program_id(0) * 2 + WG + PART).to(gl.int64) * STAMP_SLOTS
    _stamp(sb, 0, STAMPS)
    acc = gl.zeros((_WG_ROWS, BLOCK_M), gl.float32, mma)
    for j in range((nb - PART + K_SPLIT - 1) // K_SPLIT):
        acc = _block(acc, x_bufs, w_bufs, s_bufs, ready, empty, j * K_SPLIT + PART, WG, STAGES, BLOCK_M, BLOCK_K, FMT,
                     GROUP, ACC)
    _stamp(sb, 1, STAMPS)
    if K_SPLIT == 2:  # the second part's sum to the first through shared memory (c_bufs as fp32)
        PART_LAYOUT: gl.constexpr = gl.SwizzledSharedLayout(vec=2, per_phase=1, max_phase=8, order=[1, 0])
        if _REINTERPRET_NAMED:
            part = c_bufs.reinterpret(gl.float32, [_WG_ROWS, BLOCK_M], PART_LAYOUT)
        else:
            part = c_bufs._reinterpret(gl.float32, [_WG_ROWS, BLOCK_M], PART_LAYOUT)
    if K_SPLIT == 2 and PART == 1:
        part.store(acc)
        mbarrier.arrive(done.index(0))
        _stamp(sb, 5, STAMPS)
    elif SPLITS > 1 and split < SPLITS - 1:
        _splits_meet(acc, part_ptr, count_ptr, split, slot, BLOCK_M, SPLITS, mma, sb, STAMPS)
        _stamp(sb, 5, STAMPS)
    else:
        if K_SPLIT == 2:
            mbarrier.wait(done.index(0), 0)
            acc = acc + part.load(mma)
        if SPLITS > 1:
            acc = _splits_meet(acc, part_ptr, count_ptr, split, slot, BLOCK_M, SPLITS, mma, sb, STAMPS)
        _stamp(sb, 4, STAMPS)
        _store_y(acc, c_bufs, out_desc, ts_ptr, m0, n0, NP, WG, FMT, GROUP, False)
        tma.store_wait(pendings=0)
        _stamp(sb, 5, STAMPS)


@gluon.jit
def _sk_segment(tt, start, end, BLOCKS: gl.constexpr):
    """A stream-K program's tt-th segment, its tiles taken from its last
    back: (tile, first K block, end K block) of its K blocks [start, end)
    of the tiles' BLOCKS each, end to end."""
    t = (end - 1) // BLOCKS - tt
    k0 = start - t * BLOCKS
    if k0 < 0:
        k0 = 0
    k1 = end - t * BLOCKS
    if k1 > BLOCKS:
        k1 = BLOCKS
    return t, k0, k1


@gluon.jit
def _sk_plan(tiles, BLOCKS: gl.constexpr):
    """A STREAM_K program's work: whole tiles pid, pid + programs, ... in
    all but the last full wave (`waves` of them), then the rest from tile
    `base` on shared end to end, this program's K blocks [start, end) of
    their `total` (stream_k_segments)."""
    pid = gl.program_id(0)
    progs = gl.num_programs(0)
    waves = tiles // progs - 1
    if waves < 0:
        waves = 0
    base = waves * progs
    total = (tiles - base) * BLOCKS
    start = (pid.to(gl.int64) * total // progs).to(gl.int32)
    end = ((pid + 1).to(gl.int64) * total // progs).to(gl.int32)
    return waves, base, total, start, end


@gluon.jit
def _sk_producer(x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, n_tiles, tiles, NP,
                 STAGES: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                 BLOCKS: gl.constexpr, TILE_N: gl.constexpr, TILE_K: gl.constexpr, GROUP: gl.constexpr):
    """The stream-K program's whole tiles' and segments' K blocks into the
    ring, in the consumers' order (_sk_plan, _sk_segment)."""
    waves, base, total, start, end = _sk_plan(tiles, BLOCKS)
    j = 0
    for w in range(waves):
        t = w * gl.num_programs(0) + gl.program_id(0)
        m0 = (t // n_tiles) * BLOCK_M
        n0 = (t % n_tiles) * BLOCK_N
        for i in range(BLOCKS):
            _load(x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, j, i, m0, (t % n_tiles) * 2, n0,
                  NP, STAGES, BLOCK_K, TILE_N, TILE_K, GROUP)
            j += 1
    for tt in range((end - 1) // BLOCKS - start // BLOCKS + 1):
        t, k0, k1 = _sk_segment(tt, start, end, BLOCKS)
        t += base
        m0 = (t // n_tiles) * BLOCK_M
        n0 = (t % n_tiles) * BLOCK_N
        for i in range(k0, k1):
            _load(x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, j, i, m0, (t % n_tiles) * 2, n0,
                  NP, STAGES, BLOCK_K, TILE_N, TILE_K, GROUP)
            j += 1


@gluon.jit
def _sk_consumer(x_bufs, w_bufs, s_bufs, c_bufs, ready, empty, out_desc, ts_ptr, part_ptr, count_ptr, n_tiles,
                 tiles, NP, WG: gl.constexpr, STAGES: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr,
                 BLOCKS: gl.constexpr, FMT: gl.constexpr, GROUP: gl.constexpr):
    """Stream-K (STREAM_K; two consumers, 128-row tiles): whole tiles in
    all but the last full wave (a data-parallel part: the tiles in flight
    at once are neighbours, sharing x rows and weights in L2), then the
    programs take even shares of the other tiles' K blocks end to end,
    each its segments from its last tile back. A segment that ends before its tile's last
    block (only a program's first) stores its fp32 sum in the program's
    plane and counts in on the tile's counter (release); the segment
    with the tile's last block (a program's later ones) waits for the
    programs before it on that tile, adds their planes in program order
    (the same bits every call) and stores y. Those programs stored theirs
    first thing, so the wait is short; it relies on every program of the
    launch running at once (one per SM, no more than the SMs)."""
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16])
    PLANE: gl.constexpr = _WG_ROWS * BLOCK_M
    offs = _plane_offsets(_plane_view(gl.zeros((_WG_ROWS, BLOCK_M), gl.float32, mma), BLOCK_M))
    pid = gl.program_id(0)
    progs = gl.num_programs(0)
    waves, base, total, start, end = _sk_plan(tiles, BLOCKS)
    j = 0
    for w in range(waves):  # whole tiles
        t = w * progs + pid
        acc = gl.zeros((_WG_ROWS, BLOCK_M), gl.float32, mma)
        for i in range(BLOCKS):
            acc = _block(acc, x_bufs, w_bufs, s_bufs, ready, empty, j + i, WG, STAGES, BLOCK_M, BLOCK_K, FMT, GROUP)
        j += BLOCKS
        _sk_store_y(acc, c_bufs, out_desc, ts_ptr, t, n_tiles, NP, WG, BLOCK_M, FMT, GROUP)
    for tt in range((end - 1) // BLOCKS - start // BLOCKS + 1):
        r, k0, k1 = _sk_segment(tt, start, end, BLOCKS)
        t = base + r
        acc = gl.zeros((_WG_ROWS, BLOCK_M), gl.float32, mma)
        for i in range(k1 - k0):
            acc = _block(acc, x_bufs, w_bufs, s_bufs, ready, empty, j + i, WG, STAGES, BLOCK_M, BLOCK_K, FMT, GROUP)
        j += k1 - k0
        counter = count_ptr + t * 2 + WG
        if k1 < BLOCKS:  # the tile's first blocks: to this program's plane
            gl.store(part_ptr + (pid * 2 + WG).to(gl.int64) * PLANE + offs, _plane_view(acc, BLOCK_M))
            _count_in(counter)
        else:
            if k0 > 0:  # the programs from the one with the tile's first block on hold the rest
                first = ((r * BLOCKS + 1).to(gl.int64) * progs + total - 1) // total - 1
                _wait_count(counter, pid - first)
                v = _plane_view(acc, BLOCK_M)
                for p in range(first, pid):
                    v = v + gl.load(part_ptr + (p * 2 + WG) * PLANE + offs, cache_modifier=".cg")
                acc = _plane_sum(v, BLOCK_M, mma)
                _count_reset(counter)
            _sk_store_y(acc, c_bufs, out_desc, ts_ptr, t, n_tiles, NP, WG, BLOCK_M, FMT, GROUP)
    tma.store_wait(pendings=0)


@gluon.jit
def _sk_store_y(acc, c_bufs, out_desc, ts_ptr, t, n_tiles, NP, WG: gl.constexpr, BLOCK_M: gl.constexpr,
                FMT: gl.constexpr, GROUP: gl.constexpr):
    """_store_y for stream-K tile t (a program stores several tiles: the
    output buffer is reused)."""
    _store_y(acc, c_bufs, out_desc, ts_ptr, (t // n_tiles) * BLOCK_M, (t % n_tiles) * 2 * _WG_ROWS, NP, WG, FMT,
             GROUP, True)


@gluon.jit
def _store_y(acc, c_bufs, out_desc, ts_ptr, m0, n0, NP, WG: gl.constexpr, FMT: gl.constexpr, GROUP: gl.constexpr,
             REUSED: gl.constexpr):
    """Consumer WG's rows of the tile at (m0, n0) of y, its sum (NVFP4 times
    the tensor scale ts_ptr; int4 per channel, GROUP CHANNEL, times its rows'
    scales, ts_ptr the scales' row of NP), by TMA from its output buffer
    (REUSED: once the store before has read it)."""
    if FMT == _NVFP4:  # the FP32 tensor scale, and the decode's 2^-8 (decode.nvfp4_bf16x2)
        acc = acc * (gl.load(ts_ptr) * 256.0)
    elif GROUP == _CHANNEL:
        rows = n0 + WG * _WG_ROWS + gl.arange(0, _WG_ROWS, layout=gl.SliceLayout(1, acc.type.layout))
        acc = acc * gl.expand_dims(gl.load(ts_ptr + rows, mask=rows < NP, other=0.0).to(gl.float32), 1)
    c = c_bufs.index(WG)
    if REUSED:
        tma.store_wait(pendings=0)
    c.store(gl.permute(acc.to(gl.bfloat16), (1, 0)))
    fence_async_shared()
    _tma_store(out_desc, [m0, n0 + WG * _WG_ROWS], c)


@gluon.jit
def _grouped(tile, m_tiles, n_tiles, G: gl.constexpr):
    """(x-row block, weight block) of a tile in groups of G x-row blocks,
    the group's blocks adjacent for each weight block: the programs running
    at once share G blocks of x rows and 1/G as many weight blocks as in
    row-major order (which, at large N, stream every weight block through
    L2 once per x-row block)."""
    per = G * n_tiles
    first = (tile // per) * G
    rows = m_tiles - first
    if rows > G:
        rows = G
    return first + (tile % per) % rows, (tile % per) // rows


@gluon.jit
def _gdc_launch():
    """PDL 2: let the next kernel be scheduled now (_pdl_wait's first half)."""
    gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0", "=r", [], dtype=gl.int32, is_pure=False,
                              pack=1)


@gluon.jit
def _gdc_wait():
    """PDL 2: wait until the kernel before has finished and its writes are
    visible (_pdl_wait's second half: the producer before x's first load,
    each consumer before anything it reads or writes in global memory)."""
    gl.inline_asm_elementwise("griddepcontrol.wait; // $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _pdl_wait():
    """PDL 1 (launched with launch_pdl): let the next kernel be scheduled
    now, then wait until the one before has finished; in the default
    partition before the shared buffers' barriers are set up, so the
    producer's first load and every store come after it (fused_kernel's
    PDL 1: split_k_parts.pdl_prologue). A program of the next call takes
    an SM as one of this call's frees it and waits there, so its launch and
    set-up overlap this call's tail (a few percent at most on the H100:
    docs/ws_gemm.md, docs/pdl.md)."""
    gl.inline_asm_elementwise("griddepcontrol.launch_dependents; griddepcontrol.wait; // $0", "=r", [],
                              dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def ws_kernel(x_desc, w_desc, s_desc, out_desc, ts_ptr, part_ptr, count_ptr, st_ptr, N, NP, M, K: gl.constexpr,
              GROUP: gl.constexpr, FMT: gl.constexpr,
              BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr,
              TILE_N: gl.constexpr, TILE_K: gl.constexpr, K_SPLIT: gl.constexpr = 1, SPLITS: gl.constexpr = 1,
              PER: gl.constexpr = 0, STREAM_K: gl.constexpr = 0, PDL: gl.constexpr = 0,
              M_GROUP: gl.constexpr = 1, STAMPS: gl.constexpr = 0, ACC: gl.constexpr = 0):
    """y = x @ dequant(w) (module docstring); K the layout's padded K, a
    multiple of BLOCK_K; NP the scales' row stride; BLOCK_N 64 (one
    consumer, or with K_SPLIT 2 two on the K blocks) or 128 (two); FMT
    formats.INT4 or NVFP4 (ts_ptr its FP32 tensor scale; for int4 per
    channel, GROUP CHANNEL, the scales' first row; else unread). SPLITS
    programs (adjacent ids) share each output tile, each a contiguous
    range of the K blocks: PER each, the last the rest (it waits for the
    others' sums: _splits_meet; part_ptr, count_ptr; split_blocks). STREAM_K: the programs share all tiles' K blocks
    (_sk_consumer; part_ptr, count_ptr: stream_k_workspace). PDL 1:
    _pdl_wait first; PDL 2: the first weights before the wait (_producer).
    M_GROUP > 1: tiles in groups of M_GROUP x-row blocks
    (_grouped). STAMPS 1 (not with STREAM_K): each consumer's timeline into
    st_ptr (`stamp_slots`; else unread)."""
    gl.static_assert(not ACC or FMT != _NVFP4 and GROUP != _CHANNEL and GROUP % BLOCK_K == 0 and not STREAM_K,
                     "ACC takes int4 groups of whole K blocks, not STREAM_K (acc_runs, check)")
    gl.static_assert(PDL != 2 or not STREAM_K, "PDL 2 is not STREAM_K's: its partitions would never wait (check)")
    if PDL == 1:
        _pdl_wait()
    elif PDL == 2:
        _gdc_launch()
    BLOCKS: gl.constexpr = K // BLOCK_K
    CONSUMERS: gl.constexpr = BLOCK_N // _WG_ROWS
    gl.static_assert(SPLITS == 1 or K_SPLIT == 1 and 0 < PER and (SPLITS - 1) * PER < BLOCKS,
                     "SPLITS > 1 takes K_SPLIT 1 and split_blocks' PER")
    pid = gl.program_id(0)
    if SPLITS == 1:  # the loop bound a constant, as before splits
        tile, split, kb0, nb = pid, 0, 0, BLOCKS
    else:
        tile = pid // SPLITS
        split = pid % SPLITS
        kb0 = split * PER
        if split == SPLITS - 1:
            nb = BLOCKS - (SPLITS - 1) * PER
        else:
            nb = PER
    n_tiles = gl.cdiv(N, BLOCK_N)
    if M_GROUP == 1:  # row-major: the programs running at once share x rows, each its own weights
        pid_m = tile // n_tiles
        pid_n = tile % n_tiles
    else:
        pid_m, pid_n = _grouped(tile, gl.cdiv(M, BLOCK_M), n_tiles, M_GROUP)
    m0 = pid_m * BLOCK_M
    n0 = pid_n * BLOCK_N
    slot = tile * CONSUMERS
    x_bufs = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BLOCK_M, BLOCK_K], x_desc.layout)
    w_bufs = gl.allocate_shared_memory(gl.int8, [STAGES, CONSUMERS, TILE_N, BLOCK_K // 2], w_desc.layout)
    if GROUP > 0 and GROUP < BLOCK_K:  # NVFP4's blocks of 16, int4 groups of 32
        s_bufs = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BLOCK_K // GROUP, BLOCK_N], s_desc.layout)
    else:
        s_bufs = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BLOCK_N], s_desc.layout)
    c_bufs = gl.allocate_shared_memory(gl.bfloat16, [CONSUMERS * K_SPLIT, BLOCK_M, _WG_ROWS], out_desc.layout)
    done = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    if K_SPLIT == 2:  # its only user: Triton lays warp_specialize's captured values over an unused
        # barrier, and that plain store over an initialized one hung launches of several waves (docs/ws_gemm.md)
        mbarrier.init(done.index(0), count=1)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=CONSUMERS)
    WG0: gl.constexpr = 0
    # The second consumer: the tile's next 64 rows (two along N), or the same
    # rows' odd K blocks (K_SPLIT 2).
    WG_B: gl.constexpr = CONSUMERS - 1
    PART_B: gl.constexpr = K_SPLIT - 1
    if STREAM_K:
        gl.static_assert(CONSUMERS == 2 and K_SPLIT == 1 and SPLITS == 1 and not STAMPS,
                         "STREAM_K takes two consumers alone, and no STAMPS")
        tiles = gl.cdiv(M, BLOCK_M) * n_tiles
        gl.warp_specialize([
            (_sk_consumer, (x_bufs, w_bufs, s_bufs, c_bufs, ready, empty, out_desc, ts_ptr, part_ptr, count_ptr,
                            n_tiles, tiles, NP, 0, STAGES, BLOCK_M, BLOCK_K, BLOCKS, FMT, GROUP)),
            (_sk_consumer, (x_bufs, w_bufs, s_bufs, c_bufs, ready, empty, out_desc, ts_ptr, part_ptr, count_ptr,
                            n_tiles, tiles, NP, 1, STAGES, BLOCK_M, BLOCK_K, BLOCKS, FMT, GROUP)),
            (_sk_producer, (x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, n_tiles, tiles, NP, STAGES,
                            BLOCK_M, BLOCK_N, BLOCK_K, BLOCKS, TILE_N, TILE_K, GROUP)),
        ], [4, 1], [_CONSUMER_REGS, _PRODUCER_REGS])
    elif CONSUMERS * K_SPLIT == 2:
        gl.warp_specialize([
            (_consumer, (x_bufs, w_bufs, s_bufs, c_bufs, ready, empty, done, out_desc, ts_ptr, part_ptr, count_ptr,
                         st_ptr, m0, n0, NP, nb, split, slot, WG0, STAGES, BLOCK_M, BLOCK_K, FMT, WG0, K_SPLIT, SPLITS,
                         GROUP, STAMPS, ACC, PDL)),
            (_consumer, (x_bufs, w_bufs, s_bufs, c_bufs, ready, empty, done, out_desc, ts_ptr, part_ptr, count_ptr,
                         st_ptr, m0, n0, NP, nb, split, slot + WG_B, WG_B, STAGES, BLOCK_M, BLOCK_K, FMT, PART_B,
                         K_SPLIT, SPLITS, GROUP, STAMPS, ACC, PDL)),
            (_producer, (x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, m0, pid_n * CONSUMERS, n0, NP,
                         kb0, nb, STAGES, BLOCK_K, TILE_N, TILE_K, GROUP, FMT, PDL)),
        ], [4, 1], [_CONSUMER_REGS, _PRODUCER_REGS])
    else:
        gl.warp_specialize([
            (_consumer, (x_bufs, w_bufs, s_bufs, c_bufs, ready, empty, done, out_desc, ts_ptr, part_ptr, count_ptr,
                         st_ptr, m0, n0, NP, nb, split, slot, WG0, STAGES, BLOCK_M, BLOCK_K, FMT, WG0, K_SPLIT, SPLITS,
                         GROUP, STAMPS, ACC, PDL)),
            (_producer, (x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, m0, pid_n * CONSUMERS, n0, NP,
                         kb0, nb, STAGES, BLOCK_K, TILE_N, TILE_K, GROUP, FMT, PDL)),
        ], [1], [_PRODUCER_REGS])


def kernel_group(fmt: int, group: int, k: int) -> int:
    """ws_kernel's GROUP for a group as FusedGemm runs it at true K k:
    CHANNEL for int4 with one group of all K (per channel and unscaled),
    else the group."""
    return CHANNEL if fmt == INT4 and group >= k else group


def scale_rows(fmt: int, c: dict, group: int | None = None) -> int:
    """Rows of scales a K block of config c reads: NVFP4's BLOCK_K // 16
    blocks, int4's BLOCK_K // 32 with groups of 32, else one (groups of
    whole K blocks)."""
    return c["BLOCK_K"] // NVFP4_BLOCK if fmt == NVFP4 else c["BLOCK_K"] // 32 if group == 32 else 1


def shared_bytes(c: dict, fmt: int = INT4, group: int | None = None) -> int:
    """Config c's shared memory: the ring (x, weight and scale tiles), the
    consumers' output tiles, and 1 KB for the barriers and alignment
    (sm_90, 256x128x64 s3: 177120 bytes compiled, 176896 in tiles)."""
    bm, bn, bk = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]
    return c["num_stages"] * (2 * bm * bk + bn * bk // 2 + 2 * bn * scale_rows(fmt, c, group)) + \
        bn // WG_ROWS * c.get("K_SPLIT", 1) * bm * WG_ROWS * 2 + 1024


def programs_per_sm(c: dict) -> int:
    """Programs of config c an SM runs at once: two with one consumer and x
    tiles of up to 128 rows (128 registers over 8 warps each), else one."""
    one = c["BLOCK_N"] == WG_ROWS and c.get("K_SPLIT", 1) == 1
    return 2 if one and c["BLOCK_M"] <= 128 else 1


def maxnreg(c: dict) -> int:
    """Registers per thread at launch (before setmaxnreg; module docstring):
    two consumers, MAXNREG over 12 warps, one program per SM; one consumer
    with x tiles of up to 128 rows, 128 over 8 warps, two programs per SM
    (with 256 rows ptxas needed 158: MAXNREG, one program)."""
    return 128 if programs_per_sm(c) == 2 else MAXNREG


def check(c: dict, fmt: int = INT4, smem: int | None = None) -> None:
    """ValueError in one line unless c is tiles the kernel runs for format
    fmt (the one check of a config's WS value: FusedGemm and the table
    files call it) within smem bytes of shared memory a program (the
    Target's smem_per_block; None: not checked, as for a table, whose GPU
    `usable` checks; int4's groups of 32 add a few rows of scales, which
    `usable` checks too)."""
    if not isinstance(c, dict) or set(c) - set(OPTIONAL_KEYS) != set(TILE_KEYS) or \
            any(not isinstance(v, int) or isinstance(v, bool) for v in c.values()):
        raise ValueError(f"WS={c!r} must be the warp-specialized kernel's tiles, {{{', '.join(TILE_KEYS)}}} "
                         f"and optionally {', '.join(OPTIONAL_KEYS)}, integers (fused_gemm.ws_tiles)")
    if not 1 <= c.get("M_GROUP", 1) <= MAX_M_GROUP or "M_GROUP" in c and "STREAM_K" in c:
        raise ValueError(f"WS {c}: M_GROUP (x-row blocks per group of tiles) is 1 to {MAX_M_GROUP}, without STREAM_K "
                         "(which orders its tiles itself)")
    if c.get("ACC", 1) != 1 or "ACC" in c and (fmt != INT4 or c["BLOCK_M"] > MAX_ACC_BLOCK_M or "STREAM_K" in c):
        raise ValueError(f"WS {c}: ACC (scales on each block's product) is int4's only (not NVFP4), 1 or absent, "
                         f"with x tiles of at most {MAX_ACC_BLOCK_M} rows, not with STREAM_K (and runs at groups "
                         "of whole K blocks: acc_runs)")
    if c.get("PDL", 1) not in (1, 2) or c.get("PDL") == 2 and "STREAM_K" in c:
        raise ValueError(f"WS {c}: PDL is 1 (programmatic dependent launch: _pdl_wait), 2 (the first weights "
                         "loaded before the wait: _producer; not with STREAM_K) or absent")
    if "STREAM_K" in c and (c["STREAM_K"] != 1 or c["BLOCK_N"] != 2 * WG_ROWS or set(c) & {"K_SPLIT", "SPLITS"}):
        raise ValueError(f"WS {c}: STREAM_K is 1 (the programs share all tiles' K blocks), with BLOCK_N 128 and "
                         "neither K_SPLIT nor SPLITS")
    if not 1 <= c.get("SPLITS", 1) <= MAX_SPLITS or c.get("SPLITS", 1) > 1 and c.get("K_SPLIT", 1) != 1 or \
            not 0 <= c.get("SKEW", 0) <= MAX_SKEW or "SKEW" in c and c.get("SPLITS", 1) == 1:
        raise ValueError(f"WS {c}: SPLITS (programs sharing a tile's K blocks) is 1 to {MAX_SPLITS}, and above 1 "
                         f"takes K_SPLIT 1; SKEW (K blocks the last split takes beyond the others) 0 to {MAX_SKEW}, "
                         "with SPLITS above 1")
    if c.get("SKEW", 0) and c["num_stages"] > MAX_SKEW_STAGES:
        raise ValueError(f"WS {c}: SKEW takes at most {MAX_SKEW_STAGES} stages (64x64x64 split 2 with 7 or 8 stages "
                         "and a skew hung on the H100; without SKEW or with 6 stages it ran)")
    if c.get("K_SPLIT", 1) not in (1, 2) or c.get("K_SPLIT", 1) == 2 and (c["BLOCK_N"] != WG_ROWS or
                                                                         c["num_stages"] % 2):
        raise ValueError(f"WS {c}: K_SPLIT is 1 or 2, and 2 (two consumers sharing a 64-row tile's K blocks) "
                         "takes BLOCK_N 64 and an even number of stages (each stage then has one consumer; "
                         "NVFP4 128x64x128 with 3 stages failed its launch on the H100)")
    if c["BLOCK_N"] not in (64, 128) or c["BLOCK_M"] not in BLOCK_MS or c["BLOCK_K"] not in (64, 128) or \
            not 2 <= c["num_stages"] <= 8 or smem is not None and shared_bytes(c, fmt) > smem:
        raise ValueError(f"WS {c}: takes BLOCK_N 64 or 128, BLOCK_M {', '.join(map(str, BLOCK_MS))}, BLOCK_K 64 or "
                         f"128, 2 to 8 stages, and at most {smem} bytes of shared memory ({shared_bytes(c, fmt)})")


def acc_runs(fmt: int, group: int, k: int, c: dict) -> bool:
    """Whether ACC's scales on each block's product apply to config c: int4
    with groups of whole K blocks (not per channel or unscaled, group K;
    not groups of 32, a scale per 32-k run; not NVFP4's blocks of 16)."""
    return fmt == INT4 and group < k and group % c["BLOCK_K"] == 0


def tiles_for(fmt: int, group: int, k: int, c: dict) -> dict:
    """Config c as ws_kernel runs it for this format and group: without ACC
    where ACC does not apply (acc_runs; the same sums, the scales then in
    the decode), so that a table's ACC tiles tuned at group 128 still run
    the kernel at the other groups."""
    return c if not c.get("ACC") or acc_runs(fmt, group, k, c) else {x: v for x, v in c.items() if x != "ACC"}


def usable(fmt: int, group: int, k: int, n: int, x: torch.Tensor, c: dict, target) -> bool:
    """Whether ws_kernel runs config c for this x on Target `target` (module
    docstring: sm_90 only, within its shared memory); group as FusedGemm
    runs it (K per channel and unscaled; NVFP4's 16). ACC only where it
    applies (acc_runs; FusedGemm runs tiles_for's twin elsewhere)."""
    return (fmt == NVFP4 or fmt == INT4 and (group >= k or group % c["BLOCK_K"] == 0 or group == 32)) and \
        (not c.get("ACC") or acc_runs(fmt, group, k, c)) and \
        shared_bytes(c, fmt, group) <= target.smem_per_block and x.is_cuda and \
        x.dtype == torch.bfloat16 and x.shape[0] > 0 and n % 8 == 0 and \
        x.stride(1) == 1 and x.stride(0) >= x.shape[1] and x.data_ptr() % 16 == 0 and x.stride(0) * 2 % 16 == 0 and \
        target.capability == (9, 0)


def reads(kmajor, c: dict) -> bool:
    """Whether kmajor (kmajor_layout.KMajorWeights) is the layout ws_kernel
    reads with config c: fragment-order bytes in tiles of 64 rows and whole
    K blocks, bf16 scales."""
    return kmajor.frag and kmajor.tile is not None and kmajor.tile[0] == WG_ROWS and \
        kmajor.tile[1] % c["BLOCK_K"] == 0 and kmajor.scales is not None and kmajor.scales.dtype == torch.bfloat16


def boxes(c: dict, fmt: int = INT4, group: int | None = None) -> dict:
    """ws_kernel's TMA boxes with config c: descriptor name -> (Triton
    dtype name, block shape, shared layout). The weights' box is a 3-D view
    of the tiled layout (tile rows, k tile * 64 + row, byte; as
    FusedGemm.descriptors), int4's scales a run of BLOCK_N of the flattened
    rows, NVFP4's (and int4 group 32's) the K block's BLOCK_K // 16 (// 32)
    rows of BLOCK_N."""
    bm, bn, bk = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]
    nvmma = gl.NVMMASharedLayout.get_default_for
    w = [bn // WG_ROWS, WG_ROWS, bk // 2]
    s = [bk // NVFP4_BLOCK, bn] if fmt == NVFP4 else [bk // 32, bn] if group == 32 else [bn]
    return {"x_desc": ("bf16", [bm, bk], nvmma([bm, bk], gl.bfloat16)), "w_desc": ("i8", w, nvmma(w, gl.int8)),
            "s_desc": ("bf16", s, gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=len(s))),
            "out_desc": ("bf16", [bm, WG_ROWS], nvmma([bm, WG_ROWS], gl.bfloat16))}


def weight_descriptors(kmajor, c: dict, fmt: int = INT4, group: int | None = None) -> tuple:
    """TMA descriptors of the tiled weights and of the scale rows for config
    c (boxes; group as FusedGemm runs it)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    b = boxes(c, fmt, group)
    wt, (tn, tk), s = kmajor.wt, kmajor.tile, kmajor.scales
    s = s if len(b["s_desc"][1]) == 2 else s.view(-1)
    w3 = wt.view(wt.shape[0] // tn, -1, tk // 2)
    return (TensorDescriptor(w3, list(w3.shape), list(w3.stride()), *b["w_desc"][1:]),
            TensorDescriptor(s, list(s.shape), list(s.stride()), *b["s_desc"][1:]))


def split_blocks(blocks: int, c: dict) -> tuple[int, int]:
    """(programs per tile, K blocks of each but the last) for config c over
    `blocks` K blocks: c's SPLITS (at most one program per block), the
    last taking about SKEW blocks more than the others, so that their
    sums are stored while it still runs (it then only loads them)."""
    splits = min(c.get("SPLITS", 1), blocks)
    return splits, max((blocks - c.get("SKEW", 0)) // splits, 1)


def padded_k(kmajor) -> int:
    """The K of kmajor's layout (padded; ws_kernel's K)."""
    return 2 * kmajor.wt.numel() // kmajor.wt.shape[0]


def launch_splits(kmajor, c: dict) -> tuple[int, int]:
    """split_blocks over the K blocks of kmajor's padded K."""
    return split_blocks(padded_k(kmajor) // c["BLOCK_K"], c)


STREAM_K_PROGRAMS = None  # a stream-K launch's programs (None: one per SM; tests take fewer)


def stream_k_programs(kmajor, m: int, n: int, c: dict, sms: int | None) -> int:
    """A STREAM_K launch's programs: one per SM (sms, the Target's; all
    running at once, as _sk_consumer needs), at most one per K block of all
    the tiles."""
    if not (STREAM_K_PROGRAMS or sms):
        raise ValueError("a STREAM_K launch needs the Target's SM count (sms)")
    tiles = triton.cdiv(m, c["BLOCK_M"]) * triton.cdiv(n, c["BLOCK_N"])
    return min(STREAM_K_PROGRAMS or sms, tiles * (padded_k(kmajor) // c["BLOCK_K"]))


def stream_k_segments(pid: int, programs: int, tiles: int, blocks: int) -> list[tuple[int, int, int]]:
    """Program pid's (tile, first K block, end K block) segments in a
    STREAM_K launch of `programs` over `tiles` of `blocks` K blocks, in the
    order it runs them (_sk_plan and _sk_segment, here for the tests)."""
    waves = max(tiles // programs - 1, 0)
    base = waves * programs
    total = (tiles - base) * blocks
    start, end = pid * total // programs, (pid + 1) * total // programs
    return [(w * programs + pid, 0, blocks) for w in range(waves)] + \
        [(base + t, max(start - t * blocks, 0), min(end - t * blocks, blocks))
         for t in range((end - 1) // blocks, start // blocks - 1, -1)]


def stream_k_first(tile: int, programs: int, tiles: int, blocks: int) -> int:
    """The program holding a STREAM_K tile's first K block (_sk_consumer's
    `first`; a tile of the shared part): the last whose share starts at or
    before it."""
    base = max(tiles // programs - 1, 0) * programs
    total = (tiles - base) * blocks
    return (((tile - base) * blocks + 1) * programs + total - 1) // total - 1


def launch_programs(kmajor, m: int, n: int, c: dict) -> int:
    """Programs of a launch of config c at M (not STREAM_K: stream_k_programs)."""
    return triton.cdiv(m, c["BLOCK_M"]) * triton.cdiv(n, c["BLOCK_N"]) * launch_splits(kmajor, c)[0]


def stamp_slots(programs: int) -> int:
    """Elements of a STAMPS launch's stamps: STAMP_SLOTS int64 per consumer
    warpgroup (two per program; with one consumer the second's stay unset)
    of each program: program p's consumer w (K_SPLIT 2: its part) at
    (2 p + w) * STAMP_SLOTS + i, i indexing STAMP_NAMES (ns of %globaltimer;
    the last two SM clocks of %clock64)."""
    return programs * 2 * len(STAMP_NAMES)


def workspace_bytes(kmajor, m: int, n: int, c: dict, sms: int | None = None) -> int:
    """Bytes `workspace` keeps for config c at M (0 with one program per tile;
    sms: the Target's, for STREAM_K)."""
    if c.get("STREAM_K"):
        return 4 * sum(workspace_size(m, n, c, stream_k_programs(kmajor, m, n, c, sms)))
    splits = launch_splits(kmajor, c)[0]
    return 0 if splits == 1 else 4 * sum(workspace_size(m, n, {**c, "SPLITS": splits}))


def workspace(cache: dict, m: int, n: int, c: dict, device, programs: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """SPLITS > 1: the fp32 planes of config c's first SPLITS - 1 splits (64
    x BLOCK_M per tile consumer warpgroup and split; every launch writes
    what it reads) and the warpgroups' counters (zeroed once, then left
    zeroed by every launch: _splits_meet), kept in `cache` by M and tiles;
    STREAM_K: a plane per consumer warpgroup of each of the launch's
    `programs`, the tiles' warpgroups' counters (_sk_consumer).
    A launch's counters are not shared with another running at the same
    time: one weight's calls on one stream (as every caller here makes)."""
    bm, bn, splits = c["BLOCK_M"], c["BLOCK_N"], c.get("SPLITS", 1)  # the launch's SPLITS (split_blocks)
    slots, planes = workspace_size(m, n, c, programs)
    key = ("ws", m, bm, bn, splits, programs)
    if key not in cache:
        cache[key] = (torch.empty(planes, device=device, dtype=torch.float32),
                      torch.zeros(slots, device=device, dtype=torch.int32))
    return cache[key]


def workspace_size(m: int, n: int, c: dict, programs: int = 0) -> tuple[int, int]:
    """(counters, fp32 plane elements) of `workspace` for config c's SPLITS,
    or with STREAM_K for a launch of `programs`."""
    bm, bn = c["BLOCK_M"], c["BLOCK_N"]
    slots = triton.cdiv(m, bm) * triton.cdiv(n, bn) * (bn // WG_ROWS)
    if c.get("STREAM_K"):
        return slots, programs * (bn // WG_ROWS) * WG_ROWS * bm
    return slots, slots * (c.get("SPLITS", 1) - 1) * WG_ROWS * bm


def run(kmajor, fmt: int, group: int, ts, x: torch.Tensor, c: dict, descs: tuple,
        cache: dict | None = None, stamps: torch.Tensor | None = None, sms: int | None = None) -> torch.Tensor:
    """y = x @ dequant(w) by ws_kernel with config c (usable and check hold),
    descs = weight_descriptors(kmajor, c, fmt) (c the config's WS tiles);
    ts NVFP4's FP32 tensor scale (0-dim; None for int4); cache keeps the
    workspace of SPLITS > 1 (workspace; a dict the caller keeps with the
    weights); stamps, if given, int64 of at least stamp_slots(...) elements,
    takes each consumer's timeline (STAMPS 1; not with STREAM_K); sms the
    Target's SM count (a STREAM_K launch's programs)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    if fmt == NVFP4 and ts is None:
        raise ValueError("NVFP4 needs its FP32 tensor scale (ts)")
    m, n = x.shape[0], kmajor.n
    bm, bn, bk = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]
    (tn, tk), w_desc, s_desc = kmajor.tile, *descs
    b = boxes(c, fmt)
    out = torch.empty(m, n, device=x.device, dtype=x.dtype)
    x_desc = TensorDescriptor.from_tensor(x, *b["x_desc"][1:])
    o_desc = TensorDescriptor.from_tensor(out, *b["out_desc"][1:])
    splits, per = launch_splits(kmajor, c)
    if (splits > 1 or c.get("STREAM_K")) and cache is None:
        raise ValueError("SPLITS > 1 and STREAM_K need a workspace cache (run's cache)")
    if c.get("STREAM_K"):
        programs = stream_k_programs(kmajor, m, n, c, sms)
        part, count = workspace(cache, m, n, c, x.device, programs)
        grid = (programs,)
    else:
        part, count = workspace(cache, m, n, {**c, "SPLITS": splits}, x.device) if splits > 1 else (out, out)
        grid = (launch_programs(kmajor, m, n, c),)
    if stamps is not None and (c.get("STREAM_K") or stamps.dtype != torch.int64 or not stamps.is_contiguous() or
                               stamps.device != x.device or stamps.numel() < stamp_slots(grid[0])):
        raise ValueError(f"stamps: contiguous int64 on x's device of at least {stamp_slots(grid[0])} elements, "
                         "not with STREAM_K")
    kgroup = kernel_group(fmt, group, kmajor.k)
    ts = kmajor.scales if kgroup == CHANNEL else ts if ts is not None else out  # per channel: the scales' row
    st = out if stamps is None else stamps  # unread without stamps
    ws_kernel[grid](x_desc, w_desc, s_desc, o_desc, ts, part, count, st, n, kmajor.scales.stride(0), m,
                    K=padded_k(kmajor), GROUP=kgroup, FMT=fmt, BLOCK_M=bm, BLOCK_N=bn,
                    BLOCK_K=bk, STAGES=c["num_stages"], TILE_N=tn, TILE_K=tk, K_SPLIT=c.get("K_SPLIT", 1),
                    SPLITS=splits, PER=per, STREAM_K=c.get("STREAM_K", 0), M_GROUP=c.get("M_GROUP", 1),
                    STAMPS=int(stamps is not None), ACC=c.get("ACC", 0), num_warps=4,
                    maxnreg=maxnreg(c), **pdl_launch(c, x.device, chain=0))  # PDL 1, 2: _pdl_wait, _producer
    return out
