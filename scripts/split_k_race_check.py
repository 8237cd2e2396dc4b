#!/usr/bin/env python3
"""GPU check of the split-K kernel's finish step (the last program of a tile
reads the atomically summed workspace, or, deterministic, every split's
partial): every config on shapes where tiles x splits is large, 20 runs each,
counting wrong results (and, deterministic, results that differ from the
first run's bits).
  python3 scripts/split_k_race_check.py [atomic|deterministic ...]"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import triton  # noqa: E402

from qgemm_bench.backends.triton_kernels.split_k import CONFIGS, _prune, split_k_kernel  # noqa: E402
from qgemm_bench.operators.common import rel_error  # noqa: E402

dev = torch.device("cuda")


def check(mode_name, mode, m, k, n):
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
    ref = a.float() @ b.float()
    for c in _prune(CONFIGS, {"M": m, "N": n, "K": k}):
        kw = c.kwargs
        ws = torch.zeros((kw["SPLIT_K"] if mode else 1) * m * n, device=dev, dtype=torch.float32)
        cnt = torch.zeros(triton.cdiv(m, 16) * triton.cdiv(n, 32), device=dev, dtype=torch.int32)
        bad = differ = 0
        first = None
        for _ in range(20):
            out = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
            grid = (triton.cdiv(m, kw["BLOCK_M"]) * triton.cdiv(n, kw["BLOCK_N"]), kw["SPLIT_K"])
            split_k_kernel[grid](a, b, out, out, ws, cnt, m, n, k, a.stride(0), b.stride(0), out.stride(0), 0, 0,
                                 HAS_BIAS=False, MODE=mode, **kw,
                                 num_warps=c.num_warps, num_stages=c.num_stages)
            bad += rel_error(out, ref) > 1e-2
            first = out if first is None else first
            differ += not torch.equal(out, first)
        print(f"{mode_name} {m}x{k}x{n} {kw}: {bad}/20 wrong, {differ}/20 differ from run 1", flush=True)


modes = {"atomic": 0, "deterministic": 1}
for name in sys.argv[1:] or list(modes):
    for shape in [(128, 65536, 128), (256, 8192, 256), (256, 32768, 256), (64, 32768, 64)]:
        check(name, modes[name], *shape)
