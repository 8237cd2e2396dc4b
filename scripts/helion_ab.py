#!/usr/bin/env python3
"""GPU: the Helion fused kernel's TMA and persistent variants against its
store entry and the Triton backend, in one process: per op and M (K, N from
--kn), the Helion config the store gives the shape ("entry"), each of
candidates.helion_fused_variants of it (tma: x and weights by tensor
descriptors; persistent_blocked; tma on persistent_interleaved; tma one
pipeline stage deeper; with L2 groups where M has 2+ tiles; the entry
with acc_scale switched (int4 and NVFP4); NVFP4: the entry and that twin
with bf16_scales switched (FusedGemm's bf16 block scales, no conversion in
the loop); M <= 64: with acc_scale (int4) and PDL 2; int4: each
of these with frag switched, fragment-order weights, where helion_ops
takes frag (helion_ops.frag_tile_ok: tiles of up to FRAG_MAX_BLOCK_M rows,
wider ones on 4 warps) and in any tile of up to --frag-rows rows; there, a
wider tile on more warps also on 4, with and without frag) and the `triton`
backend as a run would take it; where that runs the warp-specialized Gluon
kernel, also its entry's config on the non-specialized fused_kernel ("triton
no WS"). Each is checked against the reference first
(a wrong one is reported and not timed), then timed in --rounds rounds
(graph timing over rotating copies > 2x L2, as the runner), in reverse
order every other round. --config adds a Helion config of your own (JSON,
e.g. '{"block_sizes": [128, 256], "block_k": 128, "num_warps": 8,
"num_stages": 3, "frag": true, "tma": true}'; keys it leaves out are the
entry's) at every shape. Prints each one's median p50 (us), its rounds and
helion / triton, then per variant the geometric mean of helion / triton.

  python3 scripts/helion_ab.py [--op int4_gemm,nvfp4_gemm] [--m 64,256,1024] [--kn 8192,8192]
                               [--rounds 2] [--warmup 5] [--rep 25] [--frag-rows 64] [--config JSON ...]
                               [--check-calls 1] [--entry-only]
  python3 scripts/helion_ab.py --cpu-smoke   # tiny shapes on the Triton interpreter (fp16): the script runs

--cpu-smoke patches in what the interpreter lacks (tensor descriptors, an
SM count: Helion's own test hooks); its times mean nothing."""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import sys
from pathlib import Path
from unittest import mock

if "--cpu-smoke" in sys.argv[1:]:  # before triton is imported
    os.environ["TRITON_INTERPRET"] = "1"

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's qgemm_bench

from qgemm_bench.errors import InputError, one_line  # noqa: E402
from qgemm_bench.harness.args import Parser, float_in, int_in, parsed, positive_milliseconds  # noqa: E402

OPS = ("int4_gemm", "nvfp4_gemm")
GROUP = 128  # int4's
SMOKE = {"m": [65, 100], "kn": (256, 72)}  # --cpu-smoke: fused path (M > 64 on a GPU-less target), ragged N


def parse_args(argv=None):
    p = Parser(description=__doc__, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("--op", default=",".join(OPS), help="comma-separated, of int4_gemm, nvfp4_gemm (default both)")
    p.add_argument("--m", default="64,256,1024", help="comma-separated M values (default 64,256,1024)")
    p.add_argument("--kn", default="8192,8192", metavar="K,N", help="the layer (default 8192,8192)")
    p.add_argument("--rounds", type=int_in(1, 20), default=2, help="rounds (default 2)")
    p.add_argument("--warmup", type=float_in(0.0, 10_000.0, unit=" ms"), default=5.0, help="ms per timing (default 5)")
    p.add_argument("--rep", type=positive_milliseconds, default=25.0, help="timed ms per round (default 25)")
    p.add_argument("--frag-rows", type=int_in(16, 256), default=None,
                   help="int4's frag twins also in tiles of up to this many rows on any warps (default "
                   "helion_ops.FRAG_MAX_BLOCK_M, 64: above it fragment order gave wrong sums on 8 warps, so "
                   "helion_ops takes it there on 4 only; each twin is checked against the reference before it "
                   "is timed)")
    p.add_argument("--config", action="append", default=[], metavar="JSON",
                   help="a Helion config of your own, timed at every shape too (repeatable; keys it leaves out "
                   "are the entry's; tma: true also sets indexing tensor_descriptor)")
    p.add_argument("--check-calls", type=int_in(1, 1000), default=1,
                   help="calls each candidate is checked over before it is timed (default 1; the 8-warp "
                   "fragment-order tiles' wrong sums came in some calls only: 30)")
    p.add_argument("--entry-only", action="store_true",
                   help="the entry (and --config's) alone, none of its variants: triton, triton no WS and the "
                   "entry at many shapes in little time")
    p.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on the Triton interpreter (fp16)")
    args = p.parse_args(argv)
    args.configs = []
    for text in args.config:
        try:
            cfg = json.loads(text)
        except ValueError as e:
            raise InputError(f"--config {text!r}: not JSON ({e})") from None
        if not isinstance(cfg, dict):
            raise InputError(f"--config {text!r}: expected a JSON object of config keys")
        args.configs.append({**cfg, **({"indexing": "tensor_descriptor"} if cfg.get("tma") else {})})
    args.ops = [o.strip() for o in args.op.split(",")]
    if not args.ops or not set(args.ops) <= set(OPS):
        raise InputError(f"--op {args.op!r}: expected a comma-separated subset of {', '.join(OPS)}")
    try:
        args.ms = [int(v) for v in args.m.split(",")]
        k, n = (int(v) for v in args.kn.split(","))
    except ValueError:
        raise InputError(f"--m {args.m!r} / --kn {args.kn!r}: expected integers separated by commas") from None
    if min(args.ms) < 1 or k < 1 or n < 1 or k % GROUP:
        raise InputError(f"--m {args.m!r} / --kn {args.kn!r}: positive, K a multiple of {GROUP} (int4's group)")
    args.k, args.n = k, n
    if args.cpu_smoke:
        args.ms, (args.k, args.n) = SMOKE["m"], SMOKE["kn"]
    return args


def label(cfg: dict, entry: dict) -> str:
    """A variant's name: what it adds to the entry's config."""
    parts = [f"{key} {cfg[key]}" for key in ("block_sizes", "block_k", "split_k") if cfg.get(key) != entry.get(key)]
    parts += ["tma"] if cfg.get("tma") else []
    parts += [cfg["pid_type"]] if "pid_type" in cfg else []
    parts += [f"l2 {cfg['l2_groupings'][0]}"] if "l2_groupings" in cfg else []
    parts += [f"stages {cfg['num_stages']}"] if cfg["num_stages"] != entry["num_stages"] else []
    parts += [f"warps {cfg['num_warps']}"] if cfg["num_warps"] != entry["num_warps"] else []
    parts += [f"acc_scale {bool(cfg.get('acc_scale'))}"] if bool(cfg.get("acc_scale")) != bool(entry.get("acc_scale")) \
        else []
    parts += [f"pdl {cfg.get('pdl', 0)}"] if cfg.get("pdl", 0) != entry.get("pdl", 0) else []
    parts += [f"frag {bool(cfg.get('frag'))}"] if bool(cfg.get("frag")) != bool(entry.get("frag")) else []
    parts += [f"bf16_scales {bool(cfg.get('bf16_scales'))}"] \
        if bool(cfg.get("bf16_scales")) != bool(entry.get("bf16_scales")) else []
    parts += [f"rot {bool(cfg.get('rot'))}"] if bool(cfg.get("rot")) != bool(entry.get("rot")) else []
    parts += [f"tiled {bool(cfg.get('tiled'))}"] if bool(cfg.get("tiled")) != bool(entry.get("tiled")) else []
    return "helion " + ("+".join(parts) if cfg != entry else "entry")


def candidates(op, case, inputs: list, refs: list, tol, target, frag_rows: int | None = None,
               own: list | None = None, check_calls: int = 1, entry_only: bool = False) -> tuple[dict, list[str], dict]:
    """({label: [a call per input copy]}, notes, {label: config}): the
    entry, its variants, triton; each checked before it is timed.
    frag_rows: int4's frag twins also in tiles of up to this many rows on
    any warps (default helion_ops.FRAG_MAX_BLOCK_M, which is lifted to it
    meanwhile); elsewhere where helion_ops.frag_tile_ok takes frag. own:
    --config's, each over the entry's config. check_calls: calls each is
    checked over, taking the input copies in turn, each against its own
    reference (refs): a call that returned the last call's output fails.
    entry_only: none of the entry's variants (own's still)."""
    from qgemm_bench.backends import helion_ops, registry
    from qgemm_bench.backends.helion_kernels import tuning
    from qgemm_bench.backends.helion_ops import FRAG_MAX_BLOCK_M, WeightOnly, frag_tile_ok, tma_k_inner
    from qgemm_bench.operators.common import cycled_errors
    from qgemm_bench.operators.formats import INT4, NVFP4
    from qgemm_bench.tuning.candidates import helion_fused_variants, tma_twin

    m = case.shape.M
    frag_rows = frag_rows or FRAG_MAX_BLOCK_M

    def gemm(i):
        if op.NAME == "int4_gemm":
            return WeightOnly(op.NAME, i.w, i.scales, None, INT4, i.group_size, target)
        return WeightOnly(op.NAME, i.w, i.block_scales.contiguous(), i.tensor_scale, NVFP4, None, target)

    fns, notes, configs = {}, [], {}

    def add(name: str, calls: list, note: str = "") -> None:
        try:
            errs = cycled_errors(calls, refs, check_calls)
        except Exception as e:  # noqa: BLE001 - a candidate that cannot run here: say so, compare the rest
            notes.append(f"{name}: {one_line(e, 160)}")
            return
        wrong = [e for e in errs if not e <= tol]  # nan included
        if wrong:
            notes.append(f"{name}: WRONG in {len(wrong)} of {check_calls} calls (relative error up to "
                         f"{max(wrong):.2e} > {tol:g}), not timed")
            return
        fns[name] = calls
        if note:
            notes.append(f"{name}: {note}")

    entry_gemm = gemm(inputs[0])
    try:
        ready = entry_gemm.bound(inputs[0].x)
    except Exception as e:  # noqa: BLE001
        notes.append(f"helion entry: {one_line(e, 160)}")
        ready = None
    path = entry_gemm.path(m)
    helion = []
    if ready is not None:
        entry = dict(ready.config)
        helion = [entry]  # an entry that is a variant already (tma, persistent): its twins once
        variants = []  # --entry-only: none (--config's still)
        if not entry_only:
            # The entry with the other acc_scale too (kernels.fused's: int4, on each K step's product where one
            # group spans the step; NVFP4, one dot a K step).
            twin = [{**entry, "acc_scale": not entry.get("acc_scale")}]
            # NVFP4: both with bf16_scales switched (kernels.fused's: FusedGemm's bf16 E4M3 x 2^118 block
            # scales loaded as the PTX decode's operand, not E4M3 converted per weight in the loop).
            twin += [{**c, "bf16_scales": not entry.get("bf16_scales")} for c in (entry, *twin)] \
                if op.NAME == "nvfp4_gemm" else []
            # At decode sizes, also launched early (PDL 2), as the Triton table's configs there.
            twin += [{**entry, "acc_scale": op.NAME == "int4_gemm", "pdl": 2}] \
                if m <= 64 and not entry.get("pdl") else []
            # int4: both of those with frag switched (kernels.fused's fragment-order weights; NVFP4's always
            # are), each where helion_ops takes frag in its tile (frag_tile_ok: up to FRAG_MAX_BLOCK_M rows,
            # wider on 4 warps, any tile read by TMA with x K-innermost: tma_k_inner) or --frag-rows lifts that
            # to the tile's rows; then a wide entry on more warps also on 4, as the Triton kernel's tiles there.
            wide = entry["block_sizes"][1] > FRAG_MAX_BLOCK_M
            lifted = entry["block_sizes"][1] <= frag_rows
            twin += [{**entry, "num_warps": 4}] if wide and lifted and entry["num_warps"] != 4 else []
            # (and the entry's tma variant's: on TMA loads the 8-warp 128x256 frag tile has no write to a pending
            # wgmma's operand registers offline, where its pointer-load twin, wrong on the H200, has 14)
            tma = tma_twin(entry) if path == "fused" else None
            twin += [{**c, "frag": not entry.get("frag")} for c in (entry, *([tma] if tma else []), *twin)
                     if lifted or frag_tile_ok(c, tma_k_inner(c, case.shape.K, m))] if op.NAME == "int4_gemm" else []
            variants = [*helion_fused_variants(entry, m), *twin]
        for v in [*variants, *({**entry, **c} for c in own or ())] if path == "fused" else []:
            if label(v, entry) not in [label(c, entry) for c in helion]:
                helion.append(v)
        if path != "fused":
            notes.append(f"helion takes the {path} path at M = {m}: no variants")
        notes.append(f"helion entry: {entry} ({ready.notes or 'the store entry'})")
    for cfg in helion:
        name = label(cfg, helion[0])
        try:
            with tuning.options(explicit=cfg), \
                    mock.patch.object(helion_ops, "FRAG_MAX_BLOCK_M", max(frag_rows, FRAG_MAX_BLOCK_M)):
                gemms = [gemm(i) for i in inputs]
                for g, i in zip(gemms, inputs, strict=True):  # bound and compiled under this config
                    g.bound(i.x)
        except Exception as e:  # noqa: BLE001
            notes.append(f"{name}: {one_line(e, 160)}")
            continue
        # Each WeightOnly runs its own compiled config (WeightOnly.__call__: configs of one shape share
        # Helion's bound kernel), launched as a run launches it (PDL included).
        calls = [lambda g=g, x=i.x: g(x) for g, i in zip(gemms, inputs, strict=True)]
        configs[name] = cfg
        add(name, calls)
    triton = registry.get(op.NAME, "triton")
    if (why := triton.why_not(case)) is not None:
        notes.append(f"triton: {why}")
    else:
        prepared = [triton.prepare(case, i) for i in inputs]
        add("triton", [p.fn for p in prepared], prepared[0].notes)
        add_without_ws(op, case, inputs, target, add, notes)
    return fns, notes, configs


def add_without_ws(op, case, inputs: list, target, add, notes: list) -> None:
    """Where the Triton backend runs the warp-specialized Gluon kernel at M:
    the same entry's config on fused_kernel, the non-specialized Triton loop
    ("triton no WS"): what separates Helion (no warp specialization on sm_90)
    from our fastest kernel there, feature by feature (issue 55)."""
    from qgemm_bench.backends.triton_dispatch import make_weight_only
    from qgemm_bench.backends.triton_ops import weight_args

    m = case.shape.M
    gemms = [make_weight_only(*weight_args(op.NAME, i), target=target) for i in inputs]
    if gemms[0].path(m) != "fused":
        return
    cfg, _ = gemms[0].tuned(m, "fused")
    if not (cfg or {}).get("WS"):
        return
    plain = {k: v for k, v in cfg.items() if k != "WS"}
    notes.append(f"triton no WS: {plain} (the entry's WS tiles were {cfg['WS']})")
    gemms = [make_weight_only(*weight_args(op.NAME, i), config=plain, path="fused", target=target) for i in inputs]
    add("triton no WS", [lambda g=g, x=i.x: g(x.contiguous()) for g, i in zip(gemms, inputs, strict=True)])


def compare(args, op_name: str, m: int, dev, dtype, timer, l2_bytes: int, target) -> dict:
    """Print one shape's rounds; returns {label: median us}."""
    from qgemm_bench import operators
    from qgemm_bench.harness.measure import copies_for
    from qgemm_bench.harness.sweep import time_rounds
    from qgemm_bench.types import Case, Shape

    op = operators.get(op_name)
    settings = op.Settings(GROUP) if op_name == "int4_gemm" else op.Settings()
    case = Case(op_name, Shape(m, args.k, args.n), dtype, dev, settings, target)
    first = op.make_inputs(case, 0)
    per = sum(t.numel() * t.element_size() for t in first.tensors()) + m * args.n * 2
    copies = copies_for(per, per, l2_bytes, dev) if dev.type == "cuda" else 1
    inputs = [first] + [op.make_inputs(case, i) for i in range(1, copies)]
    fns, notes, configs = candidates(op, case, inputs, [op.reference(i) for i in inputs], op.tolerance(dtype), target,
                                     args.frag_rows, args.configs, args.check_calls, args.entry_only)
    times, failed = time_rounds(list(fns), args.rounds, lambda k: statistics.median(
        timer(fns[k], args.warmup, args.rep).samples_us))
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med.get("triton")
    print(f"{op_name} {m}x{args.k}x{args.n}{f' g{GROUP}' if op_name == 'int4_gemm' else ''}: {args.rounds} rounds, "
          f"{len(inputs)} rotating copies; median p50 us, each round's, helion / triton")
    for k, v in sorted(times.items(), key=lambda kv: med[kv[0]]):
        ratio = f"{med[k] / base:5.2f}" if base else "    ?"
        print(f"  {med[k]:9.2f}  {ratio}  {k:<48} " + " ".join(f"{u:.1f}" for u in v))
    for k, cfg in configs.items():
        if k in times and k != "helion entry":
            print(f"  {k}: {cfg}")
    for note in notes + failed:
        print(f"  {note}")
    sys.stdout.flush()
    return med


def main(argv=None) -> int:
    if (args := parsed(parse_args, argv)) is None:
        return 2
    import torch

    from qgemm_bench.harness.timing import time_cpu, time_graph
    from qgemm_bench.target import of

    hooks = contextlib.ExitStack()
    if args.cpu_smoke:
        import helion._compat
        import helion.runtime

        # What the interpreter lacks, through Helion's own test hooks (undone on return).
        hooks.enter_context(mock.patch.object(helion._compat, "_supports_tensor_descriptor", lambda: True))
        hooks.enter_context(mock.patch.object(helion.runtime, "get_num_sm", lambda *a, **k: 4))
        dev, dtype, l2 = torch.device("cpu"), torch.float16, 0
        args.warmup, args.rep = 0.0, 1.0

        def timer(fns, warmup, rep):
            return time_cpu(fns[0], warmup, rep)
    elif not torch.cuda.is_available():
        print("error: helion_ab.py needs a CUDA device (--cpu-smoke: the interpreter)", file=sys.stderr)
        return 2
    else:
        dev, dtype, timer = torch.device("cuda"), torch.bfloat16, time_graph
        l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    target = of(dev)
    ratios: dict[str, list[float]] = {}
    from qgemm_bench.harness.sweep import exit_on_lost_context

    def body() -> int:
        with hooks:
            for op_name in args.ops:
                for m in args.ms:
                    med = compare(args, op_name, m, dev, dtype, timer, l2, target)
                    for k, us in med.items():
                        if k != "triton" and "triton" in med:
                            ratios.setdefault(k, []).append(us / med["triton"])
        print(f"helion / triton, geometric mean over {len(args.ops) * len(args.ms)} shapes (shapes timed)")
        for k, r in sorted(ratios.items(), key=lambda kv: math.prod(kv[1]) ** (1 / len(kv[1]))):
            print(f"  {math.prod(r) ** (1 / len(r)):5.2f}  {k} ({len(r)})")
        return 0

    return exit_on_lost_context(body)


if __name__ == "__main__":
    sys.exit(main())
