"""Triton split-K GEMM for skinny shapes: y = a @ b (+ bias), one launch.

Each program computes one output tile over one contiguous slice of K; the
partials meet in fp32 by atomics (ATOMIC) or per-split planes summed in a
fixed order (DETERMINISTIC), and the tile's last program finishes it
(split_k_parts.py). Deterministic configs may sum the planes in a second
small launch instead (REDUCE "kernel": reduce_planes; split_k_configs.py).

Configs: an explicit one, else the dispatch's (triton_dispatch.choose_split_k:
the store's table, split_k_configs.py: exact shape, nearest bucket, or a
heuristic; per mode), so a default run never autotunes. QGEMM_SPLIT_K_AUTOTUNE=1 in the environment (or AUTOTUNE =
True before a SplitKGemm is built) autotunes over CONFIGS instead, for GPUs
the table was not tuned on; `qgemm-bench tune` re-tunes the table.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from qgemm_bench.backends.checks import check_split_k
from qgemm_bench.backends.triton_kernels import split_k_configs, split_k_parts
from qgemm_bench.backends.triton_kernels.autotune import autotune_bench
from qgemm_bench.target import Target

ATOMIC, DETERMINISTIC = 0, 1
MODE_NAMES = split_k_configs.MODES  # indexed by ATOMIC / DETERMINISTIC
# Opt-in autotuning (seconds per shape) instead of the checked-in table.
AUTOTUNE = os.environ.get("QGEMM_SPLIT_K_AUTOTUNE", "") not in ("", "0")


@triton.jit
def split_k_kernel(
    a_ptr, b_ptr, bias_ptr, out_ptr, ws_ptr, count_ptr,
    M, N, K, stride_am, stride_bk, stride_om,
    M_BUCKET, N_BUCKET,  # autotuning keys only
    HAS_BIAS: tl.constexpr, MODE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
    REDUCE: tl.constexpr = 0,  # split_k_parts.finish's; kernel_meta sets it
    PDL: tl.constexpr = 0, PF_ROWS: tl.constexpr = 16,  # split_k_parts.pdl_prologue; PF_ROWS of b prefetched
):
    pid_mn, offs_m, offs_n, first, last = split_k_parts.tile_and_range(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K)
    pf_k = tl.minimum(first * BLOCK_K + tl.arange(0, PF_ROWS), K - 1)
    n0 = tl.minimum((pid_mn % tl.cdiv(N, BLOCK_N)) * BLOCK_N, N - 1)
    split_k_parts.pdl_prologue(b_ptr + pf_k * stride_bk + n0, PDL)
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
    split_k_parts.pdl_release(PDL)

    split_k_parts.finish(acc, out_ptr, stride_om, ws_ptr, count_ptr, bias_ptr, pid_mn, offs_m, offs_n, M, N,
                         SPLIT_K, MODE == 1, HAS_BIAS, REDUCE)


def _cfg(bm, bn, bk, split, warps=4, stages=3):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split},
                         num_warps=warps, num_stages=stages)


# The opt-in autotuning's grid (AUTOTUNE). Tiles no larger than the
# (power-of-two rounded) M and N; splits so that tiles x splits covers the
# 132 SMs with K slices of 256..4096. 24 configs,
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


def launch_args(a, b, bias, out, ws, count) -> tuple:
    """The kernel's positional arguments (tuning/split_k.py compiles
    ahead with exactly these)."""
    m, k = a.shape
    n = b.shape[1]
    return (a, b, bias if bias is not None else out, out, ws, count, m, n, k, a.stride(0), b.stride(0),
            out.stride(0), _bucket(m), _bucket(n))


grid_for = split_k_parts.grid


def kernel_meta(c: dict) -> dict:
    """Config c as split_k_kernel's keyword arguments: REDUCE by its code
    (split_k_parts.finish's)."""
    return {**c, "REDUCE": split_k_configs.REDUCES.index(c.get("REDUCE", "last"))}


def autotunes(a, config: dict | None, autotune: bool | None) -> bool:
    """Whether a SplitKGemm autotunes: asked for (or AUTOTUNE), no config
    given, on a GPU (the interpreter cannot time configs)."""
    return bool((AUTOTUNE if autotune is None else autotune) and config is None and a.device.type == "cuda")


class SplitKGemm:
    """A prepared split-K GEMM: owns its workspace and counters (zeroed once,
    left zeroed by every call), so calls are single launches; two with REDUCE
    "kernel" (the split kernel, then reduce_planes: no host sync, no memory
    but the output allocated per call, so a CUDA graph captures both).

    config: the config to run (triton_dispatch.make_split_k picks the
    store's for the Target and names it in `source`), or None with
    autotune (or QGEMM_SPLIT_K_AUTOTUNE, AUTOTUNE) for Triton's autotuner
    over CONFIGS. target: the GPU (qgemm_bench.target: its SMs size the
    second launch; the caller's, never looked up here)."""

    def __init__(self, a, b, bias, mode: int, config: dict | None = None, autotune: bool | None = None, *,
                 target: Target, source: str = "explicit config"):
        check_split_k(a, b, bias)
        if mode not in (ATOMIC, DETERMINISTIC):
            raise ValueError(f"mode must be ATOMIC ({ATOMIC}) or DETERMINISTIC ({DETERMINISTIC}), not {mode!r}")
        m, k = a.shape
        n = b.shape[1]
        self.target = target
        self.autotune = autotunes(a, config, autotune)
        if config is not None:
            config = dict(config)
            split_k_configs.check_config({"num_warps": 4, "num_stages": 3, **config}, MODE_NAMES[mode])
            self.source = source
        elif self.autotune:
            self.source = "autotuned (QGEMM_SPLIT_K_AUTOTUNE)"
        else:
            raise ValueError("no split-K config: pass one (triton_dispatch.make_split_k takes the store's), "
                             "or autotune=True on a GPU")
        self.a, self.b, self.bias, self.mode, self.config = a, b, bias, mode, config
        # REDUCE "kernel" is the plane-sum kernel whichever mode asked for it
        # (split_k_configs: an atomic entry may take the deterministic winner).
        if config is not None and config.get("REDUCE") == "kernel":
            mode = self.mode = DETERMINISTIC
        if config is None:  # autotuned: room for any config of CONFIGS
            planes, counters = MAX_SPLIT, split_k_parts.counters(m, n)
        else:
            planes, counters = config["SPLIT_K"], split_k_configs.tiles(m, n, config)
        planes = 1 if mode == ATOMIC else planes
        split_k_parts.check_workspace(planes, m, n)
        self.ws = torch.zeros(planes * m * n, device=a.device, dtype=torch.float32)
        self.count = torch.zeros(counters, device=a.device, dtype=torch.int32)
        self.meta = None if config is None else kernel_meta(config)
        self.reduce = None  # REDUCE "kernel": (grid, meta) of reduce_planes
        if config is not None and config.get("REDUCE") == "kernel" and config["SPLIT_K"] > 1:
            self.reduce = split_k_parts.plane_launch(m, n, config["SPLIT_K"], target.sms)

    def note(self) -> str:
        """Where the config came from, for a result row."""
        c = self.config
        if c is None:
            return self.source
        return f"{self.source}: {split_k_configs.describe(c)}"

    def __call__(self) -> torch.Tensor:
        a, b = self.a, self.b
        m, n = a.shape[0], b.shape[1]
        out = torch.empty(m, n, device=a.device, dtype=a.dtype)
        args = launch_args(a, b, self.bias, out, self.ws, self.count)
        meta = {"HAS_BIAS": self.bias is not None, "MODE": self.mode}
        if self.config is None:
            tuned_kernel()[lambda c: grid_for(m, n, c)](*args, **meta)
        else:
            meta.update(self.meta, **split_k_parts.pdl_launch(self.config, a.device))
            split_k_kernel[grid_for(m, n, self.config)](*args, **meta)
        if self.reduce is not None:
            grid, meta = self.reduce
            split_k_parts.reduce_planes[grid](self.ws, args[2], out, m, n, self.config["SPLIT_K"],
                                              self.bias is not None, **meta,
                                              **split_k_parts.pdl_launch(self.config, a.device, chain=0))
        return out
