"""Triton weight-only GEMM for the int4 and NVFP4 formats: y = x @ dequant(w).

One kernel for both formats (FMT), streaming each packed weight byte once:
- the packed [K//2, N] tile is split into its low nibbles (even k) and high
  nibbles (odd k), which multiply x's even and odd columns: two tl.dot per
  K block, no interleaving;
- decoded in registers without int->float conversions (decode.py, which
  also writes down the packed layout);
- int4 group scales are applied to the fp32 partial product of a K block when
  the block lies in one group (fewer multiplies, fp32 accuracy), else per
  element. Per-element scales (int4 groups that tile a K block, NVFP4's
  E4M3 block scales) are loaded once per group ([BLOCK_K // group, BLOCK_N])
  and broadcast over the packed rows each covers; NVFP4's are decoded once
  and applied per element (exact: E2M1 x E4M3 has at most 5 significant
  bits), its FP32 tensor scale once at the end.
  Loading each packed row's scale instead cost 27% on the H100.

Three paths, picked by M (triton_dispatch.py decides: WeightOnlyDispatch.path, path_for):
- split (M <= SPLIT_PATH_MAX_M, memory-bound, unless the table timed the
  fused kernel with split-K faster at the shape): this module's kernel, split-K
  over enough CTAs to stream the weights; splits meet in an fp32 workspace by
  atomics and the tile's last program casts and stores (split_k_parts.py;
  one launch); its configs are checked in per GPU and shape bucket
  (weight_only_configs.py), the curated lists below their candidates;
- fused (up to FUSED_MAX_M, and above where its config takes TMA loads and
  the table did not time dequant faster at the bucket): fused_gemm.py, the
  swapped-operand kernel whose decoded weights are the wgmma register
  operand, on a K-major copy of the weights made on first use;
- dequant (above FUSED_MAX_M without TMA loads: int4 groups that
  fused_gemm.tma_usable refuses for the config, Helion's kernels, GPUs
  before Hopper; or where the table timed it faster, both formats): a
  Triton kernel dequantizes the
  weights into a bf16/fp16 scratch and cuBLAS multiplies (as vLLM's AWQ path
  does for large batches); the dequant costs one pass over the weights (peak
  memory: the K x N scratch, reported in the row).

Measurements behind these choices: docs/weight_only.md, "Measurements behind
the code's choices".
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from qgemm_bench.backends.checks import check_weight_only
from qgemm_bench.backends.triton_kernels import decode, split_k_parts
from qgemm_bench.backends.triton_kernels.autotune import autotune_bench
from qgemm_bench.target import Target
from qgemm_bench.types import m_bucket

SPLIT_PATH_MAX_M = 64  # M up to this goes through split-K
SWIGLU_MAX_M = SPLIT_PATH_MAX_M  # M up to this takes the SwiGLU prologue (decode; __call__ says why)
# Above this M the fused kernel runs only with TMA loads (fused_gemm.py:
# on Hopper, the scale modes fused_gemm.tma_usable takes) and where the table did
# not time dequantize + cuBLAS faster (weight_only_configs.dequant_faster);
# elsewhere dequantize + cuBLAS.
# On the H100 the fused kernel with pointer loads beat dequantize + cuBLAS
# at M = 1024 and lost at 4096; with TMA loads (int4) it won at 2048 and
# 4096, NVFP4's (pointer loads) lost above 1024 (docs/weight_only.md).
# Up to M = 64 the table picks the split path or the fused one with split-K
# per shape (triton_dispatch.path_for).
FUSED_MAX_M = 1024
# Fused-kernel config keys: refused in split entries, dropped where the split kernel runs.
FUSED_ONLY = ("TMA", "TMA_W", "ACC_SCALE", "FOLD", "SCALE_AHEAD", "SCALE8", "SHORT_DECODE", "ROT_DECODE", "WS",
              "PF_LINES", "HALVES")


@triton.jit
def _load_w(w_ptr, kb, k_end, offs_h, offs_n, mask_n, stride_wk, BLOCK_K: tl.constexpr, EVEN_KN: tl.constexpr):
    """Packed rows of K block kb (nothing from k_end on: K, or the split's end)."""
    HALF: tl.constexpr = BLOCK_K // 2
    ptrs = w_ptr + (kb * HALF + offs_h)[:, None] * stride_wk + offs_n[None, :]
    if EVEN_KN:
        return tl.load(ptrs)
    mask_k = kb * BLOCK_K + 2 * offs_h < k_end
    return tl.load(ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0)


@triton.jit
def _load_x(x_ptr, kb, k_end, offs_m, offs_k, mask_m, stride_xm, BLOCK_K: tl.constexpr, EVEN_KN: tl.constexpr):
    k = kb * BLOCK_K + offs_k
    mask = mask_m[:, None] if EVEN_KN else mask_m[:, None] & (k < k_end)[None, :]
    return tl.load(x_ptr + offs_m[:, None] * stride_xm + k[None, :], mask=mask, other=0.0)


def even_kn(args: dict) -> bool:
    """Whether every K block and N tile of a launch is whole, so the loads
    need no K or N masks (EVEN_KN; the x rows keep theirs): dropping them cut
    the loop body's SASS by ~11% and the time by ~5% (H100, docs/weight_only.md)."""
    return args["K"] % args["BLOCK_K"] == 0 and args["N"] % args["BLOCK_N"] == 0


# M and M_BUCKET unspecialized: one compile serves every M (Triton would
# otherwise compile M == 1 and M % 16 == 0 separately; M only feeds masks).
@triton.jit(do_not_specialize=["M", "M_BUCKET"])
def weight_only_kernel(
    x_ptr, w_ptr, s_ptr, ts_ptr, out_ptr, ws_ptr, count_ptr,
    M, N, K, stride_xm, stride_wk, stride_sk, stride_om,
    M_BUCKET,  # autotuning key only
    FMT: tl.constexpr, GROUP: tl.constexpr, HAS_SCALES: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
    DECODE_ASM: tl.constexpr = False, EVEN_KN: tl.constexpr = False,
    PDL: tl.constexpr = 0, PF_ROWS: tl.constexpr = 16,  # split_k_parts.pdl_prologue; PF_ROWS packed rows prefetched
):
    DT: tl.constexpr = x_ptr.dtype.element_ty
    HALF: tl.constexpr = BLOCK_K // 2
    USE_ASM: tl.constexpr = DECODE_ASM and DT == tl.bfloat16  # the PTX decodes are bf16 only
    pid_mn, offs_m, offs_n, first, last = split_k_parts.tile_and_range(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K)
    offs_h = tl.arange(0, HALF)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N
    # Prefetch: the first packed rows of this program's range, each row's
    # BLOCK_N bytes as 128-byte lines (clamped into the tensor).
    pf_row = tl.minimum(first * HALF + tl.arange(0, PF_ROWS), tl.cdiv(K, 2) - 1)
    pf_col = tl.minimum((pid_mn % tl.cdiv(N, BLOCK_N)) * BLOCK_N + tl.arange(0, max(BLOCK_N // 128, 1)) * 128, N - 1)
    split_k_parts.pdl_prologue(w_ptr + pf_row[:, None] * stride_wk + pf_col[None, :], PDL)
    SCALE_AFTER: tl.constexpr = FMT == 0 and HAS_SCALES and GROUP % BLOCK_K == 0

    k_end = tl.minimum(K, last * BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(first, last):
        k_even = kb * BLOCK_K + 2 * offs_h
        mask_k = k_even < K
        w = _load_w(w_ptr, kb, k_end, offs_h, offs_n, mask_n, stride_wk, BLOCK_K, EVEN_KN)
        # One contiguous (vectorizable) x tile, split into even and odd k in
        # registers: two stride-2 loads instead were 1.8-4x slower (H100).
        x = _load_x(x_ptr, kb, k_end, offs_m, offs_k, mask_m, stride_xm, BLOCK_K, EVEN_KN)
        xe, xo = tl.split(tl.reshape(x, (BLOCK_M, HALF, 2)))
        if FMT == 0:
            if USE_ASM:
                lo, hi = decode.int4_nibbles_bf16x2(w)
            else:
                lo, hi = decode.int4_nibbles(w, DT)
            if SCALE_AFTER:
                s_ptrs = s_ptr + (kb * BLOCK_K // GROUP) * stride_sk + offs_n
                s = tl.load(s_ptrs) if EVEN_KN else tl.load(s_ptrs, mask=mask_n, other=0.0)
                part = tl.dot(xe, lo) + tl.dot(xo, hi)
                acc += part * s.to(tl.float32)[None, :]
            else:
                if HAS_SCALES:
                    # The block's groups once, as NVFP4's scales below (faster
                    # on the H100); per element when neither divides.
                    if BLOCK_K % GROUP == 0:
                        s = decode.load_group_rows(s_ptr, kb, K, offs_n, mask_n, stride_sk, BLOCK_K, GROUP, EVEN_KN)
                        s = decode.per_packed_row(s.to(DT), GROUP, BLOCK_K, BLOCK_N)
                    else:
                        s = tl.load(s_ptr + (k_even // GROUP)[:, None] * stride_sk + offs_n[None, :],
                                    mask=mask_k[:, None] & mask_n[None, :], other=0.0).to(DT)
                    lo = lo * s
                    hi = hi * s
                acc += tl.dot(xe, lo)
                acc += tl.dot(xo, hi)
        else:
            # The block's scales once, decoded once (see the module docstring).
            bs = decode.load_group_rows(s_ptr, kb, K, offs_n, mask_n, stride_sk, BLOCK_K, 16, EVEN_KN)
            if USE_ASM:
                sb = decode.e4m3(bs) * decode._EXP2_118
                lo, hi = decode.nvfp4_bf16x2(w, decode.per_packed_row(sb.to(tl.bfloat16), 16, BLOCK_K, BLOCK_N))
            else:
                lo, hi = decode.nvfp4_values(w, decode.per_packed_row(decode.e4m3(bs), 16, BLOCK_K, BLOCK_N), DT)
            acc += tl.dot(xe, lo)
            acc += tl.dot(xo, hi)
    split_k_parts.pdl_release(PDL)
    if FMT == 1:
        if USE_ASM:
            acc = acc * (tl.load(ts_ptr) * 256.0)  # the PTX decode's 2^-8
        else:
            acc = acc * tl.load(ts_ptr)
    split_k_parts.finish(acc, out_ptr, stride_om, ws_ptr, count_ptr, out_ptr, pid_mn, offs_m, offs_n, M, N,
                         SPLIT_K, False, False)


@triton.jit
def dequant_kernel(w_ptr, s_ptr, ts_ptr, out_ptr, HALF_K, N, stride_wk, stride_sk,
                   FMT: tl.constexpr, GROUP: tl.constexpr, HAS_SCALES: tl.constexpr,
                   BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    """Packed [K//2, N] -> out [K, N] in out's dtype, the same decode as the GEMM."""
    DT: tl.constexpr = out_ptr.dtype.element_ty
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < HALF_K)[:, None] & (cols < N)[None, :]
    w = tl.load(w_ptr + rows[:, None] * stride_wk + cols[None, :], mask=mask, other=0)
    k_even = 2 * rows
    if FMT == 0:
        lo, hi = decode.int4_nibbles(w, DT)
        if HAS_SCALES:  # k and k + 1 share a group: GROUP is even
            s = tl.load(s_ptr + (k_even // GROUP)[:, None] * stride_sk + cols[None, :], mask=mask, other=0.0)
            lo = lo * s.to(DT)
            hi = hi * s.to(DT)
    else:
        bs = tl.load(s_ptr + (k_even // 16)[:, None] * stride_sk + cols[None, :], mask=mask, other=0)
        lo, hi = decode.nvfp4_values(w, decode.e4m3(bs) * tl.load(ts_ptr), DT)
    tl.store(out_ptr + k_even[:, None] * N + cols[None, :], lo, mask=mask)
    tl.store(out_ptr + (k_even + 1)[:, None] * N + cols[None, :], hi, mask=mask)


def _cfg(bm, bn, bk, split, warps=4, stages=4, asm=True):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split, "DECODE_ASM": asm},
                         num_warps=warps, num_stages=stages)


# Curated configs (BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K[, warps, stages, asm]),
# the fastest split-path candidates of tuning/weight_only.py's grids on the
# H100, with the packed-PTX decodes, plus two without them; deep K blocks and
# 8 warps never won (docs/weight_only.md).
SMALL_M_CONFIGS = [_cfg(16, bn, bk, sk, 4, st) for bn, bk, sk, st in [
    (256, 128, 8, 3), (256, 64, 8, 3), (128, 128, 4, 4), (128, 64, 8, 3), (128, 128, 4, 3), (128, 64, 16, 4),
    (128, 64, 4, 4), (64, 64, 8, 4), (64, 64, 4, 4)]] + \
    [_cfg(16, 128, 64, 4, asm=False), _cfg(16, 128, 128, 4, asm=False)]
MID_M_CONFIGS = [_cfg(bm, bn, bk, sk) for bm, bn, bk, sk in [
    (64, 128, 128, 4), (64, 64, 128, 2), (64, 128, 128, 8), (64, 64, 128, 4), (64, 64, 64, 4), (64, 64, 64, 8)]] + \
    [_cfg(64, 64, 128, 2, asm=False)]


def split_pool(m: int) -> list[triton.Config]:
    """The curated split-path configs of M's bucket: the candidates of
    `qgemm-bench tune` (tuning/weight_only.py, and of Helion's), and of the
    run-time autotune on a GPU without a checked-in table."""
    return SMALL_M_CONFIGS if m_bucket(m) <= 16 else MID_M_CONFIGS


def config_dict(c: triton.Config) -> dict:
    """A triton.Config as the dict WeightOnlyGemm(config=...) and the tables take."""
    return {**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages}


def _prune(configs, named_args, **kwargs):
    """Only the configs of the M bucket."""
    pool = split_pool(named_args["M_BUCKET"])
    return [c for c in configs if c in pool] or configs[:1]


_tuned = None


def tuned_kernel():
    """The autotuned kernel (built on first use: no work at import)."""
    global _tuned
    if _tuned is None:
        _tuned = triton.autotune(
            configs=SMALL_M_CONFIGS + MID_M_CONFIGS,
            key=["M_BUCKET", "N", "K", "FMT", "GROUP", "HAS_SCALES"],
            prune_configs_by={"early_config_prune": _prune},
            # The kernel leaves its workspace and counters zeroed: no reset.
            do_bench=autotune_bench, cache_results=True,
        )(triton.heuristics({"EVEN_KN": even_kn})(weight_only_kernel))
    return _tuned


DEQUANT_CONFIG = {"BLOCK_R": 16, "BLOCK_N": 256, "num_warps": 4}


class WeightOnlyGemm:
    """y = x @ dequant(w) for any x [M, K], with the weights fixed: FMT INT4
    (scales [K//group, N] or None) or NVFP4 (scales = E4M3 block scales viewed
    as uint8, tensor_scale fp32 0-dim). Owns the split path's workspace and
    counters per M (zeroed once, left zeroed by every call: allocate them
    before a CUDA graph capture by calling once at that M).
    config: explicit {BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, num_warps,
    num_stages[, DECODE_ASM]} for the split and fused kernels (tests, the
    interpreter); None: the checked-in table's config for the path and
    shape (weight_only_configs; on a GPU without one, the split path
    autotunes per M bucket, N, K, the fused path takes
    fused_gemm.FUSED_CONFIGS).
    path: auto (by M), split, fused or dequant.
    target: the GPU (qgemm_bench.target; the caller's, never looked up
    here); dispatch: which path and config run at each M (an object with
    path(m) and tuned(m, path): triton_dispatch.WeightOnlyDispatch, which
    triton_dispatch.make_weight_only makes from the config store)."""

    def __init__(self, w, scales, tensor_scale, fmt: int, group: int, config: dict | None = None,
                 path: str = "auto", *, target: Target, dispatch):
        if path not in ("auto", "split", "fused", "dequant"):
            raise ValueError(f"path {path!r}: expected auto, split, fused or dequant")
        if config is not None and (config["BLOCK_M"] < split_k_parts.MIN_BLOCK_M
                                   or config["BLOCK_N"] < split_k_parts.MIN_BLOCK_N):
            raise ValueError(f"config tiles must be at least {split_k_parts.MIN_BLOCK_M} x {split_k_parts.MIN_BLOCK_N}")
        self.w, self.scales, self.ts, self.fmt, self.group = w, scales, tensor_scale, fmt, group
        self.config, self.forced_path = config, path
        self.target = target
        self.dispatch = dispatch
        self._workspace: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self._fused = None

    def path(self, m: int) -> str:
        """The path at M: the dispatch's (triton_dispatch.WeightOnlyDispatch.path)."""
        return self.dispatch.path(m)

    def _fused_group(self) -> int | None:
        return fused_group(self.w, self.scales, self.group)

    def fused(self):
        """The fused path's kernel and its K-major weights (made on first use)."""
        if self._fused is None:
            from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm

            cfg = self.config if self.config is not None else (lambda m: self.tuned(m, "fused")[0])
            self._fused = FusedGemm(self.w, self.scales, self.ts, self.fmt, self.group, cfg, target=self.target)
        return self._fused

    def resident(self, m: int) -> tuple:
        """The weight tensors the path for M reads."""
        if self.path(m) == "fused":
            return self.fused().resident_at(m)
        return tuple(t for t in (self.w, self.scales, self.ts) if t is not None)

    def tuned(self, m: int, path: str | None = None) -> tuple[dict | None, str]:
        """(config, note) of the split or fused path (default: M's) at M:
        the dispatch's (triton_dispatch.WeightOnlyDispatch.tuned)."""
        return self.dispatch.tuned(m, path)

    def note(self, m: int, x: torch.Tensor | None = None) -> str:
        """For the row: the path that is not all-Triton says so, and so does a
        config that is not the shape's own; with x, the warp-specialized
        Gluon kernel where it runs for it, and the workspace it keeps."""
        if self.path(m) == "dequant":
            return "dequantize + cuBLAS path (a K x N scratch)"
        note = self.tuned(m)[1]
        if x is not None and self.path(m) == "fused" and self.fused().runs_ws(x, self.fused().config_for(m)):
            note = "; ".join(filter(None, (note, "warp-specialized Gluon kernel (ws_gemm.py)")))
            kept = self.fused().ws_workspace_bytes(x, self.fused().config_for(m))
            if kept:  # not in weight_mib or peak_extra_mib: allocated by the first call, kept with the weights
                note += f", {kept / 2**20:.1f} MiB split workspace kept between calls"
        return note

    def dequantize(self, dtype: torch.dtype) -> torch.Tensor:
        """The weights as a dense [K, N] tensor in `dtype` (one Triton launch)."""
        w, n = self.w, self.w.shape[1]
        out = torch.empty(2 * w.shape[0], n, device=w.device, dtype=dtype)
        s = self.scales if self.scales is not None else w  # never read when HAS_SCALES is False
        ts = self.ts if self.ts is not None else out
        c = DEQUANT_CONFIG
        grid = (triton.cdiv(w.shape[0], c["BLOCK_R"]), triton.cdiv(n, c["BLOCK_N"]))
        dequant_kernel[grid](w, s, ts, out, w.shape[0], n, w.stride(0), s.stride(0), FMT=self.fmt, GROUP=self.group,
                             HAS_SCALES=self.scales is not None, **c)
        return out

    def __call__(self, x: torch.Tensor, residual: torch.Tensor | None = None,
                 norm_weight: torch.Tensor | None = None, rms: tuple | None = None, swiglu: bool = False,
                 swiglu_out: bool = False):
        """y = x @ w; residual, norm_weight, rms: FusedGemm's output parts
        (an RMSNorm between two GEMMs), in the fused kernel's store where the
        fused path runs, by torch after the others (fused_gemm.rms_scaled,
        with_residual). swiglu: x is h = [gate | up] [M, 2K] and the GEMM's
        input silu(gate) * up: FusedGemm's prologue where the fused path
        runs, by torch first on the others (fused_gemm.silu_mul, the same
        rounding), so every M the dispatch sends elsewhere still computes it.
        The prologue runs at decode sizes only (M <= SWIGLU_MAX_M): the
        prefill tiles' stages of two x tiles each would not fit in shared
        memory (offline sm_90: int4 256x64x128 at 3 stages 336 KB).
        swiglu_out: w's columns are (gate, up) pairs and the result
        silu(gate) * up [M, N // 2], after any rms scale (no residual):
        FusedGemm's epilogue where the fused path runs, by torch after the
        GEMM on the others (fused_gemm.silu_mul_pairs, the same rounding)."""
        if swiglu_out:
            from qgemm_bench.backends.triton_kernels.fused_gemm import silu_mul_pairs

            if swiglu or residual is not None or norm_weight is not None or self.w.shape[1] % 2:
                raise ValueError("swiglu_out: an even N, without swiglu, residual or norm_weight")
            if self.path(x.shape[0]) == "fused":
                check_weight_only(x, self.w, self.scales, self.fmt, self.group)
                return self.fused()(x, rms=rms, swiglu_out=True)
            return silu_mul_pairs(self(x, rms=rms))
        if swiglu:
            from qgemm_bench.backends.triton_kernels.fused_gemm import check_swiglu, silu_mul

            check_swiglu(x, 2 * self.w.shape[0])
            if x.shape[0] > SWIGLU_MAX_M or self.path(x.shape[0]) != "fused":
                return self(silu_mul(x), residual, norm_weight, rms)
            check_weight_only(x[:, :x.shape[1] // 2], self.w, self.scales, self.fmt, self.group)
            return self.fused()(x, residual, norm_weight, rms, swiglu=True)
        check_weight_only(x, self.w, self.scales, self.fmt, self.group)
        if residual is None and rms is None and norm_weight is None:
            return self._gemm(x)
        from qgemm_bench.backends.triton_kernels.fused_gemm import check_parts, rms_scaled, with_residual

        if self.path(x.shape[0]) == "fused":  # FusedGemm checks the parts
            return self.fused()(x, residual, norm_weight, rms)
        check_parts(x, self.w.shape[1], residual, norm_weight, rms)
        y = self._gemm(x)
        y = y if rms is None else rms_scaled(y, *rms, x.shape[1])
        return y if residual is None else with_residual(y, residual, norm_weight)

    def _gemm(self, x: torch.Tensor) -> torch.Tensor:
        """y = x @ w by the path at x's M, x already checked (check_weight_only)."""
        w = self.w
        m, k = x.shape
        n = w.shape[1]
        path = self.path(m)
        if path == "dequant":
            return x @ self.dequantize(x.dtype)
        if path == "fused":
            return self.fused()(x)
        out = torch.empty(m, n, device=x.device, dtype=x.dtype)
        s = self.scales if self.scales is not None else w  # never read when HAS_SCALES is False
        ts = self.ts if self.ts is not None else out
        ws, count = split_k_parts.workspace(self._workspace, m, n, x.device)
        args = (x, w, s, ts, out, ws, count, m, n, k, x.stride(0), w.stride(0), s.stride(0), out.stride(0),
                m_bucket(m))
        meta = {"FMT": self.fmt, "GROUP": self.group, "HAS_SCALES": self.scales is not None}
        c = self.tuned(m, "split")[0]
        if c is None:
            tuned_kernel()[lambda c: split_k_parts.grid(m, n, c)](*args, **meta)
        else:
            c = {key: v for key, v in c.items() if key not in FUSED_ONLY}  # a fused config's
            launch = {**c, **split_k_parts.pdl_launch(c, x.device), "EVEN_KN": even_kn({"K": k, "N": n, **c})}
            weight_only_kernel[split_k_parts.grid(m, n, c)](*args, **meta, **launch)
        return out


def fused_group(w, scales, group: int) -> int:
    """The group FusedGemm runs for packed weights w [K//2, N]: K for
    unscaled int4 (scales of one per channel), else the group."""
    return 2 * w.shape[0] if scales is None else group
