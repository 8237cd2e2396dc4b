"""The command line: `qgemm-bench` / `python runner.py`.

    python runner.py --op int4_gemm
    python runner.py --op int4_gemm --backends torch,cublas,tinygemm --shape 16,8192,8192
    python runner.py --list-ops | --list-backends [--op OP]
    python runner.py compare BASE NEW      # perf-regression report (compare --help)
    python runner.py report DIR            # rebuild a run's tables and plots from its rows.jsonl
    python runner.py tune                  # tune this GPU's configs into the store (tune --help)
    python runner.py --model llama-3.2-1b  # end to end: quantized Llama decode, memory and quality
"""

from __future__ import annotations

import argparse
import os
import sys

from qgemm_bench import operators
from qgemm_bench.backends import registry
from qgemm_bench.errors import InputError
from qgemm_bench.harness import args as types
from qgemm_bench.harness import signals
from qgemm_bench.harness import stdout as console

EPILOG = """\
defaults: on CUDA the op's GPU preset (llama layer shapes; skinny for split_k_gemm),
bfloat16, CUDA-graph timing over rotating input copies larger than 2x L2;
without CUDA the smoke preset, float16, wall-clock CPU timing and the backends
that can run on CPU. Results go to results/runs/<date>-<op>-<device>/:
rows.jsonl (appended as measured), results.csv, results.json (metadata and raw
samples), report.md and PNG plots. Rows stream to rows.jsonl as measured;
`runner.py report DIR` rebuilds the rest from it (e.g. after kill -9).
exit status: 0 done, 1 stopped early (the CUDA context was lost, or a step
outlived --stall-timeout: the rest is `skipped`) or an output could not be
written, 2 bad usage (nothing is measured or written), 130 Ctrl-C, 143
SIGTERM, 129 SIGHUP (what was measured is kept and the tables are written).

compare two runs: python runner.py compare BASE NEW (see: runner.py compare --help).
a new GPU: python runner.py tune writes its config store entry (see: runner.py tune --help).
end to end: python runner.py --model tiny|llama-3.2-1b|llama-3-8b|llama-3-70b (the model options above).
several GPUs: torchrun --nproc-per-node N runner.py ... splits a sweep's shapes over the GPUs
(rank 0 writes), or runs --model tensor-parallel.
cost: compiling and autotuning dominate (about 1 s per shape for our kernels, ~10 s for
gemlite on shapes it ships no config for); every run prints its wall time by phase."""

COMPARE_EPILOG = """\
rows are matched on (op, backend, shape, dtype, settings). ratio = new median /
base median, with a bootstrap 95% CI and a two-sided Mann-Whitney U test on the
raw samples; when both runs used --repeats 3 or more, the rounds' medians
are the unit (ratio of their geometric means, Welch's t-test on their logs),
since a GPU's clocks move between rounds more than within one.
regressed/improved: beyond the threshold and p < alpha; noisy:
beyond the threshold, not significant. Any weight or peak memory increase
beyond max(1%, 1 MiB) regresses; correct -> incorrect, or a row that ran in
BASE and fails in NEW, or ran in both without enough samples to compare, fails
whatever the time. A row of BASE missing from NEW (removed: a backend or shape
that disappeared) fails unless --allow-removed; a comparison in which no row was
timed in both runs fails unless --allow-empty.
The runs' fingerprints (GPU, driver, torch/triton/helion/CUDA versions, timing
mode, dtype, op settings) must match unless --allow-mismatch.
exit status: 0 clean (or --warn-only), 1 regression or correctness failure,
2 incomparable runs or bad usage."""


def parser() -> argparse.ArgumentParser:
    p = types.Parser(
        prog=types.prog(), description="Benchmark int4 / NVFP4 / split-K GEMM backends: latency, "
        "throughput, % of speed-of-light, memory, accuracy and speedup vs a baseline.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", help="operator: int4_gemm, nvfp4_gemm or split_k_gemm")
    lists = p.add_mutually_exclusive_group()
    lists.add_argument("--list-ops", action="store_true", help="list operators (--op's, or all) and their shape "
                       "presets")
    lists.add_argument("--list-backends", action="store_true",
                       help="list backends (of --op, or all) and whether they can run here")
    p.add_argument("--backends", metavar="A,B", help="run only these backends (comma-separated); "
                   "the baseline always runs too")
    p.add_argument("--baseline", metavar="NAME", help="backend that speedups are relative to (default: torch)")
    p.add_argument("--shapes", metavar="PRESET", help="shape preset: smoke, llama, m-sweep, decode; skinny for "
                   "split_k_gemm (default: llama/skinny on CUDA, smoke on CPU)")
    p.add_argument("--shape", metavar="M,K,N", action="append",
                   help="add a shape (repeatable); alone, it replaces the default preset")
    p.add_argument("--dtype", help="activation dtype: bfloat16 or float16 (default: bfloat16 on CUDA, "
                   "float16 on CPU, where the Triton interpreter has no bfloat16); with --model the model's "
                   "dtype, float32 too (default: bfloat16 on CUDA, float32 on CPU, where our kernels' rows then "
                   "need --dtype float16)")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    p.add_argument("--warmup", type=types.milliseconds, default=25.0, metavar="MS", help="warm-up time per backend and "
                   "shape in ms (default 25); compilation happens before and is never timed")
    p.add_argument("--rep", type=types.positive_milliseconds, default=100.0, metavar="MS",
                   help="timed time per backend and shape in ms (default 100): at least 10 samples (3 on CPU) "
                   "and at most 1000, each one call on CPU or one CUDA-graph replay of >= 1 ms on a GPU, so a "
                   "--rep longer than 1000 samples take stops there (each row's measure_s is the time taken)")
    p.add_argument("--repeats", type=types.repeats, default=1, metavar="N",
                   help="measure every shape N times, cycling through the backends each time (in reverse "
                   "order every other round, so a linear drift cancels over each pair of rounds: an even N "
                   "pairs them all), and pool the "
                   "samples; each round's median is kept, and compare tests runs of 3+ rounds round by round "
                   "(the GPU's clocks drift between rounds; default 1)")
    p.add_argument("--timing", choices=["graph", "events"], help="CUDA timing: graph (default) replays a CUDA "
                   "graph over rotating input copies; events uses triton's do_bench (flushes L2, adds "
                   "~8-12 us of event overhead to small kernels)")
    p.add_argument("--output-dir", metavar="DIR", help="write the run here (must be new or empty; created with "
                   "its parents)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--seed", type=types.seed, default=0, help="seed for the random inputs (default 0)")
    p.add_argument("--stall-timeout", type=types.stall_seconds, metavar="S",
                   help="stop the run when one backend at one shape (compiling, checking and timing it), or "
                   "one step of a --model run (a variant's load, quantize, quality or prefill, or its decode at "
                   "one batch size), takes more than S seconds, e.g. a GPU kernel that never finishes, which no "
                   "signal can stop: that row is an error, the rest `skipped`, the tables are written and the "
                   f"exit status is 1 (default {types.STALL_S:g} on CUDA; off on CPU, with --autotune "
                   "quick|full and under torchrun; 0: off)")
    p.add_argument("--compile-jobs", type=types.compile_jobs, metavar="N",
                   help="before timing, compile the backends that JIT-compile (Triton, Helion, torch.compile, "
                   "humming, gemlite) at every shape in N worker processes, whose caches the sweep then reads "
                   "(default: the CPUs but two, at most 14, for CUDA runs of 4+ shapes; 0: off); skipped when an "
                   "earlier run compiled the same shapes and backends with the same code and packages")
    ops = p.add_argument_group("operator settings (each applies to its operator only)")
    for op in operators.all_ops():
        op.add_arguments(ops)
    registry.add_arguments(p)
    from qgemm_bench.model import cli as model_cli  # light: no transformers import

    model_cli.add_arguments(p)
    return p


def compare_parser() -> argparse.ArgumentParser:
    from qgemm_bench.harness import compare as c

    p = types.Parser(prog=types.prog("compare"), description="Compare two runs for perf "
                                "regressions: a report for a CI job summary or a PR comment.",
                                epilog=COMPARE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("base", metavar="BASE", help="baseline run folder or its results.json")
    p.add_argument("new", metavar="NEW", help="new run folder or its results.json")
    p.add_argument("--threshold", type=types.positive_float, default=c.THRESHOLD, metavar="F",
                   help=f"relative change that counts (default {c.THRESHOLD})")
    p.add_argument("--small-threshold", type=types.positive_float, default=c.SMALL_THRESHOLD, metavar="F",
                   help=f"threshold for rows whose base median is under --small-us (default {c.SMALL_THRESHOLD})")
    p.add_argument("--small-us", type=types.float_in(0.0, float("inf")), default=c.SMALL_US, metavar="US",
                   help=f"what counts as a small kernel (default {c.SMALL_US:g} us)")
    p.add_argument("--alpha", type=types.float_in(0.0, 1.0, lo_open=True, hi_open=True), default=c.ALPHA,
                   help=f"significance level (default {c.ALPHA})")
    p.add_argument("--format", choices=["md", "text", "json"], default="md", help="report format (default md)")
    p.add_argument("--output", metavar="FILE", help="write the report here (stdout gets the summary line)")
    p.add_argument("--plot", metavar="PNG", help="also plot the ratios with their CIs (.png, .svg or .pdf)")
    p.add_argument("--warn-only", action="store_true", help="exit 0 even on regressions")
    p.add_argument("--allow-mismatch", action="store_true",
                   help="compare runs whose GPU or software differ (the report lists what differs)")
    p.add_argument("--allow-removed", action="store_true",
                   help="do not fail when rows of BASE are missing from NEW (a backend or shape dropped on purpose)")
    p.add_argument("--allow-empty", action="store_true",
                   help="do not fail when no row was timed in both runs (nothing was compared), nor on rows that "
                   "ran in both without samples to compare")
    return p


def report_parser() -> argparse.ArgumentParser:
    p = types.Parser(prog=types.prog("report"), description="Rebuild a run's results.csv, results.json, "
                     "report.md and plots from its rows.jsonl (e.g. after the run was killed).")
    p.add_argument("dir", metavar="DIR", help="the run folder")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    return p


def main(argv: list[str] | None = None) -> int:
    """Every entry: one line on stderr and exit 2 for bad usage; Ctrl-C
    (130), SIGTERM (143) and SIGHUP (129) without a traceback, wherever they
    land."""
    argv = sys.argv[1:] if argv is None else argv
    command = COMMANDS.get(argv[0] if argv else "", _run)
    with console.guarded() as out:  # a full or ASCII-only stdout costs the printed text, not the run
        try:
            with signals.terminate_as_interrupt():
                code = command(argv[1:] if command is not _run else argv)
        except InputError as e:
            if _speaks():  # under torchrun every rank fails alike: one line
                print(f"error: {e}", file=sys.stderr)
            code = 2
        except KeyboardInterrupt as e:
            print(f"\n{signals.describe(e)}", file=sys.stderr)
            code = signals.exit_code(e)
    return console.lost(out, code)


def _speaks(env=os.environ) -> bool:
    """Whether this process prints a usage error: rank 0 of a torchrun world,
    a process alone, or one whose rank makes no sense (it has no rank 0)."""
    rank, size = env.get("RANK", ""), env.get("WORLD_SIZE", "")
    if not (rank.isascii() and rank.isdigit() and size.isascii() and size.isdigit()):
        return True
    return int(rank) == 0 or int(rank) >= int(size)


# The runner's options the model bench (--model) reads besides its own group's.
MODEL_READS = {"help", "backends", "device", "dtype", "output_dir", "no_plots", "seed", "stall_timeout", "model",
               "checkpoint"}


def sweep_only(p: argparse.ArgumentParser, args) -> list[str]:
    """The GEMM sweep's options (--op runs) given with --model, which would
    otherwise be ignored without a word."""
    model = next(g for g in p._action_groups if g.title == "model benchmark (--model)")._group_actions
    return [a.option_strings[0] for a in p._actions
            if a.dest not in MODEL_READS and a not in model and getattr(args, a.dest, None) != a.default]


def model_only(p: argparse.ArgumentParser, args) -> list[str]:
    """--model's own options given with --op, which the GEMM sweep would
    ignore without a word (sweep_only's other side)."""
    model = next(g for g in p._action_groups if g.title == "model benchmark (--model)")._group_actions
    return [a.option_strings[0] for a in model
            if a.dest not in MODEL_READS and getattr(args, a.dest, None) != a.default]


def check_environment(env=os.environ) -> None:
    """torchrun's variables, read as integers before anything runs (WORLD_SIZE=abc
    raised ValueError; WORLD_SIZE=2 alone failed in torch's rendezvous)."""
    values = {}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        text = env.get(name, "")
        if text != "" and not (text.isascii() and text.isdigit()):
            raise InputError(f"environment: {name}={text!r}: expected a non-negative integer (torchrun sets it)")
        values[name] = int(text) if text else None
    size = values["WORLD_SIZE"] or 1
    if size > 1:
        if missing := [n for n in ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT") if not env.get(n)]:
            raise InputError(f"environment: WORLD_SIZE={size} without {', '.join(missing)}: launch several "
                             "processes with torchrun --nproc-per-node N, or unset WORLD_SIZE")
        if values["RANK"] >= size:
            raise InputError(f"environment: RANK={values['RANK']} is not below WORLD_SIZE={size}")


def _run(argv: list[str]) -> int:
    if argv and not argv[0].startswith("-"):  # the sweep takes no bare word: a command, misspelled
        import difflib

        near = difflib.get_close_matches(argv[0], COMMANDS, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        names = ", ".join(list(COMMANDS)[:-1]) + " and " + list(COMMANDS)[-1]
        raise InputError(f"{argv[0]!r} is not a command: {hint}the commands are {names}; a sweep or model run "
                         "starts with an option (--op, --model; see --help)")
    p = parser()
    args = p.parse_args(argv)
    args.argv = list(argv)  # the metadata's record of the command (a Python caller's, not sys.argv)
    check_environment()
    from qgemm_bench.harness import benchmark

    if args.list_ops:
        print(benchmark.list_ops(args.op))
        return 0
    if args.list_backends:
        if args.model is not None or args.checkpoint is not None:  # the model's backends: its formats' operators'
            from qgemm_bench.model.quant_linear import UNQUANTIZED

            print(f"--model backends: {UNQUANTIZED} (the model as it is, in its dtype), or any backend of the "
                  "operator of a --quant format below, which then runs every quantized GEMM of the model")
            print("\n".join(benchmark.list_backends(op, args.device) for op in ("int4_gemm", "nvfp4_gemm")))
            return 0
        print(benchmark.list_backends(args.op, args.device))
        return 0
    if args.output_dir is not None:
        from qgemm_bench.harness.outputs import RunFolder

        RunFolder.check(args.output_dir)
    if args.model is not None or args.checkpoint is not None:
        if args.op:
            raise InputError("--op and --model are separate benchmarks: give one of them")
        if ignored := sweep_only(p, args):
            raise InputError(f"{', '.join(ignored)}: the GEMM benchmarks' (--op), not --model's")
        from qgemm_bench.model import cli as model_cli

        return model_cli.run(args)
    if not args.op:
        raise InputError("--op (a GEMM benchmark) or --model (the end-to-end one) is required (see --list-ops)")
    if ignored := model_only(p, args):
        raise InputError(f"{', '.join(ignored)}: --model's, not the GEMM benchmarks' (--op)")
    return benchmark.execute(args)


def _compare(argv: list[str]) -> int:
    args = compare_parser().parse_args(argv)
    from qgemm_bench.harness import compare

    return compare.main(args)


def _report(argv: list[str]) -> int:
    args = report_parser().parse_args(argv)
    from qgemm_bench.harness import rebuild

    return rebuild.main(args)


def _tune(argv: list[str]) -> int:
    from qgemm_bench.tuning import command

    return command.main(argv)


COMMANDS = {"compare": _compare, "report": _report, "tune": _tune}  # else a sweep or model run (_run)
