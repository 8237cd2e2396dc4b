"""Helion kernels: int4 / NVFP4 weight-only GEMM (three paths, as the Triton
backend) and split-K GEMM.

The weight-only kernels are the Triton backend's algorithms
(backends/triton_kernels/weight_only.py and fused_gemm.py) written in Helion,
so that the Triton Helion emits has the Triton kernels' structure:
- weight_only (split path, small M): split-K over `split_k` programs per
  tile; the packed [K//2, N] tile is decoded into its low (even k) and high
  (odd k) nibbles, which multiply x's even and odd columns (one contiguous x
  tile, hl.split in registers): two hl.dot per K step. Partials meet by fp32
  atomics in a workspace and the tile's last program (a per-tile counter:
  hl.atomic_add returns the old value) casts, stores and leaves workspace and
  counter zeroed: one launch, as split_k_parts.finish (_split_partial,
  _split_last: the finish both kernels call);
- fused (mid M): the swapped-operand kernel on the K-major weights
  (kmajor_layout.py; NVFP4's in fragment order): acc[BLOCK_N, BLOCK_M] +=
  dot(decoded weight tile [BLOCK_N, BLOCK_K], x^T tile [BLOCK_K, BLOCK_M]),
  the decoded halves joined (NVFP4: and permuted, fused_gemm._in_k_order)
  back into K order in registers. int4 is in K order unless a config asks
  for fragment order (`frag`: K order costs Helion 1.5x the main loop's
  instructions, docs/helion.md): on fragment order its Helion form returned
  wrong sums on the H100 at 11 of the 16 Llama shapes at M = 256 and 1024
  with Triton's 8-warp configs (relative error 0.01-12; the Triton kernel
  and NVFP4 were right), and on the H200 in an 8-warp 128x256 tile, so
  helion_ops takes it in wider tiles than 64 rows on 4 warps only. Scale tiles
  loaded one K step ahead, out = acc^T; optionally split-K as fused_gemm's
  SPLIT_K: each split a contiguous run of whole K steps, a third grid
  dimension, finished as weight_only's (_split_partial, _split_last);
- dequant (large M): [K//2, N] -> [K, N] in the activation dtype, then the
  caller's torch matmul (cuBLAS).
Decodes avoid int->float conversions (magic-exponent bit tricks, decode.py),
or, for bf16 on the GPU, use decode.py's packed-PTX decodes through
hl.inline_asm_elementwise (the interpreter cannot run PTX).

The K step is a kernel argument (`block_k`, hl.constexpr), not a Helion
block size: the scale tiles ([BLOCK_K // group] rows broadcast over the
packed rows they cover) and the weight/activation slices need its value at
trace time (a registered block size is a symbol there, and Helion cannot
prove e.g. 2 * (bk // 2) == bk for a reshape). Configs carry it as
"block_k" next to Helion's own keys (helion_ops strips it before
set_config); Helion's autotuner therefore tunes the tiles, warps and stages
at a fixed K step. The fused kernel's `split_k` is a kernel argument too
(helion_ops takes it out of the config likewise), unlike the split path's
Helion tunable: known at trace time, one split traces exactly the kernel
without split-K (no third grid dimension, no workspace, no atomics), and
where every split has the same number of K steps the K loop runs over
constant bounds, fused_kernel's constant trip count (over a runtime count,
ptxas serializes the wgmmas: C7515). A registered tunable is a symbol at
trace time (a runtime branch and trip count), and every config would have
to carry it.

split_k is the split-K GEMM, split_k.py's split_k_kernel: N tiles, M tiles,
then K splits (Triton's program order), each split a contiguous run of whole
K steps (split_k_parts.tile_and_range; split_chunk); partials meet in a
resident fp32 workspace, by atomics or (deterministic) one plane per split
summed in split order, and the tile's last program adds the bias, casts,
stores and leaves workspace and counters zeroed (split_k_parts.finish): one
launch. With planes_only (the Triton config's REDUCE "kernel") every program
only stores its plane and reduce_planes, a second small launch, sums them
(split_k_parts.reduce_planes, its SPREAD tile from 32 planes too). Both take the config's PDL mode (the prologue
inline, _pdl_prologue; helion_ops launches them with launch_pdl). Its K step
is a kernel argument too: a split's K range, a multiple of it, is computed
in host code as the K tile's block size. Small M tiles 16 rows, as
weight_only's small_m.

The kernels never autotune by themselves (autotune_effort="none"): configs come
from the checked-in files (configs.py) or from an explicit --autotune.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch
from helion.autotuner import PowerOfTwoFragment

from qgemm_bench.backends.triton_kernels import split_k_parts  # its PDL prefetch's PTX, as text

# decode.py's packed-PTX decodes, as text: Helion has hl.inline_asm_elementwise
# but cannot call the @triton.jit helpers that wrap them.
from qgemm_bench.backends.triton_kernels.decode import (
    EXP2_118,
    INT4_BF16X2_PTX,
    NVFP4_BF16X2_PTX,
    NVFP4_ROT_BF16X2_PTX,
    NVFP4_SPLIT_BF16X2_PTX,
)

# Scale modes (the kernels' scale_mode argument), as fused_gemm.py's (its
# scale_mode() picks them for the fused kernel, in this order), and "after":
# weight_only.py's SCALE_AFTER (one group per K step, applied to the fp32
# partial product). Strings compared with literals in the kernels: Helion
# folds `constexpr == literal` at trace time, not a comparison with a module
# constant (a branch that reads a variable only its mode defines then fails).
SCALE_MODES = ("none", "channel", "block", "sub", "gather")

SMALL_M_ROWS = 16  # hl.dot's smallest M: the split kernel's row tile below it (small_m)


def _int4_nibbles(w, dtype, use_asm):
    """Packed bytes (int8/uint8) -> (low, high) nibbles as exact q in [-8, 7]:
    u = q + 8 ORed into a magic exponent is 128 + u (bf16) or 1024 + u (fp16);
    or decode.int4_nibbles_bf16x2's PTX (bf16, GPU)."""
    if use_asm:
        return hl.inline_asm_elementwise(INT4_BF16X2_PTX, "=r,=r,=r,=r,r", [w], dtype=(torch.bfloat16, torch.bfloat16),
                                         is_pure=True, pack=4)
    b = w.to(torch.int32) & 0xFF
    if dtype == torch.bfloat16:
        lo = (((b & 0xF) ^ 0x8) | 0x4300).to(torch.int16).view(torch.bfloat16) - 136.0
        hi = (((b >> 4) ^ 0x8) | 0x4300).to(torch.int16).view(torch.bfloat16) - 136.0
    else:
        lo = (((b & 0xF) ^ 0x8) | 0x6400).to(torch.int16).view(torch.float16) - 1032.0
        hi = (((b >> 4) ^ 0x8) | 0x6400).to(torch.int16).view(torch.float16) - 1032.0
    return lo, hi


def _e2m1(code):
    """E2M1 codes (int32, 0..15) -> fp16 holding value * 2^-14, exactly."""
    return (((code & 7) << 9) | ((code & 8) << 12)).to(torch.int16).view(torch.float16)


def _nvfp4_values(w, scale, dtype, use_asm):
    """Packed E2M1 bytes and each byte's fp32 scale -> (even-k, odd-k) values
    code * scale in dtype, formed in fp32 and rounded once (decode.nvfp4_values);
    with the PTX (bf16, GPU): code * scale * 2^-8 exactly (the caller
    multiplies the fp32 sum by 2^8)."""
    if use_asm:
        sb = (scale * EXP2_118).to(torch.bfloat16)
        return hl.inline_asm_elementwise(NVFP4_BF16X2_PTX, "=r,=r,=r,=r,r,r,r", [w, sb],
                                         dtype=(torch.bfloat16, torch.bfloat16), is_pure=True, pack=4)
    b = w.to(torch.int32) & 0xFF
    s = scale * 16384.0
    return (_e2m1(b & 0xF).to(torch.float32) * s).to(dtype), (_e2m1(b >> 4).to(torch.float32) * s).to(dtype)


def _nvfp4_split_values(w, s_lo, s_hi, dtype, use_asm, x2_118=False, rot=False):
    """_nvfp4_values with the low and the high nibbles' own scales (fragment
    order puts k and k + 16 in one byte: two NVFP4 blocks). x2_118 (with
    use_asm): the scales are the PTX decode's bf16 x 2^118 operand already.
    rot (with use_asm; helion_ops passes it there only): w holds
    decode.nvfp4_rot_words' permuted words, decoded by its shorter PTX."""
    ptx = NVFP4_ROT_BF16X2_PTX if rot else NVFP4_SPLIT_BF16X2_PTX
    if use_asm and x2_118:
        return hl.inline_asm_elementwise(ptx, "=r,=r,=r,=r,r,r,r,r,r", [w, s_lo, s_hi],
                                         dtype=(torch.bfloat16, torch.bfloat16), is_pure=True, pack=4)
    if use_asm:
        args = [w, (s_lo * EXP2_118).to(torch.bfloat16), (s_hi * EXP2_118).to(torch.bfloat16)]
        return hl.inline_asm_elementwise(ptx, "=r,=r,=r,=r,r,r,r,r,r", args,
                                         dtype=(torch.bfloat16, torch.bfloat16), is_pure=True, pack=4)
    b = w.to(torch.int32) & 0xFF
    return ((_e2m1(b & 0xF).to(torch.float32) * (s_lo * 16384.0)).to(dtype),
            (_e2m1(b >> 4).to(torch.float32) * (s_hi * 16384.0)).to(dtype))


def _e4m3_values(s, x2_118):
    """NVFP4 block scales -> their E4M3 values in fp32; x2_118: s holds them
    as bf16 x 2^118 (decode.bf16_x2_118)."""
    if x2_118:
        return s.to(torch.float32) * (1.0 / EXP2_118)
    return s.to(torch.float32)


def _split_partial(ws, count, acc, tile_m, tile_n, offs=None, valid=None):
    """split_k_parts.finish, every program of a tile (weight_only's and
    fused's): its fp32 partial acc [tile_m, tile_n] added into the workspace
    ws by atomics, then the tile's counter incremented; returns the counter's
    old value: the caller's tile's last program (splits - 1) calls
    _split_last. (Helion traces a helper with fake tensors: the
    data-dependent branch stays in the kernels.) Helion masks the tile;
    valid: a mask of the caller's (rows Helion does not know are padding,
    small M), the atomics then inline Triton at the caller's flat offsets
    offs (hl.atomic_add takes no mask; a tile's .index does not lower in a
    helper)."""
    if valid is None:
        hl.atomic_add(ws, [tile_m, tile_n], acc)
    else:
        hl.inline_triton("tl.atomic_add({0} + {1}, {2}, mask={3}, sem='relaxed')", args=[ws, offs, acc, valid],
                         output_like=None)
    # Every thread's partial is issued before the counter (release).
    # Helion has no CTA barrier of its own: tl.debug_barrier inline.
    hl.inline_triton("tl.debug_barrier()", args=[], output_like=None)
    return hl.atomic_add(count, [tile_m.id, tile_n.id], 1, sem="acq_rel")


def _split_last(ws, count, out, tile_m, tile_n, offs=None, valid=None):
    """split_k_parts.finish, the tile's last program: the sum cast into out,
    workspace and counter left zeroed (offs, valid: as _split_partial's)."""
    zero = hl.zeros([tile_m, tile_n], dtype=torch.float32)
    # Read the sum with an atomic (at L2, where the others' atomics
    # landed: a plain load read incomplete sums, split_k_parts.py).
    if valid is None:
        total = hl.atomic_add(ws, [tile_m, tile_n], zero, sem="acquire")
        ws[tile_m, tile_n] = zero
        out[tile_m, tile_n] = total.to(out.dtype)
    else:
        total = hl.inline_triton("tl.atomic_add({0} + {1}, {2}, mask={3}, sem='acquire')",
                                 args=[ws, offs, zero, valid], output_like=zero)
        hl.store(ws, [tile_m, tile_n], zero, extra_mask=valid)
        hl.store(out, [tile_m, tile_n], total.to(out.dtype), extra_mask=valid)
    hl.atomic_xchg(count, [tile_m.id, tile_n.id], 0)


@helion.kernel(static_shapes=True, autotune_effort="none")
def weight_only(
    x: torch.Tensor,  # [M, K] activations (M = 1: a stride-0 view of 2 rows, see small_m)
    w: torch.Tensor,  # [K//2, N] packed nibbles (int8 / uint8)
    scales: torch.Tensor,  # int4: [K//group, N]; NVFP4: E4M3 [K//16, N]; unscaled: a placeholder
    tensor_scale: torch.Tensor,  # NVFP4: fp32 [1]; else a placeholder
    ws: torch.Tensor,  # fp32 [rows, N] workspace, zero (left zero); rows: M, or SMALL_M_ROWS with small_m
    count: torch.Tensor,  # int32 [row tiles, N tiles] counters, zero (left zero)
    fmt: hl.constexpr,  # 0 int4, 1 NVFP4
    scale_mode: hl.constexpr,  # "none", "after", "sub" or "gather" (NVFP4: "sub")
    group: hl.constexpr,  # int4 group size (NVFP4: 16)
    block_k: hl.constexpr,  # K step (power of two >= 32)
    use_asm: hl.constexpr,  # packed-PTX decodes (bf16 on the GPU only)
    small_m: hl.constexpr,  # M < SMALL_M_ROWS: M, the kernel tiles SMALL_M_ROWS rows (else 0)
) -> torch.Tensor:
    """The split path: weight_only.py's weight_only_kernel. Returns [rows, N]
    (rows as ws: the first M are y)."""
    mx, k = x.size()
    n = w.size(1)
    kh = k // 2  # packed rows
    half = block_k // 2
    split_k = hl.register_tunable("split_k", PowerOfTwoFragment(1, 64))
    # Small M: Helion sizes a tile by its dimension (a dimension of 3 rows
    # gets a 4-row tile, of 1 row a 1-row one) and pads hl.dot's operands to
    # 16 rows with tl.join/permute/reshape chains on every K step, the
    # accumulator included. The Triton kernel keeps a 16-row tile with masked
    # rows instead; so does this one: it tiles SMALL_M_ROWS rows, gathers x's
    # rows clamped to the last (every address valid), and masks the stores.
    rows_out = 16 if small_m else mx  # SMALL_M_ROWS (a literal: Helion then knows it)
    out = torch.empty([rows_out, n], dtype=x.dtype, device=x.device)
    # Each split a power-of-two run of whole K steps (the inner loop never
    # crosses into the next split); `splits` of them cover K.
    chunk = max(helion.next_power_of_2(helion.cdiv(kh, split_k)), half)
    splits = helion.cdiv(kh, chunk)
    # Loops run over packed rows, k = 2 * row (as the fused kernel's: no
    # floor-division helper in the addresses).
    for tile_n, tile_m, outer in hl.tile([n, rows_out, kh], block_size=[None, None, chunk]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        if small_m:
            xrows = torch.clamp(tile_m.index, max=small_m - 1)
        for tb in hl.tile(outer.begin, outer.end, block_size=half):
            kx = 2 * tb.begin + hl.arange(block_k)
            rows = tb.begin + hl.arange(half)
            if k % block_k == 0:
                if small_m:
                    xt = x[xrows, kx]
                else:
                    xt = x[tile_m, kx]
                wp = w[rows, tile_n]
            else:  # K's last step is partial (weight_only.py's mask_k)
                if small_m:
                    xt = hl.load(x, [xrows, kx], extra_mask=(kx < k)[None, :])
                else:
                    xt = hl.load(x, [tile_m, kx], extra_mask=(kx < k)[None, :])
                wp = hl.load(w, [rows, tile_n], extra_mask=(rows < kh)[:, None])
            # One contiguous x tile, split into even and odd k in registers.
            xe, xo = hl.split(xt.reshape(tile_m, half, 2))
            if fmt == 0:
                lo, hi = _int4_nibbles(wp, x.dtype, use_asm)
                if scale_mode == "after":  # the step lies in one group: scale the fp32 partial product
                    s_row = scales[(2 * tb.begin) // group, tile_n].to(torch.float32)
                    part = hl.dot(xe, lo)
                    part = hl.dot(xo, hi, acc=part)
                    acc = acc + part * s_row[None, :]
                else:
                    if scale_mode == "sub":  # the step's groups once ([block_k // group, BLOCK_N]), broadcast
                        g = (2 * tb.begin) // group + hl.arange(block_k // group)
                        if k % block_k == 0:
                            sg = scales[g, tile_n]
                        else:
                            sg = hl.load(scales, [g, tile_n], extra_mask=(g < k // group)[:, None])
                        ng = block_k // group
                        s = sg.to(x.dtype)[:, None, :].expand(ng, group // 2, tile_n).reshape(half, tile_n)
                        lo = lo * s
                        hi = hi * s
                    elif scale_mode == "gather":  # neither divides: one scale per packed row
                        g = (2 * (tb.begin + hl.arange(half))) // group
                        s = hl.load(scales, [g, tile_n], extra_mask=(g < k // group)[:, None]).to(x.dtype)
                        lo = lo * s
                        hi = hi * s
                    acc = hl.dot(xe, lo, acc=acc)
                    acc = hl.dot(xo, hi, acc=acc)
            else:  # NVFP4: the step's E4M3 block scales once, decoded once, broadcast over 8 packed rows each
                g = tb.begin // 8 + hl.arange(block_k // 16)
                if k % block_k == 0:
                    bs = scales[g, tile_n]
                else:
                    bs = hl.load(scales, [g, tile_n], extra_mask=(g < k // 16)[:, None])
                ng = block_k // 16
                s = bs.to(torch.float32)[:, None, :].expand(ng, 8, tile_n).reshape(half, tile_n)
                lo, hi = _nvfp4_values(wp, s, x.dtype, use_asm)
                acc = hl.dot(xe, lo, acc=acc)
                acc = hl.dot(xo, hi, acc=acc)
        if fmt == 1:
            if use_asm:
                acc = acc * (tensor_scale[0] * 256.0)  # the PTX decode's 2^-8
            else:
                acc = acc * tensor_scale[0]
        # split_k_parts.finish: partials meet in the fp32 workspace; the
        # tile's last program stores the cast sum and re-zeroes both.
        if small_m:
            # Only the M real rows: masked stores, and masked atomics through
            # inline Triton (hl.atomic_add takes no mask: the padded rows'
            # atomics would multiply the workspace traffic by 16 / M).
            valid = (tile_m.index < small_m)[:, None] & (tile_n.index < n)[None, :]
            if splits == 1:
                hl.store(out, [tile_m, tile_n], acc.to(x.dtype), extra_mask=valid)
            else:
                offs = tile_m.index[:, None] * n + tile_n.index[None, :]
                done = _split_partial(ws, count, acc, tile_m, tile_n, offs, valid)
                if done == splits - 1:
                    _split_last(ws, count, out, tile_m, tile_n, offs, valid)
        elif splits == 1:
            out[tile_m, tile_n] = acc.to(x.dtype)
        else:
            done = _split_partial(ws, count, acc, tile_m, tile_n)
            if done == splits - 1:
                _split_last(ws, count, out, tile_m, tile_n)
    return out


@helion.kernel(static_shapes=True, autotune_effort="none")
def fused(
    xt: torch.Tensor,  # [K, M]: x transposed (a view: x's K stays contiguous)
    wt: torch.Tensor,  # [Np, Kp//2] uint8, K-major (NVFP4: in fragment order), zero-padded (kmajor_layout.py)
    st: torch.Tensor,  # [Np, Gp]: the K-major scales transposed (a view), or a placeholder ("none")
    tensor_scale: torch.Tensor,  # NVFP4: fp32 [1]; else a placeholder
    n: hl.constexpr,  # the true N
    fmt: hl.constexpr,  # 0 int4, 1 NVFP4
    scale_mode: hl.constexpr,  # SCALE_MODES[fused_gemm.scale_mode()]
    group: hl.constexpr,  # int4 group size (NVFP4: 16)
    block_k: hl.constexpr,  # K step (power of two, <= K_ALIGN)
    use_asm: hl.constexpr,  # packed-PTX decodes (bf16 on the GPU only)
    split_k: hl.constexpr = 1,  # fused_gemm's SPLIT_K (1: no workspace, ws and count unused)
    ws: torch.Tensor | None = None,  # split_k > 1: fp32 [M, N] workspace, zero (left zero)
    count: torch.Tensor | None = None,  # split_k > 1: int32 [cdiv(M, 16), cdiv(N, 16)] counters, zero (left zero)
    tma: hl.constexpr = False,  # x and weight tiles through K-step views, so indexing tensor_descriptor makes them TMA
    acc_scale: hl.constexpr = False,  # each K step's dot on its own (int4 BLOCK, NVFP4: fused_gemm's ACC_SCALE)
    pdl: hl.constexpr = 0,  # split_k_parts.pdl_prologue's mode (launched with launch_pdl: helion_ops)
    frag: hl.constexpr = False,  # int4: wt in fragment order, as NVFP4's (int4 groups: whole runs of 32 k)
    bf16_scales: hl.constexpr = False,  # NVFP4: st holds decode.bf16_x2_118's bf16 E4M3 x 2^118, not E4M3
    rot: hl.constexpr = False,  # NVFP4, use_asm, not tma: wt's bytes as fused_gemm.rot_words_in_register_order's
    tiled: hl.constexpr = False,  # pointer loads, block_k <= 128: wt in kmajor_layout.TILE tiles (helion_ops.tiled_ok)
) -> torch.Tensor:
    """The fused path: fused_gemm.py's fused_kernel, its split-K included.
    acc_scale (int4 with one group over each K step, scale_mode "block",
    and NVFP4; elsewhere ignored): the decoded weights go into a dot of
    their own, whose fp32 product is scaled and added. int4: unscaled
    weights, the step's scale row on the product: no multiply per weight,
    which at decode sizes is what the kernel spends its time on
    (docs/fused_gemm.md). NVFP4: the block scales in the decode, the tensor
    scale on the product; a chained accumulator had Triton split the
    step's dot into k-16 wgmma groups, fenced and waited each (docs/helion.md).
    pdl (1-3, launched with launch_pdl): split_k_parts.pdl_prologue before
    the K loop, the prefetch of this program's first weight bytes; nothing
    a kernel before may write (x, workspace, counters, out) is touched
    before its wait. frag (int4):
    the weights in fragment order, each thread's decoded pairs where the
    MMA operand wants them; on K-order bytes Triton reads the tile from
    shared memory a byte at a time (LDS.U8) and copies it in 4-byte
    cp.async, 1.5x the main loop's instructions at 16x128x128 (docs/helion.md,
    "Same tile, different kernel"). bf16_scales (NVFP4): the block scales as
    FusedGemm stores them (decode.bf16_x2_118, made on the host), the PTX
    decode's operand loaded as is; from E4M3, Inductor converts each
    thread's broadcast scales (32 per K step at 128x16) inside the loop,
    converted on the small tile or not. rot (NVFP4, the PTX decode, not
    tma; helion_ops decides): fused_gemm's ROT_DECODE, wt's bytes permuted
    so decode.NVFP4_ROT_BF16X2_PTX decodes each 8 codes in 13 PTX
    instructions, not 22; the permutation assumes the Triton fused
    kernel's A-operand register order (checked on the GPU bit for bit).
    tiled: wt stored as the Triton fused kernel reads it (kmajor_layout's
    TILE, 64 rows x 128 k a contiguous 4 KB run), so a 64-row tile's 128 k
    are one run instead of 64 rows of 64 bytes Kp / 2 apart (a K step of
    64 or 32: 64 runs of 32 or 16 bytes 64 apart)."""
    k, m = xt.size()
    kh = k // 2  # packed rows
    half = block_k // 2
    # fused_gemm._scales: a [BLOCK_N, NG] tile per K step (2-D even for BLOCK:
    # its two columns are the one group); column j is group first + j * step.
    ng = max(block_k // group, 2)
    step = 1 if block_k // group >= 2 else 0
    last = (helion.cdiv(k, block_k) - 1) * half  # the last step's first packed row
    out = torch.empty([m, n], dtype=xt.dtype, device=xt.device)
    # Split-K (split_k_parts.tile_and_range): each split a contiguous run of
    # `chunk` packed rows (whole K steps), `splits` of them (Triton's trailing
    # empty splits are not launched); a third grid dimension, N tiles varying
    # fastest, then M tiles, then splits (Triton's program order). split_k is
    # a kernel argument: all of this is decided at trace time, and one split
    # is the kernel without split-K (no third dimension, no workspace).
    chunk = split_chunk(k, block_k, split_k) // 2
    splits = helion.cdiv(kh, chunk)
    # Every split the same number of K steps: the loop's trip count a constant
    # (fused_kernel's; over a runtime count ptxas serialized the wgmmas).
    whole = helion.cdiv(k, block_k) % (chunk // half) == 0
    # tma (K a multiple of block_k): x and the weights viewed with the K step
    # as a dimension, [steps, block_k, M] and [Np, steps, half], each tile
    # then indexed by a scalar step and whole slices: Helion's tensor
    # descriptors take such subscripts (not the hl.arange ones below, which
    # always lower to pointer loads), and a slice keeps its literal size.
    # From M = 128 x's view keeps K innermost, as x is ([steps, M, block_k]),
    # and its tile is transposed after the load: Triton hands that to the
    # wgmma as a transposed view in shared memory, where [steps, block_k, M]
    # had it permute the tile through registers (255 registers and spills at
    # M = 256); below, [steps, block_k, M] compiled to fewer instructions
    # (docs/helion.md).
    by_step = tma and k % block_k == 0
    k_inner = m >= 128
    # NVFP4 there decodes at a unit scale and multiplies the block scales
    # after (fused_gemm's SCALE_AFTER, exact): with the scales inside the PTX
    # decode the loop wrote registers that pending wgmmas read as their A
    # operand (57 writes a K block offline) and returned NaN on the H200.
    # Without the PTX too, so the interpreter's tests run this arithmetic.
    scale_after = fmt == 1 and by_step and k_inner
    if by_step and k_inner:
        xk = xt.view(k // block_k, block_k, m).permute(0, 2, 1)
    if by_step and not k_inner:
        x3 = xt.view(k // block_k, block_k, m)
    if by_step:
        w3 = wt.view(wt.size(0), wt.size(1) // half, half)
    # tiled: kmajor_layout.TILE's rows and a tile row's bytes, as literals (a module constant would reach the
    # Triton code as a runtime argument; the tiled tests read weights laid out by TILE).
    tile_rows, row_bytes = 64, 64
    if tiled and not by_step:
        # The tiles' rows: row (n // 64) * Kp / 2 + (k // 128) * 64 + n % 64 holds n's bytes of those 128 k,
        # read as [runs of half bytes] (a scalar run index: its offset stays a multiple of half for Triton's
        # alignment analysis, as fused_gemm._block_ptr's).
        w_runs = wt.view(wt.size(0) * (wt.size(1) // row_bytes), row_bytes // half, half)
    for tiles in hl.tile([n, m] if splits == 1 else [n, m, kh],
                         block_size=[None, None] if splits == 1 else [None, None, chunk]):
        tile_n, tile_m = tiles[0], tiles[1]
        acc = hl.zeros([tile_n, tile_m], dtype=torch.float32)
        if fmt == 1 and acc_scale:
            t_scale = tensor_scale[0]
            if use_asm:
                t_scale = t_scale * 256.0  # the PTX decode's 2^-8
        if splits == 1:
            if scale_mode == "block" or scale_mode == "sub":
                sc = st[tile_n, hl.arange(ng) * step]
            first, end, base = 0, kh, 0
        else:
            if scale_mode == "block" or scale_mode == "sub":
                sc = st[tile_n, (2 * tiles[2].begin) // group + hl.arange(ng) * step]
            if whole:  # the loop counts from 0, the split's first row added (fused_kernel's b = first + i)
                first, end, base = 0, chunk, tiles[2].begin
            else:
                first, end, base = tiles[2].begin, tiles[2].end, 0
        # The loop runs over packed rows (bytes of K), k = 2 * row: the weight
        # tile's offset is then the loop variable itself (whole splits: plus
        # the split's first row, a multiple of the constant chunk), whose
        # alignment Triton knows (tk.begin // 2 is a floor-division helper that
        # hides it: no vector loads, no cp.async).
        if pdl:  # the weights (wt: rows of N, bytes of K) are no kernel's output: prefetched before the wait
            if pdl != 3:
                hl.inline_triton(PDL_LAUNCH, args=[], output_like=None)
            if pdl >= 2 and tiled and not by_step:  # up to 4 KB of the program's K range in its row tile
                # From the 64-row tile's start (narrower programs share it), whose 64 rows hold the range's
                # (end - first) * 64 bytes from there on: never past the tile's rows, nor the tensor.
                hl.inline_triton(PDL_PREFETCH_TILED, args=[
                    wt, (tile_n.begin // tile_rows) * tile_rows * wt.size(1) + ((base + first) // row_bytes)
                    * tile_rows * row_bytes, (end - first) * tile_rows], output_like=None)
            elif pdl >= 2:
                hl.inline_triton(PDL_PREFETCH, args=[wt, tile_n.begin, wt.size(0), wt.size(1), base + first],
                                 output_like=None)
            hl.inline_triton(PDL_WAIT, args=[], output_like=None)
        for tb in hl.tile(first, end, block_size=half):
            row = base + tb.begin
            if scale_mode == "block" or scale_mode == "sub":
                # The next step's scales now (loaded in the step that uses them, their latency showed).
                sc_next = st[tile_n, (2 * min(row + half, last)) // group + hl.arange(ng) * step]
            # The padded layout: weight tiles need no K mask.
            if by_step:
                wp = w3[tile_n, row // half, :]
            elif tiled:
                runs = ((tile_n.index // tile_rows) * wt.size(1) + (row // row_bytes) * tile_rows
                        + tile_n.index % tile_rows)
                wp = w_runs[runs, (row // half) % (row_bytes // half), hl.arange(half)]
            else:
                wp = wt[tile_n, row + hl.arange(half)]
            if fmt == 0:
                lo, hi = _int4_nibbles(wp, xt.dtype, use_asm)
                if acc_scale and scale_mode == "block":
                    pass  # on the step's product, below
                elif scale_mode == "block" or scale_mode == "sub":
                    s = sc.to(xt.dtype)[:, :, None].expand(tile_n, ng, half // ng).reshape(tile_n, half)
                    lo = lo * s
                    hi = hi * s
                elif scale_mode == "gather":
                    s = st[tile_n, (2 * (row + hl.arange(half))) // group].to(xt.dtype)
                    lo = lo * s
                    hi = hi * s
            else:  # in each run of 32 k the low nibbles are one block of 16, the high ones the next
                if bf16_scales and use_asm:
                    s = sc
                else:  # the values in fp32 (exact: E4M3's smallest, 2^-9, stays normal)
                    s = _e4m3_values(sc, bf16_scales)
                s_lo, s_hi = hl.split(s.reshape(tile_n, block_k // 32, 2))
                s_lo = s_lo[:, :, None].expand(tile_n, block_k // 32, 16).reshape(tile_n, half)
                s_hi = s_hi[:, :, None].expand(tile_n, block_k // 32, 16).reshape(tile_n, half)
                if scale_after:
                    one = hl.full([tile_n, half], 1.0, torch.float32)
                    lo, hi = _nvfp4_split_values(wp, one, one, xt.dtype, use_asm, rot=rot)
                    lo = lo * _e4m3_values(s_lo, bf16_scales and use_asm).to(xt.dtype)
                    hi = hi * _e4m3_values(s_hi, bf16_scales and use_asm).to(xt.dtype)
                else:
                    lo, hi = _nvfp4_split_values(wp, s_lo, s_hi, xt.dtype, use_asm, bf16_scales, rot)
            kx = 2 * row + hl.arange(block_k)
            if by_step:
                if k_inner:
                    xs = xk[row // half, tile_m, :].T
                else:
                    xs = x3[row // half, :, tile_m]
            elif k % block_k == 0:  # fused_gemm's EVEN_K
                xs = xt[kx, tile_m]
            else:
                xs = hl.load(xt, [kx, tile_m], extra_mask=(kx < k)[:, None])
            if fmt == 0 and not frag:  # K order: the halves interleave back (kmajor_layout.py)
                w_tile = hl.join(lo, hi).reshape(tile_n, block_k)
            else:  # fragment order: a register permutation (fused_gemm._in_k_order)
                w_tile = hl.join(lo, hi).reshape(tile_n, block_k // 32, 4, 2, 2, 2).permute(0, 1, 5, 3, 2, 4)
                w_tile = w_tile.reshape(tile_n, block_k)
            if fmt == 0 and acc_scale and scale_mode == "block":
                # The step's one group: both columns of sc are its scale row (step 0).
                s_row, _ = hl.split(sc.to(torch.float32))
                acc = acc + hl.dot(w_tile, xs) * s_row[:, None]
            elif fmt == 1 and acc_scale:  # one dot a K step, times the tensor scale (fused_gemm's ACC_SCALE)
                acc = acc + hl.dot(w_tile, xs) * t_scale
            else:
                acc = hl.dot(w_tile, xs, acc=acc)
            if scale_mode == "block" or scale_mode == "sub":
                sc = sc_next
        if pdl == 3:  # split_k_parts.pdl_release: the next kernel's programs take SMs as these finish
            hl.inline_triton(PDL_LAUNCH, args=[], output_like=None)
        if fmt == 1 and not acc_scale:
            if use_asm:
                acc = acc * (tensor_scale[0] * 256.0)  # the PTX decode's 2^-8
            else:
                acc = acc * tensor_scale[0]
        if scale_mode == "channel":
            acc = acc * st[tile_n, 0].to(torch.float32)[:, None]
        if splits == 1:
            out[tile_m, tile_n] = acc.T.to(xt.dtype)
        else:  # split_k_parts.finish, as weight_only's
            done = _split_partial(ws, count, acc.T, tile_m, tile_n)
            if done == splits - 1:
                _split_last(ws, count, out, tile_m, tile_n)
    return out


@helion.kernel(static_shapes=True, autotune_effort="none")
def dequant(
    w: torch.Tensor,  # [K//2, N] packed nibbles
    scales: torch.Tensor,  # as weight_only's (unscaled int4: a placeholder)
    tensor_scale: torch.Tensor,  # NVFP4: fp32 [1]; else a placeholder
    out: torch.Tensor,  # [K//2, 2, N] in the activation dtype: the [K, N] result viewed
    fmt: hl.constexpr,
    has_scales: hl.constexpr,
    group: hl.constexpr,
) -> torch.Tensor:
    """The dequant path's first half: weight_only.py's dequant_kernel (the
    same decode as the GEMMs); the caller multiplies with torch (cuBLAS)."""
    kh, n = w.size()
    for tr, tn in hl.tile([kh, n]):
        wp = w[tr, tn]
        g = (2 * tr.index) // group  # k = 2j and 2j + 1 share a group: group is even
        if fmt == 0:
            lo, hi = _int4_nibbles(wp, out.dtype, False)
            if has_scales:
                s = scales[g, tn].to(out.dtype)
                lo = lo * s
                hi = hi * s
        else:
            lo, hi = _nvfp4_values(wp, scales[g, tn].to(torch.float32) * tensor_scale[0], out.dtype, False)
        out[tr, 0, tn] = lo
        out[tr, 1, tn] = hi
    return out


def split_chunk(k: int, block_k: int, split: int) -> int:
    """The K range of one split-K program: split_k_parts.tile_and_range's
    per_split = cdiv(cdiv(K, BLOCK_K), SPLIT_K) whole K steps. cdiv(K, chunk)
    programs cover K (<= split: Triton's trailing empty splits are not
    launched)."""
    return helion.cdiv(helion.cdiv(k, block_k), split) * block_k


@helion.kernel(static_shapes=True, autotune_effort="none")
def split_k(
    a: torch.Tensor,  # [M, K]
    b: torch.Tensor,  # [K, N]
    bias: torch.Tensor,  # [N]; a placeholder without has_bias
    ws: torch.Tensor,  # fp32 [rows, N] (atomics: zero, left zero) or [planes >= splits, rows, N] (planes: any)
    count: torch.Tensor,  # int32 [cdiv(rows, 16), cdiv(N, 16)] per-tile counters, zero (left zero)
    has_bias: hl.constexpr,
    deterministic: hl.constexpr,  # partials as per-split planes summed in split order (else fp32 atomics)
    block_k: hl.constexpr,  # K step (Triton's BLOCK_K)
    small_m: hl.constexpr,  # M < SMALL_M_ROWS: M, the kernel tiles SMALL_M_ROWS rows (else 0)
    pdl: hl.constexpr = 0,  # split_k_parts.pdl_prologue's mode (launched with launch_pdl: helion_ops)
    planes_only: hl.constexpr = False,  # with deterministic: store the planes only, reduce_planes sums them
    # (helion_ops.SplitK passes both for a REDUCE "kernel" config of either backend mode)
) -> torch.Tensor:
    """split_k.py's split_k_kernel: y = a @ b (+ bias) in a.dtype, in one
    launch (with planes_only: the first of two). Returns [rows, N] (rows: M,
    or SMALL_M_ROWS with small_m: the first M are y; with planes_only and
    more than one split, y once reduce_planes has written it)."""
    m, k = a.size()
    n = b.size(1)
    rows = 16 if small_m else m  # SMALL_M_ROWS (a literal: Helion then knows it), as weight_only's small_m
    out = torch.empty([rows, n], dtype=a.dtype, device=a.device)
    split = hl.register_tunable("split_k", PowerOfTwoFragment(1, 128))
    chunk = split_chunk(k, block_k, split)
    splits = helion.cdiv(k, chunk)
    # N tiles vary fastest, then M tiles, then splits: Triton's program order.
    for tile_n, tile_m, outer in hl.tile([n, rows, k], block_size=[None, None, chunk]):
        if pdl:
            _pdl_prologue(b, outer.begin, tile_n.begin, k, n, pdl)
        # Helion masks each tile to its range (rows, n); the small-M rows past
        # M need this mask too (and the atomics, which Helion cannot mask: inline).
        valid = (tile_m.index < m)[:, None] & (tile_n.index < n)[None, :]
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tk in hl.tile(outer.begin, outer.end, block_size=block_k):
            if small_m:
                at = hl.load(a, [tile_m, tk], extra_mask=(tile_m.index < m)[:, None])
            else:
                at = a[tile_m, tk]
            acc = hl.dot(at, b[tk, tile_n], acc=acc)
        if pdl == 3:  # split_k_parts.pdl_release
            hl.inline_triton(PDL_LAUNCH, args=[], output_like=None)
        if splits == 1:
            if has_bias:
                acc = acc + bias[tile_n].to(torch.float32)[None, :]
            hl.store(out, [tile_m, tile_n], acc.to(a.dtype), extra_mask=valid)
        elif planes_only:  # split_k_parts' REDUCE_KERNEL: reduce_planes, launched next, sums them
            hl.store(ws, [outer.id, tile_m, tile_n], acc, extra_mask=valid)
        else:
            # split_k_parts.finish: the tile's last program adds the bias,
            # stores the cast sum and leaves workspace and counter zeroed.
            offs = tile_m.index[:, None] * n + tile_n.index[None, :]
            if deterministic:
                hl.store(ws, [outer.id, tile_m, tile_n], acc, extra_mask=valid)
            else:
                hl.inline_triton("tl.atomic_add({0} + {1}, {2}, mask={3}, sem='relaxed')", args=[ws, offs, acc, valid],
                                 output_like=None)
            # Every thread's partial is issued before the counter (release).
            # Helion has no CTA barrier of its own: tl.debug_barrier inline.
            hl.inline_triton("tl.debug_barrier()", args=[], output_like=None)
            done = hl.atomic_add(count, [tile_m.id, tile_n.id], 1, sem="acq_rel")
            if done == splits - 1:
                if deterministic:
                    # Planes 0, 1, ... in order (bitwise reproducible), 4 loads
                    # issued together (a literal: static_range takes no module
                    # constant); planes past the last split masked (the test as
                    # a 1-element tensor: the interpreter mistypes a scalar
                    # mask). Inline for split_k_parts.finish's .cg (read at L2).
                    total = hl.zeros([tile_m, tile_n], dtype=torch.float32)
                    for s0 in hl.grid(0, splits, 4):
                        for j in hl.static_range(4):
                            live = valid & (s0 + j + hl.arange(1) < splits)[:, None]
                            total = total + hl.inline_triton(
                                "tl.load({0} + {1} * {2} + {3}, mask={4}, other=0.0, cache_modifier='.cg')",
                                args=[ws, s0 + j, rows * n, offs, live], output_like=total)
                else:
                    zero = hl.zeros([tile_m, tile_n], dtype=torch.float32)
                    # Read the sum with an atomic (at L2, where the others' atomics
                    # landed: a plain load read incomplete sums, split_k_parts.py).
                    total = hl.inline_triton("tl.atomic_add({0} + {1}, {2}, mask={3}, sem='acquire')",
                                             args=[ws, offs, zero, valid], output_like=zero)
                    hl.store(ws, [tile_m, tile_n], zero, extra_mask=valid)
                if has_bias:
                    total = total + bias[tile_n].to(torch.float32)[None, :]
                hl.store(out, [tile_m, tile_n], total.to(a.dtype), extra_mask=valid)
                hl.atomic_xchg(count, [tile_m.id, tile_n.id], 0)
    return out


# split_k_parts.pdl_prologue as inline Triton (Helion cannot call the
# @triton.jit helper): let the next kernel launch, (PDL 2) prefetch b's first
# 16 rows of this program's K range to L2, then wait for the kernel before.
PDL_LAUNCH = "tl.extra.cuda.gdc_launch_dependents()"
PDL_PREFETCH = (f"tl.inline_asm_elementwise({split_k_parts.PREFETCH_L2_ASM!r}, "
                f"{split_k_parts.PREFETCH_L2_CONSTRAINTS!r}, "
                "[{0} + tl.minimum({1} + tl.arange(0, 16), {2} - 1) * {3} + {4}], "
                "dtype=tl.int32, is_pure=False, pack=1)")
PDL_WAIT = "tl.extra.cuda.gdc_wait()"
# tiled: 32 lines of 128 bytes from byte {1} on, within {2} bytes, as fused_kernel's prefetch of its tiles
PDL_PREFETCH_TILED = (f"tl.inline_asm_elementwise({split_k_parts.PREFETCH_L2_ASM!r}, "
                      f"{split_k_parts.PREFETCH_L2_CONSTRAINTS!r}, "
                      "[{0} + {1} + tl.minimum(tl.arange(0, 32) * 128, {2} - 128)], "
                      "dtype=tl.int32, is_pure=False, pack=1)")


def _pdl_prologue(b, k0, n0, k, n, pdl):
    """split_k_parts.pdl_prologue for a [K, N] b whose program starts at row k0, column n0."""
    if pdl != 3:  # 3: after the K loop (split_k_parts.pdl_release)
        hl.inline_triton(PDL_LAUNCH, args=[], output_like=None)
    if pdl >= 2:
        hl.inline_triton(PDL_PREFETCH, args=[b, k0, k, n, n0], output_like=None)
    hl.inline_triton(PDL_WAIT, args=[], output_like=None)


@helion.kernel(static_shapes=True, autotune_effort="none")
def reduce_planes(
    ws: torch.Tensor,  # fp32 [planes >= splits, size]: split_k's planes (planes_only), flat, a row-strided view
    bias: torch.Tensor,  # [N]; a placeholder without has_bias
    out: torch.Tensor,  # [size]: split_k's output, flat (its first M rows: size = M * N)
    has_bias: hl.constexpr,
    splits: hl.constexpr,
    block: hl.constexpr,  # elements per program (split_k_parts.plane_launch)
    pdl: hl.constexpr = 0,  # the split kernel's: wait for it in the prologue
    spread: hl.constexpr = False,  # plane_launch's SPREAD: ws holds exactly `splits` planes, summed as one tile
) -> torch.Tensor:
    """split_k_parts.reduce_planes: out = the planes summed per element (in
    split order; with spread, the [splits, block] tile by sum: a fixed
    order), + bias, cast; bitwise reproducible; the planes need no zeroing
    (every call writes each)."""
    size = out.size(0)
    n = bias.size(0)
    for tile in hl.tile(size, block_size=block):
        if pdl:
            hl.inline_triton(PDL_LAUNCH, args=[], output_like=None)
            hl.inline_triton(PDL_WAIT, args=[], output_like=None)
        if spread:  # every plane of the tile at once (split_k_parts.reduce_planes' SPREAD)
            total = ws[:, tile].sum(0)
        else:
            total = hl.zeros([tile], dtype=torch.float32)
            for s in hl.static_range(splits):  # unrolled: independent loads, all issued early
                total = total + ws[s, tile]
        if has_bias:
            total = total + hl.load(bias, [tile.index % n]).to(torch.float32)
        out[tile] = total.to(out.dtype)
    return out
