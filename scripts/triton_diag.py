#!/usr/bin/env python3
"""Diagnose the Triton weight-only kernel on a GPU: for each M, the autotuner's
choice, every config's time, and the compiled kernel's registers, spills and
whether it uses Hopper's wgmma. Usage: scripts/triton_diag.py [K N M ...]"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root


def main():
    from qgemm_bench.backends.triton_kernels import weight_only as wo
    from qgemm_bench.operators import int4_gemm
    from qgemm_bench.operators.common import Case, Shape

    args = [int(a) for a in sys.argv[1:]] or [8192, 8192, 1, 16, 64, 4096]
    k, n, ms = args[0], args[1], args[2:]
    for m in ms:
        c = Case("int4_gemm", Shape(m, k, n), torch.bfloat16, torch.device("cuda"), {"group_size": 128})
        inp = int4_gemm.make_inputs(c, 0)
        wo.weight_only_gemm(inp["x"], inp["w"], inp["scales"], None, wo.INT4, 128)
        tuner = wo.tuned_kernel()
        best = tuner.best_config
        print(f"M={m}: best {best.kwargs} warps={best.num_warps} stages={best.num_stages}")
        for cfg, t in sorted(getattr(tuner, "configs_timings", {}).items(), key=lambda kv: kv[1][0]):
            print(f"    {t[0] * 1e3:9.1f} us  {cfg.kwargs} w{cfg.num_warps} s{cfg.num_stages}")
        try:  # the JIT cache layout is internal to triton; best effort
            kernels = list(wo.weight_only_kernel.device_caches[0][0].values())
        except Exception as e:
            print(f"    (no compiled-kernel info: {e})")
            continue
        for kern in kernels:
            asm = kern.asm.get("ptx", "")
            print(f"    compiled {kern.name}: regs={kern.n_regs} spills={kern.n_spills} "
                  f"wgmma={'wgmma' in asm} mma.sync={'mma.sync' in asm}")
        wo.weight_only_kernel.device_caches[0][0].clear()


if __name__ == "__main__":
    main()
