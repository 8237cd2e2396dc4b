#!/usr/bin/env python3
"""Tune the Helion kernels' checked-in configs on this GPU: for each shape
bucket, time a curated list of configs the way the runner times (CUDA graph
over rotating copies larger than 2x L2), drop any that fail the accuracy
check, and write the fastest into the config store (configs/<gpu>/helion.json,
helion_dispatch.save) with its latency, the number of configs tried and the tuning time.

    qgemm-bench tune --backends helion                 # the store entry (the tune command: every op)
    python -m qgemm_bench.tuning.helion                # every bucket below into configs/<gpu>/helion.json
                                                       # (~4-5 min on an H100: 124 configs)
    python -m qgemm_bench.tuning.helion --op int4_gemm --m 1 --kn 4096,28672   # another layer's bucket
    python -m qgemm_bench.tuning.helion --op int4_gemm --m 256 --variants   # and the fused kernel's TMA /
                                                       # persistent variants (candidates.helion_fused_variants)
    python -m qgemm_bench.tuning.helion --rot-pass     # every NVFP4 fused entry against its rot twin
                                                       # (not in `qgemm-bench tune`: docs/helion.md)
    python -m qgemm_bench.tuning.helion --table-pass   # every fused entry against the Triton table's tile
                                                       # for its shape (not in `qgemm-bench tune` either)
    python -m qgemm_bench.tuning.helion --tiled-pass   # every fused entry against its twin on the Triton
                                                       # kernel's tiled weights (nor this one)
    python -m qgemm_bench.tuning.helion --split-pass   # every fused entry with fewer programs than SMs
                                                       # against its twin with twice the K split (nor this)
    python -m qgemm_bench.tuning.helion --check --op int4_gemm --m 128,256   # stored entries, 30 calls each
    torchrun --nproc-per-node N -m qgemm_bench.tuning.helion   # buckets split over N GPUs, saved by rank 0

The weight-only backends take the Triton backend's path without TMA loads
(weight_only.path_for): M <= 64 the split kernel (kernel "<op>" in the file)
unless the Triton table timed the fused kernel with split-K faster at the
shape, up to 1024 the fused kernel ("<op>_fused"), above that a dequantize
with a fixed config and cuBLAS (nothing to tune: such M are skipped). The candidates are the Triton
kernels' own, as Helion configs with the same tiles, K step, decode, warps
and stages (configs.from_triton): the split path's curated lists
(weight_only.split_pool) and, for the
fused path, fused_gemm.pool() (its checked-in winners and their neighbours
from tuning/fused_grid.py). Split-K (the atomic kernel, "split_k_gemm"; the
deterministic one, "split_k_gemm_deterministic", with --op only): the Triton
table's config for the shape (the backend's fallback without an entry) at
its PDL mode and, where that is 1 or 2, at 3, then SPLIT_K below. `runner.py --autotune quick
--save-configs` is the alternative: Helion's own search, minutes per shape
(at the default K step: the K step is a kernel argument, kernels.py).
"""

from __future__ import annotations

import argparse
import sys
import time

from qgemm_bench.errors import one_line
from qgemm_bench.tuning.candidates import HELION_SPLIT_K as SPLIT_K  # noqa: F401 (the tests' names)
from qgemm_bench.tuning.candidates import HELION_SPLIT_K_SHAPES as SPLIT_K_SHAPES
from qgemm_bench.tuning.candidates import HELION_WEIGHT_ONLY_M as WEIGHT_ONLY_M
from qgemm_bench.tuning.candidates import (
    SPLIT_K_KERNELS,
    bf16_twin,
    frag_twin,
    helion_rot_twin,
    helion_split_twin,
    helion_table_twin,
    helion_tiled_twin,
    helion_twin_passes,
)
from qgemm_bench.tuning.candidates import helion as candidates
from qgemm_bench.tuning.candidates import helion_kernel as kernel_name


def tune(op_name: str, shape, device, l2: int, rep_ms: float, dtype=None, cands: list | None = None,
         gpu: str | None = None, stop: float | None = None, target=None, variants: bool | None = None,
         check_calls: int = 1) -> dict | None:
    """The fastest accurate of `cands` (default: candidates() at the shape)
    timed by the runner's measure(), or None: {"op" (the kernel's name in
    the config file), "shape", "us", "tune_s", "save" (helion_dispatch.save's
    arguments), "key" (the bucket), "entry"}. stop (time.monotonic()): no
    candidate starts after it (the first always runs). target: the run's
    Target (default: the device's). variants: candidates.helion's (the
    fused kernel's TMA / persistent variants; default HELION_VARIANTS).
    check_calls: calls each candidate is checked over (wrong_calls)."""
    import torch

    dtype = dtype or torch.bfloat16
    cands = candidates(op_name, shape[0], shape, device, variants=variants) if cands is None else cands
    if not cands:
        print(f"{op_name} {shape}: the dequantize + cuBLAS path (fixed config): nothing to tune", flush=True)
        return None

    from qgemm_bench import operators
    from qgemm_bench.backends import registry
    from qgemm_bench.backends.config_buckets import bucket
    from qgemm_bench.backends.helion_kernels import tuning
    from qgemm_bench.harness.measure import Settings, measure
    from qgemm_bench.target import gpu_slug
    from qgemm_bench.types import Case, Shape

    base = "split_k_gemm" if op_name in SPLIT_K_KERNELS else op_name  # the operator of a split-K mode
    op = operators.get(base)
    backend = registry.get(base, SPLIT_K_KERNELS.get(op_name, "helion"))
    case = Case(base, Shape(*shape), dtype, device, op.Settings(), target)
    inputs = op.make_inputs(case, 0)
    ref = op.reference(inputs)
    tol = op.tolerance(dtype)
    checks = [(inputs, ref)]
    if check_calls > 1:  # and another input set: a call that left the last call's output is then wrong
        other = op.make_inputs(case, 1)
        checks.append((other, op.reference(other)))
    t0 = time.perf_counter()
    results = []
    for cfg in cands:
        if results and stop is not None and time.monotonic() > stop:
            print(f"  {len(cands) - cands.index(cfg)} candidates left untimed: the shape's budget is spent",
                  flush=True)
            break
        try:
            with tuning.options(explicit=cfg):
                settings = Settings(warmup_ms=10, rep_ms=rep_ms)
                first = None
                if _device_key(device) not in _MEASURED:  # the process's first timing on it: discarded (_MEASURED)
                    first = measure(case, backend, inputs, ref, tol, settings, l2)
                    _MEASURED.add(_device_key(device))
                r = first if first is not None and first["status"] != "ok" else \
                    measure(case, backend, inputs, ref, tol, settings, l2)
                if first is not None:  # the compile happened in the discarded call
                    r = {**r, "compile_s": first["compile_s"]}
                ok = r["status"] == "ok"
                wrong = wrong_calls(case, backend, checks, tol, check_calls) if ok and check_calls > 1 else 0
        except Exception as e:  # a config the kernel or GPU cannot take
            print(f"  {cfg}: {one_line(e, 160)}", flush=True)
            continue
        print(f"  {cfg}: {r['status']} {r['p50_us']:.1f} us (compile {r['compile_s']:.1f} s)", flush=True)
        if wrong:
            print(f"  {cfg}: WRONG in {wrong} of {check_calls} calls, not taken", flush=True)
            continue
        if ok:
            results.append((r["p50_us"], cfg, r["compile_s"]))
    if not results:
        print(f"{op_name} {shape}: no config passed", flush=True)
        return None
    us, cfg, compile_s = min(results, key=lambda t: t[0])
    took = time.perf_counter() - t0
    print(f"{op_name} {shape}: {us:.1f} us with {cfg} ({len(results)} tried, {took:.0f} s)", flush=True)
    # helion_dispatch.save's arguments: the caller saves (rank 0 alone under torchrun).
    info = {"us": round(us, 2), "tuned": f"best of {len(results)} curated configs, "
                                         f"{'graph' if device.type == 'cuda' else 'cpu-wall'} timing",
            "tune_s": round(took, 1), "compile_s": round(compile_s, 2)}
    save = (kernel_name(op_name, shape[0], shape, device), *shape, gpu or gpu_slug(device), cfg, info)
    return {"op": save[0], "shape": shape, "us": us, "tune_s": took, "save": save,
            "key": bucket(*shape), "entry": {"config": cfg, **info}}


def wrong_calls(case, backend, checks: list, tol: float, calls: int) -> int:
    """How many of `calls` calls of the backend miss their reference by
    more than tol (an 8-warp fragment-order tile's wrong sums came in some
    calls only), the calls taking the (inputs, reference) pairs of checks
    in turn: a call that returned an earlier call's output is wrong."""
    from qgemm_bench.operators.common import cycled_errors

    errs = cycled_errors([backend.prepare(case, inputs).fn for inputs, _ in checks], [ref for _, ref in checks], calls)
    return sum(not e <= tol for e in errs)  # NaN is wrong


REP_MS = 30.0  # timed ms per config (--rep)
# A process's first timing reads fast and can win its shape for a slower
# config (docs/tuning.md): tune() times its first config on a device twice
# and keeps the second.
_MEASURED: set[tuple] = set()  # devices this process has timed on (_device_key)


def _device_key(device) -> tuple:
    """A torch device as (type, index), "cuda" as the current CUDA device."""
    import torch

    device = torch.device(device)
    if device.index is None and device.type == "cuda":
        return device.type, torch.cuda.current_device()
    return device.type, device.index or 0


def tune_unit(op_name: str, shape, device, prior: dict | None, own: list | None = None, stop: float | None = None,
              dtype=None, gpu: str | None = None, target=None, variants: bool | None = None) -> dict | None:
    """The `qgemm-bench tune` unit of this family: one bucket's Helion
    config (tune's result). prior: the Triton table ({"kernels": ...}) of
    the nearest tuned GPU of this compute capability, whose winners at M
    prune the weight-only pools (candidates.helion); None: whole pools
    (--full). own: Helion tables (this GPU's, where it has one, then that
    GPU's) whose configs for the bucket are timed first, each followed by
    its frag twin. variants: candidates.helion's (--helion-variants)."""
    import torch

    from qgemm_bench.backends.config_buckets import bucket

    m = shape[0]
    where = target if target is not None else device  # the Target whose store entry decides the path
    kernel = kernel_name(op_name, m, shape, where)
    pruning = None if prior is None else prior.get("kernels", {}).get(kernel, {})
    cands = candidates(op_name, m, shape, where, prior=pruning, variants=variants)
    first = []
    for table in own or ():
        mine = ((table or {}).get("kernels", {}).get(kernel, {}).get(bucket(*shape)) or {}).get("config")
        if mine is not None and cands:
            fused = kernel.endswith("_fused")  # frag, bf16_scales: kernels.fused's
            twins = (frag_twin(op_name, m, mine), bf16_twin(op_name, mine)) if fused else ()
            first += [c for c in (mine, *twins) if c and c not in first]
    cands = first + [c for c in cands if c not in first]
    if not cands:
        return None
    l2 = torch.cuda.get_device_properties(device).L2_cache_size if device.type == "cuda" else 0
    best = tune(op_name, shape, device, l2, REP_MS, dtype, cands, gpu, stop, target)
    # The passes run past the unit's share: the plan counts their two timings each, and the PDL twin the share
    # cut off was 3.7% faster where it happened (docs/helion.md).
    return twin_passes(best, op_name, shape, device, l2, dtype, gpu, None, target) if kernel.endswith("_fused") \
        else best


def twin_passes(best: dict | None, op_name: str, shape, device, l2: int, dtype=None, gpu: str | None = None,
                stop: float | None = None, target=None, rep_ms: float = REP_MS) -> dict | None:
    """A fused unit's winner through candidates.helion_twin_passes in order
    (its PDL 2 twin up to PDL_MAX_M, then its TMA twin where there is one:
    docs/helion.md), each a twin_pass."""
    for label, twin_of, check_calls in helion_twin_passes(op_name, shape[0]):
        best = twin_pass(best, twin_of, label, op_name, shape, device, l2, dtype, gpu, stop, target, rep_ms,
                         check_calls)
    return best


def twin_pass(best: dict | None, twin_of, label: str, op_name: str, shape, device, l2: int, dtype=None,
              gpu: str | None = None, stop: float | None = None, target=None, rep_ms: float = REP_MS,
              check_calls: int = 1) -> dict | None:
    """best's config against twin_of(config), both timed again in one
    round, each checked over check_calls calls; the twin kept only where it
    wins ("tuned" says "then its <label> twin"). No twin (None): best as is,
    checked over check_calls calls where that is more than one. None where
    best failed that check (and its twin too: nothing to keep). No time
    left: best as is."""
    if best is None or (stop is not None and time.monotonic() > stop):
        return best
    cfg = best["entry"]["config"]
    twin = twin_of(cfg)
    if twin is None and check_calls == 1:
        return best
    again = tune(op_name, shape, device, l2, rep_ms, dtype, [cfg] if twin is None else [cfg, twin], gpu, stop,
                 target, check_calls=check_calls)
    if again is None and check_calls > 1:
        print(f"{op_name} {shape}: the winner failed its {check_calls}-call check: no config kept", flush=True)
        return None
    if again is None or twin is None or again["entry"]["config"] != twin:
        return best
    base = best["entry"]["tuned"]  # "best of N curated configs, <timing>" or "..., then its <label> twin (<timing>)"
    tried = base.split(" (")[0] if ", then its " in base else base.split(", ")[0]
    took = best["tune_s"] + again["tune_s"]
    info = {**{k: v for k, v in again["entry"].items() if k != "config"},
            "tuned": f"{tried}, then its {label} twin ({again['entry']['tuned'].split(', ')[-1]})",
            "tune_s": round(took, 1)}
    return {**again, "tune_s": took, "entry": {"config": again["entry"]["config"], **info},
            "save": (*again["save"][:-1], info)}


def parser():
    from qgemm_bench.harness.args import Parser

    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", action="append", choices=["int4_gemm", "nvfp4_gemm", *SPLIT_K_KERNELS],
                   help="operator(s) to tune (default: int4_gemm, nvfp4_gemm, split_k_gemm; "
                   "split_k_gemm_deterministic: the split-K kernel summing its planes in a fixed order, "
                   "helion_deterministic's)")
    # --ms as `qgemm-bench tune` spells it; under torchrun only --ms works (its parser takes --m for a prefix)
    p.add_argument("--m", "--ms", dest="m", type=m_list, help="weight-only M values (default: 1,16,64,128,256,512 "
                   "at K=N=8192; above 512 the dequantize path has nothing to tune)")
    p.add_argument("--kn", type=kn_pair, action="append", metavar="K,N",
                   help="weight-only layer shape (repeatable; default 8192,8192)")
    p.add_argument("--mkn", type=mkn_triple, action="append", metavar="M,K,N",
                   help="split-K shape (repeatable; default " + ", ".join(",".join(map(str, s)) for s in SPLIT_K_SHAPES)
                   + "; a shape without its own entry runs the Triton table's config, untimed in Helion)")
    p.add_argument("--rep", type=rep_ms, default=REP_MS, help="timed ms per config (default 30; 1 to 1000)")
    p.add_argument("--variants", action="store_true", help="also the fused kernel's TMA and persistent variants "
                   "(candidates.helion_fused_variants; off in `qgemm-bench tune`: HELION_VARIANTS)")
    p.add_argument("--rot-pass", action="store_true",
                   help="instead of tuning: each NVFP4 fused entry of this GPU's helion table at --m and --kn "
                   "(default: every one) against its rot twin (ROT_DECODE's permuted weights, pointer loads), "
                   "one round, "
                   f"{ROT_CHECK_CALLS} checked calls each; the faster stays (N a multiple of 16: elsewhere "
                   "rot does not run)")
    p.add_argument("--table-pass", action="store_true",
                   help="instead of tuning: each int4 and NVFP4 fused entry of this GPU's helion table at --op, "
                   "--m and --kn (default: every one) against its table twin (the Triton table's config for the "
                   "shape as Helion's, int4 in fragment order where Helion takes it, the entry's NVFP4 scales "
                   f"and rot), one round, {ROT_CHECK_CALLS} checked calls each; the faster stays")
    p.add_argument("--tiled-pass", action="store_true",
                   help="instead of tuning: each int4 and NVFP4 fused entry of this GPU's helion table at --op, "
                   "--m and --kn (default: every one) on pointer loads against its tiled twin (the weights in the "
                   "Triton fused kernel's 64 x 128 tiles, each tile's 128 k of 64 rows one contiguous run), one round, "
                   f"{ROT_CHECK_CALLS} checked calls each; the faster stays")
    p.add_argument("--split-pass", action="store_true",
                   help="instead of tuning: each int4 and NVFP4 fused entry of this GPU's helion table at --op, "
                   "--m and --kn (default: every one) whose programs (tiles x split, not persistent) are fewer than "
                   f"the GPU's SMs against its twin with twice the K split, one round, {ROT_CHECK_CALLS} checked "
                   "calls each; the faster stays")
    p.add_argument("--check", action="store_true",
                   help=f"instead of tuning: each int4 and NVFP4 fused entry of this GPU's helion table at --op, "
                   f"--m and --kn (default: every one) run {ROT_CHECK_CALLS} times against the fp64 reference "
                   "(two input sets in turn), not timed; exit 1 if any call of any entry is wrong (a config "
                   "right once can still race)")
    return p


def main() -> int:
    from qgemm_bench.errors import InputError

    try:
        args = parser().parse_args()
        twins = next((name for name in TWIN_PASSES if getattr(args, f"{name}_pass")), None)
        twin_pass_flag = f"--{twins}-pass" if twins else None
        if sum((args.rot_pass, args.check, *(getattr(args, f"{name}_pass") for name in TWIN_PASSES))) > 1:
            raise InputError("--rot-pass, --table-pass, --tiled-pass, --split-pass and --check are separate runs: "
                             "give one")
        if args.rot_pass and (args.mkn or args.variants or (args.op and args.op != ["nvfp4_gemm"])):
            raise InputError("--rot-pass times NVFP4 fused entries only: it takes --m, --kn and --rep, not "
                             "--mkn, --variants or another --op")
        if (twin_pass_flag or args.check) and (args.mkn or args.variants
                                                or set(args.op or []) & set(SPLIT_K_KERNELS)):
            flag, takes = (twin_pass_flag, "--op, --m, --kn and --rep") if twin_pass_flag else \
                ("--check", "--op, --m and --kn")
            raise InputError(f"{flag} takes int4 and NVFP4 fused entries only: it takes {takes}, not --mkn, "
                             "--variants or a split-K --op")
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    import torch

    from qgemm_bench.backends.helion_dispatch import save
    from qgemm_bench.harness import distributed
    from qgemm_bench.target import of

    if not torch.cuda.is_available():
        print("error: tuning needs a CUDA device", file=sys.stderr)
        return 2
    world = distributed.from_env()
    dev = torch.device(distributed.start(world, "cuda") if world else f"cuda:{torch.cuda.current_device()}")
    torch.cuda.set_device(dev)
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    target = of(dev)  # the store entry a pass reads and writes
    passing = "--rot-pass" if args.rot_pass else twin_pass_flag or ("--check" if args.check else None)
    if passing:
        ops = args.op or ["int4_gemm", "nvfp4_gemm"]
        work = rot_work(args.op, args.m, args.kn, target.name) if args.rot_pass else \
            twin_work(twins, ops, args.m, args.kn, target) if twins else \
            stored_work(ops, args.m, args.kn, target.name)
        if not work and twins and stored_work(ops, args.m, args.kn, target.name):
            print(f"{passing}: no such entry has a {twins} twin ({TWIN_PASSES[twins][1]}): nothing to time")
            if world:
                distributed.stop()
            return 0
        if not work:
            print(f"error: {passing}: no {'NVFP4 ' if args.rot_pass else ''}fused entries of this GPU's helion "
                  "table at those --op / --m / --kn", file=sys.stderr)
            if world:
                distributed.stop()
            return 2
    else:
        ms = args.m or WEIGHT_ONLY_M
        work = [(op, shape) for op in args.op or ["int4_gemm", "nvfp4_gemm", "split_k_gemm"]
                for shape in ((args.mkn or SPLIT_K_SHAPES) if op in SPLIT_K_KERNELS else
                              [(m, k, n) for k, n in args.kn or [(8192, 8192)] for m in ms])]
    if world:  # every rank its share; buckets cost about the same
        work = work[world.rank::world.size]
    def one(op, shape):  # a fused unit's winner then against its PDL 2 and TMA twins, as in `qgemm-bench tune`
        if args.rot_pass:
            return rot_entry(op, shape, dev, l2, target, args.rep)
        if twins:
            return twin_entry(twins, op, shape, dev, l2, target, args.rep)
        if args.check:
            return False if check_entry(op, shape, dev, target) else None
        r = tune(op, shape, dev, l2, args.rep, variants=args.variants or None)
        return twin_passes(r, op, shape, dev, l2, rep_ms=args.rep) if r and r["op"].endswith("_fused") else r

    results = [one(op, shape) for op, shape in work]
    done = [r for r in results if r]
    failed = sum(r is False for r in results)  # --rot-pass: a stored entry that failed its check
    if world:
        gathered = distributed.gather(done, world)
        distributed.stop()
        if not world.main:
            return 1 if failed else 0
        done = [r for part in gathered for r in part]
    for r in done:
        path = save(*r["save"])
        print(f"{r['op']:<26} {str(r['shape']):<20} {r['us']:9.1f} us  tuned in {r['tune_s']:5.1f} s -> {path.name}")
    if failed:
        print(f"error: {failed} stored entries failed their {ROT_CHECK_CALLS}-call check (left as they are)"
              + (" on this rank" if world else ""), file=sys.stderr)
    return 1 if failed else 0


ROT_CHECK_CALLS = 30  # the passes': rot and frag twins read bytes permuted for a register layout Helion must match


def rot_work(ops, ms, kns, slug: str, store=None) -> list[tuple]:
    """--rot-pass's (op, shape): the NVFP4 fused entries of GPU `slug`'s
    helion table at M in ms and (K, N) in kns (either None: any), N a
    multiple of ROT_ROWS (elsewhere helion_ops runs rot configs without it)."""
    from qgemm_bench.backends.helion_ops import ROT_ROWS

    if ops and "nvfp4_gemm" not in ops:
        return []
    return [w for w in stored_work(["nvfp4_gemm"], ms, kns, slug, store) if w[1][2] % ROT_ROWS == 0]


def stored_work(ops, ms, kns, slug: str, store=None) -> list[tuple]:
    """(op, shape) of the fused entries of ops in GPU `slug`'s helion table
    at M in ms and (K, N) in kns (either None: any)."""
    from qgemm_bench.backends.config_buckets import parse
    from qgemm_bench.backends.helion_dispatch import FAMILY
    from qgemm_bench.configs import store as config_store

    doc = (store or config_store.DEFAULT).read(slug, FAMILY) or {}
    return [(op, s) for op in ops for s in map(parse, doc.get("kernels", {}).get(f"{op}_fused", {}))
            if (not ms or s[0] in ms) and (not kns or tuple(s[1:]) in map(tuple, kns))]


# The passes that time each stored fused entry against a twin: name -> (twin_of(op, shape, config, target,
# store), what an entry without one is).
TWIN_PASSES = {
    "table": (helion_table_twin, "it is the table's config, or the table has none here"),
    "tiled": (lambda op, shape, c, target, store: helion_tiled_twin(c), "it is tiled, or reads by TMA or K steps "
              "of 256"),
    "split": (lambda op, shape, c, target, store: helion_split_twin(shape, c, target.sms),
              "its programs fill the SMs, or it is persistent"),
}


def twin_work(name: str, ops, ms, kns, target, store=None) -> list[tuple]:
    """--<name>-pass's (op, shape): stored_work's entries with such a twin
    (TWIN_PASSES), so that the ranks share only what is timed."""
    twin_of = TWIN_PASSES[name][0]
    return [(op, s) for op, s in stored_work(ops, ms, kns, target.name, store)
            if (entry := stored_fused(op, s, target, store, say=False)) is not None
            and twin_of(op, s, entry["config"], target, store) is not None]


def stored_fused(op_name: str, shape, target, store=None, say: bool = True) -> dict | None:
    """Target's stored fused entry at shape, or None (said, with say) where
    it has none or the path at M is no longer the fused one."""
    from qgemm_bench.backends.config_buckets import bucket
    from qgemm_bench.backends.helion_dispatch import FAMILY
    from qgemm_bench.configs import store as config_store

    kernel = kernel_name(op_name, shape[0], shape, target)
    doc = (store or config_store.DEFAULT).read(target.name, FAMILY) or {}
    entry = doc.get("kernels", {}).get(kernel, {}).get(bucket(*shape))
    if kernel != f"{op_name}_fused" or entry is None:
        if say:
            print(f"{op_name} {shape}: no fused entry here ({kernel}), skipped", flush=True)
        return None
    return entry


def stored_entry(op_name: str, shape, entry: dict, device, l2: int, target, twin_of, label: str,
                 rep_ms: float = REP_MS) -> dict | None:
    """Target's stored fused entry (stored_fused) at shape against
    twin_of(its config) (twin_pass, checked over ROT_CHECK_CALLS calls): the
    result to save where the twin won, None where the entry stays, False
    where the entry failed its check (it stays too: the caller says so)."""
    kernel = f"{op_name}_fused"
    info = {k: v for k, v in entry.items() if k != "config"}
    best = {"op": kernel, "shape": shape, "us": entry.get("us"), "tune_s": entry.get("tune_s", 0.0),
            "entry": entry, "save": (kernel, *shape, target.name, entry["config"], info)}
    r = twin_pass(best, twin_of, label, op_name, shape, device, l2, target=target, rep_ms=rep_ms,
                  check_calls=ROT_CHECK_CALLS)
    if r is None:
        return False
    return None if r is best else r


def check_entry(op_name: str, shape, device, target, calls: int = ROT_CHECK_CALLS, store=None) -> int | None:
    """How many of `calls` calls of Target's stored fused entry at shape
    miss the fp64 reference (wrong_calls, two input sets in turn, bf16);
    None where the shape has no fused entry (its path moved)."""
    import torch

    from qgemm_bench import operators
    from qgemm_bench.backends import registry
    from qgemm_bench.backends.helion_kernels import tuning
    from qgemm_bench.types import Case, Shape

    if (entry := stored_fused(op_name, shape, target, store)) is None:
        return None
    op, dtype = operators.get(op_name), torch.bfloat16 if device.type == "cuda" else torch.float16
    case = Case(op_name, Shape(*shape), dtype, device, op.Settings(), target)
    checks = [(inputs, op.reference(inputs)) for inputs in (op.make_inputs(case, 0), op.make_inputs(case, 1))]
    with tuning.options(explicit=entry["config"]):
        wrong = wrong_calls(case, registry.get(op_name, "helion"), checks, op.tolerance(dtype), calls)
    print(f"{op_name}_fused {shape}: {'WRONG in ' if wrong else ''}{wrong} of {calls} calls wrong: {entry['config']}",
          flush=True)
    return wrong


def rot_entry(op_name: str, shape, device, l2: int, target, rep_ms: float = REP_MS, store=None) -> dict | None:
    """stored_entry against the NVFP4 entry's rot twin (helion_rot_twin)."""
    if op_name != "nvfp4_gemm":
        print(f"{op_name} {shape}: rot is NVFP4's, skipped", flush=True)
        return None
    if (entry := stored_fused(op_name, shape, target, store)) is None:
        return None
    return stored_entry(op_name, shape, entry, device, l2, target, helion_rot_twin, "ROT", rep_ms)


def twin_entry(name: str, op_name: str, shape, device, l2: int, target, rep_ms: float = REP_MS,
               store=None) -> dict | None:
    """stored_entry against the entry's twin of pass `name` (TWIN_PASSES);
    an entry without one is not timed."""
    if (entry := stored_fused(op_name, shape, target, store)) is None:
        return None
    found, without = TWIN_PASSES[name]

    def twin_of(c):
        return found(op_name, shape, c, target, store)

    if twin_of(entry["config"]) is None:
        print(f"{op_name} {shape}: no {name} twin ({without}): skipped", flush=True)
        return None
    return stored_entry(op_name, shape, entry, device, l2, target, twin_of, name, rep_ms)


def m_list(text: str) -> list[int]:
    try:
        ms = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive integers separated by commas") from None
    if not ms or min(ms) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive integers separated by commas")
    return ms


def kn_pair(text: str) -> tuple[int, int]:
    try:
        k, n = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected K,N (two positive integers)") from None
    if k <= 0 or n <= 0 or k % 128:
        raise argparse.ArgumentTypeError(f"{text!r}: K and N must be positive, K a multiple of 128 (the group)")
    return k, n


def mkn_triple(text: str) -> tuple[int, int, int]:
    try:
        m, k, n = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected M,K,N (three positive integers)") from None
    if min(m, k, n) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: M, K and N must be positive")
    return m, k, n


def rep_ms(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 1 <= v <= 1000:  # false for nan
        raise argparse.ArgumentTypeError(f"{text!r}: expected milliseconds from 1 to 1000")
    return v


if __name__ == "__main__":  # the Helion autotuner's subprocesses re-import __main__
    sys.exit(main())
