"""Triton split-K GEMM for skinny shapes: y = a @ b (+ bias), one launch.

Each program computes one output tile over one contiguous slice of K; the
partials meet in fp32 by atomics (ATOMIC) or per-split planes summed in
split order (DETERMINISTIC), and the tile's last program finishes it
(split_k_parts.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from qgemm_bench.backends.checks import check_split_k
from qgemm_bench.backends.triton_kernels import split_k_parts
from qgemm_bench.backends.triton_kernels.autotune import autotune_bench

ATOMIC, DETERMINISTIC = 0, 1


@triton.jit
def split_k_kernel(
    a_ptr, b_ptr, bias_ptr, out_ptr, ws_ptr, count_ptr,
    M, N, K, stride_am, stride_bk, stride_om,
    M_BUCKET, N_BUCKET,  # autotuning keys only
    HAS_BIAS: tl.constexpr, MODE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
):
    pid_mn, offs_m, offs_n, first, last = split_k_parts.tile_and_range(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(first, last):
        k = kb * BLOCK_K + offs_k
        mask_k = k < K
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + k[None, :], mask=mask_m[:, None] & mask_k[None, :],
                    other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + offs_n[None, :], mask=mask_k[:, None] & mask_n[None, :],
                    other=0.0)
        acc += tl.dot(a, b)

    split_k_parts.finish(acc, out_ptr, stride_om, ws_ptr, count_ptr, bias_ptr, pid_mn, offs_m, offs_n, M, N,
                         SPLIT_K, MODE == 1, HAS_BIAS)


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


class SplitKGemm:
    """A prepared split-K GEMM: owns its workspace and counters (zeroed once,
    left zeroed by every call), so calls are single launches."""

    def __init__(self, a, b, bias, mode: int, config: dict | None = None):
        check_split_k(a, b, bias)
        self.a, self.b, self.bias, self.mode, self.config = a, b, bias, mode, config
        m, n = a.shape[0], b.shape[1]
        planes = 1 if mode == ATOMIC else (config["SPLIT_K"] if config else MAX_SPLIT)
        self.ws = torch.zeros(planes * m * n, device=a.device, dtype=torch.float32)
        self.count = torch.zeros(split_k_parts.counters(m, n), device=a.device, dtype=torch.int32)

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
