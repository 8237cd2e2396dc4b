#!/usr/bin/env python3
"""GPU probe (session 61), after probe.py and probe_pdl.py: the slow slot follows a set of copies (one set
timed 6 times stays fast, fresh sets alternated slow / fast in probe.py) and needs PDL (without it every
set took ~9.0 us, steady). Hypothesis: fresh copies reuse the blocks the last set freed in reverse order, so
from one set to the next the order of the copies' addresses along the rotation flips. Run from the tree's
root on a GPU: python3 results/h200/split_k_slot_s61/probe_order.py [M,K,N [backend]]
Part 1: 8 trials as probe.py's (a random pad, a fresh prepare and copies): p50, whether the copies' a and
b addresses rise or fall along the rotation, and whether each a lies below its b.
Part 2: one set timed in its order, reversed, in the order of a's addresses, descending, and shuffled."""

import random
import statistics
import sys

import torch

sys.path.insert(0, ".")
from qgemm_bench.backends import registry  # noqa: E402
from qgemm_bench.harness import measure, timing  # noqa: E402
from qgemm_bench.operators import split_k_gemm as op  # noqa: E402
from qgemm_bench.types import Case, Shape  # noqa: E402


def p50(fns) -> float:
    return statistics.median(timing.time_graph(fns, 10.0, 40.0).samples_us)


def ptr(f, name: str) -> int:
    t = getattr(f, name, None)
    return t.data_ptr() if isinstance(t, torch.Tensor) else 0


def trend(ptrs) -> str:
    up = sum(b > a for a, b in zip(ptrs, ptrs[1:], strict=False))
    return f"{up:2}/{len(ptrs) - 1} rising"


def main() -> None:
    random.seed(61)
    dev = torch.device("cuda", 0)
    shape = tuple(int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "256,8192,256").split(","))
    name = sys.argv[2] if len(sys.argv) > 2 else "triton"
    case = Case(op.NAME, Shape(*shape), torch.bfloat16, dev, op.Settings())
    inputs = op.make_inputs(case, 61)
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    be = registry.get(op.NAME, name)
    print(f"{torch.cuda.get_device_name(dev)}, split_k_gemm {'x'.join(map(str, shape))} {name}, p50 us over the "
          "rotating copies (graph, 10 ms warm-up, 40 ms timed)")
    pads, keep = [], None
    for trial in range(8):
        pads.append(torch.empty(random.randint(1, 96) << 20, dtype=torch.uint8, device=dev))
        prep = be.prepare(case, inputs)
        n = measure.copies_needed(case, inputs, prep, prep.fn(), l2)
        fns = [prep.fn] + [be.prepare(case, inputs.clone()).fn for _ in range(n - 1)]
        a = [ptr(f, "a") for f in fns]
        b = [ptr(f, "b") for f in fns]
        t = p50(fns)
        print(f"trial {trial}: {t:5.2f} | clones' a {trend(a[1:])}, b {trend(b[1:])}; a below its b "
              f"{sum(x < y for x, y in zip(a[1:], b[1:], strict=True))}/{n - 1}; clone a - its b (MiB): "
              + " ".join(f"{(x - y) / 2**20:+.0f}" for x, y in zip(a[1:6], b[1:6], strict=True)), flush=True)
        keep = fns
        del prep
    fns = keep
    by_a = sorted(fns, key=lambda f: ptr(f, "a"))
    shuffled = fns[:]
    random.shuffle(shuffled)
    for label, order in (("as built", fns), ("reversed", fns[::-1]), ("a rising", by_a),
                         ("a falling", by_a[::-1]), ("shuffled", shuffled), ("as built again", fns)):
        print(f"last set {label:15}: {p50(order):5.2f}", flush=True)


if __name__ == "__main__":
    main()
