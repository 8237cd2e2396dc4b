"""Warp-specialized int4 and NVFP4 GEMM for Hopper, in Gluon (Triton's
lower-level language): a fused config with "WS" tiles (fused_gemm.ws_tiles) runs them
here where `usable` says so, else FusedGemm runs the rest of the config in
fused_gemm.fused_kernel. In this module a config `c` is such "WS" tiles:
BLOCK_M, BLOCK_N, BLOCK_K, num_stages, optionally K_SPLIT, SPLITS, SKEW,
STREAM_K, PDL and M_GROUP.

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
  --out shows it in the PTX. H100, K = N =
  8192, one process, 3 rounds (exp/nvws_ab.py): M=64 64x64x64 s6 K_SPLIT
  2 int4 25.95 us, NVFP4 27.01, against one consumer's 64x64x128 s4 28.10
  / 28.72 and fbgemm 31.03; NVFP4 M=128 128x64x64 s4 42.02 against the
  table's fused_kernel 45.40 (int4 40.25 against 39.85); M=256 it lost
  (256x64x64 s4 58.6 against 53.0 int4).
- or, SPLITS 2 (to 4), several programs per output tile, each a
  contiguous range of its K blocks, the last SKEW blocks more than the
  others: they store their fp32 sums and count them in, the last (the
  tile's highest program id) waits for the count, adds them in split
  order (the same bits every call) and stores y (`_splits_meet`). For M
  up to 256, where a tile per program leaves SMs idle or (64-row weight
  tiles) reads x from L2 too often. H100, K = N = 8192, means of 3
  rounds, two runs of exp/nvws_ab.py (one process each), int4 / NVFP4:
  M=64 64x64x128 s4 skew 2 23.46-24.03 / 25.68-25.78 us against the
  table's K_SPLIT 2 (64x64x64 s6) 26.07-26.58 / 27.13-27.21 and fbgemm
  31.31-31.61; M=128 128x128x64 s4 skew 4 34.67-35.10 / 36.03-36.53
  against the table's fused_kernel 38.72-40.11 / 41.19-41.72 and fbgemm
  39.55-39.56; M=256 256x128x64 s4 skew 4 NVFP4 53.19-55.78 against the
  table's 57.93-59.30 and cuBLAS 54.54-57.31, int4 54.04-56.74 against
  52.54-53.27 (slower). The skew, so that the others' sums are stored
  while the last still runs, gained a little where measured side by
  side: M=64 int4 / NVFP4 64x64x128 s4 skew 0 24.69 / 25.95, skew 2 23.46
  / 25.78; M=128 128x64x64 s4 skew 0 37.56 / 37.81, skew 4 36.55 / 36.41;
  at M=256 skew 0-8 were within the rounds' spread (int4 54.04-56.98).
  With _plane_view's planes (H100, one process, 5 rounds, PDL 1, skew 0 /
  2 / 4 / 8 / 16): int4 53.93 / 55.19 / 52.50 / 53.23 / 56.90, NVFP4
  54.99 / 54.93 / 53.42 / 54.86 / 56.69, so the table keeps 4.
  More programs than SMs lost: 3 splits (int4 M=256 74.88; M=64 30.78, 4 splits 33.33),
  and two at M = 512 (117 against one's 94).
No CTA-wide barrier in the loop: fused_kernel's TMA loop (Triton's software
pipeline, the same tiles) has three per K block and sends the scale row
through shared memory (scripts/fused_sass.py, 256x128x64 w8 s3 TMA: 208
SASS instructions per K block; here 114 per warpgroup, fused_sass.py --ws;
the counts further down predate packed_layout's register order, which took 4 off each).

Each warpgroup waits for its own wgmmas before decoding the next block
(wgmma.wait_group 0), so nothing writes the A registers of a pending wgmma
(the hazard fused_gemm.wrong_on_h100 describes): the other warpgroup's
wgmmas (with one consumer, the other program's on the SM) keep the tensor
cores busy meanwhile. Waiting for all but one, with two blocks per trip in
registers of their own, made ptxas serialize every wgmma (LLVM gave both
blocks the same registers): 245 us at 1024 x 8192 x 8192 against 227 for
that build's wait-0 loop. Issuing the two warpgroups' wgmmas in strict
alternation (a pair of mbarriers) changed nothing measurable.

H100, int4 g128, K = N = 8192, same process, 3 rounds, p50 us
(exp/gws_gpu.py), 256x128x64, 3 stages, against the table's fused_kernel
config, fbgemm and cuBLAS on bf16 weights:
  M=512 95.96 / 103.94 / 93.69 / 97.70; M=1024 189.10 / 198.97 / 187.89 /
  194.07; M=2048 379.36 / 400.77 / 376.33 / 398.37; M=4096 743.37 / 815.89
  / 778.66 / 773.57.
One consumer, 64x64x128, 4 stages, two programs per SM (exp/pp_ab.py): M=64
27.72 against the table's split-K 30.08 and fbgemm's 31.18.
The same loop with no decode or scale (timing only) took 172.3 / 693.4 at
M = 1024 / 4096; the scale row loaded by pointer in the consumers (its
latency then showed in each block) 227.3 / 903.1 before the producer took
it by TMA. At M = 128 and 256 every one-consumer tile lost (M = 256: 128x64x64 s4 59.8,
128x128x64 s4 60.5, 256x64x64 s3 69.4 against the table's 51.9), and so did
shapes of few tiles (512 x 14336 x 4096, 64 programs: 129.6 against 90.9),
so the table decides per shape (scripts/tune_weight_only.py ws).

NVFP4, the same loop (exp/nvws_ab.py, one process, 3 rounds, H100, K = N = 8192):
256x128x64 s3 against the table's fused_kernel config and cuBLAS on bf16
weights, M=512 102.2 / 103.4 / 101.9; 1024 193.0 / 208.0 / 204.3; 2048
395.3 / 429.3 / 397.5; 4096 774.9 / 869.4 / 800.6 (int4's WS in the same
run 193.6 at 1024; its decode is 115 SASS instructions per K block, NVFP4's
137).

Int4 groups of 32 (the 32-k runs of the layout, the loop's instructions
as group 128's: 118 per K block at 256x128x64 s3), H100, K = N = 8192,
same process, 3 rounds (exp/g32_ab.py), against the same table entry's
fused_kernel config and cuBLAS on bf16 weights: M=64 23.60 / 31.69 / 47.82;
128 34.18 / 46.14 / 48.43; 512 96.74 / 100.34 / 101.01; 1024 186.73 /
197.41 / 198.05; 2048 395.42 / 411.42 / 384.84; 4096 747.86 / 802.53 /
774.82. At M=256 group 128's entry has no WS tiles (fused_kernel won there
at group 128): 256x128x64 s4 split 2 skew 4 took 54.47 against its 61.29
and cuBLAS 55.00, so the table's group-32 config there is those tiles
(weight_only_configs "groups").

Int4 per channel and unscaled (GROUP CHANNEL): the weights decode to q
alone, exact, and the fp32 sum takes the channel's scale once before the
store: 100 SASS instructions per K block at 256x128x64 s3 against group
128's 118 (no HMUL2, no scale row loaded). H100, same process, 3 rounds,
K = N = 8192, against the kernel before (exp/ws_main_ab.py): M=128 split 2
33.48 / 33.45, 256 split 2 53.83 / 54.33, 1024 s4 188.44 / 197.43, 4096
s3 753.46 / 806.77 (rounds 709.8-811.8: noisy). Its m-sweep baseline
(b9fc134) has M = 4096 at 723.1 against fbgemm's 754.9.

Tried at K = N = 8192 and dropped (one process each, 3 rounds):
- Four consumers, 128x256 tiles (x rows x weight rows; 112 registers
  each, no spills): half the x traffic per weight row, twice the decode
  per x row; slower everywhere (H200, int4: M=256 split 2 58.91 against
  256x128x64's 53.97; 1024 202.19 / 189.33; 4096 803.03 / 767.30).
- Two consumers of two 64-row tile rows each (BLOCK_N 256 with x tiles
  of 128 rows: a third less x per K block than 256x128x64, the second
  row decoded while the first's wgmmas run; sm_90 SASS 183 instructions
  per K block for both rows, no spills): slower or level (H100, int4,
  one process, 3 rounds, scripts/ws_ab.py, against 256x128x64 s4):
  M=512 128x256x128 s3 99.60 / 97.75, 1024 128x256x64 s4 196.40 /
  188.33, 2048 394.94 / 388.10, 4096 786.06 / 783.21; M=256 s5 split 2
  skew 4 55.18 against 53.55. With the four-consumer tiles above (the same
  traffic), x from L2 is not what holds M >= 512 back.
- A persistent launch (a program per SM taking every 132nd tile, the
  next tile's loads during the epilogue; H100): int4 M=1024 187.70 against
  187.35 per tile, 2048 388.03 / 381.68, 4096 761.44 / 752.73; NVFP4
  2048 367.78 / 377.11 (within the rounds' spread: no gain to keep).
- SPLITS 2's last split TMA-loading the other's planes (one 64 KB box per
  warpgroup into the ring once every stage's last phase is complete, after
  the count and a fence.proxy.async.global; read back in _plane_view's
  order, 16 B a thread) instead of 32 16-byte loads a thread: level
  (H100, one process, 5 rounds, scripts/ws_ab.py, PDL, without / with):
  int4 256 x 8192 x 8192 skew 4 52.97 / 53.15 (with skew 0, 2, 8: 54.68,
  54.87, 54.24), 256 x 28672 x 8192 170.86 / 174.51, NVFP4 256 x 8192 x
  8192 54.66 / 54.38, int4 128 x 8192 x 8192 32.87 / 33.32, 64 x 4096 x
  4096 (64x64x128) 10.70 / 10.92. So what is left of the fixup does not
  wait on a program's plane load (not kept).
- Where the time goes (H100, int4, 2 rounds, timing-only variants) at
  M=256 (256x128x64 s4 split 2 skew 4): 56.56 us as is, 51.25 without
  the split fixup, 52.29 loading x only on the ring's first lap, 48.91
  without both; at M=1024 (256x128x64 s3) 200.20 as is, 181.01 without
  x's reloads. x from L2 (a 32 KB tile
  per 4 KB of weights each K block) costs ~10%; halving it needs TMA
  multicast across a 2-CTA cluster, which Gluon in Triton 3.6 (the GPU
  machine's) does not have.
- Per-program %globaltimer and %clock64 stamps (H100, int4 g128, a CUDA
  graph of 40 back-to-back calls on the same weights, medians, us from
  the call's first program start; a copy of this kernel with stamps,
  exp/): the K loops take 1035-1055 SM clocks per K block against the
  1024 the tensor cores need for two 64x256x64 wgmmas, at 1.71 GHz (M =
  256, 1024) and 1.455 GHz (M = 4096). Per call 51.1 us at 256 x 8192 x
  8192 (split 2 skew 4 PDL), 171.8 at 1024 (s3), 735.0 at 4096 (s4); the
  runner's rotating copies (operands from HBM each call) measure 53.3,
  190.9 and 773.2 (results/h100/int4_gemm_msweep), not explained here.
  At M = 256 the split with 4 more blocks ends its loop at 41.2, waits for
  the other's count until 42.5 (that one: loop 38.9, plane stored 40.4,
  counted 41.5), has the plane added at 46.3 and ends at 48.4 (y from
  47.4); a tile without a split (1024 x 4096 x 4096) ends 1.2 us after its
  loop. So the split fixup costs ~7 us of the 51, the plane's load (~3-4)
  the largest part, and what is left to gain is there or in the clock.

STREAM_K (256x128 tiles, one program per SM, _sk_consumer): whole tiles
in all but the last full wave, the rest shared end to end by K blocks,
so that a part-empty last wave costs its share only. H100, one process,
3 rounds (exp/sk_ab.py), against the table's config, cuBLAS and fbgemm:
int4 1024 x 8192 x 10240 252.65 / 272.93 / 257.16 / 268.21, NVFP4 263.63
/ 276.63 / 257.98; 1024 x 4096 x 14336 int4 184.68 / 188.53 / 180.73 /
188.29. Its shared part costs 15-30 us more than the waves it saves
where they fill: 1024 x 8192 x 8192 203.03 against 187.96, 1024 x 14336
x 4096 183.73 / 159.99, and 256 x 8192 x 8192 78.18 against two splits'
53.29 (128 programs, each tile's two halves as SPLITS 2 has them: still
68.81). Not the fixup's loads: inside the segment loop ptxas keeps ~6 of
a plane's 64 in flight (sm_90 SASS; _splits_meet, after its loop, 42),
but the program's last segment run after the loop, all 42 in flight,
timed the same (H100, same process, 3 rounds, exp/skg_ab.py, that build /
this one: 1024 x 8192 x 8192 212.49 / 210.42, 1024 x 8192 x 10240 264.83
/ 263.35, NVFP4 263.22 / 265.52, 1024 x 14336 x 4096 188.26 / 191.78,
256 x 8192 x 8192 with 128 programs 69.61 / 70.71), so it was dropped.
Per-program %globaltimer stamps (H100, 256 x 8192 x 8192, 128 programs,
tile t's halves in programs 2t and 2t + 1 both ways; medians, us from
the first start): both K loops end at 40.8; the first half's plane is
stored and counted at 44.8 (stream-K 45.5); the last half is through the
wait at 45.6 but stream-K's at 57.0, has the plane added at 48.8 / 62.1
and ends at 50.9 / 63.3. So SPLITS 2 spends ~10 us of its 51 after the
loop (store 4, load 3, y 2), and stream-K 12 more in the wait: its 128
release adds and 128 acquiring adds per warpgroup queue on the counters'
few cache lines. So each warpgroup now counts in once (_count_in: a
barrier of its 128 threads, then one release add) and the last waits on
a volatile spin and a fence.acq_rel (_wait_count): H100, one process, 3
rounds, 10 calls checked each (exp/ab.py, as scripts/ws_ab.py times), against the add per thread:
stream-K 256 x 8192 x 8192 65.74 / 77.46 us, 256 x 8192 x 10240 int4
78.14 / 88.69, NVFP4 85.16 / 89.89, 512 x 8192 x 10240 (PDL) 132.20 /
138.07, 1024 x 8192 x 10240 250.99 / 254.78, NVFP4 1024 x 4096 x 28672
372.62 / 368.50 (inside its rounds' 324.9-376.5); SPLITS 2 level (M =
256 55.99 / 55.75, NVFP4 56.03 / 56.59, M = 128 34.26 / 34.04). A build
before, which also loaded the first plane outside the segment loop,
spilled (323 local loads and stores against 10) and lost 1.5-3% on the
stream-K shapes; this one compiles, with Triton 3.6 (the GPU
machine's), to the same 10 (int4) and 0 (NVFP4, SPLITS) as the add per
thread (with 3.9, the CPU machine's, NVFP4 stream-K has 62 where the add
per thread had 0, SPLITS 2 4 against 0; its K loop the same 132
instructions: scripts/fused_sass.py). A reduce-scatter (each split keeping half the tile's
x rows, storing the other half and storing its half of y, so every
split's fixup moves half the bytes) was level or slower (int4 M = 256
56.02 -> 57.25, NVFP4 57.98 -> 62.72), so the fixup looks bound by the
GPU's total plane traffic rather than one program's; not kept. The
table takes stream-K per shape (fused_gemm.WS_POOL from M = 128).
What is left is the split of tiles across programs, not the counters
(scripts/ws_ab.py, H100, one process, 3 rounds, 256 x 8192 x 8192,
stream-K / SPLITS 2 skew 4 / cuBLAS): with 128 programs (each of the 64
tiles' halves in one program, as SPLITS 2 has them) 55.58 / 54.53 /
53.63; with 132 (one per SM) 65.30 / 54.66 / 54.03. At 132 nearly every
program stores a plane mid-way and most finishers add one or two: twice
SPLITS 2's plane traffic, which the fixup is bound by. So stream-K pays
only where the waves it saves cost more (the table decides per shape).
The numbers above predate _plane_view's order of a plane (one warp
access, 512 contiguous bytes, where it was 8 rows' 32): it was not the
GPU's total traffic but a program's cache lines per access. With it (same
A/B): 256 x 8192 x 8192 SPLITS 2 52.28 against 53.78, stream-K 57.83
(132 programs). From M = 1024 at K = N = 8192 stream-K is level with one
tile per program: 3 rounds had 4096 with PDL at 720.17 against 3 stages
with PDL 742.66, but 5 rounds (int4, s3 / s4 / s3 PDL / s4 PDL / stream-K
/ stream-K PDL) 1024 184.10 / 195.28 / 185.09 / 188.87 / 195.71 / 194.58,
4096 757.78 / 742.74 / 750.77 / 774.16 / 746.16 / 797.18, rounds 715-886.

M_GROUP (_grouped): tiles in groups of M_GROUP x-row blocks, so the
programs running at once share weight blocks as well as x rows. In
row-major order a wave of 132 programs at N = 57344 covers 132 weight
blocks (66 MB of int4 at K = 8192, more than the 50 MB L2), each read again
for every x-row block. H100, int4 g128, one process, 3 rounds
(scripts/ws_ab.py), 256x128x64 s4 PDL row-major / M_GROUP 4 / 8 / 16, p50
us: 4096 x 8192 x 57344 5568.10 / 5202.34 / 5244.93 / 5412.34 (cuBLAS
5330.45); 1024 x 8192 x 57344 1369.98 / 1384.48 / 1342.54 / 1382.46;
1024 x 4096 x 28672 341.98 / 337.19 / 337.45 / 372.02; where the weights
fit in L2 row-major won: 4096 x 8192 x 10240 955.06 / 970.22 / 985.41 /
1061.31, 4096 x 8192 x 8192 746.18 / 773.52 / 782.75 / 889.74. Five
rounds (same script, rounds spread up to 25%), row-major / 4 / 8 with PDL,
then stream-K PDL: 4096 x 8192 x 57344 5712.91 / 5472.00 / 5412.77, 5215.23;
2048 x 8192 x 57344 2912.70 / 2789.22 / 2788.03, 2765.52; 1024 x 28672 x
8192 658.06 / 652.50 / 649.06, 789.55. So grouping gains ~4% where a
wave's weights outgrow L2, and stream-K (which moves programs across
tiles) does as well; the table decides per shape (WS_POOL from M = 512 has
groups of 4 and 8; tune_weight_only.py ws --layers, ac5f96d: 3 of the 32
entries re-timed took a group). The re-timed table through the runner, same run as
the peers (H100, int4 g128, 3 rounds, ed50eb5), triton / fbgemm / cuBLAS:
4096 x 8192 x 57344 (stream-K PDL) 5146.0 / 5312.0 / 5589.9, 1024 x 8192 x
57344 (stream-K) 1304.5 / 1358.7 / 1429.6, 512 x 28672 x 8192 (group 4
PDL) 328.2 / 329.8 / 346.9 (the llama baseline before, one round: 5593.0
against fbgemm's 5207.4 at the first).

Where it runs (`usable`): NVFP4 (blocks of 16 tile every K block); int4
with scales of whole K blocks (a group a multiple of BLOCK_K, per channel,
unscaled as scales of one) or groups of 32, bf16 x with
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
from qgemm_bench.backends.triton_kernels.split_k import sm_count
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
# A barrier of the threads running the code (a partition's warps): `thread_barrier` in Triton 3.6, `barrier` in 3.9.
_barrier = getattr(gl, "thread_barrier", None) or gl.barrier
SMEM_BYTES = 227 * 1024  # an H100 program's shared memory
TILE_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages")
OPTIONAL_KEYS = ("K_SPLIT", "SPLITS", "SKEW", "STREAM_K", "PDL", "M_GROUP")  # K_SPLIT 1 or 2, SPLITS 1-4: `check`
MAX_M_GROUP = 16  # M_GROUP: x-row blocks per group of tiles (_grouped)
MAX_SPLITS, MAX_SKEW = 4, 64  # more splits than 2 lost everywhere measured (module docstring)
# H100, 64 x 8192 x 8192, int4 group 64 and 128, one process per config (scripts/ws_ab.py, killed
# after 30-40 s): 64x64x64 SPLITS 2 with 7 or 8 stages and SKEW 2, 4, 8 or 16 never returned from its
# first checked call (8 stages, SKEW 16: 56 and 72 K blocks, both whole laps of the ring); the same
# without SKEW ran (25.58 us), as did 6 stages with SKEW 2 or 4 (24.91, 24.81), 64x128x64 s8 SKEW 4
# (23.69) and 64x64x128 s8 SKEW 2 (31.97). Cause not found; `check` refuses SKEW above this many
# stages (no table entry or WS_POOL tiles have more).
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
    PRMT per 4 bytes: sm_90 SASS (Triton 3.6, scripts/fused_sass.py --ws)
    118 -> 114 instructions per K block at int4 256x128x64 s3, NVFP4 140 ->
    136. H100, one process, 3 rounds (scripts/ws_ab.py, against that
    order): int4 g128 1024x8192x8192 s4 183.82 / 184.11 us, 4096 s3 PDL
    735.34 / 735.25 (cuBLAS 750.22), 256 split 2 skew 4 54.86 / 55.53;
    NVFP4 1024 s3 184.30 / 189.78; int4 64x128x128 split 2 (M = 64, 2
    rounds) 22.66 / 23.18."""
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
    transposing ldmatrix that gave the wrong blocks' scales (H100,
    exp/nvws_dbg.py)."""
    c = chunk_layout(BLOCK_K)
    per = gl._unwrap_if_constexpr(PER_RUN)
    t = lambda b: [per * b[1], b[0]]  # noqa: E731  (row, run) -> (the run's first block, row)
    return gl.DistributedLinearLayout(reg_bases=[[1, 0]] * (per == 2) + [t(b) for b in c.reg_bases if b[2] == 0],
                                      lane_bases=[t(b) for b in c.lane_bases], warp_bases=[t(b) for b in c.warp_bases],
                                      block_bases=[], shape=[gl._unwrap_if_constexpr(BLOCK_K) // 32 * per, WG_ROWS])


@gluon.jit
def _producer(x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, m0, tile_row, n0, NP, kb0, nb,
              STAGES: gl.constexpr, BLOCK_K: gl.constexpr, TILE_N: gl.constexpr,
              TILE_K: gl.constexpr, GROUP: gl.constexpr, FMT: gl.constexpr):
    """K blocks kb0 .. kb0 + nb - 1 (this program's split) into the ring."""
    for j in range(nb):
        _load(x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, j, kb0 + j, m0, tile_row, n0, NP,
              STAGES, BLOCK_K, TILE_N, TILE_K, GROUP)


@gluon.jit
def _load(x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, j, i, m0, tile_row, n0, NP,
          STAGES: gl.constexpr, BLOCK_K: gl.constexpr, TILE_N: gl.constexpr, TILE_K: gl.constexpr,
          GROUP: gl.constexpr):
    """K block i of the tile at (m0, n0) into the ring's j-th stage, once
    the consumers have freed it."""
    PER_T: gl.constexpr = TILE_K // BLOCK_K  # K blocks per tile of the layout
    s = j % STAGES
    mbarrier.wait(empty.index(s), ((j // STAGES) & 1) ^ 1)  # passes at once on the first lap
    if GROUP == _CHANNEL:  # the scales on the sum (_store_y)
        mbarrier.expect(ready.index(s), x_desc.block_type.nbytes + w_desc.block_type.nbytes)
    else:
        mbarrier.expect(ready.index(s),
                        x_desc.block_type.nbytes + w_desc.block_type.nbytes + s_desc.block_type.nbytes)
    _tma_load(x_desc, [m0, i * BLOCK_K], ready.index(s), x_bufs.index(s))
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
def _count_in(counter):
    """A warpgroup's plane is stored: once all its threads are past their
    stores (a barrier of the warpgroup), one release add of 1 to the
    counter, which makes all of them visible to whoever acquires the count
    (one add per warpgroup: an add per thread queued on the counters'
    cache lines, module docstring)."""
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
    cache lines for 256 bytes: sm_90 SASS (Triton 3.6) 64 STG.E.128 and 64
    LDG.E.128 per program at 256x128x64 split 2 against 128 of each .64,
    and stream-K's 10 spilled registers gone. H100, one process, 3 rounds
    (scripts/ws_ab.py against the build before), int4 g128, p50 us: M=256
    K = N = 8192 split 2 skew 4 52.28 / 53.78 (NVFP4 53.55 / 55.02, cuBLAS
    55.59), 128 32.61 / 33.67, 64 (64x128x128) 22.38 / 22.91; stream-K 256
    x 8192 x 10240 70.50 / 79.02, 1024 x 8192 x 10240 235.11 / 246.36, 256
    x 14336 x 4096 53.44 / 70.10 (split 2 skew 4 70.53 / 72.79)."""
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
                 mma: gl.constexpr):
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
    tile's highest id, and the others never wait."""
    PLANE: gl.constexpr = _WG_ROWS * BLOCK_M
    planes = part_ptr + (slot * (SPLITS - 1)).to(gl.int64) * PLANE  # past 2^31 elements at large M x N
    v = _plane_view(acc, BLOCK_M)
    offs = _plane_offsets(v)
    if split < SPLITS - 1:
        gl.store(planes + split * PLANE + offs, v)
        _count_in(count_ptr + slot)
    else:
        _wait_count(count_ptr + slot, SPLITS - 1)
        for p in gl.static_range(SPLITS - 1):  # in place: no second 128-register sum
            v = v + gl.load(planes + p * PLANE + offs, cache_modifier=".cg")
        _count_reset(count_ptr + slot)
        acc = _plane_sum(v, BLOCK_M, mma)
    return acc


@gluon.jit
def _block(acc, x_bufs, w_bufs, s_bufs, ready, empty, i, WG: gl.constexpr, STAGES: gl.constexpr,
           BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr, FMT: gl.constexpr, GROUP: gl.constexpr):
    """The ring's i-th K block into consumer WG's sum acc: wait for its
    stage, decode the weights with their scales, wgmma against the x tile,
    wait for it, free the stage."""
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
    elif GROUP == _CHANNEL:  # q alone, exact; the scales on the sum (_store_y)
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
    w = gl.convert_layout(gl.reshape(w, (_WG_ROWS, BLOCK_K)), a_layout)
    acc = warpgroup_mma(w, x_bufs.index(s).permute((1, 0)), acc, is_async=True)
    acc, w = warpgroup_mma_wait(num_outstanding=0, deps=(acc, w))
    mbarrier.arrive(empty.index(s))
    return acc


@gluon.jit
def _consumer(x_bufs, w_bufs, s_bufs, c_bufs, ready, empty, done, out_desc, ts_ptr, part_ptr, count_ptr, m0, n0,
              NP, nb, split, slot, WG: gl.constexpr, STAGES: gl.constexpr, BLOCK_M: gl.constexpr,
              BLOCK_K: gl.constexpr, FMT: gl.constexpr, PART: gl.constexpr, K_SPLIT: gl.constexpr,
              SPLITS: gl.constexpr, GROUP: gl.constexpr):
    """Weight rows WG * 64.. of the tile over the program's nb K blocks;
    with K_SPLIT 2 blocks PART, PART + 2, ... of them (the other consumer's
    the rest; their sums meet in shared memory at the end, `done`). With
    SPLITS > 1 the tile's other programs' sums meet in global memory
    (`_splits_meet`; slot: the tile's consumer's counter and planes)."""
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16])
    acc = gl.zeros((_WG_ROWS, BLOCK_M), gl.float32, mma)
    for j in range((nb - PART + K_SPLIT - 1) // K_SPLIT):
        acc = _block(acc, x_bufs, w_bufs, s_bufs, ready, empty, j * K_SPLIT + PART, WG, STAGES, BLOCK_M, BLOCK_K, FMT,
                     GROUP)
    if K_SPLIT == 2:  # the second part's sum to the first through shared memory (c_bufs as fp32)
        PART_LAYOUT: gl.constexpr = gl.SwizzledSharedLayout(vec=2, per_phase=1, max_phase=8, order=[1, 0])
        if _REINTERPRET_NAMED:
            part = c_bufs.reinterpret(gl.float32, [_WG_ROWS, BLOCK_M], PART_LAYOUT)
        else:
            part = c_bufs._reinterpret(gl.float32, [_WG_ROWS, BLOCK_M], PART_LAYOUT)
    if K_SPLIT == 2 and PART == 1:
        part.store(acc)
        mbarrier.arrive(done.index(0))
    elif SPLITS > 1 and split < SPLITS - 1:
        _splits_meet(acc, part_ptr, count_ptr, split, slot, BLOCK_M, SPLITS, mma)
    else:
        if K_SPLIT == 2:
            mbarrier.wait(done.index(0), 0)
            acc = acc + part.load(mma)
        if SPLITS > 1:
            acc = _splits_meet(acc, part_ptr, count_ptr, split, slot, BLOCK_M, SPLITS, mma)
        _store_y(acc, c_bufs, out_desc, ts_ptr, m0, n0, NP, WG, FMT, GROUP, False)
        tma.store_wait(pendings=0)


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
def _pdl_wait():
    """PDL 1 (launched with launch_pdl): let the next kernel be scheduled
    now, then wait until the one before has finished; in the default
    partition before the shared buffers' barriers are set up, so the
    producer's first load and every store come after it (fused_kernel's
    PDL 1: split_k_parts.pdl_prologue). A program of the next call takes
    an SM as one of this call's frees it and waits there, so its launch and
    set-up overlap this call's tail. H100, int4 g128 K = N = 8192, the
    table's WS tiles without / with, same process, 3 rounds
    (exp/pdl_ab.py): M=128 34.42 / 34.29 us, 512 92.88 / 91.97, 1024
    199.70 / 191.63 (rounds 186.9-206.7), 4096 745.38 / 739.31."""
    gl.inline_asm_elementwise("griddepcontrol.launch_dependents; griddepcontrol.wait; // $0", "=r", [],
                              dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def ws_kernel(x_desc, w_desc, s_desc, out_desc, ts_ptr, part_ptr, count_ptr, N, NP, M, K: gl.constexpr,
              GROUP: gl.constexpr, FMT: gl.constexpr,
              BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr,
              TILE_N: gl.constexpr, TILE_K: gl.constexpr, K_SPLIT: gl.constexpr = 1, SPLITS: gl.constexpr = 1,
              PER: gl.constexpr = 0, STREAM_K: gl.constexpr = 0, PDL: gl.constexpr = 0,
              M_GROUP: gl.constexpr = 1):
    """y = x @ dequant(w) (module docstring); K the layout's padded K, a
    multiple of BLOCK_K; NP the scales' row stride; BLOCK_N 64 (one
    consumer, or with K_SPLIT 2 two on the K blocks) or 128 (two); FMT
    formats.INT4 or NVFP4 (ts_ptr its FP32 tensor scale; for int4 per
    channel, GROUP CHANNEL, the scales' first row; else unread). SPLITS
    programs (adjacent ids) share each output tile, each a contiguous
    range of the K blocks: PER each, the last the rest (it waits for the
    others' sums: _splits_meet; part_ptr, count_ptr; split_blocks). STREAM_K: the programs share all tiles' K blocks
    (_sk_consumer; part_ptr, count_ptr: stream_k_workspace). PDL 1:
    _pdl_wait first. M_GROUP > 1: tiles in groups of M_GROUP x-row blocks
    (_grouped)."""
    if PDL:
        _pdl_wait()
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
        gl.static_assert(CONSUMERS == 2 and K_SPLIT == 1 and SPLITS == 1, "STREAM_K takes two consumers alone")
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
                         m0, n0, NP, nb, split, slot, WG0, STAGES, BLOCK_M, BLOCK_K, FMT, WG0, K_SPLIT, SPLITS, GROUP)),
            (_consumer, (x_bufs, w_bufs, s_bufs, c_bufs, ready, empty, done, out_desc, ts_ptr, part_ptr, count_ptr,
                         m0, n0, NP, nb, split, slot + WG_B, WG_B, STAGES, BLOCK_M, BLOCK_K, FMT, PART_B, K_SPLIT,
                         SPLITS, GROUP)),
            (_producer, (x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, m0, pid_n * CONSUMERS, n0, NP,
                         kb0, nb, STAGES, BLOCK_K, TILE_N, TILE_K, GROUP, FMT)),
        ], [4, 1], [_CONSUMER_REGS, _PRODUCER_REGS])
    else:
        gl.warp_specialize([
            (_consumer, (x_bufs, w_bufs, s_bufs, c_bufs, ready, empty, done, out_desc, ts_ptr, part_ptr, count_ptr,
                         m0, n0, NP, nb, split, slot, WG0, STAGES, BLOCK_M, BLOCK_K, FMT, WG0, K_SPLIT, SPLITS, GROUP)),
            (_producer, (x_desc, w_desc, s_desc, x_bufs, w_bufs, s_bufs, ready, empty, m0, pid_n * CONSUMERS, n0, NP,
                         kb0, nb, STAGES, BLOCK_K, TILE_N, TILE_K, GROUP, FMT)),
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


def maxnreg(c: dict) -> int:
    """Registers per thread at launch (before setmaxnreg; module docstring):
    two consumers, MAXNREG over 12 warps, one program per SM; one consumer
    with x tiles of up to 128 rows, 128 over 8 warps, two programs per SM
    (with 256 rows ptxas needed 158: MAXNREG, one program)."""
    one = c["BLOCK_N"] == WG_ROWS and c.get("K_SPLIT", 1) == 1
    return 128 if one and c["BLOCK_M"] <= 128 else MAXNREG


def check(c: dict, fmt: int = INT4) -> None:
    """ValueError in one line unless c is tiles the kernel runs for format
    fmt (the one check of a config's WS value: FusedGemm and the table
    files call it; int4's groups of 32 add a few rows of scales, which
    `usable` checks)."""
    if not isinstance(c, dict) or set(c) - set(OPTIONAL_KEYS) != set(TILE_KEYS) or \
            any(not isinstance(v, int) or isinstance(v, bool) for v in c.values()):
        raise ValueError(f"WS={c!r} must be the warp-specialized kernel's tiles, {{{', '.join(TILE_KEYS)}}} "
                         f"and optionally {', '.join(OPTIONAL_KEYS)}, integers (fused_gemm.ws_tiles)")
    if not 1 <= c.get("M_GROUP", 1) <= MAX_M_GROUP or "M_GROUP" in c and "STREAM_K" in c:
        raise ValueError(f"WS {c}: M_GROUP (x-row blocks per group of tiles) is 1 to {MAX_M_GROUP}, without STREAM_K "
                         "(which orders its tiles itself)")
    if c.get("PDL", 1) != 1:
        raise ValueError(f"WS {c}: PDL is 1 (programmatic dependent launch: _pdl_wait) or absent")
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
    if c["BLOCK_N"] not in (64, 128) or c["BLOCK_M"] not in (64, 128, 256) or c["BLOCK_K"] not in (64, 128) or \
            not 2 <= c["num_stages"] <= 8 or shared_bytes(c, fmt) > SMEM_BYTES:
        raise ValueError(f"WS {c}: takes BLOCK_N 64 or 128, BLOCK_M 64, 128 or 256, BLOCK_K 64 or 128, 2 to 8 "
                         f"stages, and at most {SMEM_BYTES} bytes of shared memory ({shared_bytes(c, fmt)})")


def usable(fmt: int, group: int, k: int, n: int, x: torch.Tensor, c: dict) -> bool:
    """Whether ws_kernel runs config c for this x (module docstring); group
    as FusedGemm runs it (K per channel and unscaled; NVFP4's 16)."""
    return (fmt == NVFP4 or fmt == INT4 and (group >= k or group % c["BLOCK_K"] == 0 or group == 32)) and \
        shared_bytes(c, fmt, group) <= SMEM_BYTES and x.is_cuda and \
        x.dtype == torch.bfloat16 and x.shape[0] > 0 and n % 8 == 0 and \
        x.stride(1) == 1 and x.stride(0) >= x.shape[1] and x.data_ptr() % 16 == 0 and x.stride(0) * 2 % 16 == 0 and \
        torch.cuda.get_device_capability(x.device) == (9, 0)


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


def stream_k_programs(kmajor, m: int, n: int, c: dict, device) -> int:
    """A STREAM_K launch's programs: one per SM (all running at once, as
    _sk_consumer needs), at most one per K block of all the tiles."""
    tiles = triton.cdiv(m, c["BLOCK_M"]) * triton.cdiv(n, c["BLOCK_N"])
    return min(STREAM_K_PROGRAMS or sm_count(device), tiles * (padded_k(kmajor) // c["BLOCK_K"]))


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


def workspace_bytes(kmajor, m: int, n: int, c: dict, device=None) -> int:
    """Bytes `workspace` keeps for config c at M (0 with one program per tile)."""
    if c.get("STREAM_K"):
        return 4 * sum(workspace_size(m, n, c, stream_k_programs(kmajor, m, n, c, device)))
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
        cache: dict | None = None) -> torch.Tensor:
    """y = x @ dequant(w) by ws_kernel with config c (usable and check hold),
    descs = weight_descriptors(kmajor, c, fmt) (c the config's WS tiles);
    ts NVFP4's FP32 tensor scale (0-dim; None for int4); cache keeps the
    workspace of SPLITS > 1 (workspace; a dict the caller keeps with the
    weights)."""
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
        programs = stream_k_programs(kmajor, m, n, c, x.device)
        part, count = workspace(cache, m, n, c, x.device, programs)
        grid = (programs,)
    else:
        part, count = workspace(cache, m, n, {**c, "SPLITS": splits}, x.device) if splits > 1 else (out, out)
        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn) * splits,)
    kgroup = kernel_group(fmt, group, kmajor.k)
    ts = kmajor.scales if kgroup == CHANNEL else ts if ts is not None else out  # per channel: the scales' row
    ws_kernel[grid](x_desc, w_desc, s_desc, o_desc, ts, part, count, n, kmajor.scales.stride(0), m,
                    K=padded_k(kmajor), GROUP=kgroup, FMT=fmt, BLOCK_M=bm, BLOCK_N=bn,
                    BLOCK_K=bk, STAGES=c["num_stages"], TILE_N=tn, TILE_K=tk, K_SPLIT=c.get("K_SPLIT", 1),
                    SPLITS=splits, PER=per, STREAM_K=c.get("STREAM_K", 0), M_GROUP=c.get("M_GROUP", 1), num_warps=4,
                    maxnreg=maxnreg(c), **pdl_launch(c, x.device))
    return out
