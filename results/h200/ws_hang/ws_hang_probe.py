#!/usr/bin/env python3
"""Where a hung ws_gemm launch stands: launch the WS kernel (SPLITS > 1) at a
shape, each launch with its own stamps buffer (STAMPS 1) or none, synced one
by one (--sync) or back to back; once a launch has not finished in --wait s,
copy its counters and stamps to the host on a second stream (copy engines run
beside a spinning kernel) and print, per split, how many programs reached
each stamp, and the counters of the tiles whose last split never finished.
Exits 3 on a hang (the process must die to free the GPU), 0 otherwise.
--module: a copy of ws_gemm.py to run instead (the variants beside this
file are diffs against ws_gemm.py before 8c8229e). Session 63 ran it as
.gpu/ws_hang_probe.py, which synced the first (compiling) call without a
limit, so at 257 x 5248 x 1000 the hung runs printed no counters; the first
call now goes through the same wait.

  python3 results/h200/ws_hang/ws_hang_probe.py --shape 257,5248,1000 --tiles 16,64,128,8,1,4 \
      [--pdl 2] [--stamps] [--sync] [--calls 40] [--module PATH]
"""
import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the checkout's qgemm_bench

import torch  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", required=True)
    p.add_argument("--tiles", required=True, help="ws_tiles' bm,bn,bk,stages,k_split,splits[,skew]")
    p.add_argument("--pdl", type=int, default=0)
    p.add_argument("--stamps", action="store_true")
    p.add_argument("--sync", action="store_true")
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--wait", type=float, default=8.0)
    p.add_argument("--module", default=None, help="a copy of ws_gemm.py to run instead")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("error: ws_hang_probe.py needs a CUDA device (an sm_90 GPU)", file=sys.stderr)
        return 2
    from qgemm_bench import operators
    from qgemm_bench.backends.triton_kernels import ws_gemm
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm, ws_tiles
    if a.module:
        from scripts.ws_ab import load_variant

        ws_gemm = load_variant("variant", Path(a.module))
    from qgemm_bench.backends.triton_ops import weight_args
    from qgemm_bench.target import of
    from qgemm_bench.types import Case, Shape

    M, K, N = map(int, a.shape.split(","))
    t = [int(v) for v in a.tiles.split(",")]
    c = ws_tiles(*t[:7], pdl=a.pdl) if len(t) >= 7 else ws_tiles(*t, pdl=a.pdl)
    dev = torch.device("cuda")
    op = operators.get("int4_gemm")
    case = Case("int4_gemm", Shape(M, K, N), torch.bfloat16, dev, op.Settings(128))
    inp = op.make_inputs(case, 0)
    g = FusedGemm(*weight_args("int4_gemm", inp), config=lambda m: {}, target=of(dev))
    splits, per = ws_gemm.launch_splits(g.kmajor, c)
    blocks = ws_gemm.padded_k(g.kmajor) // c["BLOCK_K"]
    programs = ws_gemm.launch_programs(g.kmajor, M, g.n, c)
    print(f"{M}x{K}x{N} {c}: {blocks} K blocks, splits {splits} per {per} (last {blocks - (splits - 1) * per}), "
          f"{programs} programs, {ws_gemm.programs_per_sm(c)} an SM, sync {a.sync}, stamps {a.stamps}", flush=True)
    descs, cache = ws_gemm.weight_descriptors(g.kmajor, c, g.fmt, g.group), {}
    ref = op.reference(inp)
    n_st = ws_gemm.stamp_slots(programs)
    sts = [torch.zeros(n_st, dtype=torch.int64, device=dev) for _ in range(a.calls)] if a.stamps else [None] * a.calls
    run = torch.cuda.Stream()
    side = torch.cuda.Stream()
    with torch.cuda.stream(run):  # compile, first call checked
        y = ws_gemm.run(g.kmajor, g.fmt, g.group, g.ts, inp.x, c, descs, cache, sms=g.target.sms)
        first = torch.cuda.Event()
        first.record(run)
    _, count = next(v for v in cache.values() if isinstance(v, tuple))
    host_c = torch.empty(count.shape, dtype=count.dtype, pin_memory=True)
    host_s = torch.empty(n_st, dtype=torch.int64, pin_memory=True)
    t0 = time.time()
    while not first.query():
        if time.time() - t0 > a.wait:
            print(f"HUNG: the first call not finished after {a.wait} s", flush=True)
            report(ws_gemm, side, count, host_c, None, host_s, splits, programs)
            os._exit(3)
        time.sleep(0.01)
    err = ((y.float() - ref.float()).norm() / ref.float().norm()).item()
    print(f"first call (compile) done, rel error {err:.2e}", flush=True)
    events = []
    t0 = time.time()
    for i in range(a.calls):
        with torch.cuda.stream(run):
            kw = {"stamps": sts[i]} if sts[i] is not None else {}
            ws_gemm.run(g.kmajor, g.fmt, g.group, g.ts, inp.x, c, descs, cache, sms=g.target.sms, **kw)
            ev = torch.cuda.Event()
            ev.record(run)
            events.append(ev)
        if a.sync or i == a.calls - 1:
            todo = [e for e in events]
            while time.time() - t0 < 1e9:
                done = [e.query() for e in todo]
                if all(done):
                    break
                if time.time() - t0 > a.wait:
                    hung = done.index(False)
                    print(f"HUNG: launch {hung} of {len(todo)} not finished after {time.time() - t0:.1f} s", flush=True)
                    report(ws_gemm, side, count, host_c, sts[hung], host_s, splits, programs)
                    os._exit(3)
                time.sleep(0.01)
            t0 = time.time()
    print(f"all {a.calls} calls finished; counters nonzero {int(count.count_nonzero())}", flush=True)
    return 0


def report(ws_gemm, side, count, host_c, st, host_s, splits, programs):
    with torch.cuda.stream(side):
        host_c.copy_(count, non_blocking=True)
        if st is not None:
            host_s.copy_(st, non_blocking=True)
        ev = torch.cuda.Event()
        ev.record(side)
    t = time.time()
    while not ev.query():
        if time.time() - t > 5:
            print("side copy did not finish in 5 s (the copy waits on the kernel)", flush=True)
            return
        time.sleep(0.01)
    cnt = host_c.tolist()
    hist = {}
    for v in cnt:
        hist[v] = hist.get(v, 0) + 1
    print(f"counters ({len(cnt)} tiles): value -> tiles {dict(sorted(hist.items()))}", flush=True)
    nz = [(i, v) for i, v in enumerate(cnt) if v]
    print(f"nonzero counters (tile: count), first 40: {nz[:40]}", flush=True)
    if st is None:
        return
    raw = host_s.view(programs, 2, ws_gemm.STAMP_SLOTS)[:, 0]
    set_ = raw != 0
    names = ws_gemm.STAMP_NAMES[:6]
    for sp in range(splits):
        rows = set_[sp::splits]
        print(f"split {sp}: of {rows.shape[0]} programs reached " +
              ", ".join(f"{n} {int(rows[:, i].sum())}" for i, n in enumerate(names)), flush=True)
    last = set_[splits - 1::splits]
    stuck = [t for t in range(last.shape[0]) if not last[t, 5]]
    print(f"tiles whose last split has no end stamp: {len(stuck)}; first 20: {stuck[:20]}", flush=True)
    for tl in stuck[:8]:
        states = []
        for sp in range(splits):
            r = set_[tl * splits + sp]
            states.append("".join("x" if r[i] else "." for i in range(6)))
        print(f"  tile {tl} (programs {tl * splits}..{tl * splits + splits - 1}) stamps per split "
              f"{' '.join(states)} counter {cnt[tl]}", flush=True)
    t0 = raw[raw != 0].min()
    starts = (raw[:, 0][raw[:, 0] != 0] - t0).double() / 1e3
    print(f"consumer starts (us from the first): {starts.min():.1f}..{starts.max():.1f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
