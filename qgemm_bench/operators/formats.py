"""The canonical int4 and NVFP4 weight formats: quantize, pack, unpack, dequantize.

One copy of each routine, vectorized torch, device-agnostic (CPU and CUDA).
Every backend and the references use these; kernels must match them bit for bit.

Layouts:
- Two 4-bit codes per byte along K: even k in the low nibble, odd k in the high
  nibble; packed weights are [K//2, N].
- int4: signed values in [-8, 7], stored int8; symmetric scales per group of
  `group_size` rows of K per column, `scales[K//group_size, N]` in the
  activation dtype; group_size == K is per-channel; `scales=None` is the
  unscaled variant (raw int4 values).
- NVFP4: E2M1 codes (bit 3 = sign) stored uint8; one FP8 E4M3 scale per block of
  16 consecutive K per column, `block_scales[K//16, N]`; one FP32 tensor scale.
"""

from __future__ import annotations

import torch

from qgemm_bench.errors import FormatError

# Weight formats as the weight-only kernels (Triton and Helion) take them.
INT4, NVFP4 = 0, 1
NVFP4_BLOCK = 16
E2M1_MAX = 6.0
E4M3_MAX = 448.0
# Magnitudes of the E2M1 codes 0..7; code | 8 is the same magnitude, negative.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
# Midpoints between consecutive E2M1 magnitudes, for round-to-nearest.
_E2M1_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def _div(a: torch.Tensor, divisor: float) -> torch.Tensor:
    """a / divisor as IEEE division on every device. (CUDA torch turns division
    by a Python scalar into a multiply by its reciprocal, which differs in the
    last bit on some inputs, so CPU and CUDA scales disagreed; measured on the
    H100 for the NVFP4 tensor scale.) Kernels must use true division too."""
    return a / torch.full((), divisor, dtype=a.dtype, device=a.device)


def require_finite_2d(w: torch.Tensor, what: str) -> None:
    if w.dim() != 2:
        raise FormatError(f"{what} must be 2-D [K, N], got shape {tuple(w.shape)}")
    if not w.is_floating_point():
        raise FormatError(f"{what} must be a floating-point tensor, got {w.dtype}")
    if not torch.isfinite(w).all():
        raise FormatError(f"{what} contains NaN or inf; refusing to quantize it")


def require_even_k(k: int) -> None:
    if k % 2:
        raise FormatError(f"K={k} is odd; two 4-bit codes are packed per byte along K")


# ---------------------------------------------------------------- nibble packing


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """[K, N] integer codes (only the low 4 bits are kept) -> [K//2, N] uint8."""
    require_even_k(codes.shape[0])
    c = (codes.to(torch.int16) & 0xF).to(torch.uint8)
    return c[0::2] | (c[1::2] << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """[K//2, N] bytes (uint8 or int8) -> [K, N] uint8 codes in [0, 15]."""
    p = packed.view(torch.uint8) if packed.dtype == torch.int8 else packed
    lo, hi = p & 0xF, p >> 4
    return torch.stack((lo, hi), dim=1).reshape(2 * p.shape[0], p.shape[1])


# ---------------------------------------------------------------------- int4


def check_group_size(k: int, group_size: int | None) -> None:
    if group_size is None:
        return
    if group_size <= 0 or group_size % 2:
        raise FormatError(f"group_size={group_size} must be a positive even number")
    if k % group_size:
        raise FormatError(f"K={k} is not divisible by group_size={group_size}")


def quantize_int4(w: torch.Tensor, group_size: int | None, scale_dtype=torch.bfloat16):
    """Symmetric round-to-nearest-even int4 quantization of a [K, N] weight.

    scale = absmax / 7 per group, stored in `scale_dtype`; q = clamp(round(w /
    stored_scale), -8, 7). An all-zero group gets scale 0 and q 0.
    group_size None: no scales, w is rounded and clamped to int4 directly.
    Returns (packed int8 [K//2, N], scales [K//group_size, N] or None).
    """
    require_finite_2d(w, "weight")
    k, n = w.shape
    require_even_k(k)
    check_group_size(k, group_size)
    wf = w.float()
    if group_size is None:
        q = torch.clamp(torch.round(wf), -8, 7)
        return pack_int4(q), None
    groups = wf.reshape(k // group_size, group_size, n)
    scales = _div(groups.abs().amax(dim=1), 7.0).to(scale_dtype)
    s = scales.float().unsqueeze(1)
    q = torch.clamp(torch.round(groups / torch.where(s == 0, 1.0, s)), -8, 7)
    return pack_int4(q.reshape(k, n)), scales


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """[K, N] int4 values in [-8, 7] -> [K//2, N] int8."""
    qi = q.to(torch.int16)
    if qi.numel() and (qi.min() < -8 or qi.max() > 7):
        raise FormatError("int4 values must lie in [-8, 7]")
    return pack_nibbles(qi).view(torch.int8)


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """[K//2, N] int8 -> [K, N] int8 values in [-8, 7].

    Arithmetic right shifts of int8 sign-extend each nibble: three int8 passes,
    not the six of unpack_nibbles + sign fix (halved the eager baseline on H100).
    """
    p = packed.view(torch.int8)
    return torch.stack(((p << 4) >> 4, p >> 4), dim=1).reshape(2 * p.shape[0], p.shape[1])


def dequantize_int4(packed, scales, group_size: int | None, dtype=torch.float32):
    """[K//2, N] packed int4 (+ scales) -> [K, N] weight in `dtype`.

    The arithmetic runs in `dtype`: float32 for the reference, the activation
    dtype for the torch baselines (as a real dequant+matmul would).
    """
    q = unpack_int4(packed).to(dtype)
    if scales is None:
        return q
    k, n = q.shape
    check_group_size(k, group_size)
    g = q.reshape(k // group_size, group_size, n) * scales.to(dtype).unsqueeze(1)
    return g.reshape(k, n)


# --------------------------------------------------------------------- NVFP4


def decode_e2m1(codes: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """E2M1 codes (uint8, 0..15) -> values, by arithmetic rather than a table
    (no constant tensor to upload, so it is CUDA-graph and compile friendly).
    Magnitude code 2e+m: e == 0 gives m/2 (subnormal), else (1 + m/2) * 2^(e-1);
    in quarters: 2m, or (2 + m) << e (at most 24, so uint8 arithmetic: 4x less
    traffic than int32 in the eager baseline)."""
    c = codes.to(torch.uint8)
    e, m = (c >> 1) & 3, c & 1
    quarters = torch.where(e == 0, m << 1, (m + 2) << e).to(dtype) * 0.25
    return torch.where(c >= 8, -quarters, quarters)


def encode_e2m1(x: torch.Tensor) -> torch.Tensor:
    """Round float values to E2M1 codes (nearest, ties to even code), saturating
    at +-6. The sign bit follows the input's sign, so -0.0 and tiny negatives
    give code 8 (negative zero), as the hardware conversion does."""
    a = x.float().abs().clamp(max=E2M1_MAX)
    mids = torch.tensor(_E2M1_MIDPOINTS, dtype=torch.float32, device=x.device)
    code = torch.bucketize(a, mids)  # number of midpoints strictly below a
    tie = (a == mids[code.clamp(max=len(_E2M1_MIDPOINTS) - 1)]) & (code % 2 == 1)
    code = code + tie.to(code.dtype)
    sign = torch.signbit(x).to(code.dtype) << 3
    return (code | sign).to(torch.uint8)


def quantize_nvfp4(w: torch.Tensor):
    """NVFP4 quantization of a [K, N] weight (the usual two-level recipe).

    tensor_scale = amax / (6 * 448) (1 for an all-zero weight); per block of 16
    along K: block_scale = E4M3(block_amax / 6 / tensor_scale), saturated at
    448; codes = E2M1(w / (block_scale * tensor_scale)), a zero block scale
    giving zero codes.
    Returns (packed uint8 [K//2, N], block_scales float8_e4m3fn [K//16, N],
    tensor_scale float32 0-dim tensor).
    """
    require_finite_2d(w, "weight")
    k, n = w.shape
    check_nvfp4_k(k)
    wf = w.float()
    amax = wf.abs().amax()
    tensor_scale = torch.where(amax > 0, _div(amax, E2M1_MAX * E4M3_MAX), 1.0).float()
    blocks = wf.reshape(k // NVFP4_BLOCK, NVFP4_BLOCK, n)
    bs = (_div(blocks.abs().amax(dim=1), E2M1_MAX) / tensor_scale).clamp(max=E4M3_MAX)
    block_scales = bs.to(torch.float8_e4m3fn)
    eff = (block_scales.float() * tensor_scale).unsqueeze(1)
    scaled = blocks / torch.where(eff == 0, 1.0, eff)
    scaled = torch.where(eff == 0, torch.zeros_like(scaled), scaled)
    codes = encode_e2m1(scaled.reshape(k, n))
    return pack_nibbles(codes), block_scales, tensor_scale


def check_nvfp4_k(k: int) -> None:
    if k % NVFP4_BLOCK:
        raise FormatError(f"K={k} is not divisible by the NVFP4 block size {NVFP4_BLOCK}")


def dequantize_nvfp4(packed, block_scales, tensor_scale, dtype=torch.float32):
    """[K//2, N] E2M1 codes + E4M3 block scales + FP32 tensor scale -> [K, N].

    value * (block_scale * tensor_scale); the combined scale is formed in fp32
    and the product is taken in `dtype`.
    """
    codes = unpack_nibbles(packed)
    k, n = codes.shape
    check_nvfp4_k(k)
    vals = decode_e2m1(codes, dtype)
    scale = (block_scales.float() * tensor_scale.float()).to(dtype)
    return (vals.reshape(k // NVFP4_BLOCK, NVFP4_BLOCK, n) * scale.unsqueeze(1)).reshape(k, n)
