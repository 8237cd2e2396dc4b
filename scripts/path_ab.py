#!/usr/bin/env python3
"""GPU: the Triton weight-only GEMM's paths side by side in one process, on a
hot GPU: per shape, --soak seconds of cuBLAS first, then --rounds rounds over
the candidates (each path in --paths with its checked-in config, cuBLAS on
bf16 weights), in reverse order every other round (as runner --repeats); each
round's p50 us with the SM clock (MHz), power (W) and temperature (C) read
right after it. What weight_only.FUSED_MAX_M's path choice was measured with.

  python3 scripts/path_ab.py [--op int4_gemm] [--shape 2048,8192,8192 ...] [--paths fused,dequant]
                             [--group-size 128] [--rounds 6] [--soak 2] [--warmup 5] [--rep 40]"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's qgemm_bench

from qgemm_bench.errors import InputError  # noqa: E402
from qgemm_bench.harness.args import Parser, float_in, int_in, parsed, positive_milliseconds  # noqa: E402
from qgemm_bench.harness.plan import parse_shape  # noqa: E402

PATHS = ("split", "fused", "dequant")
DENSE = "cublas (dense weights)"  # x @ w on the unquantized weights


def parse_args(argv=None):
    p = Parser(description=__doc__, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("--op", choices=["int4_gemm", "nvfp4_gemm"], default="int4_gemm")
    p.add_argument("--shape", action="append", metavar="M,K,N",
                   help="a shape to compare (repeatable; default 2048,8192,8192 and 4096,8192,8192)")
    p.add_argument("--paths", default="fused,dequant", help="comma-separated, of split, fused, dequant")
    p.add_argument("--group-size", type=int_in(2, 1 << 20), default=None, help="int4 group (default 128)")
    p.add_argument("--rounds", type=int_in(1, 100), default=6, help="rounds per shape (default 6)")
    p.add_argument("--soak", type=float_in(0.0, 60.0, unit=" s"), default=2.0,
                   help="seconds of cuBLAS before each shape's rounds (default 2)")
    p.add_argument("--warmup", type=float_in(0.0, 10_000.0, unit=" ms"), default=5.0, help="ms (default 5)")
    p.add_argument("--rep", type=positive_milliseconds, default=40.0, help="timed ms per round (default 40)")
    args = p.parse_args(argv)
    args.shapes = [parse_shape(s) for s in args.shape or ["2048,8192,8192", "4096,8192,8192"]]
    args.paths = [x.strip() for x in args.paths.split(",")]
    if not args.paths or not set(args.paths) <= set(PATHS):
        raise InputError(f"--paths: expected a comma-separated subset of {', '.join(PATHS)}")
    if args.op == "nvfp4_gemm" and args.group_size is not None:
        raise InputError("--group-size is for int4_gemm (NVFP4 blocks are 16)")
    args.group_size = args.group_size or 128
    return args


def gpu_state() -> str:
    """'MHz W C' of the current CUDA device (by UUID: nvidia-smi ignores
    CUDA_VISIBLE_DEVICES), or '?' where nvidia-smi does not answer."""
    import torch

    try:
        uuid = f"GPU-{torch.cuda.get_device_properties(torch.cuda.current_device()).uuid}"
        q = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu", "--format=csv,noheader,nounits",
             "-i", uuid]
        out = subprocess.run(q, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001 - the state is a note beside the timing, never a reason to stop
        return "?"
    return " ".join(v.strip() for v in out.split(",")) if out else "?"


def compare(args, shape, dev, dtype, timer, state=gpu_state, l2_bytes: int = 0) -> None:
    """Print the rounds of one shape. timer(fns, warmup_ms, rep_ms) -> a
    harness Timing (the GPU: time_graph over rotating copies > 2x L2)."""
    import torch

    from qgemm_bench import operators
    from qgemm_bench.backends.triton_dispatch import make_weight_only
    from qgemm_bench.backends.triton_ops import weight_args
    from qgemm_bench.harness.measure import copies_for
    from qgemm_bench.harness.sweep import time_rounds
    from qgemm_bench.operators.common import rel_error
    from qgemm_bench.target import of
    from qgemm_bench.types import Case

    op = operators.get(args.op)
    settings = op.Settings(args.group_size) if args.op == "int4_gemm" else op.Settings()
    case = Case(args.op, shape, dtype, dev, settings)
    first = op.make_inputs(case, 0)
    per = sum(t.numel() * t.element_size() for t in (first.x, *weight_args(args.op, first)[:3]) if t is not None)
    copies = copies_for(per, per, l2_bytes, dev) if dev.type == "cuda" else 1
    inputs = [first] + [op.make_inputs(case, i) for i in range(1, copies)]
    ref, tol = op.reference(first), op.tolerance(dtype)
    fns, notes = {}, []
    for path in args.paths:
        gemms = [make_weight_only(*weight_args(args.op, i), path=path, target=of(dev)) for i in inputs]
        try:
            err = rel_error(gemms[0](first.x), ref)
        except Exception as e:  # a path that cannot run this shape: say so, compare the rest
            notes.append(f"{path}: {type(e).__name__}: {str(e).splitlines()[0][:100]}")
            continue
        if err > tol:
            notes.append(f"{path}: WRONG (error {err:.2e} > {tol:g}), not timed")
            continue
        label = path + (f" {gemms[0].tuned(shape.M, path)[0]}" if path != "dequant" else "")
        fns[label] = [lambda g=g, x=i.x: g(x) for g, i in zip(gemms, inputs, strict=True)]
    dense = [torch.randn(shape.K, shape.N, device=dev, dtype=dtype) for _ in inputs]
    fns[DENSE] = [lambda x=i.x, w=w: x @ w for i, w in zip(inputs, dense, strict=True)]
    end = time.time() + args.soak
    while time.time() < end:
        for f in fns[DENSE]:
            f()
        if dev.type == "cuda":
            torch.cuda.synchronize()
    times, failed = time_rounds(list(fns), args.rounds, lambda k: (
        statistics.median(timer(fns[k], args.warmup, args.rep).samples_us), state()))
    notes += failed
    print(f"{args.op} {shape.M}x{shape.K}x{shape.N}: {args.rounds} rounds after {args.soak:g} s of cuBLAS; "
          "p50 us (SM MHz, W, C) per round")
    for k, v in sorted(times.items(), key=lambda kv: statistics.median(u for u, _ in kv[1])):
        print(f"  {statistics.median(u for u, _ in v):9.2f}  {k}\n             " +
              "  ".join(f"{u:.1f} ({s})" for u, s in v))
    for n in notes:
        print(f"  {n}")
    sys.stdout.flush()


def main(argv=None) -> int:
    if (args := parsed(parse_args, argv)) is None:
        return 2
    import torch

    if not torch.cuda.is_available():
        print("error: path_ab.py needs a CUDA device", file=sys.stderr)
        return 2
    from qgemm_bench.harness.timing import time_graph

    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    from qgemm_bench.harness.sweep import exit_on_lost_context

    def body() -> int:
        for shape in args.shapes:
            compare(args, shape, dev, torch.bfloat16, time_graph, l2_bytes=l2)
        return 0

    return exit_on_lost_context(body)


if __name__ == "__main__":
    sys.exit(main())
