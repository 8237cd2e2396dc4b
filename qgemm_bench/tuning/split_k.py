#!/usr/bin/env python3
"""GPU: tune the Triton split-K GEMM's config table for this GPU (the
split_k family of `qgemm-bench tune`, which calls tune() with its share of
the budget and writes the store; run alone it writes OUT.json):

  python3 -m qgemm_bench.tuning.split_k OUT.json [--limit-s 540] [--shapes MxKxN ...]
  python3 -m qgemm_bench.tuning.split_k --seed-only OUT.json   (no GPU: the heuristic seed table)

For every shape of split_k_gemm's skinny preset (and --shapes), in bf16
without bias: times cuBLAS (a @ b) and, per mode (atomic, deterministic),
the candidate configs (candidates.split_k), the way the runner times (a CUDA graph over rotating
copies of a and b that together exceed 2x L2); every config's result is
checked against a.float() @ b.float() first (inaccurate ones are skipped).
First of all, the prior GPU's config for the shape and mode (the nearest
tuned GPU's entry, e.g. the H100's on an H200, with its PDL and REDUCE as
stored), whatever the shape's share: a shape cut short ends no worse than
it, and an entry not timed keeps it (marked "the <prior> entry's config,
not timed on <gpu>"; the heuristic's only without a prior).
Candidates: BLOCK_M 16/32/64/128 x BLOCK_N 16/32/64/128 from 1/8 of M and N
(rounded up to powers of two) to all of them, BLOCK_K 64/128/256, SPLIT_K
1..128 with tiles x splits in [SMs/4, 4 SMs] and >= 2 K blocks per split, at
4 warps / 3 stages, the heuristic's choice first and then those nearest it;
then the best three at 4/8 warps x 3/4/5 stages (shared memory permitting)
and, deterministic, the best three and the atomic winner with their planes
summed in a second launch (REDUCE "kernel", second_launch); those and the
best three with PDL 1, 2 and 3 (split_k_parts.pdl_prologue; the second
launch then waits in its prologue too); the best three re-timed. Where the
deterministic winner is faster than the atomic one, the atomic entry takes it
(split_k_configs: any config suits both modes). Each shape gets a share of the
time left by its number of candidates, at least SHAPE_FLOOR_S (first_share; those nearest
the heuristic are timed first), so --limit-s (default 540: one 10-minute GPU call) ends the run with
every shape tried; configs compile ahead in worker processes (--jobs) while
the GPU times.

OUT.json is the table in the format the backend loads, written (atomically)
after every shape: shapes not reached keep their entry from --base (default:
the checked-in table). A second run continues: shapes --base already holds tuned entries for (this
GPU) are skipped unless --retune; with --keep-faster an entry changes only
where the new run timed >3% faster. The first shape's clock starts once its
first-pass candidates are compiled; with time left after the last shape, the
shapes that timed only some of their candidates are tuned again (from where
they stopped), keeping the faster. OUT.json's provenance records the run
as fields (journal.add_pass: command, commit, date, the entries timed,
keep_faster), after the --base table's own; a table new to this GPU starts
its provenance with it.
OUT.timings.json beside it holds every timing."""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait as wait_futures
from pathlib import Path

from qgemm_bench.backends.triton_kernels import split_k_configs as skc
from qgemm_bench.errors import InputError, one_line
from qgemm_bench.harness import environment
from qgemm_bench.harness.args import Parser, int_in, positive_float
from qgemm_bench.operators import split_k_gemm
from qgemm_bench.tuning.candidates import SPLIT_VARIANTS as VARIANTS
from qgemm_bench.tuning.candidates import second_launch, split_k_pdl, split_k_pf
from qgemm_bench.tuning.candidates import split_k as candidates
from qgemm_bench.tuning.candidates import split_k_variants as variants
from qgemm_bench.tuning.journal import Pass, add_pass
from qgemm_bench.types import Shape

DTYPE = "bfloat16"  # the GPU dtype (the CPU test's interpreter run uses float16: tune(dtype=))
MARGIN_S = 10.0  # kept back from --limit-s for the last write and the exit
WAIT_S = 3.0  # longest wait for a compile a worker has started (workers take seconds to start)
# Longest wait for the compile workers to start before the first shape's
# clock does: while they import torch, the timing process compiles every
# config itself, and the first shape then timed 1 of its 17 atomic
# candidates and no deterministic one (H100, 2026-11-25).
STARTUP_S = 60.0
# What each worker runs first (Compiler.started): a builtin's call, so it
# pickles without this script's module.
WARM_UP = "import torch, triton  # noqa"
TOP = 3
# --keep-faster and the second pass: a new entry must time this much below the
# old one (the run-to-run spread of small-kernel medians is 0.1-1.6% on the H100).
KEEP_MARGIN = 0.97
# No shape's share is below this (or, where the time left is shorter, an
# equal share of it): about 24 candidates at ~0.5 s each (check, graph,
# windows; an estimate), enough for the prior GPU's config, its PDL and
# REDUCE twins, the heuristic and a few neighbours per mode. Shares by the
# number of candidates alone gave the H200's small shapes 1-9 of 20-60
# (4 GPUs, 2026-11-28), while the large ones timed all of theirs.
SHAPE_FLOOR_S = 12.0


def first_share(left: float, weights: list, floor: float = SHAPE_FLOOR_S) -> float:
    """The first of `weights`' shapes' share of `left` seconds: by weight
    (its candidates), at least `floor` (every shape's, where left allows:
    else an equal share), the floors of the lighter shapes taken from the
    heavier ones' shares (max(floor, a x weight) summing to left). A share
    by weight alone, raised to the floor shape by shape, left the last
    shapes below it (8 s of 12 for the preset's last small shapes at 15 s a
    shape)."""
    n = len(weights)
    if left <= floor * n:
        return left / n
    ws = sorted(weights)
    for j in range(n):  # the j lightest at their floor, the rest by weight
        a = (left - floor * j) / sum(ws[j:])
        if a * ws[j] >= floor:
            break
    return max(floor, a * weights[0])


def parse_shape(text: str) -> Shape:
    parts = text.lower().replace(",", "x").split("x")
    if len(parts) != 3 or not all(p.strip().isdecimal() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: expected MxKxN with positive integers (e.g. 16x4096x64)")
    return Shape(*(int(p) for p in parts))


# ------------------------------------------------------------------ compiling ahead (worker processes)


def _spec(*vals) -> tuple:
    """What Triton specializes an int argument on (== 1, divisible by 16)."""
    return tuple((v == 1, v % 16 == 0) for v in vals)


def compile_key(m, k, n, mode, c) -> tuple:
    from qgemm_bench.backends.triton_kernels.split_k import _bucket

    return (mode, tuple(sorted(c.items())), _spec(m, n, k, _bucket(m), _bucket(n)))


def _compile(m, k, n, mode, c) -> str | None:
    """In a worker: compile (not run) the kernel for this shape class and
    config into Triton's on-disk cache, where the timing process finds it."""
    import torch

    from qgemm_bench.backends.triton_kernels import split_k as sk
    from qgemm_bench.backends.triton_kernels import split_k_parts

    try:
        dev = torch.device("cuda", torch.cuda.current_device())
        a = torch.empty(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.empty(k, n, device=dev, dtype=torch.bfloat16)
        out = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
        ws = torch.empty(16, device=dev, dtype=torch.float32)
        count = torch.empty(16, device=dev, dtype=torch.int32)
        sk.split_k_kernel.warmup(*sk.launch_args(a, b, None, out, ws, count), grid=sk.grid_for(m, n, c),
                                 HAS_BIAS=False, MODE=mode, **{**sk.kernel_meta(c), **split_k_parts.pdl_launch(c, dev)})
        return None
    except Exception as e:  # the timing process compiles it again and reports
        return one_line(e, 160)


class Compiler:
    """Two pools of worker processes: one compiles the next shapes' first-pass
    candidates ahead, one the current shape's variants (so they need not
    queue behind). Without workers (--jobs 0, or a pool that broke) the
    timing process compiles on first call, as always."""

    def __init__(self, jobs: int):
        self.futures, self.pools, self.told = {}, [], False
        self.wanted = {}  # compile key -> the (shape, mode)s that will time it
        self.warm_ups = []
        if jobs > 0:
            ctx = multiprocessing.get_context("spawn")  # never fork a process that holds CUDA
            urgent = max(1, min(4, jobs // 3))
            sizes = (max(1, jobs - urgent), urgent)
            self.pools = [ProcessPoolExecutor(size, mp_context=ctx) for size in sizes]
            # Spawned pools start a worker per queued task: one warm-up per
            # worker starts them all now (the urgent pool's would otherwise
            # start at the first shape's variants, importing torch then).
            self.warm_ups = [f for pool, size in zip(self.pools, sizes, strict=True) for f in
                             [pool.submit(exec, WARM_UP) for _ in range(size)]]

    def submit(self, shape, mode, configs, urgent=False) -> None:
        if not self.pools:
            return
        for c in configs:
            key = compile_key(*shape, mode, c)
            self.wanted.setdefault(key, set()).add((shape, mode))
            if key not in self.futures or self.futures[key].cancelled():
                try:
                    self.futures[key] = self.pools[1 if urgent else 0].submit(_compile, *shape, mode, c)
                except Exception as e:  # BrokenProcessPool, or shut down
                    print(f"  compile workers stopped ({type(e).__name__}); compiling in the timing process")
                    self.close()
                    return

    def wait(self, shape, mode, c, until: float) -> bool:
        """Whether to time c now (False: time is up). A compile a worker has
        started is waited for (up to WAIT_S, and not while the workers start);
        one still queued is cancelled and left to the timing process (whose
        in-memory cache then serves every shape with the same key)."""
        if time.monotonic() >= until:
            return False
        fut = self.futures.get(compile_key(*shape, mode, c))
        if fut is None or not self.pools or fut.cancelled():
            return True
        if not fut.running() and not fut.done() and fut.cancel():
            return True
        if not fut.done() and not any(f.done() for f in self.futures.values()):
            return True  # the workers are still starting (importing torch): compile here
        try:
            failed = fut.result(timeout=max(0.01, min(WAIT_S, until - time.monotonic())))
            if failed and not self.told:  # said once: the timing process compiles such configs itself
                print(f"  a compile worker failed ({failed}); the timing process compiles the config itself",
                      flush=True)
                self.told = True
        except FutureTimeout:
            pass
        except Exception as e:
            print(f"  compile workers failed ({type(e).__name__}: {e}); compiling in the timing process")
            self.close()
        return time.monotonic() < until

    def compiled(self, shape, mode, configs, timeout: float) -> int:
        """Wait (up to `timeout` s) for the compiles of these configs; how many
        are done (0 without workers)."""
        futs = [f for c in configs if (f := self.futures.get(compile_key(*shape, mode, c))) is not None]
        if not self.pools or not futs:
            return 0
        done, _ = wait_futures(futs, timeout=max(0.0, timeout))
        return len(done)

    def started(self, timeout: float) -> bool:
        """Wait (up to `timeout` s) for every worker's warm-up: whether all
        finished, and without an error (False without workers)."""
        if not self.pools:
            return False
        done, pending = wait_futures(self.warm_ups, timeout=timeout)
        return not pending and all(f.exception() is None for f in done)

    def drop(self, shape, mode, configs) -> None:
        """Cancel the compiles of configs that will not be timed here (if not
        started, and no other shape wants them)."""
        for c in configs:
            key = compile_key(*shape, mode, c)
            wanted = self.wanted.get(key, set())
            wanted.discard((shape, mode))
            if not wanted and key in self.futures:
                self.futures[key].cancel()

    def close(self) -> None:
        for p in self.pools:
            p.shutdown(wait=False, cancel_futures=True)
        self.pools = []


# ------------------------------------------------------------------ timing (GPU)


class Fatal(RuntimeError):
    """The CUDA context is unusable (e.g. an illegal access): stop, keep what was tuned."""


def settle(dev) -> None:
    """After a shape failed (e.g. out of memory): wait for the GPU and free
    torch's cache; Fatal where CUDA itself is unusable."""
    import torch

    try:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            torch.cuda.empty_cache()
    except Exception as e:
        raise Fatal(f"CUDA unusable: {e}") from None


def device_target(dev):
    """The Target of the device tuned (target.of: no ceilings measured)."""
    from qgemm_bench.target import of

    return of(dev)


class ShapeTuner:
    def __init__(self, shape: Shape, dev, target, warmup_ms: float, rep_ms: float, log: list, dtype=None):
        import torch

        from qgemm_bench.types import Case

        self.torch, self.shape, self.dev, self.target, self.log = torch, shape, dev, target, log
        self.sms = target.sms
        self.warmup_ms, self.rep_ms = warmup_ms, rep_ms
        dtype = dtype or getattr(torch, DTYPE)
        c = Case(split_k_gemm.NAME, shape, dtype, dev, split_k_gemm.Settings(False))
        inp = split_k_gemm.make_inputs(c, 0)
        self.a, self.b = inp.a, inp.b
        self.ref = self.a.float() @ self.b.float()
        self.tol = split_k_gemm.tolerance(dtype)
        from qgemm_bench.tuning.timing import n_copies

        touched = (self.a.numel() + self.b.numel() + shape.M * shape.N) * self.a.element_size()
        n = n_copies(touched, touched + shape.M * shape.N * 4 * 64, dev)
        self.copies = [(self.a, self.b)] + [(self.a.clone(), self.b.clone()) for _ in range(n - 1)]

    def time_us(self, fns) -> float:
        from qgemm_bench.harness.measure import Settings
        from qgemm_bench.tuning.timing import p50_us

        return p50_us(fns, Settings(warmup_ms=self.warmup_ms, rep_ms=self.rep_ms), self.dev)

    def cublas(self) -> float:
        us = self.time_us([lambda a=a, b=b: a @ b for a, b in self.copies])
        self.log.append({"shape": str(self.shape), "mode": "cublas", "us": us})
        return us

    def measure(self, mode: int, c: dict) -> tuple[float | None, float | None, str]:
        """(p50 us or None, relative error, status) of config c."""
        from qgemm_bench.backends.triton_dispatch import make_split_k
        from qgemm_bench.operators.common import rel_error

        torch = self.torch
        us, err, status = None, None, "ok"
        try:
            g = make_split_k(self.a, self.b, None, mode, c, target=self.target)
            first = g()
            err = max(rel_error(first, self.ref), rel_error(g(), self.ref))  # the second call starts from zero again
            if not math.isfinite(err) or err > self.tol:
                status = f"inaccurate: {err:.2e} > {self.tol:g}"
            else:
                fns = [g] + [make_split_k(a, b, None, mode, c, target=self.target) for a, b in self.copies[1:]]
                us = self.time_us(fns)
                del fns
        except Exception as e:
            status = f"failed: {one_line(e, 160)}"
            try:
                if self.dev.type == "cuda":
                    torch.cuda.synchronize(self.dev)
            except Exception as e2:
                raise Fatal(f"CUDA unusable after {c}: {e2}") from None
        self.log.append({"shape": str(self.shape), "mode": skc.MODES[mode], "config": c, "us": us, "err": err,
                         "status": status})
        return us, err, status

    def tune_mode(self, mode: int, compiler: Compiler, until: float, deadline: float,
                  atomic_best: dict | None = None, timed: dict | None = None, lead: list | None = None) -> dict | None:
        """Best accurate config of this mode, timing until `until`: {config, us, err, timed, candidates}.
        Deterministic: also the best and `atomic_best` summed in a second launch (second_launch).
        timed: an earlier pass's timings of this shape and mode ({json(config): (us, err, config)}),
        kept and added to: only configs not in it are timed. lead: configs timed before the rest
        (the prior GPU's winner, as stored), until `deadline` whatever `until`: a shape cut short
        still ends no worse than it."""
        shape = tuple(self.shape)
        lead = list(lead or [])
        first = candidates(*shape, self.sms)
        timed = {} if timed is None else timed

        def run(cs, stop):
            for c in cs:
                k = json.dumps(c, sort_keys=True)
                if k in timed:
                    continue
                if not compiler.wait(shape, mode, c, stop):
                    return
                us, err, _ = self.measure(mode, c)
                timed[k] = (us, err, c)

        def best(n):
            return sorted((v for v in timed.values() if v[0] is not None), key=lambda v: v[0])[:n]

        run(lead, deadline)
        # The first pass gets ~70% of the time; the variants and re-timing the rest.
        run(first, time.monotonic() + 0.7 * max(0.0, until - time.monotonic()))
        compiler.drop(shape, mode, [c for c in first if json.dumps(c, sort_keys=True) not in timed])
        tops = [c for _, _, c in best(TOP)]
        more = [v for c in tops for v in variants(c)]
        if mode == 1:  # split_k.DETERMINISTIC
            launches = second_launch(tops, atomic_best)
            more += launches
            tops += launches
        more += split_k_pdl(tops)
        compiler.submit(shape, mode, more, urgent=True)
        run(more, until)
        compiler.drop(shape, mode, more)
        # The best so far with a deeper PDL prefetch, where it launches with one.
        pf = split_k_pf([c for _, _, c in best(1)])
        compiler.submit(shape, mode, pf, urgent=True)
        run(pf, until)
        compiler.drop(shape, mode, pf)
        more += pf
        top = best(TOP)
        if not top:
            return None
        final = []
        for us, err, c in top:  # again, against noise: the mean of two medians
            again = self.measure(mode, c)[0] if time.monotonic() < deadline else None
            final.append(((us + again) / 2 if again is not None else us, err, c))
        us, err, c = min(final, key=lambda v: v[0])
        return {"config": c, "us": round(us, 3), "err": err, "timed": len(timed),
                "candidates": len({json.dumps(c, sort_keys=True) for c in lead + first + more})}


# ------------------------------------------------------------------ the run


def is_timed(entry: dict) -> bool:
    """Whether an entry was timed on its GPU (a heuristic seed or another
    GPU's config kept untimed has no "us")."""
    return entry.get("us") is not None


def untimed_entry(shape, mode: str, sms: int, gpu: str, prior: dict | None = None,
                  prior_gpu: str | None = None) -> dict:
    """A shape's entry before (or without) timing: the prior GPU's config
    for it, as the dispatch would run it here (fit), else the heuristic's."""
    c = (prior or {}).get("entries", {}).get(mode, {}).get(skc.key(*shape), {}).get("config")
    if c is None:
        return {"config": skc.heuristic(*shape, sms), "tuned": skc.SEED_NOTE}
    return {"config": skc.fit(*shape, c, sms), "tuned": f"the {prior_gpu} entry's config, not timed on {gpu}"}


def is_tuned(doc: dict, shape: Shape, gpu: str) -> bool:
    if doc.get("gpu") != gpu:
        return False
    return all(is_timed(doc["entries"].get(mode, {}).get(skc.key(*shape), {})) for mode in skc.MODES)


def write(out: Path | None, doc: dict, log: list) -> None:
    """The table and its timings beside it (out None: neither; the tune
    command writes its store entry per shape through on_shape)."""
    from qgemm_bench.harness.outputs import write_atomic

    if out is None:
        return

    write_atomic(out, skc.dumps(doc))
    write_atomic(out.with_name(out.stem + ".timings.json"), "[\n" + ",\n".join(json.dumps(r) for r in log) + "\n]\n")


def tune(args, shapes: list[Shape], dev=None, *, deadline: float | None = None, on_shape=None, dtype=None,
         gpu: str | None = None, prior: dict | None = None, prior_gpu: str | None = None, target=None) -> int:
    """Tune `shapes` (args: the options of main: base (a path, or the table
    as a dict), out (None: not written), retune, keep_faster, jobs,
    warmup_ms, rep_ms, limit_s). deadline (time.monotonic()): when to stop,
    else --limit-s from now. on_shape(shape, {mode: entry}, table, cut_short):
    each shape's entries as soon as it is tried (the tune command's store
    writes; cut_short: some candidates went untimed). dtype: the GPU's
    bfloat16 unless given (the CPU test's float16). prior: the table of
    GPU prior_gpu (the nearest tuned one): each shape's entry there is
    timed first in its mode, and an entry not timed keeps it. target: the
    GPU's Target (default: the device's, device_target)."""
    import torch

    t0 = time.monotonic()
    dev = torch.device("cuda", torch.cuda.current_device()) if dev is None else dev
    from qgemm_bench.backends.triton_kernels.split_k import ATOMIC, DETERMINISTIC
    from qgemm_bench.harness.environment import gpu_slug
    from qgemm_bench.tuning.timing import ROUNDS

    gpu = gpu or gpu_slug(dev)
    target = target if target is not None else device_target(dev)
    sms = target.sms
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else str(dev)
    base = args.base if isinstance(args.base, dict) else skc.read_table(args.base)
    doc = base if base.get("gpu") in (None, gpu) else skc.seed_table(shapes, sms)
    if prior is None and base.get("gpu") not in (None, gpu):  # run alone: --base is the nearest GPU's table
        prior, prior_gpu = base, base["gpu"]
    doc = {k: v for k, v in doc.items() if k not in ("source", "versions")}  # the tuners' older prose: provenance
    if base.get("gpu") != gpu:  # a seed's or another GPU's table: this GPU's file starts here
        doc.pop("provenance", None)
    doc = {**doc, "format": skc.FORMAT, "gpu": gpu, "sms": sms}
    doc["entries"] = {mode: dict(doc["entries"].get(mode, {})) for mode in skc.MODES}
    for s in shapes:  # every shape has an entry: untimed ones the prior's config, else the heuristic's
        for mode in skc.MODES:
            entry = doc["entries"][mode].get(skc.key(*s))
            if entry is None or not is_timed(entry):
                doc["entries"][mode][skc.key(*s)] = untimed_entry(s, mode, sms, gpu, prior, prior_gpu)
    todo = [s for s in shapes if args.retune or not is_tuned(base, s, gpu)]
    skipped = len(shapes) - len(todo)
    print(f"{name} ({gpu}, {sms} SMs), torch {torch.__version__}: {len(todo)} shapes to tune"
          + (f", {skipped} already tuned in {args.base} (--retune to redo)" if skipped else "")
          + f", limit {args.limit_s:.0f} s", flush=True)
    log: list = []
    # Run alone (OUT.json): the run recorded in the table's provenance, with the entries it timed.
    run = None if args.out is None else Pass(doc, "split_k", keep_faster=args.keep_faster or None, rounds=ROUNDS,
                                             versions=environment.versions(dev))
    timed_entries = set()  # (mode, key)

    def save():
        if run is not None:
            run.stamp(doc, timed_entries)
        write(args.out, doc, log)

    save()
    deadline = t0 + args.limit_s - MARGIN_S if deadline is None else deadline
    compiler = Compiler(args.jobs)
    modes = (ATOMIC, DETERMINISTIC)

    def lead(s, mode) -> list:
        """The prior GPU's config for the shape and mode, as stored (PDL, REDUCE), timed first."""
        c = (prior or {}).get("entries", {}).get(skc.MODES[mode], {}).get(skc.key(*s), {}).get("config")
        return [] if c is None else [skc.fit(*s, c, sms)]

    timings = {}  # (shape, mode) -> the timings of every pass (ShapeTuner.tune_mode's `timed`)

    def tune_shape(s, share: float, keep_faster: bool) -> bool:
        """Tune shape s for `share` seconds; whether some candidates went untimed.
        keep_faster: an entry changes only where this pass timed faster (by KEEP_MARGIN)."""
        head, line = f"[{time.monotonic() - t0:4.0f} s] {s}: ", []
        try:
            tuner = ShapeTuner(s, dev, target, args.warmup_ms, args.rep_ms, log, dtype)
            cub = tuner.cublas()
            line.append(f"cuBLAS {cub:7.2f} us")
            start = time.monotonic()
            atomic_best, fresh, untimed = None, {}, False
            for j, mode in enumerate(modes):
                mname = skc.MODES[mode]
                until = min(deadline, start + share * (j + 1) / len(modes))
                r = tuner.tune_mode(mode, compiler, until, deadline, atomic_best,
                                    timings.setdefault((tuple(s), mode), {}), lead=lead(s, mode))
                if r is None:
                    line.append(f"{mname}: nothing accurate timed (keeps its entry)")
                    untimed = True
                    continue
                timed_entries.add((mname, skc.key(*s)))
                if mode == ATOMIC:
                    atomic_best = r["config"]
                untimed |= r["timed"] < r["candidates"]
                line.append(f"{mname} {r['us']:7.2f} us ({r['us'] / cub:4.2f}x cuBLAS) {skc.describe(r['config'])} "
                            f"[{r['timed']}/{r['candidates']}]")
                old = doc["entries"][mname].get(skc.key(*s), {})
                if keep_faster and old.get("us") is not None and r["us"] >= KEEP_MARGIN * old["us"]:
                    line.append(f"keeps its {old['us']:.2f} us entry")
                    continue
                doc["entries"][mname][skc.key(*s)] = fresh[mname] = {
                    "config": r["config"], "us": r["us"], "cublas_us": round(cub, 3),
                    "err": float(f"{r['err']:.3g}"),
                    "tuned": f"best of {r['timed']} timed of {r['candidates']} candidates on {gpu}"}
            a, d = (doc["entries"][m].get(skc.key(*s), {}) for m in skc.MODES)
            if "deterministic" in fresh and a.get("us") is not None and d["us"] < a["us"] \
                    and d["config"].get("REDUCE") == "kernel" and d["config"] != a["config"]:
                doc["entries"]["atomic"][skc.key(*s)] = {  # any config suits both modes
                    **d, "tuned": f"the deterministic winner, faster than the atomic best ({a['us']} us, "
                                  f"{skc.describe(a['config'])}){' in the same run' if len(fresh) == 2 else ''}: "
                                  f"{d['tuned']}"}
                line.append("atomic takes the deterministic winner")
            del tuner
        except Fatal:
            raise
        except Exception as e:  # e.g. out of memory: this shape keeps its entries
            line.append(f"failed: {one_line(e, 200)}")
            settle(dev)
            untimed = False  # a shape that failed is not tried again
        save()
        if on_shape is not None:  # tried: its entries (untimed ones the prior's) go to the store
            on_shape(s, {m: doc["entries"][m][skc.key(*s)] for m in skc.MODES}, doc, untimed)
        print(head + " | ".join(line), flush=True)
        return untimed

    def tune_pass(shapes: list, keep_faster: bool, late: str) -> list:
        """Tune `shapes` in order, each with its share of the time left (by its
        number of candidates, at least SHAPE_FLOOR_S or an equal share),
        compiling two shapes ahead; the shapes that timed only some candidates."""
        partial, weights = [], [len(candidates(*s, sms)) + TOP * len(VARIANTS) for s in shapes]
        for i, s in enumerate(shapes):
            if time.monotonic() >= deadline:
                print(f"time limit: {len(shapes) - i} shapes {late}")
                break
            for ahead in shapes[i:i + 3] if i == 0 else shapes[i + 2:i + 3]:
                for mode in modes:
                    compiler.submit(tuple(ahead), mode, lead(ahead, mode) + candidates(*ahead, sms))
            if i == 0:
                # The first shape's share would pass while every worker compiles
                # the first shapes' candidates (H100, 2026-11-25, workers up:
                # 16x4096x16 timed 2 of its 17 atomic candidates in 6 s): its
                # clock starts once its first-pass candidates are compiled.
                t = time.monotonic()
                wait = min(STARTUP_S, max(0.0, deadline - t) / 4)
                n = sum(compiler.compiled(tuple(s), mode, candidates(*s, sms), wait - (time.monotonic() - t))
                        for mode in modes)
                if compiler.pools:
                    print(f"[{time.monotonic() - t0:4.0f} s] {s}: {n} first-pass compiles done after "
                          f"{time.monotonic() - t:.0f} s", flush=True)
            left = max(0.0, deadline - time.monotonic())
            share = first_share(left, weights[i:])
            if tune_shape(s, share, keep_faster):
                partial.append(s)
        return partial

    try:
        for s in todo[:2]:
            for mode in modes:
                compiler.submit(tuple(s), mode, lead(s, mode) + candidates(*s, sms))
        t = time.monotonic()
        if compiler.started(min(STARTUP_S, max(0.0, deadline - t))):
            print(f"[{t - t0:4.0f} s] compile workers up after {time.monotonic() - t:.0f} s", flush=True)
        elif compiler.pools:
            print(f"[{t - t0:4.0f} s] compile workers not all up after {time.monotonic() - t:.0f} s: going on",
                  flush=True)
        partial = tune_pass(todo, args.keep_faster, "not tuned (they keep the entries they had, if any)")
        # The first shapes' shares pass while the workers compile everything
        # queued at once (H100, 2026-11-25: 16x4096x16 timed 6 of 33 atomic
        # candidates and the run ended 150 s early): with time left, the shapes
        # that timed only some candidates get another pass (their timed
        # candidates are not timed again), and an entry changes only where the
        # new pass timed faster.
        if partial and deadline - time.monotonic() > 5 * len(partial):
            print(f"[{time.monotonic() - t0:4.0f} s] again, with the time left: {len(partial)} shapes that timed "
                  "only some candidates", flush=True)
            tune_pass(partial, True, "not tuned again")
    except Fatal as e:
        print(f"stopped: {e}", flush=True)
        return 1
    finally:
        compiler.close()
        save()
        if args.out is not None:
            print(f"wrote {args.out} ({time.monotonic() - t0:.0f} s)", flush=True)
    return 0


PF_ROUNDS = 3  # the pf pass's rounds (round_order: the second reversed)
PF_MARGIN = 0.99  # a twin replaces its entry where its mean p50 is this much below the entry's, same rounds


def pf_pass(args, only: list[Shape], dev=None, target=None, dtype=None) -> int:
    """Each entry of args.base (a path or the table) that launches with PDL 2
    or 3 and the default prefetch, against its twins prefetching more rows of
    b (candidates.split_k_pf), checked and timed as the tuner times (rotating
    copies) in the same PF_ROUNDS rounds; the fastest where PF_MARGIN below
    the entry replaces it (us: its mean over the rounds; err: its check's).
    only: those shapes (all where empty; one not in the table is an error).
    Writes args.out after each shape, the pass recorded in its provenance
    (nothing where nothing is to be timed); returns the exit status."""
    import torch

    from qgemm_bench.tuning.timing import time_rounds

    t0 = time.monotonic()
    dev = torch.device("cuda", torch.cuda.current_device()) if dev is None else dev
    target = target if target is not None else device_target(dev)
    doc = args.base if isinstance(args.base, dict) else skc.read_table(args.base)
    doc = {**doc, "entries": {m: dict(e) for m, e in doc.get("entries", {}).items()}}
    gpu = target.name
    if doc.get("gpu") not in (None, gpu):
        print(f"error: the table to pass over is {doc.get('gpu')}'s, not this GPU's ({gpu}): tune {gpu} first "
              "(qgemm-bench tune --op split_k_gemm)", file=sys.stderr)
        return 2
    keys = {k for e in doc["entries"].values() for k in e}
    if missing := [str(s) for s in only if skc.key(*s) not in keys]:
        print(f"error: --shapes {' '.join(missing)}: not in the table", file=sys.stderr)
        return 2
    todo = {}  # shape -> [(mode, key, entry)]
    for mi, mname in enumerate(skc.MODES):
        for key, entry in doc["entries"].get(mname, {}).items():
            shape = Shape(*skc.parse_key(key))
            if (not only or shape in only) and split_k_pf([entry["config"]]) and is_timed(entry):
                todo.setdefault(shape, []).append((mi, key, entry))
    if not todo:
        print("pf pass: no timed entry launches with PDL 2 or 3 at the default prefetch: nothing to time, "
              "nothing written", flush=True)
        return 0
    print(f"pf pass: {sum(map(len, todo.values()))} entries at {len(todo)} shapes launch with PDL 2 or 3, "
          f"limit {args.limit_s:.0f} s", flush=True)
    run = None if args.out is None else Pass(doc, "split_k pf", rounds=PF_ROUNDS, versions=environment.versions(dev))
    log, timed, changed = [], set(), set()

    def save():
        if run is not None:
            run.stamp(doc, timed)
        write(args.out, doc, log)

    def pass_entry(tuner, mode, key, entry) -> str:
        cands = [entry["config"], *split_k_pf([entry["config"]])]
        errs, fatal = {}, []  # candidate -> its first check's error; a Fatal that time_rounds caught

        def time_one(c):
            try:
                us, err, status = tuner.measure(mode, c)
            except Fatal as e:
                fatal.append(e)
                raise
            errs.setdefault(json.dumps(c, sort_keys=True), err)
            if us is None:
                raise RuntimeError(status)  # this candidate's: time_rounds times it no more
            return us

        got = time_rounds(cands, time_one, PF_ROUNDS)
        if fatal:  # CUDA unusable: the pass stops (time_rounds keeps only a lost context's exception going)
            raise fatal[0]
        means = [None if isinstance(v, Exception) else v for v in got]
        timed.add((skc.MODES[mode], key))
        line = " | ".join(f"{skc.describe(c)} {v if means[i] is None else f'{means[i]:.2f}'}"
                          for i, (c, v) in enumerate(zip(cands, got, strict=True)))
        ok = [i for i, v in enumerate(means) if v is not None]
        best = min(ok, key=lambda i: means[i]) if ok else 0
        if best and means[0] is not None and means[best] < PF_MARGIN * means[0]:
            doc["entries"][skc.MODES[mode]][key] = {
                **entry, "config": cands[best], "us": round(means[best], 3),
                "err": float(f"{errs[json.dumps(cands[best], sort_keys=True)]:.3g}"),
                "tuned": f"{entry.get('tuned', '')}; pf pass: PF_ROWS {cands[best]['PF_ROWS']} "
                         f"{means[best]:.2f} against {means[0]:.2f} us, mean of {PF_ROUNDS} rounds"}
            changed.add((skc.MODES[mode], key))
            line += " -> takes it"
        return line

    deadline = t0 + args.limit_s - MARGIN_S
    try:
        for n, (shape, items) in enumerate(todo.items()):
            if time.monotonic() >= deadline:
                print(f"time limit: {len(todo) - n} shapes not timed (they keep their entries)", flush=True)
                break
            try:
                tuner = ShapeTuner(shape, dev, target, args.warmup_ms, args.rep_ms, log, dtype)
                for mode, key, entry in items:
                    print(f"[{time.monotonic() - t0:4.0f} s] {shape} {skc.MODES[mode]}: "
                          f"{pass_entry(tuner, mode, key, entry)}", flush=True)
                del tuner
            except Fatal:
                raise
            except Exception as e:  # e.g. out of memory: this shape keeps its entries
                print(f"[{time.monotonic() - t0:4.0f} s] {shape}: failed: {one_line(e, 200)} (keeps its entries)",
                      flush=True)
                settle(dev)
            save()
    except Fatal as e:
        print(f"stopped: {e}", flush=True)
        return 1
    finally:
        save()
        if args.out is not None:
            print(f"wrote {args.out}: {len(changed)} entries changed ({time.monotonic() - t0:.0f} s)", flush=True)
    return 0


def main() -> int:
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", metavar="OUT.json", type=Path, help="the table (and OUT.timings.json beside it)")
    p.add_argument("--shapes", nargs="+", type=parse_shape, default=[], metavar="MxKxN",
                   help="shapes to tune besides the skinny preset's")
    p.add_argument("--no-preset", action="store_true", help="only the --shapes")
    p.add_argument("--limit-s", type=positive_float, default=540.0,
                   help="wall-clock limit of the whole run in seconds (default 540)")
    p.add_argument("--base", type=Path, default=None,
                   help="the table to start from (default: the store's entry for this GPU: its own, or the "
                        "nearest of its compute capability)")
    p.add_argument("--retune", action="store_true", help="tune shapes --base already holds tuned entries for")
    p.add_argument("--keep-faster", action="store_true",
                   help="an entry of --base changes only where this run timed a config >3%% faster than its "
                        "recorded us (re-tuning without losing entries an earlier run timed faster)")
    p.add_argument("--jobs", type=int_in(0, 64), default=max(0, min(16, (os.cpu_count() or 2) - 2)),
                   help="worker processes compiling ahead (default: CPUs - 2, at most 16; 0: none)")
    p.add_argument("--warmup-ms", type=positive_float, default=5.0, help="warm-up per config (default 5 ms)")
    p.add_argument("--rep-ms", type=positive_float, default=20.0, help="timed ms per config (default 20)")
    p.add_argument("--seed-only", action="store_true",
                   help="write the heuristic seed table for the shapes (no GPU, no timing)")
    p.add_argument("--pf-pass", action="store_true",
                   help="instead of tuning: time each --base entry that launches with PDL 2 or 3 against its twins "
                        "prefetching 64 and 256 rows of b (PF_ROWS) in the same rounds, keep the fastest where "
                        ">1%% faster (--shapes: only those; the preset's shapes are not added; no compile workers)")
    try:
        args = p.parse_args()
        if not args.out.resolve().parent.is_dir():
            raise InputError(f"{args.out}: its folder does not exist")
        if args.no_preset and not args.shapes:
            raise InputError("--no-preset needs --shapes")
        if not args.seed_only and args.base is not None and not args.base.exists():
            raise InputError(f"--base {args.base}: no such file")
        if not args.seed_only and args.base is not None:
            skc.read_table(args.base)
    except (InputError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.pf_pass and (given := [f for f, on in (("--seed-only", args.seed_only), ("--retune", args.retune),
                                                    ("--keep-faster", args.keep_faster)) if on]):
        print(f"error: --pf-pass times the table's entries against their twins: not with {', '.join(given)}",
              file=sys.stderr)
        return 2
    shapes = [] if args.no_preset or args.pf_pass else list(split_k_gemm.PRESETS["skinny"])
    shapes += [s for s in args.shapes if s not in shapes]
    if args.seed_only:
        from qgemm_bench.harness.outputs import write_atomic

        doc = skc.seed_table(shapes)
        add_pass(doc, "seed", rounds=0, versions={})  # its provenance: nothing timed
        write_atomic(args.out, skc.dumps(doc))
        print(f"wrote the heuristic seed for {len(shapes)} shapes to {args.out}")
        return 0
    import torch

    if not torch.cuda.is_available():
        print("error: tuning needs a CUDA device (--seed-only writes the heuristic table without one)",
              file=sys.stderr)
        return 2
    if args.base is None:
        from qgemm_bench.backends.triton_dispatch import split_k_entry
        from qgemm_bench.target import of

        entry = split_k_entry(of(torch.device("cuda", torch.cuda.current_device())))
        args.base = entry.table or {"entries": {}}
    return pf_pass(args, shapes) if args.pf_pass else tune(args, shapes)


if __name__ == "__main__":
    sys.exit(main())
