#!/usr/bin/env python3
"""GPU probe (session 61): is split-K 256x8192x256's slow measurement slot (~20% over the rest in some
preset runs, whatever the backend: docs/measuring.md "Between rounds") a matter of where a prepare's
memory lands? Run from the tree's root on a GPU: python3 results/h200/split_k_slot_s61/probe.py

Part 1: per backend, 8 trials, each after a pad allocation of random size (the allocator's state moves
as in a long sweep): a fresh prepare and the runner's rotating copies (measure.copies_needed), timed
together as the runner times them (graph, short windows), then each copy alone (its operands then in
L2); the workspace's and counters' addresses of each copy (MiB within its 1 GiB).
Part 2: one prepared triton GEMM with its counters, then its workspace, moved to offsets inside a
fresh zeroed buffer: does their placement alone move the time?"""

import random
import statistics
import sys

import torch

sys.path.insert(0, ".")
from qgemm_bench.backends import registry  # noqa: E402
from qgemm_bench.harness import measure, timing  # noqa: E402
from qgemm_bench.operators import split_k_gemm as op  # noqa: E402
from qgemm_bench.types import Case, Shape  # noqa: E402


def p50(fns, warmup_ms=10.0, rep_ms=40.0) -> float:
    return statistics.median(timing.time_graph(fns, warmup_ms, rep_ms).samples_us)


def where(t) -> str:
    return f"{(t.data_ptr() % (1 << 30)) / (1 << 20):7.2f}" if t is not None else "-"


def main() -> None:
    random.seed(61)
    dev = torch.device("cuda", 0)
    shape = tuple(int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "256,8192,256").split(","))
    case = Case(op.NAME, Shape(*shape), torch.bfloat16, dev, op.Settings())
    inputs = op.make_inputs(case, 61)
    ref = op.reference(inputs).float()
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    pads = []
    print(f"{torch.cuda.get_device_name(dev)}, split_k_gemm {'x'.join(map(str, shape))}, p50 us "
          f"(graph, 10 ms warm-up, 40 ms timed)")
    for name in ("triton", "triton_deterministic", "helion"):
        be = registry.get(op.NAME, name)
        for trial in range(8):
            pads.append(torch.empty(random.randint(1, 96) << 20, dtype=torch.uint8, device=dev))
            prep = be.prepare(case, inputs)
            out = prep.fn()
            err = ((out.float() - ref).norm() / ref.norm()).item()
            n = measure.copies_needed(case, inputs, prep, out, l2)
            fns = [prep.fn] + [be.prepare(case, inputs.clone()).fn for _ in range(n - 1)]
            together = p50(fns)
            alone = [p50([f]) for f in fns]
            ws = " ".join(f"{where(getattr(f, 'ws', None))}/{where(getattr(f, 'count', None))}" for f in fns)
            print(f"{name:21} trial {trial}: {n} copies {together:6.2f} | each alone "
                  + " ".join(f"{a:6.2f}" for a in alone) + f" | ws/count MiB {ws} | rel err {err:.1e}", flush=True)
            del fns, prep
        torch.cuda.synchronize()
    # Part 2: triton, one prepare, counters then workspace moved.
    g = registry.get(op.NAME, "triton").prepare(case, inputs).fn
    if not hasattr(g, "count"):
        return
    print(f"part 2: triton alone, its own counters/workspace {p50([g]):.2f}; config {g.note()}")
    cnt, ws = g.count, g.ws
    buf = torch.zeros(4 << 20, dtype=torch.int32, device=dev)
    for off in (0, 8, 16, 32, 64, 256, 1024, 8192, 1 << 16, 1 << 19, 1 << 21, (1 << 22) - 4096):
        g.count = buf[off:off + cnt.numel()]
        print(f"  counters at +{off * 4:>9} B: {p50([g]):6.2f}", flush=True)
    g.count = cnt
    wbuf = torch.zeros(ws.numel() + (8 << 20), dtype=torch.float32, device=dev)
    for off in (0, 32, 1024, 8192, 1 << 16, 1 << 19, 1 << 21, 1 << 22, 1 << 23):
        g.ws = wbuf[off:off + ws.numel()]
        o = g()
        e = ((o.float() - ref).norm() / ref.norm()).item()
        print(f"  workspace at +{off * 4:>9} B: {p50([g]):6.2f} (rel err {e:.1e})", flush=True)


if __name__ == "__main__":
    main()
