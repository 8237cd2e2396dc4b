"""Decode attention in one launch: one query token per sequence against a
static KV cache [B, H_kv, L, D], slots 0..pos, GQA's G = H / H_kv query heads
of a KV head as the rows of one tile (padded to 16, the dot's least M).

Split-KV as flash-decoding: program (b, h_kv, s) runs an online softmax over
its share of the slots; with more than one split each writes its partial
(row max, row sum, unnormalised output, fp32) to a workspace and counts in,
and the pair's last program merges the partials and writes the output, then
zeroes the counter (split-K's last-program pattern, split_k_parts.finish):
no second kernel for the merge. Splits past pos skip their loop and write an
empty partial (max -inf, weight 0 in the merge).

In a --pdl step (split_k_parts.chained_pdl) it launches with PDL in our
GEMMs' chained mode 3: scheduled while the kernel before it finishes, it
waits before its first load and lets the next kernel be scheduled after its
main loop (flex's kernels, Inductor's, launch that way there too).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from qgemm_bench.backends.triton_kernels import split_k_parts

BLOCK_G = 16  # query rows a program computes: the G heads of its KV head, padded to tl.dot's least M
FEW_PAIRS = 16  # (b, h_kv) pairs up to which block_for takes 128-slot steps (8B batch 1 and 2, a 70B rank's)
_LOG2E = 1.4426950408889634
_WORKSPACES: dict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}


@triton.jit
def rotated(D: tl.constexpr):
    """The columns rotate_half reads: d + D/2 for the first half, d - D/2 for the second."""
    offs = tl.arange(0, D)
    return (offs + D // 2) % D


@triton.jit
def rotary(x, x_rot, cos, sin, D: tl.constexpr):
    """Llama's rotary embedding in fp32: x * cos + rotate_half(x) * sin, where
    x_rot is x at the columns `rotated` gives (rotate_half negates its first half)."""
    sign = tl.where(tl.arange(0, D) < D // 2, -1.0, 1.0)
    return x.to(tl.float32) * cos + sign * x_rot.to(tl.float32) * sin


@triton.jit
def decode_attention_kernel(q_ptr, k_ptr, v_ptr, pos_ptr, out_ptr, ws_acc_ptr, ws_ml_ptr, count_ptr, L, CHUNK,
                            qk_scale, stride_qb, stride_qh, stride_kb, stride_kh, stride_kl, stride_vb,
                            stride_vh, stride_vl, stride_ob, stride_oh, HKV: tl.constexpr, G: tl.constexpr,
                            D: tl.constexpr, BLOCK_N: tl.constexpr, SPLITS: tl.constexpr, IEEE: tl.constexpr,
                            PDL: tl.constexpr = 0, kn_ptr=None, vn_ptr=None, cos_ptr=None, sin_ptr=None,
                            len_ptr=None, stride_knb=0, stride_knh=0, stride_vnb=0, stride_vnh=0, stride_cb=0,
                            ROPE: tl.constexpr = False, HAS_LEN: tl.constexpr = False):
    pid_bh = tl.program_id(1)
    split = tl.program_id(0)
    b = pid_bh // HKV
    hk = pid_bh % HKV
    k_base = k_ptr + b * stride_kb + hk * stride_kh
    v_base = v_ptr + b * stride_vb + hk * stride_vh
    # PDL 3: wait for the kernels before (q, pos and this token's K/V are theirs); the one L2 prefetch
    # pdl_prologue issues first is of this pair's first K line, which earlier steps wrote.
    split_k_parts.pdl_prologue(k_base, PDL)
    offs_g = tl.arange(0, 16)
    offs_d = tl.arange(0, D)
    mask_g = offs_g < G
    q_rows = q_ptr + b * stride_qb + (hk * G + offs_g)[:, None] * stride_qh
    q = tl.load(q_rows + offs_d[None, :], mask=mask_g[:, None], other=0.0)
    pos = tl.load(pos_ptr)
    start = split * CHUNK
    if ROPE:  # q and the new key rotated here, and the new K/V written into the cache at pos
        cos = tl.load(cos_ptr + b * stride_cb + offs_d).to(tl.float32)
        sin = tl.load(sin_ptr + b * stride_cb + offs_d).to(tl.float32)
        q = rotary(q, tl.load(q_rows + rotated(D)[None, :], mask=mask_g[:, None], other=0.0), cos[None, :],
                   sin[None, :], D).to(q.dtype)
        # The split holding pos writes the slot and then reads it in its loop (a barrier between: the CTA's
        # threads see each other's global writes after it); the others never read that slot.
        if (start <= pos) & (pos < start + CHUNK) & (pos < L):
            kn = kn_ptr + b * stride_knb + hk * stride_knh
            k_new = rotary(tl.load(kn + offs_d), tl.load(kn + rotated(D)), cos, sin, D)
            tl.store(k_base + pos * stride_kl + offs_d, k_new.to(k_ptr.dtype.element_ty))
            tl.store(v_base + pos * stride_vl + offs_d, tl.load(vn_ptr + b * stride_vnb + hk * stride_vnh + offs_d))
            tl.debug_barrier()
        if HAS_LEN and (pid_bh == 0) & (split == 0):
            tl.store(len_ptr, (pos + 1).to(len_ptr.dtype.element_ty))  # the cache's own count, as its update
    end = tl.minimum(tl.minimum(start + CHUNK, pos + 1), L)
    m = tl.full([16], float("-inf"), dtype=tl.float32)
    s = tl.zeros([16], dtype=tl.float32)
    acc = tl.zeros([16, D], dtype=tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    for n0 in range(start, end, BLOCK_N):
        n = n0 + offs_n
        mask_n = n < end
        k = tl.load(k_base + n[:, None] * stride_kl + offs_d[None, :], mask=mask_n[:, None], other=0.0)
        if IEEE:  # float32 operands: tl.dot would take TF32
            scores = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
        else:
            scores = tl.dot(q, tl.trans(k)) * qk_scale  # log2 units: the softmax by exp2
        scores = tl.where(mask_n[None, :], scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(scores - m_new[:, None])
        v = tl.load(v_base + n[:, None] * stride_vl + offs_d[None, :], mask=mask_n[:, None], other=0.0)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        s = s * alpha + tl.sum(p, axis=1)
        m = m_new
    split_k_parts.pdl_release(PDL)  # the next kernel waits for all of this one anyway
    out_rows = out_ptr + b * stride_ob + (hk * G + offs_g)[:, None] * stride_oh + offs_d[None, :]
    if SPLITS == 1:
        tl.store(out_rows, (acc / s[:, None]).to(out_ptr.dtype.element_ty), mask=mask_g[:, None])
    else:
        item = pid_bh * SPLITS + split
        tl.store(ws_acc_ptr + item * 16 * D + offs_g[:, None] * D + offs_d[None, :], acc, mask=mask_g[:, None])
        tl.store(ws_ml_ptr + item * 32 + offs_g, m, mask=mask_g)
        tl.store(ws_ml_ptr + item * 32 + 16 + offs_g, s, mask=mask_g)
        # Every thread's partial is issued before the counter (release); the last
        # program's reads come after it (acquire), as split_k_parts.finish.
        tl.debug_barrier()
        done = tl.atomic_add(count_ptr + pid_bh, 1, sem="acq_rel")
        if done == SPLITS - 1:
            first = pid_bh * SPLITS
            mx = tl.full([16], float("-inf"), dtype=tl.float32)
            for i in range(0, SPLITS):
                mx = tl.maximum(mx, tl.load(ws_ml_ptr + (first + i) * 32 + offs_g, mask=mask_g, other=0.0,
                                            cache_modifier=".cg"))
            total = tl.zeros([16, D], dtype=tl.float32)
            norm = tl.zeros([16], dtype=tl.float32)
            for i in range(0, SPLITS):
                mi = tl.load(ws_ml_ptr + (first + i) * 32 + offs_g, mask=mask_g, other=0.0, cache_modifier=".cg")
                si = tl.load(ws_ml_ptr + (first + i) * 32 + 16 + offs_g, mask=mask_g, other=0.0,
                             cache_modifier=".cg")
                w = tl.exp2(mi - mx)  # an empty split: exp2(-inf) = 0
                ai = tl.load(ws_acc_ptr + (first + i) * 16 * D + offs_g[:, None] * D + offs_d[None, :],
                             mask=mask_g[:, None], other=0.0, cache_modifier=".cg")
                total += ai * w[:, None]
                norm += si * w
            norm = tl.where(mask_g, norm, 1.0)  # the padding rows: never stored
            tl.store(out_rows, (total / norm[:, None]).to(out_ptr.dtype.element_ty), mask=mask_g[:, None])
            tl.atomic_xchg(count_ptr + pid_bh, 0, sem="relaxed")


def sm90(device: torch.device) -> bool:
    """Whether griddepcontrol (PDL) compiles here: a CUDA GPU (not ROCm) of compute
    capability 9.0+ (Inductor's own test for emitting PDL, decode.pdl_runs)."""
    return device.type == "cuda" and not torch.version.hip and torch.cuda.get_device_capability(device)[0] >= 9


def block_for(batch: int, kv_heads: int, row_bytes: int) -> int:
    """Slots a loop step takes: 128 where a launch has few (b, h_kv) pairs
    and a K/V row is at most 256 bytes (bf16 at head dim 128: 3 stages of
    128-slot K and V tiles take 139 KB of shared memory; float32's would
    take 279 KB, over the H200's 227), 64 otherwise. On the H200 alone
    (session 57, results/h200/compile_ab/attention_s57/a_flex_ab.txt, p50
    us): 8B batch 1 (8 pairs) 6.38 at 128 against 6.67 at 64; batch 16
    (128 pairs) 18.75 against 14.08."""
    return 128 if batch * kv_heads <= FEW_PAIRS and row_bytes <= 256 else 64


def splits_for(batch: int, kv_heads: int, slots: int, sms: int, block_n: int) -> int:
    """KV splits of a launch: enough (b, h_kv, split) programs for one per SM
    where the pairs are fewer than the SMs, at least one block of slots each."""
    return max(1, min(-(-slots // block_n), -(-sms // (batch * kv_heads))))


def _rope_args(rope: tuple, b: int, kv_heads: int, d: int, device: torch.device) -> dict:
    """The kernel's arguments for decode_attention's `rope` (ValueError, one
    line, for what it would misread)."""
    k_new, v_new, cos, sin, length = rope
    for name, t in (("k_new", k_new), ("v_new", v_new)):
        if t.shape != (b, kv_heads, d) or t.stride(2) != 1 or t.device != device:
            raise ValueError(f"decode attention: {name} must be [{b}, {kv_heads}, {d}] on {device}, last dim "
                             f"contiguous, got {tuple(t.shape)}")
    if cos.shape != (b, d) or sin.shape != (b, d) or cos.stride() != sin.stride() or cos.stride(1) != 1 or \
            cos.device != device or sin.device != device:
        raise ValueError(f"decode attention: cos and sin must be [{b}, {d}] with one stride on {device}")
    if length is not None and (length.numel() != 1 or length.device != device or length.is_floating_point()):
        raise ValueError("decode attention: length must be a 1-element integer tensor on q's device")
    return dict(kn_ptr=k_new, vn_ptr=v_new, cos_ptr=cos, sin_ptr=sin, len_ptr=length, HAS_LEN=length is not None,
                stride_knb=k_new.stride(0), stride_knh=k_new.stride(1), stride_vnb=v_new.stride(0),
                stride_vnh=v_new.stride(1), stride_cb=cos.stride(0), ROPE=True)


def _workspace(device: torch.device, items: int, d: int, pairs: int):
    """(partial outputs, row max and sum, counters) for `items` programs and
    `pairs` (b, h_kv): made once per size and device (the counters zeroed once,
    left zeroed by each launch's last programs), so a CUDA graph replays them."""
    key = (device, items, d, pairs)
    if key not in _WORKSPACES:
        _WORKSPACES[key] = (torch.empty(items * BLOCK_G * d, device=device, dtype=torch.float32),
                            torch.empty(items * 2 * BLOCK_G, device=device, dtype=torch.float32),
                            torch.zeros(pairs, device=device, dtype=torch.int32))
    return _WORKSPACES[key]


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor, scale: float,
                     sms: int, block_n: int | None = None, splits: int | None = None, num_warps: int = 4,
                     rope: tuple | None = None) -> torch.Tensor:
    """Attention of q [B, H, D] (one token per sequence) over k, v [B, H_kv, L,
    D] (last dimension contiguous) at slots 0..pos[0] (a 1-element integer
    tensor on q's device, the same position for every sequence), softmax
    scale `scale`; returns [B, H, D] in q's dtype. sms: the GPU's SM count
    (splits_for; `splits` overrides it); block_n: slots a loop step takes
    (block_for's by default).

    rope = (k_new, v_new, cos, sin, length): the token's rotary and cache
    write done here too, as Llama's attention does them before it (the
    kernels they took in a compiled step go): q is taken before its rotary,
    k_new [B, H_kv, D] is rotated and written with v_new [B, H_kv, D] into k
    and v at slot pos[0] (where pos[0] < L), cos and sin [B, D] are the
    token's (the model's dtype; one row stride for both), and the 1-element
    `length` (the cache's count of filled slots; None: left alone) becomes
    pos[0] + 1. A pos[0] past the cache writes nothing (the attention then
    covers all L slots): the caller keeps positions within it, as
    transformers' cache does by failing."""
    b, h, d = q.shape
    kv_heads, slots = k.shape[1], k.shape[2]
    if k.shape != (b, kv_heads, slots, d) or v.shape != k.shape:
        raise ValueError(f"decode attention: k {tuple(k.shape)} and v {tuple(v.shape)} must be [B, H_kv, L, {d}]")
    if h % kv_heads or h // kv_heads > BLOCK_G:
        raise ValueError(f"decode attention: {h} query heads over {kv_heads} KV heads (at most {BLOCK_G} a KV head)")
    if d < 16 or d & (d - 1) or q.stride(2) != 1 or k.stride(3) != 1 or v.stride(3) != 1:
        raise ValueError(f"decode attention: head dim {d} must be a power of two >= 16, contiguous")
    if not q.is_cuda and q.dtype == torch.bfloat16:
        raise ValueError("decode attention: the Triton interpreter has no bfloat16 (its results would be wrong)")
    if pos.numel() != 1 or pos.device != q.device:
        raise ValueError("decode attention: pos must be a 1-element tensor on q's device")
    extra = {} if rope is None else _rope_args(rope, b, kv_heads, d, q.device)
    block_n = block_n or block_for(b, kv_heads, d * k.element_size())
    splits = splits or splits_for(b, kv_heads, slots, sms, block_n)
    if b * kv_heads > 65535:  # the grid's y axis
        raise ValueError(f"decode attention: batch {b} x {kv_heads} KV heads is more pairs than a launch takes")
    per_split = -(-slots // splits)
    chunk = -(-per_split // block_n) * block_n  # slots a split covers, whole blocks
    out = torch.empty(b, h, d, device=q.device, dtype=q.dtype)
    ws_acc, ws_ml, count = _workspace(q.device, b * kv_heads * splits, d, b * kv_heads)
    pdl = split_k_parts.pdl_launch({"PDL": 3}, q.device) if split_k_parts.chained() and sm90(q.device) else {}
    decode_attention_kernel[(splits, b * kv_heads)](
        q, k, v, pos, out, ws_acc, ws_ml, count, slots, chunk, scale * _LOG2E,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
        out.stride(0), out.stride(1), HKV=kv_heads, G=h // kv_heads, D=d, BLOCK_N=block_n, SPLITS=splits,
        IEEE=q.dtype == torch.float32, num_warps=num_warps, **pdl, **extra)
    return out
