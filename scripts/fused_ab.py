#!/usr/bin/env python3
"""GPU: configs of the Triton weight-only GEMM's fused path side by side at
a shape, in one process: each --config is the config the `triton` backend
takes there ("table": the store's, with its note) changed by +KEY[=VALUE]
(set; the value as JSON, default true) and -KEY (drop), or a JSON dict.
Each is checked first on --calls fresh random x against x.float() @ the
dequantized weights (rel. error 1e-2, the tuner's; any wrong call: WRONG and
not timed), then timed in --rounds rounds (graph timing over rotating copies
> 2x L2, the runner's windows), in reverse order every other round. Prints
each one's median p50 (us) and its rounds, fastest first. Exits 1 when a
config failed or was wrong (after every shape ran), 2 on bad input.

  python3 scripts/fused_ab.py --op nvfp4_gemm --shape 1,8192,57344 --shape 16,28672,8192 \\
      --config table --config table+SCALE8 --config table+SCALE8-PDL [--calls 30] [--rounds 3]
  python3 scripts/fused_ab.py --cpu-smoke   # tiny shapes on the Triton interpreter (fp16): the script runs

A config with WS tiles runs the warp-specialized kernel where ws_gemm.usable
says so (table-WS: the same config in fused_kernel). Its times mean nothing
with --cpu-smoke."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

if "--cpu-smoke" in sys.argv[1:]:  # before torch and triton are imported; a GPU host's smoke runs on the CPU too
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's qgemm_bench

from qgemm_bench.errors import InputError, one_line  # noqa: E402
from qgemm_bench.harness.args import Parser, int_in, parsed  # noqa: E402

OPS = {"int4_gemm": "int4", "nvfp4_gemm": "nvfp4"}
SMOKE = {"shapes": [(3, 256, 136)], "configs": ["table", "table+SCALE8", "table+SCALE8-PDL"], "calls": 3}


def parse_config(spec: str):
    """"table" with +KEY[=VALUE] / -KEY changes -> ("table", changes), or a
    JSON dict -> (dict, [])."""
    if spec.lstrip().startswith("{"):
        try:
            c = json.loads(spec)
        except json.JSONDecodeError as e:
            raise InputError(f"--config {spec!r}: not a JSON dict ({e})") from None
        if not isinstance(c, dict):
            raise InputError(f"--config {spec!r}: not a JSON dict")
        return c, []
    if not spec.startswith("table"):
        raise InputError(f"--config {spec!r}: expected table[+KEY[=VALUE]][-KEY]... or a JSON dict")
    changes, rest = [], spec[len("table"):]
    while rest:
        sign, rest = rest[0], rest[1:]
        if sign not in "+-":
            raise InputError(f"--config {spec!r}: expected +KEY[=VALUE] or -KEY after 'table'")
        cut = min([i for i in (rest.find("+"), rest.find("-")) if i >= 0] or [len(rest)])
        part, rest = rest[:cut], rest[cut:]
        key, _, value = part.partition("=")
        if not key:
            raise InputError(f"--config {spec!r}: a change without a key")
        try:
            changes.append((sign, key, json.loads(value) if value else True))
        except json.JSONDecodeError:
            raise InputError(f"--config {spec!r}: {key}={value!r} is not a JSON value") from None
    return "table", changes


def parse_args(argv=None):
    import argparse

    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", choices=sorted(OPS), default="nvfp4_gemm", help="default nvfp4_gemm")
    p.add_argument("--shape", action="append", default=[], metavar="M,K,N", help="repeat for more shapes")
    p.add_argument("--config", action="append", default=[], metavar="SPEC",
                   help="table[+KEY[=VALUE]][-KEY]... or a JSON dict; repeat (default: table)")
    p.add_argument("--calls", type=int_in(1, 1000), default=30, help="checked calls per config (default 30)")
    p.add_argument("--rounds", type=int_in(1, 20), default=3, help="timed rounds (default 3)")
    p.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on the Triton interpreter (fp16)")
    args = p.parse_args(argv)
    if args.cpu_smoke:
        args.shapes, args.config, args.calls, args.rounds = SMOKE["shapes"], SMOKE["configs"], SMOKE["calls"], 2
    else:
        if not args.shape:
            raise InputError("--shape M,K,N: at least one")
        try:
            args.shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape]
        except ValueError:
            raise InputError(f"--shape {args.shape}: expected M,K,N integers") from None
        if any(len(s) != 3 or min(s) < 1 for s in args.shapes):
            raise InputError(f"--shape {args.shape}: expected three positive integers M,K,N")
    configs = args.config or ["table"]
    if len(set(configs)) < len(configs):  # each config is timed once a round, by its spec
        raise InputError(f"--config: given twice: {sorted({c for c in configs if configs.count(c) > 1})}")
    args.specs = [(s, parse_config(s)) for s in configs]
    return args


def resolve(base: dict, changes: list) -> dict:
    c = dict(base)
    for sign, key, value in changes:
        if sign == "-":
            c.pop(key, None)
        else:
            c[key] = value
    return c


def run_shape(t, fmt: str, shape: tuple, specs: list, calls: int, rounds: int) -> int:
    """Check and time each config at one shape; returns how many failed or were wrong."""
    import torch

    from qgemm_bench.backends.triton_kernels.split_k_configs import describe
    from qgemm_bench.harness.sweep import print_rounds, time_rounds
    from qgemm_bench.operators.common import rel_error

    m, k, n = shape
    x, wargs, wd = t.operands(fmt, m, k, n, dequantized=True)
    base, note = t.gemm_of(*wargs).tuned(m, "fused")
    print(f"{fmt} {m}x{k}x{n}: the table's fused config {describe(base) if base else None}"
          + (f" ({note})" if note else ""), flush=True)
    reps, ready, bad = t.copies(x, wargs), {}, 0  # the rotating copies; label -> call list of the right configs
    for spec, (what, changes) in specs:
        c = resolve(base or {}, changes) if what == "table" else what
        label = spec
        try:
            label = f"{spec}: {describe(c)}"  # a config without its tiles fails here
            gemm = t.gemm_of(*wargs, config=c, path="fused")
            errs = [rel_error(gemm(xi), xi.float() @ wd) for xi in (torch.randn_like(x) for _ in range(calls))]
        except Exception as e:  # noqa: BLE001 - a config that does not compile, fit or pass is reported, not fatal
            print(f"  FAILED {label}: {one_line(e, 160)}", flush=True)
            bad += 1
            continue
        wrong = sum(not e <= 1e-2 for e in errs)
        if wrong:
            print(f"  WRONG {label}: {wrong} of {calls} calls over 1e-2 (max {max(errs):.2e})", flush=True)
            bad += 1
            continue
        ready[label] = t.copy_calls(reps, config=c, path="fused")
    # A lost CUDA context is the run's, not this config's: it ends the script.
    times, failed = time_rounds(list(ready), rounds, lambda k: t.time_fns(ready[k]))
    del x, wargs, wd, reps
    return bad + print_rounds(times, failed)


def main(argv=None) -> int:
    if (args := parsed(parse_args, argv)) is None:
        return 2
    import torch

    from qgemm_bench.harness.measure import Settings
    from qgemm_bench.tuning import weight_only as t

    if args.cpu_smoke:
        t.DEV, t.DTYPE, t.SETTINGS = torch.device("cpu"), torch.float16, Settings(warmup_ms=1.0, rep_ms=1.0)
    elif not torch.cuda.is_available():
        print("error: fused_ab.py needs a CUDA device (--cpu-smoke: the interpreter)", file=sys.stderr)
        return 2
    from qgemm_bench.harness.sweep import exit_on_lost_context

    def body() -> int:
        bad = sum(run_shape(t, OPS[args.op], shape, args.specs, args.calls, args.rounds) for shape in args.shapes)
        if bad:  # every shape still ran; the exit says not all of it is usable
            print(f"error: {bad} config(s) failed or were wrong (the rows above)", file=sys.stderr)
        return 1 if bad else 0

    return exit_on_lost_context(body)


if __name__ == "__main__":
    sys.exit(main())
