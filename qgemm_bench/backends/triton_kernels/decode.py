"""Decode helpers of the weight-only kernels: packed int4 / E2M1 bytes to
bf16/fp16 values, E4M3 scales, and per-group scale rows broadcast over the
packed rows they cover.

The weight layout they expect (formats.py): [K//2, N] bytes, two 4-bit codes
per byte along K, even k in the low nibble, odd k in the high nibble; a
decode returns (even-k values, odd-k values), each [K//2-rows, N].

Decoding avoids int->float conversions (I2F/F2F issue at 1/8 of the FMA rate
on Hopper): an int4 nibble u = q + 8 ORed into the exponent of a magic
constant is exactly 128 + u in bf16 (1024 + u in fp16), minus 136 (1032;
int4_biased leaves an offset on, for callers that subtract it from sums); an
E2M1 code's 3 magnitude bits shifted into an fp16's exponent/mantissa are
exactly value * 2^-14, subnormal 0.5 included. The packed-PTX variants
(bf16 only, GPU only: the interpreter cannot run inline PTX) do the same
with prmt/lop3 and one bf16x2 fma per pair.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

# The packed-PTX decodes, as text: Triton's @triton.jit helpers below and the
# Helion kernels (helion_kernels/kernels.py, which cannot call them) share them.
# The int4 decode without its subtraction: each value q + 136 (128 + u), exact
# in bf16 (8 significant bits); FOLD's, which subtracts 136 x the x tile's sum
# once per K block on the fp32 product (fused_gemm's module docstring).
INT4_BIASED_BF16X2_PTX = """{
        .reg .b32 t0, t1;
        prmt.b32 t0, $4, 0, 0x4140;
        prmt.b32 t1, $4, 0, 0x4342;
        lop3.b32 $0, t0, 0x000F000F, 0x43084308, 0x6a;
        lop3.b32 $1, t1, 0x000F000F, 0x43084308, 0x6a;
        shr.u32 t0, t0, 4;
        shr.u32 t1, t1, 4;
        lop3.b32 $2, t0, 0x000F000F, 0x43084308, 0x6a;
        lop3.b32 $3, t1, 0x000F000F, 0x43084308, 0x6a;
        }"""
INT4_BF16X2_PTX = INT4_BIASED_BF16X2_PTX.replace(".reg .b32 t0, t1;", """.reg .b32 t0, t1, one, off;
        mov.b32 one, 0x3F803F80;
        mov.b32 off, 0xC308C308;""").replace("        }", """        fma.rn.bf16x2 $0, $0, one, off;
        fma.rn.bf16x2 $1, $1, one, off;
        fma.rn.bf16x2 $2, $2, one, off;
        fma.rn.bf16x2 $3, $3, one, off;
        }""")
NVFP4_BF16X2_PTX = """{
        .reg .b32 t0, t1, h0, h1, a, b, z;
        mov.b32 z, 0x80008000;
        prmt.b32 t0, $4, 0, 0x4140;
        prmt.b32 t1, $4, 0, 0x4342;
        shr.u32 h0, t0, 4;
        shr.u32 h1, t1, 4;
        shl.b32 a, t0, 6;
        shl.b32 b, t0, 12;
        and.b32 b, b, 0x80008000;
        lop3.b32 $0, a, 0x01C001C0, b, 0xEA;
        fma.rn.bf16x2 $0, $0, $5, z;
        shl.b32 a, t1, 6;
        shl.b32 b, t1, 12;
        and.b32 b, b, 0x80008000;
        lop3.b32 $1, a, 0x01C001C0, b, 0xEA;
        fma.rn.bf16x2 $1, $1, $6, z;
        shl.b32 a, h0, 6;
        shl.b32 b, h0, 12;
        and.b32 b, b, 0x80008000;
        lop3.b32 $2, a, 0x01C001C0, b, 0xEA;
        fma.rn.bf16x2 $2, $2, $5, z;
        shl.b32 a, h1, 6;
        shl.b32 b, h1, 12;
        and.b32 b, b, 0x80008000;
        lop3.b32 $3, a, 0x01C001C0, b, 0xEA;
        fma.rn.bf16x2 $3, $3, $6, z;
        }"""
# The same decode with the high nibble shifted straight from the spread bytes
# (by 2 and 8; the masks drop the rest), no shift right first: 8 fewer SASS
# instructions per 64-row x 64-k block, and faster at M = 1 on the H100; but
# the TMA loop's unit-scale decode (SCALE_AFTER) slowed with it, so that one
# keeps the text above (docs/ws_gemm.md).
NVFP4_DIRECT_BF16X2_PTX = (
    NVFP4_BF16X2_PTX.replace("shr.u32 h0, t0, 4;\n        shr.u32 h1, t1, 4;\n        ", "")
    .replace("a, h0, 6", "a, t0, 2").replace("b, h0, 12", "b, t0, 8")
    .replace("a, h1, 6", "a, t1, 2").replace("b, h1, 12", "b, t1, 8"))
# NVFP4_DIRECT_BF16X2_PTX with the high nibbles scaled by their own scales ($7,
# $8): the fragment-order layout puts k and k + 16 in one byte
# (kmajor_layout.py), two NVFP4 blocks of 16 (split-K loops, ws_gemm.py).
NVFP4_SPLIT_BF16X2_PTX = NVFP4_DIRECT_BF16X2_PTX.replace("$2, $2, $5", "$2, $2, $7").replace("$3, $3, $6", "$3, $3, $8")
# NVFP4_SPLIT_BF16X2_PTX from the bytes spread into the lanes' high bytes
# (fused_gemm's SHORT_DECODE): a low nibble's magnitude is then 2 bits right of
# bf16 bits 6-8 and its sign 4 left of bit 15, a high nibble's sign already at
# bit 15; with nothing else under the masks one lop3 merges the two shifts
# (a low nibble) or a shift and an and (a high one): 18 instructions per 8
# values, not 22, the same bits (tests/test_decode_ptx.py checks every byte).
NVFP4_SPLIT_SHORT_BF16X2_PTX = """{
        .reg .b32 t0, t1, a, b, z;
        mov.b32 z, 0x80008000;
        prmt.b32 t0, $4, 0, 0x1404;
        prmt.b32 t1, $4, 0, 0x3424;
        shr.u32 a, t0, 2;
        shl.b32 b, t0, 4;
        lop3.b32 $0, a, b, 0x81C081C0, 0xA8;
        fma.rn.bf16x2 $0, $0, $5, z;
        shr.u32 a, t1, 2;
        shl.b32 b, t1, 4;
        lop3.b32 $1, a, b, 0x81C081C0, 0xA8;
        fma.rn.bf16x2 $1, $1, $6, z;
        shr.u32 a, t0, 6;
        and.b32 b, t0, z;
        lop3.b32 $2, a, 0x01C001C0, b, 0xEA;
        fma.rn.bf16x2 $2, $2, $7, z;
        shr.u32 a, t1, 6;
        and.b32 b, t1, z;
        lop3.b32 $3, a, 0x01C001C0, b, 0xEA;
        fma.rn.bf16x2 $3, $3, $8, z;
        }"""
# NVFP4_SPLIT_BF16X2_PTX's values from a word whose bits nvfp4_rot_words
# permuted on the host so that each output register is one rotate and one
# mask (the fourth a rotate, a second rotate and mask, and a lop3): 13 PTX
# instructions per 8 codes with the 4 fmas, not 22, the same bits before each
# fma (tests/test_decode_ptx.py checks every byte pair). fused_gemm's
# ROT_DECODE.
NVFP4_ROT_BF16X2_PTX = """{
        .reg .b32 a, b, z;
        mov.b32 z, 0x80008000;
        and.b32 $0, $4, 0x81C081C0;
        fma.rn.bf16x2 $0, $0, $5, z;
        shf.r.wrap.b32 a, $4, $4, 4;
        and.b32 $1, a, 0x81C081C0;
        fma.rn.bf16x2 $1, $1, $6, z;
        shf.r.wrap.b32 a, $4, $4, 10;
        and.b32 $2, a, 0x81C081C0;
        fma.rn.bf16x2 $2, $2, $7, z;
        shf.r.wrap.b32 a, $4, $4, 14;
        shf.r.wrap.b32 b, $4, $4, 6;
        and.b32 b, b, 0x81808180;
        lop3.b32 $3, a, 0x00400040, b, 0xEA;
        fma.rn.bf16x2 $3, $3, $8, z;
        }"""
# nvfp4_rot_words' bit map: output register j (0, 1: the low nibbles of bytes
# 0-1, 2-3; 2, 3: their high nibbles), lane h, code bit b sits at word bit
# (ROT_POS[b] + 16 h + shift) mod 32, shift ROT_SHIFT[j] (j = 3: 14 for bit 0,
# 6 for the others), so rotating right by the shift puts it at bf16 bit
# ROT_POS[b] of lane h (sign at 15, magnitude at 6-8: value x 2^-126).
ROT_POS = (6, 7, 8, 15)
ROT_SHIFT = (0, 4, 10)


def rot_bit(j: int, h: int, b: int) -> int:
    """The word bit nvfp4_rot_words puts code bit b of register j, lane h at."""
    shift = ROT_SHIFT[j] if j < 3 else (14 if b == 0 else 6)
    return (ROT_POS[b] + 16 * h + shift) % 32


@functools.cache
def _rot_byte_tables() -> torch.Tensor:
    """[4, 256] int32: for each byte position of a word and byte value, the
    bits it contributes to nvfp4_rot_words' permuted word (rot_bit; byte p
    holds lane p % 2 of registers p // 2 (low nibble) and p // 2 + 2)."""
    table = [[sum(((v >> (4 * n + b)) & 1) << rot_bit(p // 2 + 2 * n, p % 2, b) for n in range(2) for b in range(4))
              for v in range(256)] for p in range(4)]
    return torch.tensor([[t - (1 << 32) if t >= 1 << 31 else t for t in row] for row in table], dtype=torch.int32)


def nvfp4_rot_words(wt: torch.Tensor) -> torch.Tensor:
    """Packed E2M1 bytes (uint8, each 4-byte word the codes one
    NVFP4_SPLIT_BF16X2_PTX call decodes: byte i's low nibble and then its
    high one) -> the same shape with each word's 32 bits permuted for
    NVFP4_ROT_BF16X2_PTX (rot_bit), which decodes it to the same values.
    The last dimension must hold whole words. A table per byte position,
    in int32: about 3x the bytes of temporaries at the peak."""
    if wt.dtype != torch.uint8 or wt.shape[-1] % 4:
        raise ValueError(f"nvfp4_rot_words takes uint8 bytes in whole 4-byte words, got {wt.dtype} {tuple(wt.shape)}")
    tables = _rot_byte_tables().to(wt.device)  # cached on the CPU: a copy per call, 4 KiB
    words = wt.reshape(-1, 4)
    out = torch.zeros(words.shape[0], dtype=torch.int32, device=wt.device)
    for p in range(4):
        out |= tables[p][words[:, p].to(torch.int32)]
    return out.view(torch.uint8).view(wt.shape)


# nvfp4_bf16x2's scale offset: callers pass each scale times 2^118 (exact in
# bf16 for E4M3 scales <= 448) and multiply the result by 2^8.
EXP2_118 = 2.0**118
_INT4_PTX = tl.constexpr(INT4_BF16X2_PTX)  # a @triton.jit function reads globals only as constexpr
_INT4_BIASED_PTX = tl.constexpr(INT4_BIASED_BF16X2_PTX)
# int4_biased's offsets (a jit helper returning one gave an fp32 tensor in Triton 3.6, not a constant).
INT4_OFF_BF16 = tl.constexpr(136.0)
INT4_OFF_FP16 = tl.constexpr(24.0)
_NVFP4_PTX = tl.constexpr(NVFP4_BF16X2_PTX)
_NVFP4_SPLIT_PTX = tl.constexpr(NVFP4_SPLIT_BF16X2_PTX)
_NVFP4_SPLIT_SHORT_PTX = tl.constexpr(NVFP4_SPLIT_SHORT_BF16X2_PTX)
_NVFP4_ROT_PTX = tl.constexpr(NVFP4_ROT_BF16X2_PTX)
_EXP2_118 = tl.constexpr(EXP2_118)


@triton.jit
def int4_nibbles(w, DT: tl.constexpr):
    """int8 bytes -> (even-k values, odd-k values) in DT, exactly q in [-8, 7]."""
    b = w.to(tl.int32) & 0xFF
    if DT == tl.bfloat16:
        lo = (((b & 0xF) ^ 0x8) | 0x4300).to(tl.int16).to(tl.bfloat16, bitcast=True) - 136.0
        hi = (((b >> 4) ^ 0x8) | 0x4300).to(tl.int16).to(tl.bfloat16, bitcast=True) - 136.0
    else:
        lo = (((b & 0xF) ^ 0x8) | 0x6400).to(tl.int16).to(tl.float16, bitcast=True) - 1032.0
        hi = (((b >> 4) ^ 0x8) | 0x6400).to(tl.int16).to(tl.float16, bitcast=True) - 1032.0
    return lo.to(DT), hi.to(DT)


@triton.jit
def int4_biased(w, DT: tl.constexpr):
    """int8 bytes -> (even-k, odd-k) q + INT4_OFF_BF16 (136) in bf16, 128 + u
    for u = q + 8, as int4_biased_bf16x2; in fp16 q + INT4_OFF_FP16 (24),
    16 + u (u in mantissa bits 6-9: with 1032 the offset's products lost the
    fp16 tolerance on cancelling x, tests/test_fused_fold.py). Exact."""
    b = w.to(tl.int32) & 0xFF
    if DT == tl.bfloat16:
        lo = (((b & 0xF) ^ 0x8) | 0x4300).to(tl.int16).to(tl.bfloat16, bitcast=True)
        hi = (((b >> 4) ^ 0x8) | 0x4300).to(tl.int16).to(tl.bfloat16, bitcast=True)
    else:
        lo = ((((b & 0xF) ^ 0x8) << 6) | 0x4C00).to(tl.int16).to(tl.float16, bitcast=True)
        hi = ((((b >> 4) ^ 0x8) << 6) | 0x4C00).to(tl.int16).to(tl.float16, bitcast=True)
    return lo.to(DT), hi.to(DT)


@triton.jit
def int4_nibbles_bf16x2(w):
    """int4_nibbles for bf16 in packed PTX, 4 bytes per instance: prmt spreads
    bytes into 16-bit halves, one lop3 masks a nibble, flips its sign bit and
    ORs in the 128.0 exponent, one bf16x2 fma subtracts 136 (13 instructions
    per 8 values). GPU only: the interpreter cannot run inline PTX."""
    return tl.inline_asm_elementwise(
        asm=_INT4_PTX,
        constraints="=r,=r,=r,=r,r", args=[w], dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)


@triton.jit
def int4_biased_bf16x2(w):
    """int4_biased for bf16 in packed PTX: int4_nibbles_bf16x2 without its
    4 fmas (4 of its 13 instructions per 8 values). GPU only."""
    return tl.inline_asm_elementwise(
        asm=_INT4_BIASED_PTX,
        constraints="=r,=r,=r,=r,r", args=[w], dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)


@triton.jit
def nvfp4_bf16x2(w, sb):
    """Packed bytes of E2M1 codes (uint8) and each byte's scale as bf16 times
    2^118 -> (even-k, odd-k) bf16 code * scale * 2^-8, exactly, in packed PTX,
    4 bytes per instance. A code's 3 magnitude bits shifted to bf16 bits 6-8
    (sign to 15) read as value * 2^-126, subnormal 0.5 included; one bf16x2
    fma (no flush to zero) by the scale gives the product, which has at most
    6 significant bits and lies in [2^-18, 11]: exact. The caller multiplies
    the fp32 sum by 2^8. GPU only: the interpreter cannot run inline PTX."""
    return tl.inline_asm_elementwise(
        asm=_NVFP4_PTX,
        constraints="=r,=r,=r,=r,r,r,r", args=[w, sb], dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)


@triton.jit
def nvfp4_split_bf16x2(w, sb_lo, sb_hi, SHORT: tl.constexpr = False):
    """nvfp4_bf16x2 with the low and high nibbles' own scales (SHORT:
    NVFP4_SPLIT_SHORT_BF16X2_PTX, the same values)."""
    return tl.inline_asm_elementwise(
        asm=_NVFP4_SPLIT_SHORT_PTX if SHORT else _NVFP4_SPLIT_PTX,
        constraints="=r,=r,=r,=r,r,r,r,r,r", args=[w, sb_lo, sb_hi], dtype=(tl.bfloat16, tl.bfloat16), is_pure=True,
        pack=4)


@triton.jit
def nvfp4_rot_bf16x2(w, sb_lo, sb_hi):
    """nvfp4_split_bf16x2 of words nvfp4_rot_words permuted (NVFP4_ROT_BF16X2_PTX,
    the same values). GPU only: the interpreter cannot run inline PTX."""
    return tl.inline_asm_elementwise(
        asm=_NVFP4_ROT_PTX,
        constraints="=r,=r,=r,=r,r,r,r,r,r", args=[w, sb_lo, sb_hi], dtype=(tl.bfloat16, tl.bfloat16), is_pure=True,
        pack=4)


@triton.jit
def e2m1_fp16(c):
    """E2M1 codes (int32, 0..15) -> fp16 holding value * 2^-14, exactly."""
    return (((c & 7) << 9) | ((c & 8) << 12)).to(tl.int16).to(tl.float16, bitcast=True)


@triton.jit
def e4m3(bs):
    """E4M3 bytes (uint8) -> fp32, exactly."""
    return bs.to(tl.float8e4nv, bitcast=True).to(tl.float32)


@triton.jit
def e4m3_x2_118(bs):
    """E4M3 bytes (uint8) -> fp32 value x 2^118, exactly: nvfp4_bf16x2's
    scale operand as FusedGemm makes it on the host (its bf16 rounding is
    exact too: 4 significant bits, at most 448 x 2^118 < 2^127); zero,
    subnormals and sign kept, NaN stays NaN (on the GPU; the interpreter's
    E4M3 has no NaN). On sm_90 per pair: the hardware conversion
    (cvt.rn.f16x2.e4m3x2), two to fp32, two fmuls, one pack to bf16x2
    (fused_gemm's SCALE8, on the small scale tile; docs/fused_gemm.md)."""
    return e4m3(bs) * _EXP2_118


def bf16_x2_118(bs: torch.Tensor) -> torch.Tensor:
    """E4M3 block scales (float8_e4m3fn, or their bytes as uint8) -> bf16
    value x 2^118, exactly: nvfp4_bf16x2's scale operand, made once on the
    host (FusedGemm; Helion's fused kernel with bf16_scales) so the kernels
    load it as is; e4m3_x2_118 is the in-kernel conversion. 2 bytes a scale."""
    return (bs.view(torch.float8_e4m3fn).float() * EXP2_118).to(torch.bfloat16)


@triton.jit
def nvfp4_values(w, scale, DT: tl.constexpr):
    """Packed E2M1 bytes and each byte's fp32 scale -> (even-k, odd-k)
    code * scale in DT, formed in fp32 and rounded once."""
    b = w.to(tl.int32) & 0xFF
    s = scale * 16384.0
    return (e2m1_fp16(b & 0xF).to(tl.float32) * s).to(DT), (e2m1_fp16(b >> 4).to(tl.float32) * s).to(DT)


@triton.jit
def load_group_rows(s_ptr, kb, K, offs_n, mask_n, stride_sk, BLOCK_K: tl.constexpr, GROUP: tl.constexpr,
                    EVEN_KN: tl.constexpr = False):
    """The scale rows of K block kb's groups: [BLOCK_K // GROUP, BLOCK_N]
    (GROUP divides BLOCK_K; EVEN_KN: the block and tile are whole, no masks)."""
    g = kb * (BLOCK_K // GROUP) + tl.arange(0, BLOCK_K // GROUP)
    ptrs = s_ptr + g[:, None] * stride_sk + offs_n[None, :]
    if EVEN_KN:
        return tl.load(ptrs)
    return tl.load(ptrs, mask=(g * GROUP < K)[:, None] & mask_n[None, :], other=0)


@triton.jit
def per_packed_row(s, GROUP: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
    """[BLOCK_K // GROUP, BLOCK_N] per-group values -> [BLOCK_K // 2, BLOCK_N],
    each repeated for the GROUP // 2 packed rows of its group (in the dot
    operand's layout: Triton places the broadcast there, no shared-memory
    round trip)."""
    return tl.reshape(tl.broadcast_to(s[:, None, :], (BLOCK_K // GROUP, GROUP // 2, BLOCK_N)), (BLOCK_K // 2, BLOCK_N))


@triton.jit
def per_k(s, GROUP: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr):
    """[ROWS, COLS // GROUP] per-group values -> [ROWS, COLS], each repeated
    for the GROUP columns of its group: per_packed_row along the last axis,
    for the fused kernel's [BLOCK_N, BLOCK_K // 2] byte tiles."""
    return tl.reshape(tl.broadcast_to(s[:, :, None], (ROWS, COLS // GROUP, GROUP)), (ROWS, COLS))
