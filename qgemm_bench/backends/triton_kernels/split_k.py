"""Triton split-K GEMM for skinny shapes: y = a @ b (+ bias), one launch.

Each program computes one output tile over one contiguous slice of K. The
partials meet in fp32 in one of two ways (MODE):
- ATOMIC: fp32 atomics into a workspace tile;
- DETERMINISTIC: each split stores its own partial; the sum is taken in split
  order, so the result does not depend on which program finishes first.
A per-tile counter tells the last program of a tile to finish it: add the
bias (exactly once), cast, store, and zero the workspace and counter for the
next call. No memset or cast kernels: at 64x32768x64 the kernel floor is a
few microseconds and every extra launch costs ~1-2 us even in a CUDA graph.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from qgemm_bench.backends.triton_kernels import autotune_bench

ATOMIC, DETERMINISTIC = 0, 1


@triton.jit
def split_k_kernel(
    a_ptr, b_ptr, bias_ptr, out_ptr, ws_ptr, count_ptr,
    M, N, K, stride_am, stride_bk, stride_om,
    M_BUCKET, N_BUCKET,  # autotuning keys only
    HAS_BIAS: tl.constexpr, MODE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
):
    pid_mn = tl.program_id(0)
    pid_k = tl.program_id(1)
    n_tiles = tl.cdiv(N, BLOCK_N)
    pid_m = pid_mn // n_tiles
    pid_n = pid_mn % n_tiles
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N
    blocks = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(blocks, SPLIT_K)
    first = pid_k * per_split
    last = tl.minimum(first + per_split, blocks)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(first, last):
        k = kb * BLOCK_K + offs_k
        mask_k = k < K
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + k[None, :], mask=mask_m[:, None] & mask_k[None, :],
                    other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + offs_n[None, :], mask=mask_k[:, None] & mask_n[None, :],
                    other=0.0)
        acc += tl.dot(a, b)

    tile = offs_m[:, None] * N + offs_n[None, :]  # workspace index within one [M, N] plane
    mask = mask_m[:, None] & mask_n[None, :]
    if MODE == 0:
        tl.atomic_add(ws_ptr + tile, acc, mask=mask, sem="relaxed")
    else:
        tl.store(ws_ptr + pid_k * M * N + tile, acc, mask=mask)
    # Every thread's partial is issued before the counter (release); the last
    # program's reads come after it (acquire) and skip L1 (.cg).
    tl.debug_barrier()
    done = tl.atomic_add(count_ptr + pid_mn, 1, sem="acq_rel")
    if done == SPLIT_K - 1:
        if MODE == 0:
            # Read the sum with an atomic (performed at L2, where the other
            # programs' atomics land). A .cg load here read incomplete sums:
            # up to 20 of 20 runs wrong per config at 256x8192x256 and
            # 256x32768x256 on the H100 (scripts/split_k_race_check.py);
            # the atomic read: 0 of 1240.
            zero = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            total = tl.atomic_add(ws_ptr + tile, zero, mask=mask, sem="acquire")
            tl.store(ws_ptr + tile, zero, mask=mask)
        else:
            total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for s in range(0, SPLIT_K):
                total += tl.load(ws_ptr + s * M * N + tile, mask=mask, other=0.0, cache_modifier=".cg")
        if HAS_BIAS:
            total += tl.load(bias_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)[None, :]
        tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :],
                 total.to(out_ptr.dtype.element_ty), mask=mask)
        tl.atomic_xchg(count_ptr + pid_mn, 0)


def _cfg(bm, bn, bk, split, warps=4, stages=3):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split},
                         num_warps=warps, num_stages=stages)


# Tiles no larger than the (power-of-two rounded) M and N; splits so that
# tiles x splits covers the 132 SMs with K slices of 256..4096. 24 configs,
# not the full 48-config grid, whose autotuning made the skinny preset outlast
# a 10-minute run on the H100. An 18-config set without the 64-way split
# measured 10.1 us at 64x32768x64, against 7.5 us with the full grid.
CONFIGS = [_cfg(bm, bn, bk, sk) for bm in (16, 32, 64) for bn in (32, 64)
           for bk, sk in ((64, 16), (64, 32), (64, 64), (128, 16))]
MAX_SPLIT = 64


def _bucket(v: int) -> int:
    return min(triton.next_power_of_2(v), 256)


def _prune(configs, named_args, **kwargs):
    m, n, k = named_args["M"], named_args["N"], named_args["K"]
    keep = [c for c in configs
            if c.kwargs["BLOCK_M"] <= max(16, _bucket(m)) and c.kwargs["BLOCK_N"] <= max(32, _bucket(n))
            and k // c.kwargs["SPLIT_K"] >= 2 * c.kwargs["BLOCK_K"]
            and triton.cdiv(m, c.kwargs["BLOCK_M"]) * triton.cdiv(n, c.kwargs["BLOCK_N"]) * c.kwargs["SPLIT_K"] <= 1024]
    return keep or configs[:1]


_tuned = None


def tuned_kernel():
    """The autotuned kernel (built on first use: no work at import)."""
    global _tuned
    if _tuned is None:
        # The kernel leaves its workspace and counters zeroed, so the
        # autotuner's repeated runs need no reset.
        _tuned = triton.autotune(configs=CONFIGS, key=["M_BUCKET", "N_BUCKET", "K", "HAS_BIAS", "MODE"],
                                 prune_configs_by={"early_config_prune": _prune}, do_bench=autotune_bench,
                                 cache_results=True)(split_k_kernel)
    return _tuned


def check_inputs(a, b, bias) -> None:
    """Refuse what a split-K kernel cannot take, in one line (ValueError)."""
    if a.dtype not in (torch.float16, torch.bfloat16) or b.dtype != a.dtype:
        raise ValueError(f"a and b must share float16 or bfloat16, not {a.dtype} and {b.dtype}")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"a {tuple(a.shape)} and b {tuple(b.shape)} do not match: need [M, K] @ [K, N]")
    if a.stride(1) != 1 or b.stride(1) != 1:
        raise ValueError("a and b must be contiguous in their last dimension")
    if bias is not None and bias.shape != (b.shape[1],):
        raise ValueError(f"bias {tuple(bias.shape)} must be [N] = [{b.shape[1]}]")


class SplitKGemm:
    """A prepared split-K GEMM: owns its workspace and counters (zeroed once,
    left zeroed by every call), so calls are single launches."""

    def __init__(self, a, b, bias, mode: int, config: dict | None = None):
        check_inputs(a, b, bias)
        self.a, self.b, self.bias, self.mode, self.config = a, b, bias, mode, config
        m, n = a.shape[0], b.shape[1]
        planes = 1 if mode == ATOMIC else (config["SPLIT_K"] if config else MAX_SPLIT)
        self.ws = torch.zeros(planes * m * n, device=a.device, dtype=torch.float32)
        self.count = torch.zeros(triton.cdiv(m, 16) * triton.cdiv(n, 32), device=a.device, dtype=torch.int32)

    def __call__(self) -> torch.Tensor:
        a, b = self.a, self.b
        m, k = a.shape
        n = b.shape[1]
        out = torch.empty(m, n, device=a.device, dtype=a.dtype)
        bias = self.bias if self.bias is not None else out
        args = (a, b, bias, out, self.ws, self.count, m, n, k, a.stride(0), b.stride(0), out.stride(0),
                _bucket(m), _bucket(n))
        meta = {"HAS_BIAS": self.bias is not None, "MODE": self.mode}
        if self.config is None:
            def grid(c):
                return (triton.cdiv(m, c["BLOCK_M"]) * triton.cdiv(n, c["BLOCK_N"]), c["SPLIT_K"])
            tuned_kernel()[grid](*args, **meta)
        else:
            c = self.config
            grid = (triton.cdiv(m, c["BLOCK_M"]) * triton.cdiv(n, c["BLOCK_N"]), c["SPLIT_K"])
            split_k_kernel[grid](*args, **meta, **c)
        return out
