#!/usr/bin/env python3
# As run in session 57 call A at 0c8b383 (results/h200/call42_session57.sh): it needs that commit's tree, whose
# decode attention had the L2 prefetch rows (QGEMM_ATTN_PREFETCH_MIB); they were removed after these numbers.
"""GPU: `--attention triton`'s L2 prefetch of each layer's next weights
(QGEMM_ATTN_PREFETCH_MIB, docs/model.md) in the whole decode step, at
several amounts in one process. The variant is built as the runner builds
it from the same model options (quantized, RMSNorms in our GEMMs, combo and
multi kernels, --pdl), with the largest --mib's tables; per batch its step
is compiled and captured once, then each --mib value lowers the tables in
place (decode.limit_prefetch: the graph reads their headers at each replay,
so every value runs the same graph; 0 still launches the prefetching
programs, which then find no chunk), its replay checked against the
model's own eager step, and timed --rounds times (reverse order every other round),
--decode-steps greedy steps a time, with each --policy (the L2 cache
policy of the prefetch: normal, or evict_last, whose lines outlast
streaming reads; what one label leaves marked evict_last is pushed out
in the next label's first step, which streams ~3.7 GB at 8B through the
60 MB L2, an inference, not a measurement). Prints per batch each value's median
step time (us) and its rounds, fastest first. Exit 1 when a check failed,
2 on bad input.

  python3 results/h200/compile_ab/attention_s57/prefetch_ab.py --mib 0,8,24,40 -- --model llama-3-8b \\
      --quant int4-g128 --backends triton --batch 1,16 --compile default --lm-head --pdl
  python3 results/h200/compile_ab/attention_s57/prefetch_ab.py --cpu-smoke
      # tiny model, uncompiled, on the interpreter (CPU ignores the tables)

After `--`, the runner's --model options (`runner.py --model ... --help`); --attention is triton here, the
first quantized variant of --backends x --quant is the one timed."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

if "--cpu-smoke" in sys.argv[1:]:  # before torch and triton are imported; a GPU host's smoke runs on the CPU too
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # this checkout's qgemm_bench

from qgemm_bench.errors import InputError  # noqa: E402
from qgemm_bench.harness.args import Parser, int_in, parsed  # noqa: E402

SMOKE = ["--model", "tiny", "--device", "cpu", "--layers", "2", "--dtype", "float16", "--backends", "triton",
         "--quant", "int4-g32", "--batch", "1", "--prompt-len", "8", "--decode-steps", "2"]


def parse_args(argv=None):
    import argparse

    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mib", default="0,8,24,40", metavar="N,...", help="MiB a layer to prefetch (default 0,8,24,40)")
    p.add_argument("--policy", default="normal,last", metavar="P,...",
                   help="the prefetch's L2 cache policies, normal and/or last (evict_last) (default both)")
    p.add_argument("--rounds", type=int_in(1, 20), default=3, help="timed rounds (default 3)")
    p.add_argument("--cpu-smoke", action="store_true", help="the tiny model on the Triton interpreter, 1 round")
    args = p.parse_args(argv[:cut])
    args.model_argv = SMOKE if args.cpu_smoke else argv[cut + 1:]
    if args.cpu_smoke:
        args.mib, args.policy, args.rounds = "0,1", "normal,last", 1
    try:
        args.mibs = [float(v) for v in args.mib.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--mib {args.mib!r}: expected numbers") from None
    if not args.mibs or not all(math.isfinite(v) and v >= 0 for v in args.mibs) or \
            len(set(args.mibs)) < len(args.mibs):
        raise InputError(f"--mib {args.mib!r}: finite numbers >= 0, each once")
    args.policies = [v.strip() for v in args.policy.split(",") if v.strip()]
    if not args.policies or not set(args.policies) <= {"normal", "last"} or \
            len(set(args.policies)) < len(args.policies):
        raise InputError(f"--policy {args.policy!r}: normal and/or last, each once")
    if not args.model_argv:
        raise InputError("the model options after `--` (e.g. -- --model llama-3-8b --quant int4-g128 ...)")
    if "--attention" in args.model_argv:
        raise InputError("--attention: this script runs triton's")
    return args


def model_plan(model_argv: list[str]):
    """The runner's plan for these --model options with --attention triton,
    and its first quantized variant."""
    import argparse

    from qgemm_bench.model import cli, decode

    p = argparse.ArgumentParser(prog="prefetch_ab.py ... --")
    cli.add_arguments(p)
    args = p.parse_args([*model_argv, "--attention", "triton"])
    plan = cli.build_plan(args)
    if plan.device.type == "cuda" and not decode.pdl_runs(plan.device):
        raise InputError(f"{plan.device}: the bulk L2 prefetch needs compute capability 9.0+")
    variant = next(((b, s) for b, s in plan.variants if s is not None), None)
    if variant is None:
        raise InputError("--backends / --quant: no quantized variant to time")
    return plan, variant


def run_batch(plan, model, batch: int, mibs: list[float], rounds: int, policies=("normal",)) -> int:
    """One batch's step, compiled and captured once, checked and timed at each amount; the failures."""
    import torch

    from qgemm_bench.model import bench, decode

    prompt, steps, dev = plan.prompt_len, plan.decode_steps, plan.device
    tol = bench.GRAPH_CHECK_TOL if plan.compile == "none" else bench.COMPILED_CHECK_TOL  # decode_row's
    try:
        return _run_batch(plan, model, batch, mibs, rounds, prompt, steps, dev, tol, policies)
    finally:
        decode.attach_prefetch(model, 0)  # the tables hold raw addresses: none outlives this batch's step
        torch._dynamo.reset()  # the next batch compiles afresh, as the runner's do


def _run_batch(plan, model, batch, mibs, rounds, prompt, steps, dev, tol, policies) -> int:
    import torch

    from qgemm_bench.harness.sweep import print_rounds, time_rounds
    from qgemm_bench.model import decode

    with decode.inductor_pdl(plan.pdl), decode.inductor_options(plan.inductor):
        decode.use_decode_attention(model, "triton")
        total = decode.attach_prefetch(model, max(mibs))
        cache = decode.static_cache(model, decode.cache_len(prompt, steps, "triton"))
        ids = decode.random_tokens(model.config.vocab_size, batch, prompt, plan.seed, dev)
        step = decode.DecodeStep(model, cache, batch, dev, plan.compile)
        step.feed_greedy(decode.prefill(model, cache, ids))
        first = step.tok.clone()
        if dev.type == "cuda":
            step.capture(profiled=False)
        print(f"batch {batch}: tables of {total / 2**20:.1f} MiB in all ({len(model.model.layers)} layers), "
              f"{steps} steps a time", flush=True)
        bad, labels = 0, {}
        # (MiB, evict_last) a label; 0 MiB once (no policy to tell apart)
        amounts = [(mib, p == "last") for mib in mibs for p in (policies if mib else policies[:1])]
        for mib, last in amounts:
            label = f"{mib:g} MiB" + (" last" if last and mib else "")
            got = decode.limit_prefetch(model, mib, last)
            err = decode.check_step(step, cache, prompt)
            ok = err <= tol
            print(f"  {label} a layer ({got / 2**20:.1f} MiB a step): check rel err {err:.3g}"
                  f"{'' if ok else ' WRONG'}", flush=True)
            if ok:
                labels[label] = (mib, last)
            bad += not ok

        def time_one(label):
            decode.limit_prefetch(model, *labels[label])
            samples = decode.time_steps(step, cache, prompt, first, steps, dev)
            return 1e3 * torch.tensor(samples).median().item()

        times, notes = time_rounds(list(labels), rounds, time_one)
        bad += print_rounds(times, notes)
    return bad


def main(argv=None) -> int:
    if (args := parsed(parse_args, argv)) is None:
        return 2
    from qgemm_bench.harness.sweep import exit_on_lost_context
    from qgemm_bench.model import bench

    def body() -> int:
        try:
            plan, (backend, spec) = model_plan(args.model_argv)
        except InputError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"{plan.source.name} {backend} {spec.name} on {plan.device}, compile {plan.compile}, pdl {plan.pdl}, "
              f"fused norms {plan.fused_norms}", flush=True)
        model = plan.source.fresh(plan.device)
        bench.prepare_variant(plan, model, backend, spec)
        bad = sum(run_batch(plan, model, b, args.mibs, args.rounds, args.policies) for b in plan.batches)
        if bad:
            print(f"error: {bad} check(s) or timing(s) failed (the lines above)", file=sys.stderr)
        return 1 if bad else 0

    return exit_on_lost_context(body)


if __name__ == "__main__":
    sys.exit(main())
