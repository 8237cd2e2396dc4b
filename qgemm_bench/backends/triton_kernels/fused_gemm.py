"""Fused mixed-input GEMM for int4 and NVFP4 weights: y = x @ dequant(w), the
packed weights read once, decoded in registers, fed to the tensor cores.

Swapped operands: each program computes a [BLOCK_N, BLOCK_M] tile of
y^T = W^T x^T. The dequantized weight tile is the dot's first operand, which
Hopper's wgmma takes from registers (its second operand, the pipelined x
tile, sits in shared memory), and M is the MMA's narrow dimension: 16 rows of
x suffice, the weight rows fill the MMA's 64-row side. Weights are in the
K-major layout in fragment order, stored in 64 x 128 tiles
(kmajor_layout.py; FRAG: each thread reads its bytes of the register operand
as one vector and each decoded register is one of its k pairs; _in_k_order
puts them back in K order, in registers; TILE_N/TILE_K: a K block is a few
contiguous runs). An evict-first hint on the weight loads changed nothing
on the H100. Compiled for sm_90 (Triton 3.6), the
weight tile goes global -> shared (cp.async or TMA, pipelined) -> registers,
is decoded there and feeds every wgmma of the block asynchronously: no
shared memory round trip of the decoded values. K is a constexpr (one compile per
K): with the loop's trip count a constant, ptxas pipelines the wgmmas; with
a runtime count it warned C7515 (wgmma serialized) and was slower.

TMA (config "TMA", FusedGemm.descriptors): the x and weight tiles come by
TMA copies instead of per-thread cp.async: the weights through a 3-D view of
the tiled layout (tile rows, k tile * TILE_N + row, byte), so a BLOCK_N x
BLOCK_K // 2 byte tile is one box; x rows past M and columns past K come back
as zeros. Same tiles and math; no address arithmetic per thread. Only with
the scale modes tma_usable names (int4 groups of whole K blocks, as 128, or
tiling one, as 32 and 64; NVFP4) on Hopper or newer (elsewhere
WeightOnlyGemm takes a pointer-load config). TMA paid from M = 128 on the
H100 and not below, so the split-K configs keep pointer loads.
NVFP4 with TMA multiplies its block scales after a unit-scale decode
(with them inside the PTX decode it returned NaN, wrong_on_sm90). A config
may also take x's tiles alone by TMA ("TMA_W" False; the weights and scales
by pointer), which won NVFP4's M = 256 tile. Triton 3.6's automatic warp
specialization (tl.range(warp_specialize=True)) did not help this loop.
Measurements: docs/fused_gemm.md, "Measurements behind the code's choices".

Scales (SCALE_MODE, chosen on the host from the group and K):
- NONE: unscaled int4 (not from FusedGemm, which passes scales of one);
- CHANNEL: one group spans K, in the small split-K pointer tiles only
  (elsewhere BLOCK: scale_mode, channel_block): applied to the fp32 tile
  once, at the end;
- BLOCK: a group spans whole K blocks: one row of BLOCK_N scales per block,
  applied to the decoded weights;
- SUB: groups tile a K block: [BLOCK_N, BLOCK_K // GROUP] loaded, broadcast;
- GATHER: anything else, one scale load per weight element.
ACC_SCALE (a config key; int4 BLOCK and NVFP4, elsewhere ignored): each K
block's decoded weights go into a dot of their own, whose fp32 product is
scaled and added up. int4: the weights unscaled, the product times the
block's scale row (loaded in that block, in the accumulator's layout): no
bf16 multiply and no shared-memory convert of the scale row, but a second
accumulator and a wait on each block's wgmma. It pays on split-K tiles at
M <= 64 (the 128-row one with its registers capped, maxnreg), not with TMA
(FUSED_SPLIT_POOL's numbers); the exact products are also the more
accurate. NVFP4: the block scales stay in the decode, the product takes the
FP32 tensor scale. With the accumulator chained instead (tl.dot(w, x,
acc)), Triton 3.6 splits an NVFP4 block's dot into k-16 wgmma groups, each
fenced and waited, and the SASS writes registers that pending wgmmas read
(the hazard wrong_on_sm90 describes); one dot a block has neither
(scripts/fused_sass.py, docs/fused_gemm.md).
SCALE_AHEAD (a config key; int4 with ACC_SCALE's path, elsewhere
ignored): each block's scale row is loaded one block ahead instead of in
its own block, where its fp32 widening waited on the load (Nsight
Compute's hottest stall at int4 1x8192x8192). On the H200 it pays at
16x128x128 tiles and costs at 16x64x128 ones (docs/fused_gemm.md): the
table's `ahead` pass decides per entry.
FOLD (a config key; int4 with ACC_SCALE's path, elsewhere ignored): the
decode leaves its offset on (q + 136 in bf16, decode.int4_biased: 4 fewer
PTX instructions per 8 values) and each block's fp32 product loses 136 x
the x tile's sum over the block's k (tl.sum) before its scale. No stored
config has it yet; its instruction counts are in docs/fused_gemm.md.
NVFP4: its E4M3 block scales as SUB (16 k each), the FP32 tensor scale at the
end. FusedGemm stores the block scales as bf16 E4M3 x 2^118 (exact), the PTX
decode's operand: converted in the loop, each thread converted its 32
broadcast scales per K block (fewer SASS instructions and faster at
M <= 128, slower in one 253-register tile, so the table is re-tuned per
bucket). The scales take 2 bytes instead of 1 (+4 MiB at K = N = 8192).
SHORT_DECODE (a config key; NVFP4 with pointer loads, elsewhere ignored):
decode.NVFP4_SPLIT_SHORT_BF16X2_PTX, the same values in 18 PTX
instructions per 8 codes instead of 22 (docs/fused_gemm.md).
ROT_DECODE (a config key; NVFP4 with pointer loads, fragment order and the
PTX decode, elsewhere ignored): the weights as decode.nvfp4_rot_words
permutes each 4-byte word's bits (FusedGemm.wt_rot, a second copy made on
first use) and decode.NVFP4_ROT_BF16X2_PTX, the same values in 13 PTX
instructions per 8 codes instead of 22. No pool holds it: the rot pass
(tuning.weight_only) chooses it per entry.
SCALE8 (a config key; NVFP4 with pointer loads, refused elsewhere:
scale8_refused): the kernel reads the E4M3 bytes (FusedGemm.scales8) and
converts each K block's [BLOCK_N, BLOCK_K // 16] tile as it loads it, before
the broadcast (_scales; decode.e4m3_x2_118, exact): a few values per
thread (8 in 16x128x128 w4), not its 32 broadcast ones. The pools' NVFP4
split-K candidates have SCALE8 twins (tuning.weight_only's scale8 pass).
Scale tiles are loaded one K block ahead (Triton does not pipeline loads
this small; loaded in the block they are used, their latency showed).

SWIGLU (a launch switch, FusedGemm's swiglu; not a config key): x_ptr is
h = [gate | up] and each x tile is silu(gate) * up, computed in fp32 as it
loads (_x_load) and rounded once; x by pointers then (a TMA config's
weights stay TMA's). docs/fused_gemm.md, "The SwiGLU prologue".

Small M splits K over SPLIT_K programs per tile (split_k_parts.py: atomics
in an fp32 workspace, the tile's last program stores; one launch).
"""

from __future__ import annotations

import dataclasses

import torch
import triton
import triton.language as tl

from qgemm_bench.backends import kmajor_layout, norm_parts
from qgemm_bench.backends.kmajor_layout import K_ALIGN, N_ALIGN, TILE, to_kmajor
from qgemm_bench.backends.triton_kernels import decode, split_k_parts
from qgemm_bench.operators.formats import INT4, NVFP4, NVFP4_BLOCK
from qgemm_bench.target import Target
from qgemm_bench.types import m_bucket

NONE, CHANNEL, BLOCK, SUB, GATHER = range(5)


def scale_mode(fmt: int, group: int | None, k: int, block_k: int, frag: bool = False,
               channel_block: bool = True) -> int:
    """The kernel's scale handling (module docstring). A group of all K
    (per channel) takes BLOCK: one scale row for every block, applied to
    the decoded weights as group 128's (with K off the K block too: the
    row index stays 0 below K, the padded rows past it meet zero weights
    and masked x). CHANNEL's own loop (unscaled decoded weights into the
    wgmma, the scale on the sum) returned garbage on the H100 in a table
    tile: it wrote registers that pending wgmmas read, the hazard
    wrong_on_sm90 describes (docs/fused_gemm.md, "Measurements behind the
    code's choices"). FusedGemm runs unscaled int4 as scales of one
    per channel. channel_block False: CHANNEL (Helion's fused kernel,
    compiled its own way; and channel_block(config)'s small tiles)."""
    if fmt == NVFP4:
        return SUB
    if group is None:
        return NONE
    if group >= k:
        return BLOCK if channel_block else CHANNEL
    if frag and group % 32:  # a byte's two codes (k, k + 16) can lie in two groups
        return GATHER
    if group % block_k == 0:
        return BLOCK
    return SUB if block_k % group == 0 else GATHER


def channel_block(c: dict) -> bool:
    """scale_mode's channel_block for launch config c: per-channel (and
    unscaled) int4 keeps CHANNEL's loop in pointer-load tiles of at most
    SPLIT_POOL_MAX_M x rows, the small-M split-K ones: there it was right
    in every call measured on the H100 and faster than BLOCK's. Not with
    ACC_SCALE: BLOCK's ACC path then scales each K block's fp32 product (a
    group of all K: the same row every block); CHANNEL's loop in those
    tiles wrote registers pending wgmmas read and returned wrong sums.
    Measurements: docs/fused_gemm.md, "Measurements behind the code's
    choices"."""
    return c["BLOCK_M"] > SPLIT_POOL_MAX_M or bool(c.get("TMA")) or bool(c.get("ACC_SCALE"))


@triton.jit
def _scale_row(s_ptr, b, offs_n, stride_sg, GROUP: tl.constexpr, BLOCK_K: tl.constexpr):
    """K block b's row of BLOCK scales as stored (bf16), [BLOCK_N, 1]:
    ACC_SCALE's multiplier of the block's fp32 product."""
    return tl.load(s_ptr + (b * BLOCK_K // GROUP) * stride_sg + offs_n[:, None])


@triton.jit
def _scales(s_ptr, b, offs_n, stride_sg, GROUP: tl.constexpr, SCALE_MODE: tl.constexpr, BLOCK_K: tl.constexpr,
            SCALE8: tl.constexpr = False, USE_ASM: tl.constexpr = True):
    """K block b's scale tile: [BLOCK_N, 1] (BLOCK), [BLOCK_N, BLOCK_K // GROUP]
    (SUB, NVFP4), else a placeholder. (2-D even for BLOCK: a [BLOCK_N] row
    carried through the loop fixed the decode's layout to the load's, which
    then cost a shared-memory round trip to reach the MMA operand layout.)
    SCALE8 (NVFP4): the E4M3 bytes, converted here, on the small tile, to
    the bf16 x 2^118 the stored scales hold (fp32 without the PTX decode)."""
    if SCALE_MODE == 2 or SCALE_MODE == 3:
        NG: tl.constexpr = max(BLOCK_K // GROUP, 2)
        g = (b * BLOCK_K + tl.arange(0, NG) * (BLOCK_K // NG)) // GROUP
        t = tl.load(s_ptr + g[None, :] * stride_sg + offs_n[:, None])
        if SCALE8:
            t = decode.e4m3_x2_118(t)
            if USE_ASM:
                t = t.to(tl.bfloat16)
        return t
    else:
        return 0


@triton.jit
def _weights(wp, sc, s_ptr, b, offs_n, stride_sg,
             FMT: tl.constexpr, GROUP: tl.constexpr, SCALE_MODE: tl.constexpr,
             USE_ASM: tl.constexpr, DT: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
             FRAG: tl.constexpr = False, SCALE_AFTER: tl.constexpr = False, FOLD: tl.constexpr = False,
             SHORT: tl.constexpr = False, ROT: tl.constexpr = False):
    """A [BLOCK_N, BLOCK_K // 2] byte tile (scale tile sc) -> its even-k and
    odd-k weights, [BLOCK_N, BLOCK_K // 2] each in DT, scaled unless the
    scale comes at the end (CHANNEL). SCALE_AFTER (NVFP4 with the PTX
    decode): the codes decoded at a unit scale, then multiplied by the block
    scales in bf16, exact either way (a code x 2^-8 times an E4M3 value
    has at most 6 significant bits; wrong_on_sm90 says why it exists).
    FOLD (int4, unscaled in the loop): q + decode.INT4_OFF_BF16 (fp16:
    INT4_OFF_FP16), the caller subtracts the offset from the fp32 product
    (fused_kernel's FOLD). SHORT (NVFP4 with the PTX decode, fragment order,
    not SCALE_AFTER): decode.nvfp4_split_bf16x2's shorter PTX. ROT (the
    same, on nvfp4_rot_words' bytes): decode.nvfp4_rot_bf16x2."""
    HALF: tl.constexpr = BLOCK_K // 2
    if FMT == 0:
        if FOLD and USE_ASM:
            lo, hi = decode.int4_biased_bf16x2(wp)
        elif FOLD:
            lo, hi = decode.int4_biased(wp, DT)
        elif USE_ASM:
            lo, hi = decode.int4_nibbles_bf16x2(wp)
        else:
            lo, hi = decode.int4_nibbles(wp, DT)
        if SCALE_MODE == 2 or SCALE_MODE == 3:
            NG: tl.constexpr = max(BLOCK_K // GROUP, 2)
            s = decode.per_k(sc.to(DT), HALF // NG, BLOCK_N, HALF)  # k = 2j and 2j + 1 share a group
            lo = lo * s
            hi = hi * s
        elif SCALE_MODE == 4:
            if FRAG:
                p = tl.arange(0, HALF)
                k_lo = b * BLOCK_K + 32 * (p // 16) + 8 * ((p // 2) % 2) + 2 * ((p // 4) % 4) + p % 2
                s_lo = tl.load(s_ptr + (k_lo // GROUP)[None, :] * stride_sg + offs_n[:, None]).to(DT)
                s_hi = tl.load(s_ptr + ((k_lo + 16) // GROUP)[None, :] * stride_sg + offs_n[:, None]).to(DT)
                lo = lo * s_lo
                hi = hi * s_hi
            else:
                g = (b * BLOCK_K + 2 * tl.arange(0, HALF)) // GROUP
                s = tl.load(s_ptr + g[None, :] * stride_sg + offs_n[:, None]).to(DT)
                lo = lo * s
                hi = hi * s
    else:
        # Block scales arrive as bf16 E4M3 x 2^118 (FusedGemm, exact; SCALE8:
        # _scales' conversion of the bytes), the operand the PTX decode takes.
        if USE_ASM:
            s = sc
        else:
            s = sc.to(tl.float32) * (1.0 / decode._EXP2_118)
        if FRAG:
            if SCALE_AFTER and USE_ASM:  # E4M3 values: x 2^-118 in fp32 (a bf16 constant 2^-118 folded to 0)
                s = (s.to(tl.float32) * (1.0 / decode._EXP2_118)).to(tl.bfloat16)
            s_lo, s_hi = tl.split(tl.reshape(s, (BLOCK_N, BLOCK_K // 32, 2)))
            s_lo = decode.per_k(s_lo, 16, BLOCK_N, HALF)
            s_hi = decode.per_k(s_hi, 16, BLOCK_N, HALF)
            if SCALE_AFTER and USE_ASM:
                lo, hi = decode.nvfp4_bf16x2(wp, tl.full(s_lo.shape, decode._EXP2_118, tl.bfloat16))
                lo = lo * s_lo
                hi = hi * s_hi
            elif USE_ASM and ROT:
                lo, hi = decode.nvfp4_rot_bf16x2(wp, s_lo, s_hi)
            elif USE_ASM:
                lo, hi = decode.nvfp4_split_bf16x2(wp, s_lo, s_hi, SHORT)
            else:
                lo, _ = decode.nvfp4_values(wp, s_lo, DT)
                _, hi = decode.nvfp4_values(wp, s_hi, DT)
        else:
            s = decode.per_k(s, 8, BLOCK_N, HALF)
            if USE_ASM:
                lo, hi = decode.nvfp4_bf16x2(wp, s)
            else:
                lo, hi = decode.nvfp4_values(wp, s, DT)
    return lo, hi


@triton.jit
def _x_load(ptrs, mask, UP: tl.constexpr, SWIGLU: tl.constexpr):
    """x's tile at ptrs by pointer loads, masked entries zero. SWIGLU: ptrs
    point into h = [gate | up] (the gate columns; up's are UP columns on)
    and the tile is silu(gate) * up, in fp32 from the stored gate and up,
    rounded once to h's dtype: Inductor's fused silu * mul, not eager
    torch's (which rounds silu's output first). Masked entries: silu(0) * 0."""
    x = tl.load(ptrs, mask=mask, other=0.0)
    if SWIGLU:
        g = x.to(tl.float32)
        u = tl.load(ptrs + UP, mask=mask, other=0.0).to(tl.float32)
        x = (g * tl.sigmoid(g) * u).to(ptrs.dtype.element_ty)
    return x


@triton.jit
def _x_block(x_cols, b, mask_m, offs_k, K, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
             SWIGLU: tl.constexpr = False):
    """x's [BLOCK_K, BLOCK_M] tile of K block b by pointer loads: rows past M,
    and unless EVEN_K columns past K, read as zeros; SWIGLU: _x_load's
    prologue (up K columns after gate)."""
    if EVEN_K:
        x = _x_load(x_cols + b * BLOCK_K, mask_m[None, :], K, SWIGLU)
    else:
        x = _x_load(x_cols + b * BLOCK_K, mask_m[None, :] & (b * BLOCK_K + offs_k < K)[:, None], K, SWIGLU)
    return x


@triton.jit
def _tensor_scale(ts_ptr, USE_ASM: tl.constexpr):
    """NVFP4's FP32 tensor scale as its products take it: times 2^8 after the
    PTX decode, which leaves each value times 2^-8 (decode.nvfp4_bf16x2)."""
    return tl.load(ts_ptr) * (256.0 if USE_ASM else 1.0)


@triton.jit
def _block_product(w, x, FOLD: tl.constexpr):
    """One K block's fp32 product of the decoded weights [BLOCK_N, BLOCK_K]
    and the x tile [BLOCK_K, BLOCK_M] (ACC_SCALE's); FOLD: the weights are
    int4_biased's, whose offset times the tile's sums over k comes off."""
    d = tl.dot(w, x)
    if FOLD:
        OFF: tl.constexpr = decode.INT4_OFF_BF16 if x.dtype == tl.bfloat16 else decode.INT4_OFF_FP16
        d -= OFF * tl.sum(x.to(tl.float32), axis=0)[None, :]
    return d


@triton.jit
def _halves_product(w_blk, w_off, x_blk, mask_m, k_left, USE_ASM: tl.constexpr, DT: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, FRAG: tl.constexpr,
                    EVEN_K: tl.constexpr, FOLD: tl.constexpr = False, SWIGLU: tl.constexpr = False,
                    UP: tl.constexpr = 0):
    """HALVES (int4, ACC_SCALE's unscaled decode): K block's fp32 product as
    _block_product's, from two half-K tiles decoded and multiplied in turn
    (half the decoded operand live at a time). w_blk: the block's first-half
    bytes [BLOCK_N, BLOCK_K // 4], the second w_off bytes on; x_blk: x's
    first-half [BLOCK_K // 2, BLOCK_M] pointers; k_left: K less the block's
    first k (masks x unless EVEN_K); SWIGLU: x's tiles by _x_load's
    prologue, up UP columns after gate."""
    HK: tl.constexpr = BLOCK_K // 2
    d = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for h in tl.static_range(2):
        # unscaled int4 (SCALE_MODE 0): _weights reads no scale argument
        lo, hi = _weights(tl.load(w_blk + h * w_off), 0, w_blk, 0, 0, 0, 0, 2, 0, USE_ASM, DT, BLOCK_N, HK, FRAG,
                          False, FOLD)
        if EVEN_K:
            xh = _x_load(x_blk + h * HK, mask_m[None, :], UP, SWIGLU)
        else:
            xh = _x_load(x_blk + h * HK, mask_m[None, :] & (h * HK + tl.arange(0, HK) < k_left)[:, None], UP,
                         SWIGLU)
        w = _in_k_order(lo, hi, BLOCK_N, HK, FRAG)
        if FOLD:
            d += _block_product(w, xh, FOLD)
        else:
            d = tl.dot(w, xh, d)
    return d


@triton.jit
def _in_k_order(lo, hi, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, FRAG: tl.constexpr):
    """Decoded (low-nibble, high-nibble) tiles [BLOCK_N, BLOCK_K // 2] -> the
    weight tile [BLOCK_N, BLOCK_K] in K order (kmajor_layout.py's byte
    orders; with FRAG a register permutation, each thread's pairs already
    where the MMA operand wants them)."""
    w = tl.join(lo, hi)
    if FRAG:
        w = tl.reshape(w, (BLOCK_N, BLOCK_K // 32, 4, 2, 2, 2))  # n, chunk, c, u, e, nibble
        w = tl.permute(w, (0, 1, 5, 3, 2, 4))  # k = 32 chunk + 16 nibble + 8 u + 2 c + e
    return tl.reshape(w, (BLOCK_N, BLOCK_K))


@triton.jit
def _weight_rows(w_ptr, pid_mn, offs_n, N, stride_wn, BLOCK_N: tl.constexpr, KW: tl.constexpr,
                 TILE_N: tl.constexpr, TILE_K: tl.constexpr):
    """Pointers to the first KW // 2 bytes of K block 0 of each of the tile's
    BLOCK_N weight rows (tile pid_mn, its rows offs_n); _block_ptr moves them
    to a K block. Tiled (kmajor_layout.py): TILE_N x TILE_K tiles of TILE_N *
    TILE_K // 2 contiguous bytes, K-major within; a program's tile spans
    BLOCK_N // TILE_N tile rows (or part of one), its K block part of a tile
    or several."""
    if TILE_N:
        TB: tl.constexpr = TILE_K // 2  # a tile row's bytes
        TILE_BYTES: tl.constexpr = TILE_N * TB
        if BLOCK_N >= TILE_N:
            # From the program's tile index: the offs_n form below was slower
            # with 128-row tiles (H100).
            r = tl.arange(0, BLOCK_N)
            tile_n = (pid_mn % tl.cdiv(N, BLOCK_N)).to(tl.int64)
            rows = (r // TILE_N) * TILE_N * stride_wn + (r % TILE_N) * TB
            w_rows = w_ptr + tile_n * BLOCK_N * stride_wn + rows[:, None]
        else:
            rows = (offs_n // TILE_N) * TILE_N * stride_wn + (offs_n % TILE_N) * TB
            w_rows = w_ptr + rows[:, None]
        if KW <= TILE_K:
            w_rows += tl.arange(0, KW // 2)[None, :]
        else:
            j = tl.arange(0, KW // 2)
            w_rows += ((j // TB) * TILE_BYTES + j % TB)[None, :]
    else:
        w_rows = w_ptr + offs_n[:, None] * stride_wn + tl.arange(0, KW // 2)[None, :]
    return w_rows


@triton.jit
def _block_ptr(w_rows, b, BLOCK_K: tl.constexpr, TILE_N: tl.constexpr, TILE_K: tl.constexpr):
    """_weight_rows' pointers moved to K block b. The block's byte offset is a
    multiple of its run length by construction: computed as kb // TB *
    TILE_BYTES + kb % TB, Triton lost its alignment and the weight loads
    left the cp.async pipeline."""
    if TILE_N:
        TILE_BYTES: tl.constexpr = TILE_N * (TILE_K // 2)
        if BLOCK_K < TILE_K:
            PER: tl.constexpr = TILE_K // BLOCK_K  # K blocks per tile
            return w_rows + (b // PER) * TILE_BYTES + (b % PER) * (BLOCK_K // 2)
        else:
            return w_rows + b * (BLOCK_K // TILE_K) * TILE_BYTES
    else:
        return w_rows + b * (BLOCK_K // 2)


@triton.jit(do_not_specialize=["M"])
def fused_kernel(
    x_ptr, w_ptr, s_ptr, ts_ptr, out_ptr, ws_ptr, count_ptr,
    M, N, K: tl.constexpr, stride_xm, stride_wn, stride_sg, stride_om,
    FMT: tl.constexpr, GROUP: tl.constexpr, SCALE_MODE: tl.constexpr, EVEN_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
    DECODE_ASM: tl.constexpr = True, FRAG: tl.constexpr = False, TILE_N: tl.constexpr = 0, TILE_K: tl.constexpr = 0,
    PDL: tl.constexpr = 0, PF_LINES: tl.constexpr = 32,  # split_k_parts.pdl_prologue; 128-byte lines per tile row
    TMA: tl.constexpr = False, x_desc=None, w_desc=None,  # tile loads by TMA (FusedGemm.descriptors)
    ACC_SCALE: tl.constexpr = False,  # BLOCK scales on each K block's fp32 product (module docstring)
    TMA_W: tl.constexpr = True,  # with TMA: False, only x by TMA, the weights by pointer loads
    FOLD: tl.constexpr = False,  # with ACC_SCALE, int4: the decode's offset off the fp32 product (module docstring)
    SCALE_AHEAD: tl.constexpr = False,  # with ACC_SCALE, int4: each block's scale row loaded a block ahead (same)
    HALVES: tl.constexpr = False,  # with ACC_SCALE, int4 BLOCK, pointer loads: each K block in two half-K tiles
    SCALE8: tl.constexpr = False,  # NVFP4, pointer loads: block scales read as E4M3 bytes (module docstring)
    SHORT_DECODE: tl.constexpr = False,  # NVFP4, pointer loads: the shorter PTX decode (module docstring)
    ROT_DECODE: tl.constexpr = False,  # NVFP4, pointer loads: FusedGemm passes wt_rot's bytes (module docstring)
    # split_k_parts._store's parts of the output: a residual added (and the norm-weighted copy), rows scaled
    res_ptr=None, sq_ptr=None, RESIDUAL: tl.constexpr = False, nw_ptr=None, xw_ptr=None, NORM_W: tl.constexpr = False,
    sqin_ptr=None, eps=0.0, RMS_SCALE: tl.constexpr = False,
    # the input's part: x_ptr is h = [gate | up] ([M, 2K]), x = silu(gate) * up as x loads (_x_load); by pointers
    SWIGLU: tl.constexpr = False,
    # the output's: columns in (gate, up) pairs, out [M, N // 2] = silu(gate) * up (split_k_parts._store)
    SWIGLU_OUT: tl.constexpr = False,
):
    DT: tl.constexpr = x_ptr.dtype.element_ty
    USE_ASM: tl.constexpr = DECODE_ASM and DT == tl.bfloat16  # the PTX decodes are bf16 only
    pid_mn, offs_m, offs_n, first, last = split_k_parts.tile_and_range(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K)
    # HALVES' loop (_halves_product; elsewhere ignored): the pointer tiles below span half a K block
    HALVED: tl.constexpr = HALVES and ACC_SCALE and FMT == 0 and SCALE_MODE == 2 and not TMA
    KW: tl.constexpr = BLOCK_K // 2 if HALVED else BLOCK_K  # the k of one weight and x load
    offs_k = tl.arange(0, KW)
    mask_m = offs_m < M
    # Weights and scales are padded (kmajor_layout.py): only x needs masks.
    w_rows = _weight_rows(w_ptr, pid_mn, offs_n, N, stride_wn, BLOCK_N, KW, TILE_N, TILE_K)
    if TILE_N:
        TB: tl.constexpr = TILE_K // 2  # a tile row's bytes
        TILE_BYTES: tl.constexpr = TILE_N * TB
        # HALVES: the second half's byte offset
        H_OFF: tl.constexpr = BLOCK_K // 4 if BLOCK_K <= TILE_K else BLOCK_K // 4 // TB * TILE_BYTES
    else:
        H_OFF: tl.constexpr = BLOCK_K // 4
    # PDL 2, 3: prefetch the start of each tile row's K range, PF_LINES lines of
    # it (32 timed fastest of 16..256 on the H100: docs/fused_gemm.md).
    if PDL >= 2 and TILE_N and BLOCK_N >= TILE_N:
        RT: tl.constexpr = BLOCK_N // TILE_N
        tile_n = (pid_mn % tl.cdiv(N, BLOCK_N)).to(tl.int64)
        span = (last - first) * (BLOCK_K // 2) * TILE_N  # this program's bytes per tile row
        line = tl.minimum(tl.arange(0, PF_LINES) * 128, span - 128)
        pf = (w_ptr + (tile_n * (BLOCK_N // TILE_N) + tl.arange(0, RT)[:, None]) * TILE_N * stride_wn
              + (first * BLOCK_K // TILE_K) * TILE_BYTES + line[None, :])
        split_k_parts.pdl_prologue(pf, PDL)
    else:
        split_k_parts.pdl_prologue(w_ptr + tl.arange(0, 2), PDL)  # PDL 2, 3: two harmless prefetches
    X_TMA: tl.constexpr = TMA and not SWIGLU  # the prologue loads x by pointers (the weights may stay TMA's)
    if X_TMA:
        m0 = (pid_mn // tl.cdiv(N, BLOCK_N)) * BLOCK_M
    if TMA and TMA_W:
        tile_row = (pid_mn % tl.cdiv(N, BLOCK_N)) * (BLOCK_N // TILE_N)
    x_cols = x_ptr + offs_m[None, :] * stride_xm + offs_k[:, None]
    W_SCALE: tl.constexpr = 0 if ACC_SCALE and SCALE_MODE == 2 else SCALE_MODE  # the decoded weights' (2: BLOCK)
    FOLDED: tl.constexpr = FOLD and FMT == 0 and W_SCALE != SCALE_MODE
    S8: tl.constexpr = SCALE8 and FMT == 1 and not TMA  # FusedGemm refuses it elsewhere (scale8_refused)
    # The first block's scales, loaded before the loop: a program whose range is empty (more splits than
    # blocks) runs no block, but its first index is past the last scale row, so it reads the last.
    b0 = tl.minimum(first, last - 1)
    sc = _scales(s_ptr, b0, offs_n, stride_sg, GROUP, W_SCALE, BLOCK_K, S8, USE_ASM)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    BLOCKS: tl.constexpr = (K + BLOCK_K - 1) // BLOCK_K
    if BLOCKS % SPLIT_K == 0:
        steps = BLOCKS // SPLIT_K  # a constant trip count (see the module docstring)
    else:
        steps = last - first
    if FMT == 1 and ACC_SCALE:
        t_scale = _tensor_scale(ts_ptr, USE_ASM)
    AHEAD: tl.constexpr = SCALE_AHEAD and W_SCALE != SCALE_MODE
    if AHEAD:
        s_raw = _scale_row(s_ptr, b0, offs_n, stride_sg, GROUP, BLOCK_K)
    for i in range(0, steps):
        b = first + i
        sc_next = _scales(s_ptr, tl.minimum(b + 1, last - 1), offs_n, stride_sg, GROUP, W_SCALE, BLOCK_K, S8,
                          USE_ASM)
        if AHEAD:  # this block's row, loaded a block ago; the next one's now (module docstring)
            s_row = s_raw.to(tl.float32)
            s_raw = _scale_row(s_ptr, tl.minimum(b + 1, last - 1), offs_n, stride_sg, GROUP, BLOCK_K)
        elif W_SCALE != SCALE_MODE:  # needed only after the block's dot: its latency hides behind it
            s_row = _scale_row(s_ptr, b, offs_n, stride_sg, GROUP, BLOCK_K).to(tl.float32)
        if TMA and TMA_W:
            PER_T: tl.constexpr = TILE_K // BLOCK_K  # K blocks per tile
            wp = w_desc.load([tile_row, (b // PER_T) * TILE_N, (b % PER_T) * (BLOCK_K // 2)])
            wp = tl.reshape(wp, (BLOCK_N, BLOCK_K // 2))
        else:
            w_blk = _block_ptr(w_rows, b, BLOCK_K, TILE_N, TILE_K)
        if HALVED:
            acc += _halves_product(w_blk, H_OFF, x_cols + b * BLOCK_K, mask_m, K - b * BLOCK_K, USE_ASM, DT, BLOCK_N,
                                   BLOCK_M, BLOCK_K, FRAG, EVEN_K, FOLDED, SWIGLU, K) * s_row
        else:
            if not (TMA and TMA_W):
                wp = tl.load(w_blk)
            lo, hi = _weights(wp, sc, s_ptr, b, offs_n, stride_sg, FMT, GROUP, W_SCALE, USE_ASM, DT, BLOCK_N,
                              BLOCK_K, FRAG, TMA, FOLDED, SHORT_DECODE, ROT_DECODE)
            if X_TMA:  # rows past M and columns past K read as zeros
                x = tl.trans(x_desc.load([m0, b * BLOCK_K]))
            else:
                x = _x_block(x_cols, b, mask_m, offs_k, K, BLOCK_K, EVEN_K, SWIGLU)
            w = _in_k_order(lo, hi, BLOCK_N, BLOCK_K, FRAG)
            if W_SCALE != SCALE_MODE:
                acc += _block_product(w, x, FOLDED) * s_row
            elif ACC_SCALE and FMT == 1:  # NVFP4: each block's dot on its own (module docstring)
                acc += tl.dot(w, x) * t_scale
            else:
                acc = tl.dot(w, x, acc)
        sc = sc_next
    split_k_parts.pdl_release(PDL)
    if FMT == 1 and not ACC_SCALE:
        acc = acc * _tensor_scale(ts_ptr, USE_ASM)
    if SCALE_MODE == 1:
        acc = acc * tl.load(s_ptr + offs_n).to(tl.float32)[:, None]
    split_k_parts.finish(tl.trans(acc), out_ptr, stride_om, ws_ptr, count_ptr, out_ptr, pid_mn, offs_m, offs_n, M, N,
                         SPLIT_K, False, False, 0, res_ptr, sq_ptr, RESIDUAL, nw_ptr, xw_ptr, NORM_W, sqin_ptr, K,
                         eps, RMS_SCALE, SWIGLU_OUT)


def config(bm: int, bn: int, bk: int, split: int, warps: int = 4, stages: int = 4, asm: bool = True,
           tma: bool | str = False, acc: bool = False, maxnreg: int | None = None,
           ws: tuple[int, ...] | None = None, fold: bool = False, scale8: bool = False) -> dict:
    """A launch config; tma True: x and weight tiles by TMA, "x": only x's
    (TMA_W False); maxnreg caps the registers per thread (Triton's compile
    option: ptxas may spill to fit); ws (BLOCK_M, BLOCK_N, BLOCK_K, stages[, K_SPLIT]):
    the warp-specialized Gluon kernel's tiles (ws_gemm.py), which run where
    it runs (ws_gemm.usable), the rest of the config in fused_kernel
    elsewhere; fold: FOLD (with acc, int4: fused_kernel's FOLD); scale8:
    SCALE8 (NVFP4, pointer loads: block scales read as E4M3 bytes)."""
    c = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split, "DECODE_ASM": asm,
         "num_warps": warps, "num_stages": stages}
    return {**c, **({"TMA": True} if tma else {}), **({"TMA_W": False} if tma == "x" else {}),
            **({"ACC_SCALE": True} if acc else {}), **({"FOLD": True} if fold else {}),
            **({"SCALE8": True} if scale8 else {}),
            **({"maxnreg": maxnreg} if maxnreg else {}),
            **({"WS": ws_tiles(*ws)} if ws else {})}


def ws_tiles(bm: int, bn: int, bk: int, stages: int, k_split: int = 1, splits: int = 1, skew: int = 0,
             stream_k: bool = False, pdl: int = 0, m_group: int = 1, acc: bool = False) -> dict:
    """A config's "WS" value: the warp-specialized kernel's tiles (k_split 2:
    two consumers share one 64-row weight tile's K blocks; splits: programs
    share a tile's K blocks, the last `skew` blocks more; stream_k: the
    programs, one per SM, share all tiles' K blocks; pdl: launched with
    programmatic dependent launch, ws_gemm._pdl_wait (1 or True), the first
    weights loaded before the wait (2: ws_gemm._producer); m_group: tiles in
    groups of that many x-row blocks, ws_gemm._grouped; acc: int4 scales on
    each block's product, ws_gemm._block; ws_gemm.py)."""
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_stages": stages} | \
        ({"K_SPLIT": k_split} if k_split != 1 else {}) | ({"SPLITS": splits} if splits != 1 else {}) | \
        ({"SKEW": skew} if skew else {}) | ({"STREAM_K": 1} if stream_k else {}) | \
        ({"PDL": int(pdl)} if pdl else {}) | ({"M_GROUP": m_group} if m_group != 1 else {}) | \
        ({"ACC": 1} if acc else {})


# Checked-in configs by format and M bucket (no autotuning in default runs;
# the table, weight_only_configs, has the Llama layers' own): the fastest of
# the pointer-load pool on the H100 at K = N = 8192 (docs/fused_gemm.md,
# "Measurements behind the code's choices"). Kernels without TMA loads
# (Helion's fused kernel) mirror these.
POINTER_CONFIGS = {
    INT4: {128: config(128, 64, 128, 2, 4, 3), 256: config(128, 128, 128, 1, 8, 3), 512: config(256, 128, 64, 1, 8, 4),
           1024: config(256, 128, 128, 1, 8, 3)},
    NVFP4: {128: config(128, 64, 128, 2, 4, 3), 256: config(256, 64, 128, 1, 4, 3), 512: config(256, 128, 64, 1, 8, 4),
            1024: config(256, 128, 128, 1, 8, 3)},
}
# int4 with TMA loads: the fastest on the H100 at K = N = 8192 in the
# runner's timing windows (256x64x64 w4 s3 won short windows only; above
# M = 1024 the 256-row tiles are within 1-10% and swap places between
# machines); NVFP4: its own table entries (wrong_on_sm90). Measurements:
# docs/fused_gemm.md.
FUSED_CONFIGS = {
    INT4: {128: config(128, 64, 128, 1, 4, 5, tma=True), 256: config(256, 64, 128, 1, 4, 3, tma=True),
           512: config(256, 128, 128, 1, 8, 3, tma=True), 1024: config(256, 128, 64, 1, 8, 3, tma=True),
           2048: config(256, 128, 128, 1, 8, 3, tma=True), 4096: config(256, 128, 64, 1, 8, 3, tma=True)},
    NVFP4: POINTER_CONFIGS[NVFP4],
}


# The warp-specialized Gluon kernel's candidate tiles by M bucket (ws_gemm.py;
# the table times them against each entry at these M and keeps the fastest:
# tuning/weight_only.py ws; the entry's own config runs where the
# kernel does not). Per bucket the one-consumer tiles that timed fastest on
# the H100 (none won at 128 and 256), two consumers on a 64-row tile
# (K_SPLIT 2), two or four programs per tile (SPLITS, SKEW), stream-K for
# tile counts that leave a wave part-empty (at 64 untimed yet), and at 64 the 64-k split tiles,
# the only ones int4 group 64 runs (ws_gemm.usable). Measurements:
# docs/fused_gemm.md and docs/ws_gemm.md. At 16 the decode-size x tiles
# (16 rows) that beat the fused kernel at 16x8192x8192 on the H200 (int4
# 16.4 against 17.3 us, NVFP4 17.7 against 19.2; none did at M = 1), and
# their ACC twins (int4 groups of whole K blocks only: ws_gemm.usable;
# faster at int4 16x8192x8192, docs/ws_gemm.md).
_WS16 = [ws_tiles(16, 64, 128, 8, splits=2), ws_tiles(16, 64, 128, 8, 2), ws_tiles(16, 128, 128, 6, splits=2)]
WS_POOL = {16: _WS16 + [{**t, "ACC": 1} for t in _WS16],
           64: [ws_tiles(64, 64, 128, 4), ws_tiles(64, 64, 64, 6, 2), ws_tiles(64, 64, 128, 4, splits=2, skew=2),
                ws_tiles(64, 128, 128, 4, splits=2, skew=2), ws_tiles(64, 128, 64, 6, splits=2, skew=4),
                ws_tiles(64, 64, 64, 6, splits=2, skew=2), ws_tiles(64, 128, 128, 4, stream_k=True)],
           128: [ws_tiles(128, 64, 64, 4, 2), ws_tiles(128, 128, 64, 4, splits=2, skew=4),
                 ws_tiles(128, 128, 64, 4, stream_k=True), ws_tiles(128, 128, 128, 3, splits=2, skew=2)],
           256: [ws_tiles(256, 128, 64, 4, splits=2, skew=4), ws_tiles(128, 128, 64, 4, splits=2, skew=4),
                 ws_tiles(256, 128, 64, 4, splits=4, skew=4), ws_tiles(256, 128, 64, 4, stream_k=True),
                 ws_tiles(128, 128, 64, 4, stream_k=True), ws_tiles(128, 128, 128, 3, splits=2, skew=2)],
           512: [ws_tiles(256, 128, 64, 3), ws_tiles(256, 128, 64, 4), ws_tiles(256, 128, 64, 4, stream_k=True),
                 ws_tiles(256, 128, 64, 4, m_group=4), ws_tiles(256, 128, 64, 4, m_group=8)]}


def ws_pool(m: int) -> list[dict]:
    """The WS tiles the table times at M (WS_POOL: the bucket's, from 512
    the 512 ones; none elsewhere)."""
    b = m_bucket(m)
    return list(WS_POOL[512] if b >= 512 else WS_POOL.get(b, []))


# The fused path's tuning candidates from M = 128 (BLOCK_M, BLOCK_N, BLOCK_K,
# SPLIT_K, warps, stages, TMA; those with BLOCK_M above M's bucket left
# out): the TMA winners above and their runners-up, and
# the pointer-load pool before TMA (NVFP4's, and the configs kernels without
# TMA mirror: tuning/weight_only.py records each entry's best of them).
# Tiles measured slower and left out are listed in docs/fused_gemm.md.
FUSED_POOL = [(128, 64, 128, 1, 4, 5, True), (128, 64, 128, 1, 4, 4, True), (128, 64, 128, 2, 4, 3, True),
              (128, 64, 128, 1, 4, 3, True), (128, 128, 128, 1, 8, 4, True), (256, 64, 128, 1, 4, 3, True),
              (256, 128, 64, 1, 8, 3, True), (256, 128, 64, 1, 8, 5, True), (256, 128, 128, 1, 8, 3, True),
              (256, 64, 64, 1, 4, 3, True)]
FUSED_POOL += [(*t, False) for t in ((128, 64, 128, 2, 4, 3), (128, 64, 128, 1, 4, 3), (128, 64, 128, 1, 4, 4),
                                     (128, 128, 128, 1, 8, 3), (128, 128, 128, 2, 8, 3), (256, 64, 128, 1, 4, 3),
                                     (256, 128, 64, 1, 8, 4), (256, 128, 128, 1, 8, 3))]  # the pre-TMA pool
# Below M = 128 the fused kernel splits K to fill the SMs (BLOCK_N, BLOCK_K,
# SPLIT_K, warps, stages[, ACC_SCALE[, maxnreg]]; BLOCK_M = M's bucket):
# 3 stages and splits that divide the K blocks (a constant trip count) timed
# fastest on the H100; 1x4096x4096 stays tinygemm's. Measurements and the
# tiles left out: docs/fused_gemm.md.
FUSED_SPLIT_POOL = [(128, 128, 8, 4, 3), (64, 128, 4, 4, 3), (64, 128, 2, 4, 3), (64, 128, 4, 4, 4),
                    (64, 128, 2, 4, 4), (64, 128, 8, 4, 4), (128, 128, 4, 8, 4), (128, 128, 2, 8, 4),
                    (128, 128, 8, 8, 4), (64, 256, 4, 4, 3), (128, 128, 4, 4, 4), (128, 128, 2, 4, 4)]
# With ACC_SCALE (int4 BLOCK scales on each K block's fp32 product): the
# tiles where it was faster on the H100 (64-row split-K tiles; not 128-row or
# TMA ones: docs/fused_gemm.md).
FUSED_SPLIT_POOL += [(*t, True) for t in ((64, 128, 4, 4, 3), (64, 128, 2, 4, 3), (64, 128, 8, 4, 3),
                                          (128, 128, 4, 4, 4))]
# 16x128x128 split 8 with ACC_SCALE took 167 registers (sm_90, Triton 3.6),
# so 3 programs per SM, and its 512 programs at K = N = 8192 two waves;
# capped at 128 (maxnreg, no spills: scripts/fused_sass.py) 4 fit, one wave,
# and it was the fastest (H100: docs/fused_gemm.md).
FUSED_SPLIT_POOL += [(128, 128, 8, 4, 3, True, 128)]
# 64-column tiles split 8 without ACC_SCALE: NVFP4's pool had none, where its
# 16x128 split-8 grid runs 1.2 waves at N = 10240 (docs/fused_gemm.md).
FUSED_SPLIT_POOL += [(64, 128, 8, 4, 3)]
SPLIT_POOL_MAX_M = 64  # M buckets up to this take FUSED_SPLIT_POOL


def wrong_on_sm90(fmt: int, c: dict) -> bool:
    """Configs that return wrong sums on sm_90 (measured on the H100, Triton 3.6):
    - int4 with 8 warps and split-K: wrong in 1-100% of calls across the
      family, not rounding (others of the family passed every call) and not
      the partials' memory order (a fence changed nothing); NVFP4, the K-order
      layout, 4 warps and SPLIT_K 1 had no wrong call. The whole family is
      left out of the pools and refused.
    - (No longer refused) NVFP4 with TMA loads, its block scales applied
      inside the PTX decode: NaN or wrong sums. The SASS writes registers
      that wgmmas still pending read as their A operand, which the PTX ISA
      leaves undefined (scripts/fused_sass.py counts such writes; none in the
      scale-after loops and in every int4 TMA config of the table). So with
      TMA, NVFP4 decodes at a unit scale and multiplies after (_weights'
      SCALE_AFTER). Pointer-load configs have such writes too and have not
      returned a wrong call (the cp.async waits ahead of them in each K block
      are the likely margin); the margin ran out for int4 without scales in
      the loop (per channel, unscaled): scale_mode now gives them group
      128's loop. Measurements: docs/fused_gemm.md, "Measurements behind the
      code's choices"."""
    return fmt == INT4 and c["num_warps"] == 8 and c["SPLIT_K"] > 1


def scale8_refused(fmt: int, c: dict) -> str:
    """Why config c may not have SCALE8 (block scales read as E4M3 bytes:
    fused_kernel's _scales), "" where it may or has none: NVFP4 with
    pointer loads only (int4 has no E4M3 scales; the TMA loop decodes at a
    unit scale and applies its scales after, SCALE_AFTER). FusedGemm and
    the table files refuse the others."""
    if c.get("SCALE8") and (fmt != NVFP4 or c.get("TMA")):
        return "SCALE8 is for NVFP4 with pointer loads only (not int4, not TMA)"
    return ""


# What a weight-only config may name: the tiles and launch options, then
# fused_kernel's switches (the split path takes the first line's).
CONFIG_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "DECODE_ASM", "num_warps", "num_stages", "maxnreg", "PDL",
               "PF_LINES", "TMA", "TMA_W", "ACC_SCALE", "FOLD", "SCALE_AHEAD", "HALVES", "SCALE8", "SHORT_DECODE",
               "ROT_DECODE", "WS")


def unknown_refused(c: dict) -> str:
    """Why config c may not run: it names keys no kernel here takes (a stale
    one, e.g. PERSISTENT of the persistent kernel removed in 9395170; a typo);
    "" where it does not (FusedGemm and weight_only_configs.check_config
    refuse it in one line, before a launch could fail or ignore it)."""
    if unknown := [key for key in c if key not in CONFIG_KEYS]:
        return f"{', '.join(map(str, unknown))}: not a config key of these kernels (they take {', '.join(CONFIG_KEYS)})"
    return ""


def pool(m: int, fmt: int = INT4) -> list[dict]:
    """The fused path's tuning candidates at M for a format
    (`qgemm-bench tune`: tuning/weight_only.py, tuning/helion.py); NVFP4 from
    M = 256 also 256x64x128 w4 with x's loads alone by TMA; above
    weight_only.FUSED_MAX_M, where the path runs only with TMA loads, the
    256-row TMA ones."""
    from qgemm_bench.backends.triton_kernels.weight_only import FUSED_MAX_M

    b = m_bucket(m)
    if b <= SPLIT_POOL_MAX_M:
        cands = [config(max(16, b), *t[:5], acc=len(t) > 5, maxnreg=t[6] if len(t) > 6 else None)
                 for t in FUSED_SPLIT_POOL]
        # NVFP4's ACC_SCALE tiles with the shorter decode too: the two untimed changes in one candidate
        # beside the chained configs (docs/fused_gemm.md, FUSED_SPLIT_POOL).
        cands = [{**c, "SHORT_DECODE": True} if fmt == NVFP4 and c.get("ACC_SCALE") else c for c in cands]
        cands = scale8_twins(fold_twins(cands, fmt), fmt)
    elif b > FUSED_MAX_M:  # the path runs only with TMA here; 128-row x tiles 1.2-1.3x at 2048 and 4096
        cands = [config(bm, bn, bk, sk, w, st, tma=t) for bm, bn, bk, sk, w, st, t in FUSED_POOL if bm == 256 and t]
    else:
        cands = [config(bm, bn, bk, sk, w, st, tma=t) for bm, bn, bk, sk, w, st, t in FUSED_POOL if bm <= b]
        if fmt == NVFP4:  # also x alone by TMA in the tile where it won (e01e460's table)
            cands += [config(256, 64, 128, 1, 4, 3, tma="x")] if b >= 256 else []
    return [c for c in cands if not wrong_on_sm90(fmt, c)]


def fold_twins(cands: list[dict], fmt: int) -> list[dict]:
    """cands, each int4 pointer-load ACC_SCALE config followed by its FOLD
    twin where the list lacks it (pool up to SPLIT_POOL_MAX_M: the tuner
    times them with the whole pools, and where they won on the prior table
    when it prunes by one)."""
    out = []
    for c in cands:
        out.append(c)
        twin = {**c, "FOLD": True}
        if fmt == INT4 and c.get("ACC_SCALE") and not c.get("TMA") and not c.get("FOLD") and twin not in cands:
            out.append(twin)
    return out


def scale8_twins(cands: list[dict], fmt: int) -> list[dict]:
    """cands, each NVFP4 pointer-load config followed by its SCALE8 twin
    where the list lacks it (pool up to SPLIT_POOL_MAX_M; timed as
    fold_twins' are: whole pools, or where they won on a prior table)."""
    out = []
    for c in cands:
        out.append(c)
        twin = {**c, "SCALE8": True}
        if fmt == NVFP4 and not c.get("TMA") and not c.get("SCALE8") and twin not in cands:
            out.append(twin)
    return out


def halved(fmt: int, group: int | None, k: int, c: dict, frag: bool = True) -> bool:
    """Whether config c runs fused_kernel's HALVES loop: asked for, int4
    with ACC_SCALE, BLOCK scales, pointer loads (elsewhere HALVES is
    ignored). No pool or stored config has it: an explicit request only.
    At 8 warps with split-K (wrong_on_sm90's family) FusedGemm takes it
    only when told its calls are checked (FusedGemm.unchecked:
    decode_probe's S4 halves rows, HALVES_CHECK_CALLS each), until the
    H200 shows it right."""
    return bool(c.get("HALVES")) and bool(c.get("ACC_SCALE")) and fmt == INT4 and not c.get("TMA") and \
        scale_mode(fmt, group, k, c["BLOCK_K"], frag, channel_block(c)) == BLOCK


def tma_usable(fmt: int, group: int | None, k: int, block_k: int, target, block_m: int = 256) -> bool:
    """Whether a config with TMA loads (or x's alone, TMA_W False) takes them
    on Target `target` (FusedGemm.descriptors adds the per-call conditions on
    x), a Hopper or newer GPU (the interpreter runs them too): NVFP4 (its SUB
    scales), int4 BLOCK scales (groups of whole K blocks, as 128) and int4
    SUB scales (groups tiling a K block, as 32 and 64), the latter with more
    than two groups per K block only in 256-row x tiles (with 128-row ones
    four groups per K block were slower than pointer loads on the H100).
    Per channel is BLOCK here (scale_mode; FusedGemm runs unscaled int4 as
    scales of one per channel, so callers pass group K for it): CHANNEL's
    and NONE's TMA loops wrote registers of pending wgmmas, and a multiply
    by a runtime 1.0 that removed the writes put the decoded tile through
    shared memory. GATHER loads a scale per weight by pointer. Measurements:
    docs/fused_gemm.md, "Measurements behind the code's choices"."""
    mode = scale_mode(fmt, group, k, block_k, True)
    if fmt != NVFP4 and not (mode == BLOCK or mode == SUB and (block_k // group <= 2 or block_m >= 256)):
        return False
    return target.is_cpu or target.capability[0] >= 9


def tma_refused(c: dict, fmt: int, group: int | None, k: int, target) -> bool:
    """Whether config c has TMA loads that tma_usable refuses here (its
    tiles, the weights' format, group and K): the table entry's
    pointer-load config runs instead (WeightOnlyGemm.tuned; the tuner's
    ws pass at a group size)."""
    return bool(c.get("TMA")) and not tma_usable(fmt, group, k, c["BLOCK_K"], target, c["BLOCK_M"])


def tuned_config(fmt: int, m: int, tma: bool = True) -> dict:
    """The checked-in config of the nearest measured M bucket (tma False:
    of POINTER_CONFIGS, for kernels without TMA loads)."""
    table = (FUSED_CONFIGS if tma else POINTER_CONFIGS)[fmt]
    b = m_bucket(m)
    return table[min(table, key=lambda k: abs(k - b))]


def rot_words_in_register_order(p) -> torch.Tensor:
    """p's bytes (kmajor_layout.KMajorWeights, fragment order) with each
    decode call's 4 bytes permuted as one word (decode.nvfp4_rot_words). A
    call does not take 4 bytes of one row: in the wgmma A-operand registers
    a thread's bytes come as (row r, bytes 2p, 2p + 1), then (row r + 8, the
    same bytes), for r mod 16 < 8 (the MMA fragment's rows g and g + 8), so
    those are the words. Untiled, permuted, tiled again."""
    wt = kmajor_layout.untiled(p)
    np_, kh = wt.shape
    words = wt.reshape(np_ // 16, 2, 8, kh // 2, 2).permute(0, 2, 3, 1, 4).reshape(np_ // 16, 8, kh // 2, 4)
    words = decode.nvfp4_rot_words(words).reshape(np_ // 16, 8, kh // 2, 2, 2)
    return kmajor_layout.retiled(p, words.permute(0, 3, 1, 2, 4).reshape(np_, kh).contiguous())


def check_parts(x: torch.Tensor, n: int, residual, norm_weight, rms) -> None:
    """ValueError, one line, for norm parts FusedGemm's kernel would misread:
    residual a contiguous [M, N] of x's dtype, norm_weight a unit-stride [N]
    with a residual, rms's sums a contiguous fp32 [M, sumsq_chunks(K)]."""
    m, k = x.shape
    if residual is not None and (residual.shape != (m, n) or residual.dtype != x.dtype
                                 or not residual.is_contiguous()):
        raise ValueError(f"residual must be a contiguous [{m}, {n}] {x.dtype} tensor, got "
                         f"{tuple(residual.shape)} {residual.dtype}")
    if norm_weight is not None and (residual is None or norm_weight.shape != (n,) or norm_weight.stride(0) != 1):
        raise ValueError(f"norm_weight must be [{n}] and come with a residual, got {tuple(norm_weight.shape)}")
    chunks = norm_parts.sumsq_chunks(k)
    if rms is not None and (rms[0].shape != (m, chunks) or rms[0].dtype != torch.float32
                            or not rms[0].is_contiguous()):
        raise ValueError(f"rms: contiguous fp32 sums of squares [{m}, {chunks}], got {tuple(rms[0].shape)} "
                         f"{rms[0].dtype}")


def rms_scaled(y: torch.Tensor, sumsq: torch.Tensor, eps: float, k: int) -> torch.Tensor:
    """y's rows times rsqrt(sum of x's squares / k + eps), the sums per-chunk
    partials: split_k_parts._store's RMS_SCALE by torch, on the cast y (the
    kernel scales the fp32 sum, so the two can differ in y's last bit)."""
    return (y.float() * torch.rsqrt(sumsq.sum(-1, keepdim=True) / k + eps)).to(y.dtype)


def silu_mul(h: torch.Tensor) -> torch.Tensor:
    """fused_kernel's SWIGLU prologue by torch: h = [gate | up] ([M, 2I]) ->
    silu(gate) * up [M, I], in fp32 from the stored values and rounded once
    to h's dtype, as the kernel and Inductor's fused silu * mul round (eager
    F.silu(gate) * up rounds silu's output first: the two can differ in the
    last bit)."""
    return _silu_times(*h.chunk(2, dim=-1))


def silu_mul_pairs(y: torch.Tensor) -> torch.Tensor:
    """fused_kernel's SWIGLU_OUT by torch: y [M, 2I] with columns in (gate,
    up) pairs -> silu(gate) * up [M, I], rounded as silu_mul rounds."""
    return _silu_times(*y.unflatten(-1, (-1, 2)).unbind(-1))


def _silu_times(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up in fp32, rounded once to their dtype."""
    return (torch.nn.functional.silu(gate.float()) * up.float()).to(gate.dtype)


def check_swiglu(h: torch.Tensor, k: int) -> None:
    """ValueError, one line, for an h a GEMM of K = k with the SwiGLU
    prologue would misread: [M, 2k] (gate | up), unit stride along it."""
    if h.dim() != 2 or h.shape[1] != 2 * k or h.stride(1) != 1:
        raise ValueError(f"swiglu: h must be [M, {2 * k}] (gate then up, unit stride), got {tuple(h.shape)}")


def with_residual(y: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor | None = None) -> tuple:
    """split_k_parts._store's RESIDUAL (and NORM_W) by torch: (h = residual +
    y, [h * norm_weight,] h's rows' fp32 sums of squares per norm_parts.SUMSQ_CHUNK
    columns)."""
    h = residual + y
    if norm_weight is None:
        return h, norm_parts.row_sumsq(h)
    return (h, *norm_parts.weighted_and_sums(h, norm_weight))


class FusedGemm:
    """y = x @ dequant(w) for any x [M, K], the weights rearranged once into
    the K-major layout (frag: in fragment order, the default). Same arguments as WeightOnlyGemm: FMT INT4 (scales
    [K//group, N] or None) or NVFP4 (E4M3 block scales as uint8, fp32 0-dim
    tensor scale). Owns the split workspace and counters per M (zeroed once,
    left zeroed by every call: call once at an M before capturing a graph).
    config: see config(); or a function M -> config. target: the GPU
    (qgemm_bench.target; the caller's, never looked up here): its shared
    memory and SMs bound the warp-specialized kernel's tiles and stream-K
    launch."""

    def __init__(self, w, scales, tensor_scale, fmt: int, group: int | None, config, frag: bool = True,
                 tile: tuple[int, int] | None = TILE, *, target: Target):
        self.k, self.n = 2 * w.shape[0], w.shape[1]
        self.target = target
        if fmt == NVFP4:
            group = NVFP4_BLOCK
        elif scales is None:  # unscaled: scales of one per channel (exact; scale_mode says why)
            group, scales = self.k, torch.ones(1, self.n, device=w.device, dtype=torch.bfloat16)
        self.kmajor = to_kmajor(w, scales, group, frag, tile)
        if fmt == NVFP4:  # E4M3 block scales -> bf16 x 2^118 (exact; the PTX decode's operand), decoded once here
            self.kmajor = dataclasses.replace(self.kmajor, scales=decode.bf16_x2_118(self.kmajor.scales))
        self.ts, self.fmt, self.group = tensor_scale, fmt, group
        self._scales8: torch.Tensor | None = None  # SCALE8's E4M3 bytes (scales8), made on first use
        self._wt_rot: torch.Tensor | None = None  # ROT_DECODE's permuted weights (wt_rot), made on first use
        self.config = config
        # True: take int4 8-warp split-K configs that run HALVES (halved), the family wrong_on_sm90 refuses:
        # only where every call is checked (decode_probe's S4 halves rows), never a table's or a pool's.
        self.unchecked = False
        self._workspace: dict = {}  # split-K workspaces by M (split_k_parts.workspace, ws_gemm.workspace)
        self._w_desc: dict[tuple, object] = {}

    @property
    def resident(self) -> tuple:
        """Every weight tensor held (SCALE8's bytes once made)."""
        return tuple(t for t in (self.kmajor.wt, self.kmajor.scales, self._scales8, self._wt_rot, self.ts)
                     if t is not None)

    def resident_at(self, m: int) -> tuple:
        """The weight tensors the config for M reads: with SCALE8 the block
        scales' bytes (made here), not the bf16 ones; with ROT_DECODE (NVFP4
        by pointer loads) the permuted weights (made here), not the plain
        ones; both where it has WS tiles too (the warp-specialized kernel,
        where it runs, reads bf16 scales and plain weights)."""
        c = self.config_for(m)
        scales = (self.scales8(),) if c.get("SCALE8") else ()
        scales = (self.kmajor.scales, *scales) if not scales or c.get("WS") else scales
        rot = self._rot_config(c)  # rot_runs without x (a bf16 x assumed)
        weights = (self.wt_rot(),) if rot else ()
        weights = (self.kmajor.wt, *weights) if not weights or c.get("WS") else weights
        return tuple(t for t in (*weights, *scales, self.ts) if t is not None)

    def wt_rot(self) -> torch.Tensor:
        """The packed weights with the bits of each 4 bytes one decode call
        takes permuted for decode.NVFP4_ROT_BF16X2_PTX
        (rot_words_in_register_order), what ROT_DECODE configs read where it
        runs (rot_runs): made on first use and kept, a second copy beside the
        plain one."""
        if self._wt_rot is None:
            self._wt_rot = rot_words_in_register_order(self.kmajor)
        return self._wt_rot

    def rot_runs(self, x: torch.Tensor, c: dict) -> bool:
        """Whether config c decodes x's call with NVFP4_ROT_BF16X2_PTX: NVFP4
        in fragment order by pointer loads (c's TMA as descriptors resolved
        it) with the PTX decode (bf16 x, DECODE_ASM); elsewhere the key is
        ignored, as fused_kernel's ROT_DECODE is."""
        return self._rot_config(c) and x.dtype == torch.bfloat16

    def _rot_config(self, c: dict) -> bool:
        """rot_runs' conditions on the layout and config alone."""
        return bool(c.get("ROT_DECODE")) and self.fmt == NVFP4 and self.kmajor.frag and not c.get("TMA") and \
            bool(c.get("DECODE_ASM", True))

    def scales8(self) -> torch.Tensor:
        """The block scales as E4M3 bytes (uint8, the K-major layout's
        [K // 16, N] padded rows), what SCALE8 configs read: made on first
        use from the bf16 x 2^118 ones (exactly: their inverse; NaN stays
        NaN) and kept, 1 byte per 16 weights on top of the bf16 copy's 2
        (K = N = 8192: 4 MiB beside 8)."""
        if self._scales8 is None:
            e4m3 = (self.kmajor.scales.float() * (1.0 / decode.EXP2_118)).to(torch.float8_e4m3fn)
            self._scales8 = e4m3.view(torch.uint8)
        return self._scales8

    def config_for(self, m: int) -> dict:
        c = self.config(m) if callable(self.config) else self.config
        if c["BLOCK_K"] > K_ALIGN or c["BLOCK_N"] > N_ALIGN or c["BLOCK_K"] % 32:
            raise ValueError(f"config {c}: BLOCK_K a multiple of 32 up to {K_ALIGN} and BLOCK_N <= {N_ALIGN} "
                             "(the layout's runs and padding)")
        tile = self.kmajor.tile
        if c.get("TMA") and c.get("TMA_W", True) and \
                (tile is None or c["BLOCK_N"] % tile[0] or tile[1] % c["BLOCK_K"]):
            raise ValueError(f"config {c}: TMA loads need tiled weights, BLOCK_N a multiple of the tile's "
                             f"{tile and tile[0]} rows and BLOCK_K dividing its {tile and tile[1]} k")
        if wrong_on_sm90(self.fmt, c) and not (self.unchecked and halved(self.fmt, self.group, self.k, c,
                                                                         self.kmajor.frag)):
            raise ValueError(f"config {c} returns wrong sums on sm_90 (fused_gemm.wrong_on_sm90: int4 with "
                             "8 warps and split-K)")
        if why := scale8_refused(self.fmt, c) or unknown_refused(c):
            raise ValueError(f"config {c}: {why}")
        if c.get("WS"):
            from qgemm_bench.backends.triton_kernels import ws_gemm

            ws_gemm.check(c["WS"], self.fmt, self.target.smem_per_block)
        return c

    def runs_ws(self, x: torch.Tensor, c: dict) -> bool:
        """Whether config c runs the warp-specialized kernel (its "WS" tiles,
        as ws_gemm.tiles_for runs them at this group) for this x
        (ws_gemm.usable and ws_gemm.reads, the layout; else the rest of c in
        fused_kernel)."""
        w = c.get("WS")
        if not w or not x.is_cuda or not c.get("DECODE_ASM", True):
            return False
        from qgemm_bench.backends.triton_kernels import ws_gemm

        w = ws_gemm.tiles_for(self.fmt, self.group, self.k, w)
        return ws_gemm.reads(self.kmajor, w) and ws_gemm.usable(self.fmt, self.group, self.k, self.n, x, w, self.target)

    def ws_workspace_bytes(self, x: torch.Tensor, c: dict) -> int:
        """Bytes of the workspace config c's warp-specialized launch keeps
        between calls for this x (SPLITS > 1 and STREAM_K: ws_gemm.workspace;
        else 0)."""
        if not self.runs_ws(x, c):
            return 0
        from qgemm_bench.backends.triton_kernels import ws_gemm

        return ws_gemm.workspace_bytes(self.kmajor, x.shape[0], self.n, c["WS"], self.target.sms)

    def descriptors(self, x: torch.Tensor, c: dict, swiglu: bool = False) -> dict:
        """The launch keywords of config c's TMA loads: descriptors of x's
        [BLOCK_M, BLOCK_K] tiles and of the tiled weights' [BLOCK_N,
        BLOCK_K // 2] byte tiles (a 3-D view: tile rows, k tile * TN + row,
        byte; made once per block shape; not with TMA_W False). {} without
        TMA. TMA off (the same tiles then load by pointer) where tma_usable
        says no (int4 GATHER groups, more than two groups to a K block in
        tiles under 256 rows, a GPU before Hopper), on a GPU
        without the PTX decode (float16 x, or DECODE_ASM off), x's rows are
        not 16-byte aligned, as TMA needs, or x has no rows (a descriptor
        needs a positive shape). Without the PTX decode TMA configs returned
        wrong sums on the H100 (float16 x, int4 and NVFP4), right by pointer
        loads; their SASS writes registers that pending wgmmas read (see
        wrong_on_sm90; docs/fused_gemm.md). swiglu (x is h, the SWIGLU
        prologue loads it by pointers): no x descriptor; the weights' alone,
        else TMA off."""
        if not c.get("TMA"):
            return {}
        weights = c.get("TMA_W", True)
        ptx_decode = x.dtype == torch.bfloat16 and c.get("DECODE_ASM", True)
        if not tma_usable(self.fmt, self.group, self.k, c["BLOCK_K"], self.target, c["BLOCK_M"]) or x.shape[0] == 0 or \
                x.data_ptr() % 16 or x.stride(0) * x.element_size() % 16 or (x.is_cuda and not ptx_decode):
            return {"TMA": False}
        from triton.tools.tensor_descriptor import TensorDescriptor

        if swiglu and not weights:
            return {"TMA": False}
        x_desc = None if swiglu else TensorDescriptor.from_tensor(x, [c["BLOCK_M"], c["BLOCK_K"]])
        if not weights:
            return {"x_desc": x_desc}
        key = (c["BLOCK_N"], c["BLOCK_K"])
        if key not in self._w_desc:
            wt, (tn, tk) = self.kmajor.wt, self.kmajor.tile
            w3 = wt.view(wt.shape[0] // tn, -1, tk // 2)
            self._w_desc[key] = TensorDescriptor(w3, list(w3.shape), list(w3.stride()),
                                                 [c["BLOCK_N"] // tn, tn, c["BLOCK_K"] // 2])
        return {"w_desc": self._w_desc[key]} if swiglu else {"x_desc": x_desc, "w_desc": self._w_desc[key]}

    def __call__(self, x: torch.Tensor, residual: torch.Tensor | None = None,
                 norm_weight: torch.Tensor | None = None, rms: tuple | None = None, swiglu: bool = False,
                 swiglu_out: bool = False):
        """y = x @ w. rms (sumsq [M, sumsq_chunks(K)] fp32, eps): y's rows
        times 1 / RMS from those sums, an RMSNorm's scale taken after the GEMM
        (x then is h * weight as a residual call with norm_weight wrote it).
        residual [M, N] (x's dtype, contiguous): returns (h = residual + y, h's
        rows' sums of squares [M, sumsq_chunks(N)] fp32), with norm_weight [N]
        (h, h * norm_weight, sums). All in the last program's store
        (split_k_parts._store) of fused_kernel, also where the config has WS
        tiles: the warp-specialized kernel has no such store, and torch around
        it would add launches (int4 16x4096x6144: WS 8.61 us, the same config
        without 9.50; the parts by torch, a few small kernels more).
        swiglu: x is h = [gate | up] [M, 2K] and the GEMM's input silu(gate)
        * up (the input's part, fused_kernel's SWIGLU, with any output
        parts): by pointer loads of x (a TMA config's weights stay TMA's)
        in fused_kernel, also where the config has WS tiles, as the parts.
        swiglu_out: w's columns are (gate, up) pairs and the result
        silu(gate) * up [M, N // 2] (fused_kernel's SWIGLU_OUT, after any
        rms scale; no residual), in fused_kernel as the parts."""
        p = self.kmajor
        if swiglu:
            check_swiglu(x, self.k)
        elif x.dim() != 2 or x.shape[1] != self.k or x.stride(1) != 1:
            raise ValueError(f"x must be [M, {self.k}] with unit stride along K, got {tuple(x.shape)}")
        m, n, k = x.shape[0], self.n, self.k
        check_parts(x[:, :k], n, residual, norm_weight, rms)
        if swiglu_out and (residual is not None or n % 2):
            raise ValueError(f"swiglu_out: needs an even N (got {n}) and no residual")
        c = dict(self.config_for(m))
        if residual is None and rms is None and not swiglu and not swiglu_out and self.runs_ws(x, c):
            return self._ws(x, c)
        c.pop("WS", None)
        out = torch.empty(m, n // 2 if swiglu_out else n, device=x.device, dtype=x.dtype)
        ws, count = split_k_parts.workspace(self._workspace, m, n, x.device) if c["SPLIT_K"] > 1 else (out, out)
        s = self.scales8() if c.get("SCALE8") else p.scales if p.scales is not None else p.wt  # wt: never read
        ts = self.ts if self.ts is not None else out
        desc = self.descriptors(x, c, swiglu)
        rot = self.rot_runs(x, {**c, **desc})
        wt = self.wt_rot() if rot else p.wt
        args = (x, wt, s, ts, out, ws, count, m, n, k, x.stride(0), wt.stride(0), s.stride(0), out.stride(0))
        meta = {"FMT": self.fmt, "GROUP": self.group or 2,
                "SCALE_MODE": scale_mode(self.fmt, self.group, k, c["BLOCK_K"], p.frag, channel_block(c)),
                "EVEN_K": k % c["BLOCK_K"] == 0, "FRAG": p.frag,
                "TILE_N": p.tile[0] if p.tile else 0, "TILE_K": p.tile[1] if p.tile else 0,
                **split_k_parts.pdl_launch(c, x.device), "ROT_DECODE": rot}
        extra, outs = ({"SWIGLU": True} if swiglu else {}) | ({"SWIGLU_OUT": True} if swiglu_out else {}), (out,)
        if rms is not None:
            extra |= {"sqin_ptr": rms[0], "eps": float(rms[1]), "RMS_SCALE": True}
        if residual is not None:
            sq = torch.empty(m, norm_parts.sumsq_chunks(n), device=x.device, dtype=torch.float32)
            extra |= {"res_ptr": residual, "sq_ptr": sq, "RESIDUAL": True}
            outs = (out, sq)
            if norm_weight is not None:
                xw = torch.empty_like(out)
                extra |= {"nw_ptr": norm_weight, "xw_ptr": xw, "NORM_W": True}
                outs = (out, xw, sq)
        fused_kernel[split_k_parts.grid(m, n, c)](*args, **{**c, **meta, **desc, **extra})
        return out if residual is None else outs

    def _ws(self, x: torch.Tensor, c: dict) -> torch.Tensor:
        from qgemm_bench.backends.triton_kernels import ws_gemm

        p = self.kmajor
        w = ws_gemm.tiles_for(self.fmt, self.group, self.k, c["WS"])
        key = ("ws", w["BLOCK_N"], w["BLOCK_K"])
        if key not in self._w_desc:
            self._w_desc[key] = ws_gemm.weight_descriptors(p, w, self.fmt, self.group)
        return ws_gemm.run(p, self.fmt, self.group, self.ts, x, w, self._w_desc[key], self._workspace,
                           sms=self.target.sms)
