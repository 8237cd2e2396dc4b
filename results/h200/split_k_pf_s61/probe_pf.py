#!/usr/bin/env python3
"""GPU probe (session 61): does the split-K kernel's PDL prologue gain from prefetching more of b than its
first 16 rows (split_k_kernel's PF_ROWS) while it waits for the kernel before? At 16x65536x16 the
deterministic form took 5.11-5.17 us over the runner's rotating copies against 3.95-3.98 for each copy alone
(the atomic 4.51-4.68 / 3.65-4.28: ../split_k_slot_s61/), so most of its time over the copies is the
operands' reads from HBM. Run from the tree's root on a GPU:
    python3 results/h200/split_k_pf_s61/probe_pf.py [--rounds 3]
Per shape and mode (the store's config for it, which must have PDL 2 or 3), PF_ROWS 16 (the kernel's
default), 64, 256 and the program's whole K range (to a power of two), each checked against fp32 first,
then timed as the runner does (graph over rotating copies, 25 ms / 100 ms windows) in rounds, the
variants' order reversed every other round; prints each variant's median of its rounds' p50s (us)."""

import argparse
import math
import statistics
import sys

import torch

sys.path.insert(0, ".")
from qgemm_bench import target as targets  # noqa: E402
from qgemm_bench.backends.triton_dispatch import make_split_k  # noqa: E402
from qgemm_bench.backends.triton_kernels.split_k import ATOMIC, DETERMINISTIC, SplitKGemm  # noqa: E402
from qgemm_bench.backends.triton_kernels.split_k_configs import describe  # noqa: E402
from qgemm_bench.harness import measure, timing  # noqa: E402

SHAPES = [(16, 65536, 16), (32, 65536, 32), (16, 32768, 16), (32, 32768, 32), (64, 8192, 64), (256, 8192, 256),
          (128, 65536, 128), (16, 14336, 16)]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    dev = torch.device("cuda", 0)
    tgt = targets.of(dev)
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    print(f"{torch.cuda.get_device_name(dev)}, split_k_gemm bf16, p50 us over rotating copies "
          f"(graph, 25 ms / 100 ms), median of {args.rounds} rounds")
    for m, k, n in SHAPES:
        g = torch.Generator(device=dev).manual_seed(61)
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16, generator=g)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16, generator=g)
        ref = a.float() @ b.float()
        per_copy = a.nbytes + b.nbytes
        copies = measure.copies_for(per_copy + m * n * 2, per_copy, l2, dev)
        ops = [(a, b)] + [(a.clone(), b.clone()) for _ in range(copies - 1)]
        for mode, label in ((ATOMIC, "atomic"), (DETERMINISTIC, "deterministic")):
            base = make_split_k(a, b, None, mode, target=tgt).config
            if base.get("PDL", 0) < 2:
                print(f"{m}x{k}x{n} {label}: {describe(base)}: no PDL prefetch, skipped")
                continue
            k_range = math.ceil(math.ceil(k / base["BLOCK_K"]) / base["SPLIT_K"]) * base["BLOCK_K"]
            rows = sorted({16, 64, 256, 1 << (k_range - 1).bit_length()})
            variants = {}
            for r in rows:
                c = {**base, "PF_ROWS": r}
                gemms = [SplitKGemm(x, w, None, mode, c, target=tgt) for x, w in ops]
                out = gemms[0]()
                err = ((out.float() - ref).norm() / ref.norm()).item()
                if not err < 1e-2:
                    print(f"{m}x{k}x{n} {label} PF_ROWS {r}: WRONG (rel err {err:.1e})")
                    continue
                variants[r] = gemms
            times = {r: [] for r in variants}
            for rnd in range(args.rounds):
                for r in (list(variants) if rnd % 2 == 0 else list(variants)[::-1]):
                    fns = [gm.__call__ for gm in variants[r]]
                    times[r].append(statistics.median(timing.time_graph(fns, 25.0, 100.0).samples_us))
            print(f"{m}x{k}x{n} {label:13} {describe(base)} ({copies} copies, K range {k_range}): "
                  + "  ".join(f"PF_ROWS {r} {statistics.median(t):5.2f} [{min(t):.2f}-{max(t):.2f}]"
                              for r, t in times.items()), flush=True)
            del variants


if __name__ == "__main__":
    main()
