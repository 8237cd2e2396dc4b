#!/usr/bin/env python3
"""GPU probe (session 61), after probe.py: at split-K 256x8192x256 the runner's timing over its
rotating copies alternated between ~9.9 and ~8.2 us from one trial to the next, for every one of our
backends (each copy alone: 7.6-8.1). Does the alternation follow the timing call or the copies, and does
it go with PDL (the three backends' configs at this shape launch with it; cuBLAS, steady in every preset
run, does not)? Run from the tree's root on a GPU: python3 results/h200/split_k_slot_s61/probe_pdl.py [M,K,N [backends]]
Per backend: one set of copies timed 6 times in a row; then the same with QGEMM_PDL=0 (pdl_launch reads
it at each call), then 4 fresh sets of copies with it."""

import os
import statistics
import sys

import torch

sys.path.insert(0, ".")
from qgemm_bench.backends import registry  # noqa: E402
from qgemm_bench.harness import measure, timing  # noqa: E402
from qgemm_bench.operators import split_k_gemm as op  # noqa: E402
from qgemm_bench.types import Case, Shape  # noqa: E402


def p50(fns) -> float:
    t = timing.time_graph(fns, 10.0, 40.0)
    return statistics.median(t.samples_us)


def copies(be, case, inputs, l2):
    prep = be.prepare(case, inputs)
    n = measure.copies_needed(case, inputs, prep, prep.fn(), l2)
    return [prep.fn] + [be.prepare(case, inputs.clone()).fn for _ in range(n - 1)]


def main() -> None:
    dev = torch.device("cuda", 0)
    shape = tuple(int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "256,8192,256").split(","))
    case = Case(op.NAME, Shape(*shape), torch.bfloat16, dev, op.Settings())
    inputs = op.make_inputs(case, 61)
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    print(f"{torch.cuda.get_device_name(dev)}, split_k_gemm {'x'.join(map(str, shape))}, p50 us over the "
          "rotating copies (graph, 10 ms warm-up, 40 ms timed)")
    for name in (sys.argv[2] if len(sys.argv) > 2 else "torch,triton,helion").split(","):
        be = registry.get(op.NAME, name)
        os.environ.pop("QGEMM_PDL", None)
        fns = copies(be, case, inputs, l2)
        same = [p50(fns) for _ in range(6)]
        os.environ["QGEMM_PDL"] = "0"
        off = [p50(fns) for _ in range(6)]
        fresh = [p50(copies(be, case, inputs, l2)) for _ in range(4)]
        os.environ.pop("QGEMM_PDL", None)
        print(f"{name:8} {len(fns)} copies | one set, 6 timings: " + " ".join(f"{v:5.2f}" for v in same)
              + " | QGEMM_PDL=0, same set: " + " ".join(f"{v:5.2f}" for v in off)
              + " | QGEMM_PDL=0, fresh sets: " + " ".join(f"{v:5.2f}" for v in fresh), flush=True)
        del fns


if __name__ == "__main__":
    main()
