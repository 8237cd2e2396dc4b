#!/usr/bin/env python3
"""GPU: the warp-specialized kernel (ws_gemm.py) side by side in one process:
per shape, each --tiles config with each build of the kernel (this checkout's
ws_gemm, and each --variant: a copy of ws_gemm.py with a change, e.g. the file
at another commit: `git show HEAD~1:qgemm_bench/backends/triton_kernels/ws_gemm.py
> /tmp/old.py`), and cuBLAS on bf16 weights (--cublas); each candidate checked
against the fp32 reference in --calls calls (each rotating copy at least
twice, its split planes NaN before each call, its counters zero after them
all), then timed in --rounds rounds (graph
timing over rotating copies > 2x L2, the runner's windows), in reverse order
every other round (as runner --repeats). Prints each candidate's median and
round p50s (us). The same-process A/Bs in docs/ws_gemm.md were
timed this way, by git-ignored scripts (exp/) before this one.

  python3 scripts/ws_ab.py --shape 256,8192,10240 --tiles 256x128x64s4+sk --tiles 256x128x64s4+split2+skew4
                           [--op int4_gemm] [--group-size 128] [--variant old=/tmp/old.py] [--cublas]
                           [--programs 128] [--rounds 3] [--calls 10] [--stall-timeout 120] [--copies N]
  python3 scripts/ws_ab.py --stamps --shape 256,8192,8192 --tiles 256x128x64s4+split2+skew4+pdl [--copies 1]

TILES: BMxBNxBKsSTAGES, then any of +splitN (SPLITS), +skewN (SKEW), +k2
(K_SPLIT 2), +sk (STREAM_K), +pdl (PDL 1; +pdl2: PDL 2), +mgN (M_GROUP: tiles in groups
of N x-row blocks), +acc (ACC 1, int4: the scales on each block's product);
checked by ws_gemm.check.
--programs: a stream-K launch's programs (ws_gemm.STREAM_K_PROGRAMS; default
one per SM). --stall-timeout: a candidate whose checked calls or one timing
run longer stops the script with one line naming it (exit 1): tiles that
hang (ws_gemm.MAX_SKEW_STAGES) would otherwise block it for ever.
--copies: rotating copies of the operands (default: as the runner, enough
to exceed 2x L2, so every call reads them from HBM; 1: the same operands
every call, in L2 where they fit).
--stamps: instead of the rounds, each candidate's timeline (this checkout's
kernel built with ws_gemm's STAMPS): a CUDA graph of back-to-back calls
over the copies, its time per call, then for the last call, per split,
the median [min-max] of each consumer's stamps (us from the call's first
consumer start, after any PDL wait: ws_gemm.STAMP_NAMES), the SM clock
over the K loops and the clocks per K block against what the wgmmas of an
SM's programs need at 4096 FLOP a clock (an H100 SM's dense bf16 rate).
The stamped build is not the benchmarked one: its time per call and its
loop (a few SASS instructions more) can differ a little."""

from __future__ import annotations

import argparse
import contextlib
import importlib.machinery
import importlib.util
import inspect
import math
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's qgemm_bench

from qgemm_bench.errors import InputError  # noqa: E402
from qgemm_bench.harness.args import Parser, int_in, stall_seconds  # noqa: E402
from qgemm_bench.harness.plan import parse_shape  # noqa: E402
from qgemm_bench.harness.watchdog import Watchdog, stall_reason  # noqa: E402

MAIN = "main"  # this checkout's ws_gemm
STALL_S = 120.0  # --stall-timeout's default: a candidate's compile and checked calls took under 20 s on the H100
_TILES = re.compile(r"(\d+)x(\d+)x(\d+)s(\d+)((?:\+[a-z]+\d*)*)")
_OPTIONS = {"split": "SPLITS", "skew": "SKEW", "k": "K_SPLIT", "sk": "STREAM_K", "pdl": "PDL", "mg": "M_GROUP",
            "acc": "ACC"}
_FLAGS = ("sk", "acc")  # options without a number
_MAYBE = ("pdl",)  # options whose number is optional (+pdl: 1)


def parse_tiles(text: str, fmt: int) -> dict:
    """A --tiles value as the kernel's WS config (fused_gemm.ws_tiles's keys),
    checked by ws_gemm.check for format fmt; InputError in one line if not."""
    from qgemm_bench.backends.triton_kernels import ws_gemm

    m = _TILES.fullmatch(text.strip())
    if not m:
        raise InputError(f"--tiles {text!r}: expected BMxBNxBKsSTAGES[+splitN][+skewN][+k2][+sk][+pdl[2]][+mgN][+acc] "
                         "(e.g. 256x128x64s4+split2+skew4)")
    c = dict(zip(ws_gemm.TILE_KEYS, map(int, m.groups()[:4]), strict=True))
    for opt in filter(None, m.group(5).split("+")):
        name, value = re.fullmatch(r"([a-z]+)(\d*)", opt).groups()
        if name not in _OPTIONS or name not in _MAYBE and (name in _FLAGS) != (value == "") or _OPTIONS[name] in c:
            raise InputError(f"--tiles {text!r}: {opt!r} is not one of +splitN, +skewN, +k2, +sk, +pdl, +pdl2, +mgN, "
                             "+acc (each once)")
        c[_OPTIONS[name]] = int(value) if value else 1
    try:
        ws_gemm.check(c, fmt)
    except ValueError as e:
        raise InputError(f"--tiles {text!r}: {e}") from None
    return c


def load_variant(name: str, path: Path):
    """A copy of ws_gemm.py as a module of its own (its kernels compile apart
    from this checkout's)."""
    loader = importlib.machinery.SourceFileLoader(f"ws_gemm_{name}", str(path))
    spec = importlib.util.spec_from_file_location(f"ws_gemm_{name}", path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # noqa: BLE001 - a variant that does not import is the user's to fix, in one line
        raise InputError(f"--variant {name}={path}: does not import ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''})") from None
    if not all(hasattr(mod, f) for f in ("run", "weight_descriptors", "usable", "reads")):
        raise InputError(f"--variant {name}={path}: not a ws_gemm.py (no run, weight_descriptors, usable, reads)")
    return mod


def parse_args(argv=None):
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", choices=["int4_gemm", "nvfp4_gemm"], default="int4_gemm")
    p.add_argument("--shape", action="append", metavar="M,K,N", required=True, help="a shape (repeatable)")
    p.add_argument("--tiles", action="append", metavar="TILES", required=True,
                   help="WS tiles to time (repeatable; see above)")
    p.add_argument("--variant", action="append", metavar="NAME=PATH", default=[],
                   help="another build of ws_gemm.py to time each --tiles with (repeatable)")
    p.add_argument("--group-size", type=int_in(2, 1 << 20), default=None, help="int4 group (default 128)")
    p.add_argument("--cublas", action="store_true", help="also time x @ w on bf16 weights")
    p.add_argument("--triton", action="store_true",
                   help="also time the triton backend as a run takes it (its table's config for the shape), "
                        "checked against the reference in as many calls (its workspaces are its own: not "
                        "NaN-poisoned nor their counters checked, as the tiles' are)")
    p.add_argument("--programs", type=int_in(1, 100_000), default=None,
                   help="stream-K programs per launch, at most the SMs (default: one per SM)")
    p.add_argument("--rounds", type=int_in(1, 100), default=3, help="rounds per shape (default 3)")
    p.add_argument("--calls", type=int_in(1, 1000), default=10, help="checked calls per candidate (default 10)")
    p.add_argument("--copies", type=int_in(1, 64), default=None,
                   help="rotating operand copies (default: enough to exceed 2x L2, as the runner)")
    p.add_argument("--stamps", action="store_true",
                   help="print each candidate's per-program timeline instead of timing rounds (see above)")
    p.add_argument("--stall-timeout", type=stall_seconds, default=STALL_S, metavar="S",
                   help="stop (exit 1, naming the candidate) when one candidate's checked calls or one of its "
                        f"timings take more than S seconds, e.g. tiles that hang (default {STALL_S:g}; 0: off)")
    args = p.parse_args(argv)
    args.shapes = [parse_shape(s) for s in args.shape]
    if args.op == "nvfp4_gemm" and args.group_size is not None:
        raise InputError("--group-size is for int4_gemm (NVFP4 blocks are 16)")
    args.group_size = args.group_size or 128
    from qgemm_bench.operators.formats import INT4, NVFP4

    args.fmt = INT4 if args.op == "int4_gemm" else NVFP4
    args.configs = [parse_tiles(t, args.fmt) for t in args.tiles]
    from qgemm_bench.backends.triton_kernels.split_k_configs import ws_label

    labels = [ws_label(c) for c in args.configs]
    twice = sorted({x for x in labels if labels.count(x) > 1})
    if twice:
        raise InputError(f"--tiles: the same tiles twice ({', '.join(twice)}; SKEW 0, SPLITS 1 and K_SPLIT 1 "
                         "are the defaults)")
    if args.stamps and (args.variant or args.cublas or args.triton or any(c.get("STREAM_K") for c in args.configs)):
        raise InputError("--stamps: this checkout's kernel alone (no --variant, --cublas, --triton or +sk tiles: "
                         "stream-K's consumers are not stamped)")
    args.variants = {}
    for v in args.variant:
        name, sep, path = v.partition("=")
        if not sep or not re.fullmatch(r"\w+", name) or name == MAIN or name in args.variants:
            raise InputError(f"--variant {v!r}: expected NAME=PATH, NAME a word other than {MAIN!r}, each once")
        if not Path(path).is_file():
            raise InputError(f"--variant {v!r}: no such file {path!r}")
        args.variants[name] = Path(path)
    return args


def _step(args, label: str):
    """The block under main()'s watchdog (--stall-timeout), if it set one."""
    watch = getattr(args, "watch", None)
    return watch.step(label) if watch else contextlib.nullcontext()


def _workspaces(cache: dict):
    """The (fp32 planes, int32 counters) pairs a ws_gemm.run cache holds."""
    return [v for v in cache.values() if isinstance(v, tuple) and len(v) == 2]


def poison(cache: dict) -> None:
    """Fill a run cache's partial-sum planes with NaN."""
    for planes, _ in _workspaces(cache):
        planes.fill_(math.nan)


def counters(cache: dict) -> list:
    return [count for _, count in _workspaces(cache)]


def worst(errs: list[float]) -> float:
    """The largest of the checked calls' errors, NaN above all (max() keeps
    the first value where a NaN follows it)."""
    return max(errs, key=lambda e: e if e == e else math.inf)


def candidates(args, shape, dev, builds: dict) -> tuple[dict, list]:
    """(label -> calls over rotating copies of the weights and x, notes):
    each config with each build where it runs, checked args.calls times
    against the fp32 reference (a wrong or failing one noted, not timed),
    cuBLAS on bf16 weights with --cublas and the triton backend with
    --triton (checked in as many calls; its workspaces, the backend's own,
    are neither poisoned nor their counters checked)."""
    import torch

    from qgemm_bench import operators
    from qgemm_bench.backends.triton_kernels.fused_gemm import FusedGemm
    from qgemm_bench.backends.triton_kernels.split_k_configs import ws_label
    from qgemm_bench.backends.triton_ops import weight_args
    from qgemm_bench.harness.measure import copies_for
    from qgemm_bench.operators.common import rel_error
    from qgemm_bench.target import of
    from qgemm_bench.types import Case

    op = operators.get(args.op)
    settings = op.Settings(args.group_size) if args.op == "int4_gemm" else op.Settings()
    case = Case(args.op, shape, torch.bfloat16, dev, settings)
    first = op.make_inputs(case, 0)
    per = sum(t.numel() * t.element_size() for t in (first.x, *weight_args(args.op, first)[:3]) if t is not None)
    copies = args.copies or (copies_for(per, per, args.l2_bytes, dev) if dev.type == "cuda" else 2)  # CPU: two
    inputs = [first] + [op.make_inputs(case, i) for i in range(1, copies)]
    gemms = [FusedGemm(*weight_args(args.op, i), config=lambda m: {}, target=of(dev)) for i in inputs]
    refs, tol = [op.reference(i) for i in inputs], op.tolerance(torch.bfloat16)
    fns, notes = {}, []
    args.stamp_bufs = {}
    for c in args.configs:
        for name, mod in builds.items():
            label = f"{ws_label(c)} @{name}"
            g = gemms[0]
            try:
                # The Target (shared memory, SMs) where a build takes it (builds before Targets did not).
                takes = inspect.signature(mod.usable).parameters.keys() | inspect.signature(mod.run).parameters.keys()
                target = [g.target] if "target" in takes else []
                sms = {"sms": g.target.sms} if "sms" in takes else {}
                if not (mod.reads(g.kmajor, c) and mod.usable(g.fmt, g.group, g.k, g.n, first.x, c, *target)):
                    notes.append(f"{label}: the kernel does not run these tiles here (ws_gemm.usable)")
                    continue
                calls, caches, st = [], [], None
                if args.stamps:  # one buffer: the last call's stamps stay
                    st = torch.zeros(mod.stamp_slots(mod.launch_programs(g.kmajor, shape.M, g.n, c)),
                                     dtype=torch.int64, device=dev)
                    args.stamp_bufs[label] = (st, c, g.kmajor)
                for gemm, i in zip(gemms, inputs, strict=True):
                    descs, cache = mod.weight_descriptors(gemm.kmajor, c, gemm.fmt, gemm.group), {}
                    caches.append(cache)
                    calls.append(lambda m=mod, f=gemm, x=i.x, c=c, d=descs, w=cache, st=st, sms=sms:
                                 m.run(f.kmajor, f.fmt, f.group, f.ts, x, c, d, w, **sms,
                                       **({"stamps": st} if st is not None else {})))
                # Each copy in turn, each at least twice; before each call its partial-sum planes are
                # NaN (a sum read before it was stored shows), after all of them every counter is 0.
                n = max(args.calls, 2 * len(calls))
                errs = []
                with _step(args, f"{label}'s {n} checked calls at {shape.M}x{shape.K}x{shape.N}"):
                    for j in range(n):
                        poison(caches[j % len(calls)])
                        errs.append(rel_error(calls[j % len(calls)](), refs[j % len(calls)]))
                left = sum(int(t.count_nonzero()) for cache in caches for t in counters(cache))
            except Exception as e:  # noqa: BLE001 - this candidate's failure: say so, time the rest
                notes.append(f"{label}: {type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}")
                continue
            if not all(e <= tol for e in errs):  # NaN too
                notes.append(f"{label}: WRONG (error {worst(errs):.2e} > {tol:g} in {n} calls), not timed")
                continue
            if left:
                notes.append(f"{label}: WRONG ({left} split counters not zeroed after {n} calls), not timed")
                continue
            fns[label] = calls
    if args.triton:
        from qgemm_bench.backends import registry

        triton = registry.get(args.op, "triton")
        try:
            if (why := triton.why_not(case)) is not None:
                raise RuntimeError(why)
            with _step(args, f"triton's compile at {shape.M}x{shape.K}x{shape.N}"):
                prepared = [triton.prepare(case, i) for i in inputs]
            n = max(args.calls, 2 * len(prepared))
            with _step(args, f"triton's {n} checked calls at {shape.M}x{shape.K}x{shape.N}"):
                errs = [rel_error(prepared[j % len(prepared)].fn(), refs[j % len(prepared)]) for j in range(n)]
            if all(e <= tol for e in errs):
                fns["triton (the run's)"] = [p.fn for p in prepared]
                notes.append(f"triton (the run's): {prepared[0].notes or 'its table config'}")
            else:
                notes.append(f"triton (the run's): WRONG (error {worst(errs):.2e} > {tol:g} in {n} calls), not timed")
        except Exception as e:  # noqa: BLE001 - say so, time the rest
            notes.append(f"triton (the run's): {type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}")
    if args.cublas:
        dense = [op.dequantize(i).to(torch.bfloat16) for i in inputs]
        fns["cublas (bf16 weights)"] = [lambda x=i.x, w=w: x @ w for i, w in zip(inputs, dense, strict=True)]
    return fns, notes


def compare(args, shape, dev, builds: dict, timer=None) -> None:
    """Print the rounds of one shape (timer(fns, warmup_ms, rep_ms) -> a
    harness Timing; the runner's graph timing by default)."""
    from qgemm_bench.harness.measure import Settings
    from qgemm_bench.harness.sweep import time_rounds
    from qgemm_bench.harness.timing import time_graph

    timer = timer or time_graph
    s = Settings()
    fns, notes = candidates(args, shape, dev, builds)
    if args.stamps:
        for k in fns:
            with _step(args, f"{k}'s stamped calls at {shape.M}x{shape.K}x{shape.N}"):
                print("\n".join(timeline(args, shape, k, fns[k])))
        for n in notes:
            print(f"  {n}")
        sys.stdout.flush()
        return
    def time_one(k):
        with _step(args, f"{k}'s timing at {shape.M}x{shape.K}x{shape.N}"):
            return statistics.median(timer(fns[k], s.warmup_ms, s.rep_ms).samples_us)

    times, failed = time_rounds(list(fns), args.rounds, time_one)
    notes += failed
    print(f"{args.op} {shape.M}x{shape.K}x{shape.N}: {args.rounds} rounds, p50 us (median; each round's)")
    for k, v in sorted(times.items(), key=lambda kv: statistics.median(kv[1])):
        print(f"  {statistics.median(v):9.2f}  {k}  ({' / '.join(f'{u:.2f}' for u in v)})")
    for n in notes:
        print(f"  {n}")
    sys.stdout.flush()


STAMP_GRAPH_CALLS = 40  # calls in a --stamps graph (each copy at least twice)


def timeline(args, shape, label: str, calls: list) -> list[str]:
    """--stamps: the lines for one candidate (module docstring)."""
    import torch

    from qgemm_bench.backends.triton_kernels import ws_gemm

    st, c, kmajor = args.stamp_bufs[label]
    n = max(STAMP_GRAPH_CALLS, 2 * len(calls))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for j in range(n):
            calls[j % len(calls)]()
    graph.replay()  # warm
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    per_call = start.elapsed_time(end) * 1e3 / (3 * n)
    return [f"{args.op} {shape.M}x{shape.K}x{shape.N} {label}: {per_call:.2f} us per call (a CUDA graph of {n} "
            f"back-to-back calls over {len(calls)} operand copies)",
            *stamp_lines(st.view(-1, 2, ws_gemm.STAMP_SLOTS).cpu(), c, kmajor)]


def stamp_lines(raw, c: dict, kmajor) -> list[str]:
    """timeline's summary of one launch's int64 stamps raw [programs, 2,
    slots] (ws_gemm.stamp_slots; unset slots are 0): the SM clock over the K
    loops, then per split (with K_SPLIT 2 per part) the clocks per K block
    and each stamp's median [min-max] in us from the first start, a stamp
    some consumers left unset said so. Differences are taken in int64: the
    timer counts ns since the epoch, past float64's ns resolution."""
    from qgemm_bench.backends.triton_kernels import ws_gemm

    splits, per = ws_gemm.launch_splits(kmajor, c)
    blocks = ws_gemm.padded_k(kmajor) // c["BLOCK_K"]
    consumers, k_split = c["BLOCK_N"] // ws_gemm.WG_ROWS, c.get("K_SPLIT", 1)
    used = raw[:, :consumers * k_split].long()
    t0 = used[:, :, 0].min()
    loop_ns = (used[:, :, 1] - used[:, :, 0]).double()
    clocks = (used[:, :, 7] - used[:, :, 6]).double()
    per_sm = ws_gemm.programs_per_sm(c)
    need = per_sm * consumers * ws_gemm.WG_ROWS * c["BLOCK_M"] * c["BLOCK_K"] * 2 / 4096  # an SM's, per K block
    fmt = lambda t: f"{t.median():.1f} [{t.min():.1f}-{t.max():.1f}]"  # noqa: E731
    lines = [f"  SM clock over the K loops {fmt(clocks / loop_ns)} GHz; {need:.0f} clocks per K block for the "
             f"wgmmas of {'the two programs on an SM' if per_sm == 2 else 'the program'} at 4096 FLOP a clock"]
    groups = [(f" part {p}", slice(p, p + 1)) for p in range(2)] if k_split == 2 else [("", slice(None))]
    for sp in range(splits):
        nb = per if sp < splits - 1 else blocks - (splits - 1) * per
        for part, cols in groups:
            rows = used[sp::splits, cols]
            parts = [f"clocks per K block {fmt(clocks[sp::splits, cols] / nb)}"]
            for i, name in enumerate(ws_gemm.STAMP_NAMES[:6]):
                col = rows[:, :, i]
                unset = int((col == 0).sum())
                if unset < col.numel():
                    us = (col[col != 0] - t0).double() / 1e3
                    parts.append(f"{name} {fmt(us)}" + (f" (unset in {unset} of {col.numel()})" if unset else ""))
            lines.append(f"  split {sp} of {splits}{part} ({nb} K blocks): " + "; ".join(parts))
    return lines


def unknown_keys(builds: dict, configs: list[dict]) -> str:
    """A line naming a build whose ws_gemm lacks a key of the --tiles (an
    older build would run them without it, unnoticed), or ""."""
    for name, mod in builds.items():
        known = (*getattr(mod, "TILE_KEYS", ()), *getattr(mod, "OPTIONAL_KEYS", ()))
        if known and (lacks := {k for c in configs for k in c if k not in known}):
            return f"--variant {name}: its ws_gemm has no {', '.join(sorted(lacks))} (an older build): leave those " \
                "tiles out"
    return ""


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
        builds = {name: load_variant(name, path) for name, path in args.variants.items()}
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("error: ws_ab.py needs a CUDA device (an sm_90 GPU)", file=sys.stderr)
        return 2
    from qgemm_bench.backends.triton_kernels import ws_gemm

    builds = {MAIN: ws_gemm, **builds}
    if unknown := unknown_keys(builds, args.configs):
        print(f"error: {unknown}", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    if args.programs is not None and args.programs > sms:
        print(f"error: --programs {args.programs}: at most the GPU's {sms} SMs (stream-K waits on programs "
              "that must all be running)", file=sys.stderr)
        return 2
    for mod in builds.values():
        mod.STREAM_K_PROGRAMS = args.programs
    args.l2_bytes = torch.cuda.get_device_properties(dev).L2_cache_size

    def stalled(label: str) -> int:
        print(f"error: {stall_reason(label, args.stall_timeout)}: leave those tiles out", file=sys.stderr)
        return 1

    args.watch = Watchdog(args.stall_timeout, stalled)
    from qgemm_bench.harness.sweep import exit_on_lost_context

    def body() -> int:
        for shape in args.shapes:
            compare(args, shape, dev, builds)
        return 0

    return exit_on_lost_context(body)


if __name__ == "__main__":
    sys.exit(main())
