#!/usr/bin/env python3
"""Diagnose the Triton weight-only kernel on a GPU: for each M, the autotuner's
choice, every config's time, and the compiled kernel's registers, spills and
whether it uses Hopper's wgmma. Usage: scripts/triton_diag.py [K N M ...]"""

import sys

import torch


def main():
    from backends.triton_kernels import weight_only as wo
    from operators import int4_gemm
    from operators.common import Case, Shape

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
        for key, kern in list(wo.weight_only_kernel.device_caches[0][0].items())[-1:]:
            asm = kern.asm.get("ptx", "")
            print(f"    last compiled: regs={kern.n_regs} spills={kern.n_spills} wgmma={'wgmma' in asm} "
                  f"mma.sync={'mma.sync' in asm}")


if __name__ == "__main__":
    main()
