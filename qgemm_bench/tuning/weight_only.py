#!/usr/bin/env python3
"""GPU: time the Triton weight-only GEMM's candidate configs and paths, the
way the runner times (CUDA graph over rotating copies > 2x L2): the
weight_only family of `qgemm-bench tune` (tune_entry, ws_entry, pdl_entry
per table entry) and, run alone, its expert modes on this GPU's table:
  python3 -m qgemm_bench.tuning.weight_only OUT.json [variants|table|pdl|ws|scale8|tma|rot|ahead|regs|check]
table (--paths split,fused, --formats int4,nvfp4; H100: 311 s, 60 of them the split path, before
the candidates were timed in two rounds): this GPU's checked-in table
(backends/triton_kernels/weight_only_configs/<gpu>.json): each format x
Llama layer (K, N) x M in TABLE_M, the best of the path's curated configs
(weight_only.split_pool, fused_gemm.pool; up to M = 64 each with PDL 0
and 2; all checked first, then timed in a forward round and a reverse
round of the TABLE_KEEP fastest, TABLE_ROUNDS; above weight_only.FUSED_MAX_M
the winner and dequantize + cuBLAS in two more rounds, as the entry's
versus_dequant_us), replacing that path's entries.
ws (--formats, --ms; H100, both formats: 142 s from M = 512, 112 s at 64,
128 and 256): each fused entry of that table at fused_gemm.WS_POOL's M without
and with each of the warp-specialized Gluon kernel's candidate tiles
(ws_gemm.py) in the same rounds; the fastest stays, the config's timing
without WS and the best with noted (ws_us; 156 s at 128 and 256 with
stream-K in the pool; the entry's own WS tiles timed too). The table mode
drops WS: run ws after it, and pdl after ws (the pool's tiles have no PDL).
With --formats int4 --group 32|64|channel (120 s at every M):
the same at that group size, written as each entry's "groups" config.
pdl (--ms; H100: about 4 minutes up to M = 64): each entry of that table
up to M = 64 (or at --ms) timed with PDL 0 and 2 (split_k_parts.pdl_prologue;
above M = 64 0 and 1; where the warp-specialized kernel runs, its tiles
without and with PDL 1) in the same two rounds, the fastest kept (the
table mode times PDL 0 and 2 itself up to M = 64). scale8 (--ms; after
ws and pdl): each NVFP4 fused entry up to M = 64 (or at --ms) where its
loads are fused_kernel's pointer loads (not its WS tiles', not TMA), without
and with SCALE8 (block scales read as E4M3 bytes) in the same two rounds,
the faster kept (scale8_us). tma (--ms; after those): each fused entry
up to M = 64 (or at --ms) whose WS tiles do not run, on pointer loads and
on TMA loads (fused_kernel's TMA; NVFP4 then scales after its decode, so
no SCALE8) in the same two rounds, the faster kept (tma_us; a TMA winner
keeps the other as its pointer_config). rot (--ms; after those): each
NVFP4 fused entry up to M = 64 (or at --ms) as it is and with ROT_DECODE
on pointer loads in the fused kernel (the permuted weights' 13-instruction
decode; not its WS tiles), at SPLIT_K 2, 4, 8 and 16 where the config
splits K, in the same two rounds, the fastest kept (rot_us). ahead
(--ms): each int4 fused entry with ACC_SCALE up to M = 64 (or at --ms)
without and with SCALE_AHEAD (its scale rows loaded a K block ahead) in
the same two rounds, the faster kept (ahead_us). regs (--formats, --ms):
each fused entry up to M = 64 (or at --ms) whose WS tiles do not run,
without a register cap and at REG_CAPS (maxnreg 96, 80, 72 at 4 warps, 80
at 8: one more program an SM, scripts/fused_waves.py) in the same two
rounds, the fastest kept (regs_us). In each of ws, pdl, scale8, tma,
rot, ahead and regs the entry's config stays where it times within
TIE_SHARE (0.5%) of the fastest. check
(--calls, --ms, --group): each entry of that table run --calls times at its shape against
the reference, wrong calls counted (exit 1 if any: a config that is right once
can still race; with --group, int4 weights in that group size and the
config that runs there). Otherwise:
1. split path, every candidate, M = 1, 16, 64 at K = N = 8192, int4 g128 and NVFP4
   (a 66-config grid at M <= 16: about 2 minutes per format);
2. each case's best 6 on four other llama shapes;
3. large M: dequantize + cuBLAS against cuBLAS bf16, and the dequantize
   kernel's configs. (The fused path's configs: tuning/fused_grid.py.)
pdl, ws, scale8, tma, rot, ahead, regs and check take --layers KxN,... to touch only those layers' entries.
Every mode: a config whose check or timing outlives --stall-timeout (default
300 s; a kernel that hangs) stops the tune with one line naming it, exit 1,
the table as written so far and OUT.json with the timings so far.
Prints tables; writes every timing to OUT.json."""

import argparse
import functools
import json
import sys
import time
from pathlib import Path

import torch

from qgemm_bench.backends.triton_dispatch import make_weight_only
from qgemm_bench.backends.triton_kernels import weight_only as wo
from qgemm_bench.backends.triton_ops import weight_args
from qgemm_bench.errors import InputError, one_line
from qgemm_bench.harness import environment, faults
from qgemm_bench.harness.args import Parser, stall_seconds
from qgemm_bench.harness.measure import Settings
from qgemm_bench.harness.outputs import write_atomic
from qgemm_bench.harness.watchdog import Watchdog, stall_reason
from qgemm_bench.operators import int4_gemm, nvfp4_gemm
from qgemm_bench.operators.common import rel_error
from qgemm_bench.tuning import candidates as cands
from qgemm_bench.tuning.candidates import FORMATS, PDL_MAX_M, pdl_variants
from qgemm_bench.tuning.journal import Pass
from qgemm_bench.tuning.timing import n_copies, p50_us, time_rounds
from qgemm_bench.types import Case, Shape

# Where and how the tuner runs: the tune command sets these (use()); the
# CPU test runs the interpreter in float16.
DEV = torch.device("cuda")
DTYPE = torch.bfloat16
TARGET = None  # the run's qgemm_bench.target.Target (None: the device's, target.of)
TABLE_OUT: Path | None = None  # the table file written (None: this GPU's checked-in one)
SETTINGS = Settings()  # the runner's warm-up and timed windows (timing.p50_us)
results = []
STALL_S = 300.0  # --stall-timeout's default: a config's check or timing took under a minute on the H100


def _stalled(label: str) -> int:
    """A check or timing that never finished (a hung kernel: ws_gemm.MAX_SKEW_STAGES):
    say which, keep the timings so far, exit 1 (watchdog.py)."""
    print(f"error: {stall_reason(label, WATCH.seconds)}; the table keeps the entries written before it",
          file=sys.stderr)
    if WATCH_OUT:
        write_atomic(WATCH_OUT, json.dumps(results, indent=1))
    return 1


WATCH, WATCH_OUT = Watchdog(0.0, _stalled), None  # armed in __main__


def operands(fmt, m, k, n, dequantized=False, group=128):
    """(x, WeightOnlyGemm's weight arguments, the reference); int4 in groups
    of `group` (an int or "channel"). dequantized: the fp32 [K, N] weights
    in the reference's place (the reference of any x: x.float() @ them, as
    op.reference)."""
    op = int4_gemm if fmt == "int4" else nvfp4_gemm
    settings = int4_gemm.Settings(group) if fmt == "int4" else nvfp4_gemm.Settings()
    inp = op.make_inputs(Case(op.NAME, Shape(m, k, n), DTYPE, DEV, settings), 0)
    return inp.x, weight_args(op.NAME, inp), op.dequantize(inp) if dequantized else op.reference(inp)


def copies(x, wargs):
    """Rotating copies of (x, weights) that together exceed 2x L2."""
    per = sum(t.numel() * t.element_size() for t in (x, *wargs[:3]) if isinstance(t, torch.Tensor))
    n = n_copies(per, per, DEV)
    clone = lambda ts: tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in ts)
    return [(x, wargs)] + [(x.clone(), clone(wargs)) for _ in range(n - 1)]


def time_fns(fns):
    """p50 us of a call, timed as the runner times by default (timing.p50_us)."""
    return p50_us(fns, SETTINGS, DEV)


def target():
    """The run's Target (TARGET), else the device's (target.of)."""
    from qgemm_bench.target import of

    return TARGET if TARGET is not None else of(DEV)


def gemm_of(*wargs, **kw):
    """make_weight_only(*wargs, **kw) on the run's Target."""
    return make_weight_only(*wargs, target=target(), **kw)


def copy_calls(reps, **kw) -> list:
    """One call per rotating copy of a make_weight_only(weights, **kw) on its x."""
    return [functools.partial(gemm_of(*w, **kw), xc) for xc, w in reps]


def checked_calls(what: str, wargs, x, ref, reps, config, path: str) -> list | None:
    """copy_calls of make_weight_only(config, path) if 3 calls at x are right
    against ref, else None (the failure printed with `what`)."""
    try:
        with WATCH.step(f"{what}'s check"):
            errs = [rel_error(gemm_of(*wargs, config=config, path=path)(x), ref) for _ in range(3)]
        if max(errs) < 1e-2:
            return copy_calls(reps, config=config, path=path)
        print(f"  {what}: wrong, error {max(errs):.2e}", flush=True)
    except Exception as e:  # pragma: no cover - a GPU-side failure is reported, not fatal
        if faults.context_lost(e):
            raise
        print(f"  {what}: {type(e).__name__}: {str(e)[:80]}", flush=True)
    return None


def gpu_table(needed_for: str | None = None):
    """(path, contents) of this GPU's table file; a broken file, or with
    `needed_for` an absent one, ends in one InputError line (an absent one
    otherwise reads as empty)."""
    from qgemm_bench.backends.triton_kernels import weight_only_configs as woc
    from qgemm_bench.configs.store import DEFAULT
    from qgemm_bench.harness.environment import gpu_slug

    out = TABLE_OUT or DEFAULT.path(gpu_slug(DEV), woc.FAMILY)  # this GPU's file; other GPUs' are left alone
    if not out.exists():
        if needed_for:
            raise InputError(f"{out}: no table to {needed_for} (run the table mode first)")
        return out, {"kernels": {}}
    try:
        return out, woc.read_table(out)
    except ValueError as e:  # say so before any timing
        raise InputError(f"{e} (fix or delete it)") from None


# The table's candidates are timed after all of them compiled and passed the
# check, in TABLE_ROUNDS rounds, the second in reverse order (timing.py):
# timed one by one right after its compile, each had the GPU cool from the
# compile. The second round re-times the TABLE_KEEP fastest of the first
# (as the split-K tuner re-times its best three): a round of every candidate
# was a quarter of the weight-only family's expected time (tuning/plan.py).
TABLE_ROUNDS = 2
TABLE_KEEP = 3


def time_interleaved(cands: list, stop: float | None = None) -> list:
    """cands: each candidate's call list (rotating copies). Each one's mean
    p50 over TABLE_ROUNDS rounds, the rounds after the first of the
    TABLE_KEEP fastest only (timing.time_rounds; stop: no round after the
    first starts later), or the exception that stopped it."""
    return time_rounds(cands, lambda fns: time_fns(fns), TABLE_ROUNDS, WATCH, stop, keep=TABLE_KEEP)


def versus_dequant(entry: dict, calls: list, reps, what: str) -> str:
    """A fused winner's calls above FUSED_MAX_M against dequantize + cuBLAS
    in rounds of their own (the winner's own us, the least of several noisy
    means, would favour it; WeightOnlyGemm runs the faster: dequant_faster):
    the entry's versus_dequant_us, dropped where either failed. Returns the
    log's text."""
    fused_us, dequant_us = time_interleaved([calls, copy_calls(reps, path="dequant")])
    if isinstance(fused_us, Exception) or isinstance(dequant_us, Exception):
        print(f"  {what} vs dequant: {fused_us} / {dequant_us}", flush=True)
        entry.pop("versus_dequant_us", None)
        return ""
    entry["versus_dequant_us"] = [round(fused_us, 2), round(dequant_us, 2)]
    return f" | vs dequant {fused_us:7.2f} / {dequant_us:7.2f}"


def timed(fmt, shape, label, make):
    """make(weight arguments) -> a WeightOnlyGemm; its p50 us and error at shape."""
    x, wargs, ref = operands(fmt, *shape)
    try:
        with WATCH.step(f"{fmt} {label} at {shape}"):
            err = rel_error(make(wargs)(x), ref)
            us = time_fns([functools.partial(make(w), xc) for xc, w in copies(x, wargs)])
    except Exception as e:  # a config that does not compile or fit
        err, us = None, None
        label = f"{label} FAILED {one_line(e, 120)}"
    results.append({"fmt": fmt, "shape": shape, "label": label, "us": us, "err": err})
    return us, err


def cfg(bm, bn, bk, sk, w=4, st=4):
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sk, "num_warps": w, "num_stages": st}


def candidates(m):
    if m <= 16:  # the grid behind SMALL_M_CONFIGS (8 warps never won; BLOCK_N 64 never won at K = N = 8192)
        return [{**cfg(16, bn, bk, sk, w, st), "DECODE_ASM": True} for bn in (128, 256) for bk in (32, 64, 128)
                for sk in (4, 8, 16) for w in (4, 8) for st in (3, 4) if not (w == 8 and bn == 128 and bk == 32)]
    return [cfg(bm, bn, bk, sk) for bm in (32, 64) for bn in (64, 128) for bk in (64, 128) for sk in (2, 4, 8)]


VARIANT_BASES = {  # the best split-path configs of a first full run (H100)
    "int4": [(16, 256, 64, 8), (16, 128, 64, 8), (16, 128, 64, 16), (16, 128, 128, 4), (16, 128, 64, 4)],
    "nvfp4": [(16, 64, 64, 4), (16, 64, 64, 8), (16, 128, 64, 4), (16, 128, 64, 8), (16, 256, 64, 8),
              (16, 128, 128, 4)],
}


def variants():
    """The packed-PTX decodes, on the best configs. (A register prefetch of the
    next K block measured slower everywhere on the H100: nvfp4 46-55 vs 39-41 us.)"""
    t0 = time.time()
    for fmt, bases in VARIANT_BASES.items():
        for m in (1, 16):
            rows = []
            for bm, bn, bk, sk in bases:
                for asm in (False, True):
                    for st in (3, 4):
                        c = {**cfg(bm, bn, bk, sk, 4, st), "DECODE_ASM": asm}
                        us, err = timed(fmt, (m, 8192, 8192), json.dumps(c),
                                        lambda a, c=c: gemm_of(*a, config=c, path="split"))
                        rows.append((us or 1e9, err, c))
            rows.sort(key=lambda r: r[0])
            print(f"\n{fmt} M={m} 8192x8192 ({time.time() - t0:.0f} s)", flush=True)
            for us, err, c in rows[:10]:
                print(f"  {us:8.2f} us err {err:.1e}  {c}")
            worst = [r for r in rows if r[1] is None or r[1] > 1e-2]
            print(f"  failed or inaccurate: {len(worst)}" + (f" e.g. {worst[0]}" if worst else ""))
    try:  # Triton internals: the compiled kernels' PTX and register use
        for dev_cache in wo.weight_only_kernel.device_caches.values():
            for ck in list(dev_cache[0].values())[:3]:
                ptx = ck.asm["ptx"]
                print("PTX: cp.async", ptx.count("cp.async"), "mma.sync", ptx.count("mma.sync"), "wgmma",
                      ptx.count("wgmma"), "regs", ck.n_regs, "spills", ck.n_spills, ck.src.constants)
    except Exception as e:
        print("no PTX summary:", type(e).__name__, e)


def table(paths=("split", "fused"), ms=None, fmts=FORMATS):
    """Time each path's candidates (weight_only.split_pool(m), fused_gemm.pool())
    at every (format in `fmts`, Llama (K, N), M in cands.TABLE_M[path], or only
    those in `ms`); write the winners to this GPU's
    weight_only_configs/<gpu>.json (see that module), keeping the other
    paths' and formats' entries (with `ms`, the path's entries at other M
    too)."""
    from qgemm_bench.backends.config_buckets import bucket
    from qgemm_bench.backends.triton_kernels import weight_only_configs as woc
    from qgemm_bench.harness.environment import gpu_slug
    from qgemm_bench.operators.common import LLAMA3_8B_KN, LLAMA3_70B_KN

    t0 = time.time()
    out, doc = gpu_table()
    if ms is None and tuple(fmts) == FORMATS and set(paths) == set(woc.PATHS):  # every entry is this run's
        for old in ("provenance", "source", "versions"):
            doc.pop(old, None)
    doc["gpu"] = gpu_slug(DEV)
    run = Pass(doc, "table", paths=list(paths), formats=list(fmts), ms=sorted(ms) if ms is not None else None,
               rounds=TABLE_ROUNDS, versions=environment.versions(DEV))
    timed = set()  # (kernel, bucket)
    for path in paths:
        for fmt_id, fmt in enumerate(FORMATS):
            if fmt not in fmts:
                continue
            if ms is None:
                doc["kernels"][woc.kernel(fmt_id, path)] = {}
            entries = doc["kernels"].setdefault(woc.kernel(fmt_id, path), {})
            for k, n in LLAMA3_8B_KN + LLAMA3_70B_KN:
                for m in [m for m in cands.TABLE_M[path] if ms is None or m in ms]:
                    pool = cands.weight_only_pool(fmt_id, path, m)
                    if not pool:  # the path does not run here (NVFP4's fused path above FUSED_MAX_M)
                        continue
                    entry = tune_entry(fmt, path, m, k, n, pool, t0=t0)
                    if entry is not None:
                        entries[bucket(m, k, n)] = entry
                        timed.add((woc.kernel(fmt_id, path), bucket(m, k, n)))
                run.stamp(doc, timed)
                write_atomic(out, woc.dumps(woc.check_table(doc, "tuned table")))
    print(f"wrote {out} in {time.time() - t0:.0f} s")


def tune_entry(fmt: str, path: str, m: int, k: int, n: int, pool: list[dict], stop: float | None = None,
               t0: float | None = None, pdl: bool = True) -> dict | None:
    """One table entry: the path's candidates `pool` at (m, k, n), each with
    PDL 2 too up to M = PDL_MAX_M (pdl False: the pool has the PDL
    variants it should), checked against the reference, then the
    right ones timed in TABLE_ROUNDS rounds (stop: see time_interleaved);
    the fastest with its runner-up, where it has TMA loads the best
    pointer-load config (what kernels without TMA loads mirror), above
    FUSED_MAX_M its time against dequantize + cuBLAS. None where every
    candidate failed."""
    from qgemm_bench.backends.triton_kernels.split_k_configs import describe

    t0 = time.time() if t0 is None else t0
    if pdl and m <= PDL_MAX_M:  # each candidate with and without PDL (see PDL_MAX_M)
        pool = cands.with_pdl(pool, None, m)
    x, wargs, ref = operands(fmt, m, k, n)
    reps = copies(x, wargs)
    ready = []  # (config, label, error, calls) of those that ran right
    for i, c in enumerate(pool):
        if stop is not None and len(ready) >= 2 and time.monotonic() > stop:
            print(f"  {fmt} {path} {m}x{k}x{n}: {len(pool) - i} candidates left unchecked (the unit's budget)",
                  flush=True)
            break
        label = f"{fmt} {path} {m}x{k}x{n} {describe(c)} asm {c.get('DECODE_ASM', True)}"
        try:
            with WATCH.step(f"{label}'s check"):
                err = rel_error(gemm_of(*wargs, config=c, path=path)(x), ref)
            if err < 1e-2:
                ready.append((c, label, err, copy_calls(reps, config=c, path=path)))
                continue
        except Exception as e:  # a config that does not compile or fit
            if faults.context_lost(e):
                raise
            err = None
            label += f" FAILED {one_line(e, 120)}"
        results.append({"fmt": fmt, "shape": (m, k, n), "label": label, "us": None, "err": err})
    rows = []  # (us, config, calls)
    for (c, label, err, fns), us in zip(ready, time_interleaved([r[3] for r in ready], stop), strict=True):
        if isinstance(us, Exception):
            label, us = label + f" FAILED timing {type(us).__name__}: {str(us)[:80]}", None
        else:
            rows.append((us, c, fns))
        results.append({"fmt": fmt, "shape": (m, k, n), "label": label, "us": us, "err": err})
    del ready
    rows.sort(key=lambda r: r[0])
    if not rows:
        print(f"{fmt} {path} {m}x{k}x{n}: every config failed", flush=True)
        return None
    us, c = rows[0][:2]
    entry = {"config": c, "us": round(us, 2),
             "tuned": f"best of {len(rows)} curated configs, {'graph' if DEV.type == 'cuda' else 'cpu-wall'} "
                      f"timing, mean of {TABLE_ROUNDS} rounds (the second reversed, of the "
                      f"{TABLE_KEEP} fastest of the first)",
             "runner_up": [round(rows[1][0], 2), describe(rows[1][1])] if len(rows) > 1 else None}
    pointer = [r for r in rows if not r[1].get("TMA")]
    if c.get("TMA") and pointer:  # what kernels without TMA loads (Helion's) mirror
        entry.update(pointer_config=pointer[0][1], pointer_us=round(pointer[0][0], 2))
    versus = ""
    if path == "fused" and m > wo.FUSED_MAX_M:  # where the fused kernel replaces dequantize + cuBLAS
        versus = versus_dequant(entry, rows[0][2], reps, f"{fmt} fused {m}x{k}x{n}")
    print(f"{fmt} {path} {m:3d}x{k}x{n}: {us:7.2f} us {describe(c)} | next "
          f"{rows[1][0] if len(rows) > 1 else float('nan'):7.2f}{versus} ({time.time() - t0:.0f} s)", flush=True)
    return entry


def tune_unit(fmt: str, path: str, m: int, k: int, n: int, prior: dict | None, stop: float | None = None,
              groups: tuple = (), rival: dict | None = None) -> dict | None:
    """The `qgemm-bench tune` unit of this family: the table entry of one
    (format, path, shape) made as the table, ws, pdl and rot modes make it,
    in that order. prior: the kernel's entries ({bucket: entry}) on the
    nearest tuned GPU of this compute capability, which prune the pools
    (candidates.pruned, ws_pruned, pdl_won_at, rot_pass_at), the bucket's own winner
    there first as stored (with its PDL); None times them whole
    (--full). groups (int4 fused): each group size's own WS config too
    (ws --group). rival: the prior's entries of the other path (the
    split path's unit times the prior winner alone where its fused path
    was faster at every bucket of M: candidates.unit_pool). stop
    (time.monotonic()): the unit's budget; past it no further candidate is
    checked (two at least are) and no second round starts. None where
    nothing ran right."""
    from qgemm_bench.backends.config_buckets import bucket
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_pool

    fmt_id, key = FORMATS.index(fmt), bucket(m, k, n)
    first = cands.prior_first(prior, key)
    # the prior winner as stored (its PDL twin included) first: checked whatever the budget
    pool = cands.unit_pool(fmt_id, path, m, prior, first, rival)
    if not pool:  # the path does not run here
        return None
    entry = tune_entry(fmt, path, m, k, n, pool, stop, pdl=False)
    if entry is None:
        return None
    entry["tuned"] += f" ({len(pool)} candidates{': those that won at this M on the prior GPU' if prior else ''})"
    if path == "fused" and ws_pool(m):
        tiles = cands.ws_pruned(ws_pool(m), prior, m, key)
        if tiles:
            ws_entry(fmt, key, entry, tiles, stop=stop)
        for g in groups if fmt == "int4" else ():
            ws_entry(fmt, key, entry, tiles or ws_pool(m), group=g, stop=stop)
    if m > PDL_MAX_M and cands.pdl_won_at(prior, m, key):  # up to PDL_MAX_M tune_entry timed PDL itself
        pdl_entry(fmt, path, key, entry, stop=stop)
    if cands.rot_pass_at(fmt, path, m, prior, key):  # no pool holds ROT_DECODE
        rot_entry(fmt, path, key, entry, stop)
    return entry


def kxn(layers) -> str:
    """Layers (K, N) as --layers writes them: 4096x28672,8192x57344."""
    return ",".join(f"{k}x{n}" for k, n in sorted(layers))


def parse_layers(text: str) -> set[tuple[int, int]]:
    """--layers' value ("4096x28672,8192x57344") as a set of (K, N);
    InputError in one line unless every item is two positive integers."""
    try:
        layers = {tuple(int(v) for v in kn.split("x", 1)) for kn in text.split(",")}
    except ValueError:
        raise InputError(f"--layers {text!r}: expected comma-separated KxN (e.g. 8192x57344)") from None
    if any(len(kn) != 2 or min(kn) <= 0 for kn in layers):
        raise InputError(f"--layers {text!r}: expected KxN pairs of positive integers")
    return layers


def layers_note(layers) -> str:
    """An error line's words for --layers."""
    return f" of layers {kxn(layers)}" if layers else ""


def require_layers(doc: dict, layers) -> None:
    """--layers names only layers the table has entries for (a swapped KxN would match nothing)."""
    from qgemm_bench.backends.config_buckets import parse

    have = {parse(key)[1:] for entries in doc.get("kernels", {}).values() for key in entries}
    if layers and (unknown := set(layers) - have):
        raise InputError(f"--layers: {kxn(unknown)} not in the table's layers ({kxn(have)})")


def pdl_entry(fmt: str, path: str, key: str, entry: dict, stop: float | None = None, t0: float | None = None) -> bool:
    """One table entry's pdl_variants at its bucket's shape, checked, then
    timed in the same rounds; the fastest stays in `entry`, each timing
    noted (pdl_us). Whether any variant was timed."""
    return variant_entry(fmt, path, key, entry, pdl_variants, "pdl", stop, t0)


def scale8_variants(config: dict, m: int, runs_ws: bool) -> list[tuple[str, dict]]:
    """The SCALE8 variants scale8_pass times of an NVFP4 fused config (block
    scales read as E4M3 bytes, fused_gemm.scale8_refused): without and with,
    none where its WS tiles run (they read the bf16 scales) or its loads are
    TMA's."""
    if runs_ws or config.get("TMA"):
        return []
    base = {c: v for c, v in config.items() if c != "SCALE8"}
    return [("scale8 0", base), ("scale8 1", {**base, "SCALE8": True})]


def tma_variants(config: dict, m: int, runs_ws: bool) -> list[tuple[str, dict]]:
    """The TMA variants tma_pass times of a fused config: on pointer loads
    and with x and weight tiles by TMA (NVFP4 then applies its scales after
    the decode, fused_gemm.wrong_on_sm90: no SCALE8); none where its WS
    tiles run."""
    if runs_ws:
        return []
    pointer = {c: v for c, v in config.items() if c not in ("TMA", "TMA_W")}
    return [("tma 0", pointer), ("tma 1", {**{c: v for c, v in pointer.items() if c != "SCALE8"}, "TMA": True})]


def ahead_variants(config: dict, m: int, runs_ws: bool) -> list[tuple[str, dict]]:
    """The SCALE_AHEAD variants ahead_pass times of an int4 fused config
    with ACC_SCALE (each block's scale row loaded a block ahead,
    fused_gemm.fused_kernel): without and with; none where its WS tiles
    run or it has no ACC_SCALE (its scales are in the decode)."""
    if runs_ws or not config.get("ACC_SCALE"):
        return []
    base = {c: v for c, v in config.items() if c != "SCALE_AHEAD"}
    return [("ahead 0", base), ("ahead 1", {**base, "SCALE_AHEAD": True})]


def rot_variants(config: dict, m: int, runs_ws: bool) -> list[tuple[str, dict]]:
    """The ROT_DECODE variants rot_pass times of an NVFP4 fused config (the
    permuted weights' 13-instruction decode, fused_gemm.FusedGemm.rot_runs):
    the config as it is and its pointer-load twin with ROT_DECODE (which
    needs pointer loads: a TMA config's twin drops TMA; and replaces
    SHORT_DECODE's decode). Where its WS tiles run (they read the plain
    weights) the twin is the fused kernel alone: ROT_DECODE made it faster
    than the WS tiles at 1x28672x8192 (49.09 us against M = 16's WS 54.66).
    A split config's twin also at the other candidates.ROT_SPLITS: no pool holds
    ROT_DECODE, so no tune timed its splits."""
    base = {c: v for c, v in config.items() if c != "ROT_DECODE"}
    # ROT replaces SHORT's decode; where WS tiles run, against them the fused kernel alone
    rot = {c: v for c, v in base.items() if c not in ("TMA", "TMA_W", "SHORT_DECODE", "WS")}
    out = [("rot 0", config if runs_ws else base), ("rot 1", {**rot, "ROT_DECODE": True})]
    # A shorter decode can want fewer splits (1x8192x57344: split 2 94.17 us, the table's 8 100.06)
    split = rot.get("SPLIT_K", 1)
    out += [(f"rot 1 split {s}", {**rot, "SPLIT_K": s, "ROT_DECODE": True}) for s in cands.ROT_SPLITS
            if s != split and split > 1]
    return out


# regs_variants' register caps by num_warps: the most registers at which 5, 6 and 7 programs of 4 warps
# (3 of 8) fit an SM's 65536; below them the decode-size loops spill (scripts/fused_waves.py).
REG_CAPS = {4: (96, 80, 72), 8: (80,)}


def regs_variants(config: dict, m: int, runs_ws: bool) -> list[tuple[str, dict]]:
    """The register caps regs_pass times of a fused config: without a cap
    and at each of REG_CAPS for its warps (and its own cap, if any): a cap
    that fits one more program an SM can take the grid in fewer waves
    (docs/fused_gemm.md, "Waves, offline"); none where its WS tiles run."""
    if runs_ws:
        return []
    base = {c: v for c, v in config.items() if c != "maxnreg"}
    caps = sorted({*REG_CAPS.get(config["num_warps"], ()), *([config["maxnreg"]] if "maxnreg" in config else [])},
                  reverse=True)
    return [("regs 0", base)] + [(f"regs {cap}", {**base, "maxnreg": cap}) for cap in caps]


# The passes that time one format's entries (they take --formats naming it, as a no-op).
ONE_FORMAT = {"scale8": "nvfp4", "rot": "nvfp4", "ahead": "int4"}

# Each pass's timings in an entry: of its config; one that replaces the config drops the others'.
PASS_TIMINGS = ("pdl_us", "scale8_us", "tma_us", "rot_us", "ahead_us", "regs_us")
# A pass's variant replaces the entry's config only where it timed faster than the config by more than
# this share, in the same rounds: two runs' tables then differ where the timings do, not by noise (the
# H200's regs pass had kept a 96-register cap at 6.53 us against 6.54 without one).
TIE_SHARE = 0.005


def pick(rows: list, incumbent: dict) -> tuple:
    """rows: (us, label, config) of one entry's variants. The fastest,
    unless the incumbent config's row is within TIE_SHARE of it."""
    best = min(rows, key=lambda r: r[0])
    own = next((r for r in rows if r[2] == incumbent), None)
    return own if own is not None and own[0] <= best[0] * (1 + TIE_SHARE) else best


def tie_note(us: float, fastest: float) -> str:
    """The log line's words where pick kept a config slower than the fastest."""
    return "" if us == fastest else f", within {TIE_SHARE:.1%} of the fastest"


def variant_entry(fmt: str, path: str, key: str, entry: dict, variants, name: str, stop: float | None = None,
                  t0: float | None = None, incumbent: dict | None = None) -> bool:
    """One table entry's variants(config, m, runs_ws) ((label, config) pairs
    whose labels start with `name`) at its bucket's shape, checked, then
    timed in the same rounds; the fastest stays in `entry` (the incumbent,
    else the entry's config, where it ties: pick), each timing noted
    (`name`_us). Whether any variant was timed."""
    from qgemm_bench.backends.config_buckets import parse

    t0 = time.time() if t0 is None else t0
    m, k, n = parse(key)
    x, wargs, ref = operands(fmt, m, k, n)
    reps = copies(x, wargs)
    runs_ws = path == "fused" and "WS" in entry["config"] and \
        gemm_of(*wargs, config=entry["config"], path="fused").fused().runs_ws(x, entry["config"])
    ready = []  # (label, config, calls) of the variants that ran right
    for label, c in variants(entry["config"], m, runs_ws):
        calls = checked_calls(f"{fmt} {path} {key} {label}", wargs, x, ref, reps, c, path)
        if calls is not None:
            ready.append((label, c, calls))
            continue
        results.append({"fmt": fmt, "shape": (m, k, n), "label": f"{path} {label}", "us": None})
    rows = []
    for (label, c, _), us in zip(ready, time_interleaved([r[2] for r in ready], stop), strict=True):
        if isinstance(us, Exception):
            print(f"  {fmt} {path} {key} {label}: {type(us).__name__}: {str(us)[:80]}")
            us = None
        results.append({"fmt": fmt, "shape": (m, k, n), "label": f"{path} {label}", "us": us})
        if us is not None:
            rows.append((us, label, c))
    del ready
    if not rows:
        return False
    us, label, c = pick(rows, entry["config"] if incumbent is None else incumbent)
    tie = tie_note(us, min(r[0] for r in rows))
    if c != entry["config"]:  # the other passes' timings were of another config (as ws_entry drops them)
        for other in PASS_TIMINGS:
            if other != f"{name}_us":
                entry.pop(other, None)
    if name == "tma" and c.get("TMA"):  # what kernels without TMA loads (Helion's) mirror, as the table keeps
        pointer = [(u, cc) for u, lab, cc in rows if not cc.get("TMA")]
        if pointer:
            entry.update(pointer_config=pointer[0][1], pointer_us=round(pointer[0][0], 2))
    elif not c.get("TMA"):  # a pointer-load winner is its own pointer config (rot's twin of a TMA config)
        entry.pop("pointer_config", None)
        entry.pop("pointer_us", None)
    if name == "rot" and c != entry["config"]:  # the ws pass's timings were of the config rot replaced
        entry.pop("ws_us", None)
    entry["config"] = c
    entry[f"{name}_us"] = {lab.replace(f"{name} ", ""): round(u, 2) for u, lab, _ in rows}  # "0", "ws 1" ...
    entry["us"] = round(us, 2)
    timings = " ".join(f"{lab} {u:6.2f}" for u, lab, _ in rows)
    print(f"{fmt} {path} {key}: {timings} -> {label}{tie} ({time.time() - t0:.0f} s)", flush=True)
    return True


def rot_entry(fmt: str, path: str, key: str, entry: dict, stop: float | None = None,
              t0: float | None = None) -> bool:
    """variant_entry with rot_variants from the config the entry had before
    any rot pass (its rot_of, where ROT_DECODE replaced it), so that "rot
    0" is the pool's config again; a ROT_DECODE winner keeps that config
    as rot_of (what candidates.winners_at and prior_first read: no pool
    holds ROT_DECODE). The entry as it was where nothing was timed."""
    saved = dict(entry)
    if "rot_of" in entry:
        entry["config"] = entry.pop("rot_of")
    before = entry["config"]
    if not variant_entry(fmt, path, key, entry, rot_variants, "rot", stop, t0, incumbent=saved["config"]):
        entry.clear()
        entry.update(saved)
        return False
    if entry["config"].get("ROT_DECODE"):
        entry["rot_of"] = before
    return True


def _variant_pass(what: str, kernels, variants, name: str, ms, layers, fields: dict, skip=None,
                  entry_fn=None) -> None:
    """pdl_pass's and scale8_pass's loop: each entry of this GPU's table in
    `kernels` ((fmt, path) pairs) at M in `ms` (else up to PDL_MAX_M) and the
    `layers`, unless skip(its config), through variant_entry with `variants`
    and `name`; the table written after each, the pass recorded in its
    provenance (journal.add_pass: the entries it timed, `fields`, --ms and
    --layers) once it timed one. entry_fn(fmt, path, key, entry, t0=):
    instead of variant_entry (rot_pass: rot_entry)."""
    from qgemm_bench.backends.config_buckets import parse
    from qgemm_bench.backends.triton_kernels import weight_only_configs as woc

    t0 = time.time()
    out, doc = gpu_table(what)
    require_layers(doc, layers)
    run = Pass(doc, name, **fields, ms=sorted(ms) if ms else None, layers=kxn(layers) if layers else None,
               rounds=TABLE_ROUNDS, versions=environment.versions(DEV))
    timed = set()  # (kernel, bucket)
    for fmt, path in kernels:
        group = woc.kernel(FORMATS.index(fmt), path)
        for key, entry in sorted(doc["kernels"].get(group, {}).items()):
            m, k, n = parse(key)
            if ((m not in ms) if ms else m > PDL_MAX_M) or layers and (k, n) not in layers or \
                    skip and skip(entry["config"]):
                continue
            if (entry_fn(fmt, path, key, entry, t0=t0) if entry_fn else
                    variant_entry(fmt, path, key, entry, variants, name, t0=t0)):
                timed.add((group, key))
                run.stamp(doc, timed)
            write_atomic(out, woc.dumps(woc.check_table(doc, "tuned table")))
    write_atomic(out, woc.dumps(woc.check_table(doc, "tuned table")))
    print(f"wrote {out} in {time.time() - t0:.0f} s")


def pdl_pass(paths=("split", "fused"), fmts=FORMATS, ms=None, layers=None):
    """Every entry of this GPU's table for the paths (M in `ms` if given,
    else up to M = PDL_MAX_M), at its bucket's shape: its pdl_variants, in
    the same process; the fastest stays, each timing noted (pdl_us)."""
    _variant_pass("add PDL to", [(fmt, path) for path in paths for fmt in FORMATS if fmt in fmts], pdl_variants,
                  "pdl", ms, layers, {"paths": list(paths), "formats": list(fmts)})


def scale8_pass(ms=None, layers=None):
    """Every NVFP4 fused entry of this GPU's table up to M = PDL_MAX_M (or
    at `ms`), at its bucket's shape, without and with SCALE8 in the same
    rounds (scale8_variants: not where its WS tiles or TMA loads run); the
    faster stays, both timings noted (scale8_us)."""
    from qgemm_bench.backends.triton_kernels.fused_gemm import SPLIT_POOL_MAX_M

    if ms and max(ms) > SPLIT_POOL_MAX_M:  # above it no pool has SCALE8 twins: a prior table's winner matches none
        raise InputError(f"scale8 --ms {','.join(map(str, sorted(ms)))}: M up to {SPLIT_POOL_MAX_M} only "
                         "(fused_gemm.pool has SCALE8 twins there)")
    # (TMA: the scales are applied after the decode, SCALE_AFTER; scale8_variants has none)
    _variant_pass("add SCALE8 to", [(ONE_FORMAT["scale8"], "fused")], scale8_variants, "scale8", ms, layers, {},
                  skip=lambda c: c.get("TMA"))


def ahead_pass(ms=None, layers=None):
    """Every int4 fused entry of this GPU's table with ACC_SCALE up to M =
    PDL_MAX_M (or at `ms`), at its bucket's shape, without and with
    SCALE_AHEAD in the same rounds (ahead_variants: not where its WS tiles
    run); the faster stays, both timings noted (ahead_us). On the H200 it
    won at a 16x128x128 tile and lost at 16x64x128 ones (docs/fused_gemm.md)."""
    _variant_pass("add SCALE_AHEAD to", [(ONE_FORMAT["ahead"], "fused")], ahead_variants, "ahead", ms, layers, {},
                  skip=lambda c: not c.get("ACC_SCALE"))


def regs_pass(fmts=FORMATS, ms=None, layers=None):
    """Every fused entry of this GPU's table up to M = PDL_MAX_M (or at
    `ms`) whose WS tiles do not run, at its bucket's shape, without a
    register cap and at each of regs_variants' caps in the same rounds; the
    fastest stays, each timing noted (regs_us)."""
    _variant_pass("cap the registers of", [(fmt, "fused") for fmt in FORMATS if fmt in fmts], regs_variants,
                  "regs", ms, layers, {"formats": list(fmts)})


def tma_pass(fmts=FORMATS, ms=None, layers=None):
    """Every fused entry of this GPU's table up to M = PDL_MAX_M (or at
    `ms`) whose WS tiles do not run, at its bucket's shape, on pointer and
    on TMA loads in the same rounds (tma_variants: the split pool has no
    TMA tiles; Helion's TMA twin won at M = 1 on the H200, docs/helion.md);
    the faster stays, both timings noted (tma_us)."""
    _variant_pass("add TMA to", [(fmt, "fused") for fmt in FORMATS if fmt in fmts], tma_variants, "tma", ms,
                  layers, {"formats": list(fmts)})


def rot_pass(ms=None, layers=None):
    """Every NVFP4 fused entry of this GPU's table up to M = PDL_MAX_M (or
    at `ms`), at its bucket's shape, as it is and with ROT_DECODE on
    pointer loads, the fused kernel's alone, at each of ROT_SPLITS where it
    splits K (rot_variants), in the same rounds; the fastest stays, every
    timing noted (rot_us)."""
    from qgemm_bench.backends.triton_kernels.fused_gemm import SPLIT_POOL_MAX_M

    if ms and max(ms) > SPLIT_POOL_MAX_M:  # the decode's share of a K block is small past the split-K tiles
        raise InputError(f"rot --ms {','.join(map(str, sorted(ms)))}: M up to {SPLIT_POOL_MAX_M} only")
    _variant_pass("add ROT_DECODE to", [(ONE_FORMAT["rot"], "fused")], rot_variants, "rot", ms, layers, {},
                  entry_fn=rot_entry)


def ws_entry(fmt: str, key: str, entry: dict, tiles: list[dict], group=None, stop: float | None = None,
             t0: float | None = None) -> bool:
    """One fused entry at its bucket's shape without and with each of the
    warp-specialized `tiles` (and the entry's own) where the kernel runs
    them (ws_pass says how); the fastest stays in `entry` (or its
    "groups" config with `group`). Whether the pass timed it."""
    from qgemm_bench.backends.config_buckets import parse
    from qgemm_bench.backends.triton_kernels import weight_only_configs as woc
    from qgemm_bench.backends.triton_kernels.fused_gemm import tma_refused
    from qgemm_bench.backends.triton_kernels.split_k_configs import describe, ws_label
    from qgemm_bench.backends.triton_kernels.ws_gemm import tiles_for

    t0 = time.time() if t0 is None else t0
    m, k, n = parse(key)
    x, wargs, ref = operands(fmt, m, k, n, group=group or 128)
    g = k if group == "channel" else group or 128  # the group the kernels run (per channel: one of K)
    config = entry["config"]
    if group is not None and "pointer_config" in entry and tma_refused(config, FORMATS.index(fmt), g, k, target()):
        config = entry["pointer_config"]  # as WeightOnlyGemm.tuned runs it at this group
    base = {c: v for c, v in config.items() if c != "WS"}
    # Only tiles the kernel runs here: elsewhere a "WS" config runs its base tiles.
    gemm = gemm_of(*wargs, config=base, path="fused").fused()
    # The pool's tiles, and the entry's own (with its PDL, which the pool's lack).
    own = [config["WS"]] if "WS" in config else []
    # (not tiles whose ACC does not apply here: they would run as their twin without it, ws_gemm.tiles_for)
    cands = {"base": base} | {ws_label(w): {**base, "WS": dict(w)} for w in list(tiles) + own
                              if gemm.runs_ws(x, {**base, "WS": w}) and tiles_for(FORMATS.index(fmt), g, k, w) == w}
    del gemm
    if len(cands) == 1:
        print(f"  {fmt} {key}: the warp-specialized kernel does not run here (ws_gemm.usable)", flush=True)
        return False
    reps = copies(x, wargs)
    ready = {label: calls for label, c in cands.items()
             if (calls := checked_calls(f"{fmt} {key} {label}", wargs, x, ref, reps, c, "fused")) is not None}
    us = {}
    for label, t in zip(ready, time_interleaved(list(ready.values()), stop), strict=True):
        if isinstance(t, Exception):
            print(f"  {fmt} {key} {label}: {type(t).__name__}: {str(t)[:80]}", flush=True)
            continue
        us[label] = t
        results.append({"fmt": fmt, "shape": (m, k, n), "label": f"ws pass {label}", "us": t})
    if "base" not in us:  # nothing to compare against: the entry stays as it was
        return True
    # What the entry (or the group's own) runs now stays where it ties (pick)
    held = entry.get("groups", {}).get(woc.group_key(None if group == "channel" else group, k), {}).get("config") \
        if group is not None else entry["config"]
    best = pick([(t, label, cands[label]) for label, t in us.items()], held)[1]
    ws_us = {label: t for label, t in us.items() if label != "base"}
    if group is not None:  # the group's own entry; the group-128 one stays
        own = {"config": cands[best], "us": round(us[best], 2),
               "tuned": f"ws --group {group}: the entry's config and WS tiles, same rounds"}
        entry.setdefault("groups", {})[woc.group_key(None if group == "channel" else group, k)] = own
        entry = own
    else:
        if cands[best] != entry["config"]:  # its passes' timings were of another config
            for other in PASS_TIMINGS:
                entry.pop(other, None)
        entry["config"] = cands[best]
        entry["us"] = round(us[best], 2)
    if ws_us:
        entry["ws_us"] = [round(us["base"], 2), round(min(ws_us.values()), 2)]
    else:  # WS failed its check or its timing: off
        entry.pop("ws_us", None)
    versus = versus_dequant(entry, ready[best], reps, f"{fmt} {key}") \
        if m > wo.FUSED_MAX_M and group is None else ""
    del ready, x, wargs, ref, reps
    timings = " | ".join(f"{'' if label == 'base' else 'ws '}{describe(base) if label == 'base' else label} "
                         f"{t:7.2f}" for label, t in us.items())
    tie = tie_note(us[best], min(us.values()))
    print(f"{fmt} {key}: {timings}{versus} -> {best}{tie} ({time.time() - t0:.0f} s)", flush=True)
    return True


def ws_pass(fmts=FORMATS, ms=None, group=None, layers=None):
    """Each fused entry of this GPU's table (formats `fmts`; M in `ms` only,
    if given) at an M where fused_gemm.ws_pool has tiles, at its bucket's
    shape, where the
    warp-specialized kernel runs (FusedGemm.runs_ws): its config without and
    with each of those WS tiles (ws_gemm.py), each checked (3 calls), then
    timed in the same rounds (time_interleaved); the fastest stays (the
    config's own tiles run where the kernel does not), ws_us the config
    without WS and the fastest with; WS that fails comes off. Above
    FUSED_MAX_M the winner is then timed against dequantize + cuBLAS in
    rounds of their own, as the table mode does, renewing
    versus_dequant_us. The table mode drops WS: run this after it, and
    the pdl pass after this (the pool's tiles have no PDL; the entry's own
    WS tiles, with theirs, are timed beside them; an entry whose config
    changes loses its pdl_us and scale8_us), then the scale8 pass.
    group (int4: 32, 64 or "channel"): the same at that group size, from
    the entry's config as it runs there (its pointer_config where its TMA
    loads do not: fused_gemm.tma_usable), the fastest written as the
    entry's "groups" config for it (weight_only_configs.lookup), the
    entry's own left as it was."""
    from qgemm_bench.backends.config_buckets import parse
    from qgemm_bench.backends.triton_kernels import weight_only_configs as woc
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_pool

    t0 = time.time()
    out, doc = gpu_table("time the warp-specialized kernel against")
    require_layers(doc, layers)
    run = Pass(doc, "ws", formats=list(fmts), ms=sorted(ms) if ms else None, group=group,
               layers=kxn(layers) if layers else None, rounds=TABLE_ROUNDS, versions=environment.versions(DEV))
    timed = set()  # (kernel, bucket)
    work = [(f, key, entry) for f in fmts for key, entry in
            sorted(doc["kernels"].get(woc.kernel(FORMATS.index(f), "fused"), {}).items(), key=lambda kv: parse(kv[0]))]
    for fmt, key, entry in work:
        m, k, n = parse(key)
        if not ws_pool(m) or ms and m not in ms or layers and (k, n) not in layers:
            continue
        if ws_entry(fmt, key, entry, ws_pool(m), group, t0=t0):
            timed.add((woc.kernel(FORMATS.index(fmt), "fused"), key))
            run.stamp(doc, timed)
            write_atomic(out, woc.dumps(woc.check_table(doc, "tuned table")))
    write_atomic(out, woc.dumps(woc.check_table(doc, "tuned table")))
    print(f"wrote {out} in {time.time() - t0:.0f} s")


def check(paths=("split", "fused"), ms=None, calls=30, fmts=FORMATS, group=None, layers=None) -> int:
    """Every entry of this GPU's table for the paths (M in `ms` only, if
    given) run `calls` times at its bucket's shape (the first call on the
    seed-0 x, each other on new activations), its config and, where it
    has one, its pointer_config (what kernels without TMA loads and int4
    groups that take none run); a call with error over 1e-2 (or NaN) is
    wrong, a config that fails to run counts as wrong too. group (int4: 32,
    64 or "channel"): the weights in that group size, each entry's config
    as WeightOnlyGemm runs it there (its "groups" config, else its own,
    TMA loads giving way where they do not run), whose scale handling
    differs from group 128's. Prints a line per config; returns how many
    had a wrong call."""
    from qgemm_bench.backends.config_buckets import parse
    from qgemm_bench.backends.triton_kernels import weight_only_configs as woc
    from qgemm_bench.backends.triton_kernels.split_k_configs import describe

    _, doc = gpu_table("check")
    require_layers(doc, layers)
    bad, checked, t0 = 0, 0, time.time()
    for path in paths:
        for fmt_id, fmt in enumerate(FORMATS):
            if fmt not in fmts:
                continue
            for key, entry in sorted(doc["kernels"].get(woc.kernel(fmt_id, path), {}).items()):
                m, k, n = parse(key)
                if ms is not None and m not in ms or layers and (k, n) not in layers:
                    continue
                x, wargs, wd = operands(fmt, m, k, n, dequantized=True, group=group or 128)
                # New activations each call: a call that read a buffer left by the one before (split-K
                # workspaces, ws_gemm's SPLITS planes) gives the old sums, wrong for the new x.
                gen = torch.Generator(device=x.device).manual_seed(1)
                xs = [x] + [torch.randn(x.shape, generator=gen, device=x.device, dtype=x.dtype)
                            for _ in range(calls - 1)]
                if group is not None:  # what runs at this group (weight_only_configs.lookup, WeightOnlyGemm.tuned)
                    configs = [gemm_of(*wargs).tuned(m, path)[0]]
                else:
                    configs = [entry["config"]] + ([entry["pointer_config"]] if "pointer_config" in entry else [])
                for c in configs:
                    checked += 1
                    try:
                        gemm = gemm_of(*wargs, config=c, path=path)
                        with WATCH.step(f"{fmt} {path} {key} {describe(c)}'s {calls} checked calls"):
                            errs = [rel_error(gemm(xi), xi.float() @ wd) for xi in xs]
                        wrong = sum(not e <= 1e-2 for e in errs)  # NaN counts as wrong
                        worst = float("nan") if any(e != e for e in errs) else max(errs)
                        text = f"{wrong}/{calls} wrong, max error {worst:.2e}"
                    except Exception as e:  # a config that does not run is as bad as a wrong one
                        wrong, worst, text = calls, float("nan"), f"FAILED {type(e).__name__}: {str(e)[:80]}"
                    bad += wrong > 0
                    at = f" group {group}" if group is not None else ""
                    results.append({"fmt": fmt, "shape": (m, k, n), "label": f"{path} check{at} {describe(c)}",
                                    "wrong": wrong, "calls": calls, "max_err": worst if worst == worst else "nan"})
                    print(f"{fmt}{at} {path} {key} {describe(c)}: {text} ({time.time() - t0:.0f} s)", flush=True)
                del x, xs, wargs, wd
    if not checked:
        raise InputError(f"no table entries for --paths {','.join(paths)} and --formats {','.join(fmts)}"
                         + (f" and --ms {','.join(map(str, sorted(ms)))}" if ms else "") + layers_note(layers))
    print(f"{bad} of {checked} configs with a wrong call")
    return bad


def main(args):
    if args.variants == "check":
        return 1 if check(args.paths.split(","), args.ms, args.calls, args.formats, args.group, args.layers) else 0
    if args.variants == "variants":
        return variants()
    if args.variants == "table":
        return table(args.paths.split(","), args.ms, args.formats)
    if args.variants == "pdl":
        return pdl_pass(args.paths.split(","), args.formats, args.ms, args.layers)
    if args.variants == "ws":
        return ws_pass(args.formats, args.ms, args.group, args.layers)
    if args.variants == "scale8":
        return scale8_pass(args.ms, args.layers)
    if args.variants == "tma":
        return tma_pass(args.formats, args.ms, args.layers)
    if args.variants == "ahead":
        return ahead_pass(args.ms, args.layers)
    if args.variants == "rot":
        return rot_pass(args.ms, args.layers)
    if args.variants == "regs":
        return regs_pass(args.formats, args.ms, args.layers)
    t0 = time.time()
    best = {}
    for fmt in ("int4", "nvfp4"):
        for m in (1, 16, 64):
            rows = []
            for c in candidates(m):
                us, err = timed(fmt, (m, 8192, 8192), json.dumps(c),
                                lambda a, c=c: gemm_of(*a, config=c, path="split"))
                if us is not None and err < 1e-2:
                    rows.append((us, c))
            rows.sort(key=lambda r: r[0])
            best[(fmt, m)] = [c for _, c in rows[:6]]
            print(f"\n{fmt} M={m} 8192x8192 ({time.time() - t0:.0f} s): best of {len(rows)}", flush=True)
            for us, c in rows[:8]:
                print(f"  {us:8.2f} us  {c}")
    for (fmt, m), cs in best.items():
        for k, n in ((4096, 4096), (8192, 57344), (28672, 8192), (14336, 4096)):
            line = []
            for c in cs:
                us, _ = timed(fmt, (m, k, n), json.dumps(c), lambda a, c=c: gemm_of(*a, config=c,
                                                                                             path="split"))
                line.append(f"{us:7.1f}" if us else "   fail")
            print(f"{fmt} M={m} {k}x{n}: " + " ".join(line), flush=True)
    print(f"\nlarge M ({time.time() - t0:.0f} s): dequant+cuBLAS / cuBLAS bf16, us")
    for fmt in ("int4", "nvfp4"):
        for m in (1024, 4096):
            for k, n in ((8192, 8192), (4096, 28672)):
                row = []
                for path in ("dequant",):
                    us, err = timed(fmt, (m, k, n), path, lambda a, p=path: gemm_of(*a, path=p))
                    row.append(f"{path} {us:8.1f} (err {err:.1e})" if us else f"{path} failed")
                a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
                ws = [torch.randn(k, n, device=DEV, dtype=torch.bfloat16) for _ in range(2)]
                cub = time_fns([lambda w=w, a=a: a @ w for w in ws])
                results.append({"fmt": fmt, "shape": (m, k, n), "label": "cublas", "us": cub})
                print(f"{fmt} {m}x{k}x{n}: {' | '.join(row)} | cuBLAS {cub:8.1f}", flush=True)
    x, wargs, _ = operands("int4", 1, 8192, 8192)
    for c in ({"BLOCK_R": 16, "BLOCK_N": 256, "num_warps": 4}, {"BLOCK_R": 32, "BLOCK_N": 128, "num_warps": 4},
              {"BLOCK_R": 8, "BLOCK_N": 512, "num_warps": 4}, {"BLOCK_R": 32, "BLOCK_N": 256, "num_warps": 8}):
        wo.DEQUANT_CONFIG = c
        us = time_fns([functools.partial(gemm_of(*w, path="dequant").dequantize, torch.bfloat16)
                       for _, w in copies(x, wargs)])
        print(f"dequant int4 8192x8192 {c}: {us:.1f} us ({(32 + 128 + 1) * 2**20 / us / 1e3:.0f} GB/s)")
        results.append({"fmt": "int4", "shape": (1, 8192, 8192), "label": f"dequant {c}", "us": us})
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", metavar="OUT.json", help="where every timing goes")
    p.add_argument("variants", nargs="?",
                   choices=["variants", "table", "pdl", "ws", "scale8", "tma", "rot", "ahead", "regs", "check"],
                   help="variants: only the packed-PTX decode variants; table: tune this GPU's checked-in table "
                        "of split and fused configs (weight_only_configs/<gpu>.json; see --paths); pdl: time "
                        "each entry of that table up to M = 64 (or at --ms) with and without PDL and keep the "
                        "faster; ws: time "
                        "each fused entry at M 64, 128, 256 and from 512 without and with each of the warp-specialized "
                        "kernel's candidate tiles (ws_gemm.py) and keep the fastest; scale8: time each NVFP4 "
                        "fused entry up to M = 64 (or at --ms) without and with SCALE8 (block scales read as "
                        "E4M3 bytes) and keep the faster; tma: time each fused entry up to M = 64 (or at "
                        "--ms) on pointer and on TMA loads and keep the faster; rot: time each NVFP4 fused "
                        "entry up to M = 64 (or at --ms) as it is and with ROT_DECODE (permuted weights, the "
                        "13-instruction decode) at SPLIT_K 2, 4, 8, 16, and keep the fastest; ahead: time "
                        "each int4 fused entry with ACC_SCALE up to M = 64 (or at --ms) without and with "
                        "SCALE_AHEAD (its scale rows a K block ahead) and keep the faster; regs: time each "
                        "fused entry up to M = 64 (or at --ms) whose WS tiles do not run without and with "
                        "register caps (maxnreg 96, 80, 72 at 4 warps, 80 at 8) and keep the fastest; check: run "
                        "each entry --calls times against the reference and count wrong calls")
    p.add_argument("--calls", type=int, default=None, help="check: calls per table entry (default 30)")
    p.add_argument("--group", default=None, choices=["32", "64", "channel"],
                   help="ws: time int4 at this group size instead, writing each entry's config for it (the "
                        "entry's \"groups\"; group 128's configs stay); check: run the configs that run at "
                        "this group size, on weights in it")
    p.add_argument("--paths", default="split,fused",
                   help="table, pdl, check: the paths to tune or check (split, fused or both)")
    p.add_argument("--formats", default="int4,nvfp4",
                   help="table, pdl, ws, tma, regs, check: the formats to tune or check (int4, nvfp4 or both; the "
                        "others' entries are kept); scale8 and rot time nvfp4 entries only, ahead int4 ones (each "
                        "takes --formats naming its format)")
    p.add_argument("--stall-timeout", type=stall_seconds, default=STALL_S, metavar="S",
                   help=f"stop (exit 1, the table as written so far, OUT.json the timings so far) when one "
                        f"config's check or timing takes more than S seconds, e.g. a kernel that never finishes "
                        f"(default {STALL_S:g}; 0: off)")
    p.add_argument("--ms", default=None,
                   help="table, pdl, ws, check: re-tune or check only these M (comma-separated, each in the "
                        "path's table M: split "
                        f"{','.join(map(str, cands.TABLE_M['split']))}, "
                        f"fused {','.join(map(str, cands.TABLE_M['fused']))}), "
                        "keeping the path's other entries")
    p.add_argument("--layers", default=None, metavar="KxN,...",
                   help="pdl, ws, scale8, tma, rot, ahead, regs, check: only the entries of these layers (e.g. "
                        "8192x57344,4096x28672), keeping the others")
    try:
        args = p.parse_args()
        if not set(args.paths.split(",")) <= {"split", "fused"}:
            raise InputError(f"--paths {args.paths!r}: expected split, fused or split,fused")
        if args.variants not in ("table", "pdl", "check") and args.paths != "split,fused":
            raise InputError("--paths is for the table, pdl and check modes")
        fmts = args.formats.split(",")
        if not fmts or not set(fmts) <= set(FORMATS) or len(set(fmts)) != len(fmts):
            raise InputError(f"--formats {args.formats!r}: expected int4, nvfp4 or int4,nvfp4")
        own = ONE_FORMAT.get(args.variants)  # a mode of one format takes --formats naming just it
        if own and set(fmts) not in ({own}, set(FORMATS)):
            raise InputError(f"--formats {args.formats!r}: the {args.variants} mode times {own} entries only")
        if not own and args.variants not in ("table", "pdl", "ws", "tma", "regs", "check") \
                and set(fmts) != set(FORMATS):
            raise InputError("--formats is for the table, pdl, ws, tma, regs and check modes (and names the one format "
                             "of scale8, rot and ahead)")
        args.formats = tuple(f for f in FORMATS if f in fmts)
        if args.calls is not None and args.variants != "check":
            raise InputError("--calls is for the check mode")
        args.calls = 30 if args.calls is None else args.calls
        if args.group is not None:
            if args.variants not in ("ws", "check") or args.formats != ("int4",):
                raise InputError("--group is for the ws and check modes with --formats int4")
            args.group = args.group if args.group == "channel" else int(args.group)
        if args.calls < 1:
            raise InputError(f"--calls {args.calls}: expected a positive number of calls")
        if args.ms is not None:
            if args.variants not in ("table", "pdl", "ws", "scale8", "tma", "rot", "ahead", "regs", "check"):
                raise InputError("--ms is for the table, pdl, ws, scale8, tma, rot, ahead, regs and check modes")
            try:
                args.ms = {int(v) for v in args.ms.split(",")}
            except ValueError:
                raise InputError(f"--ms {args.ms!r}: expected comma-separated integers") from None
            known = set().union(*(cands.TABLE_M[p] for p in args.paths.split(",")))
            if args.variants == "ws":  # the M the warp-specialized kernel has tiles for
                from qgemm_bench.backends.triton_kernels.fused_gemm import ws_pool

                known = {m for m in cands.TABLE_M["fused"] if ws_pool(m)}
            if not args.ms <= known:
                raise InputError(f"--ms: {sorted(args.ms - known)} not in the table's M ({sorted(known)})")
        if args.layers is not None:
            if args.variants not in ("pdl", "ws", "scale8", "tma", "rot", "ahead", "regs", "check"):
                raise InputError("--layers is for the pdl, ws, scale8, tma, rot, ahead, regs and check modes")
            args.layers = parse_layers(args.layers)
        if not Path(args.out).resolve().parent.is_dir():
            raise InputError(f"{args.out}: its folder does not exist")
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if not torch.cuda.is_available():
        print("error: tuning needs a CUDA device", file=sys.stderr)
        sys.exit(2)
    WATCH.seconds, WATCH_OUT = args.stall_timeout, Path(args.out)
    try:
        rc = main(args) or 0
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    finally:
        write_atomic(Path(args.out), json.dumps(results, indent=1))
    sys.exit(rc)
