#!/usr/bin/env python3
"""GPU: check the humming peer backend (qgemm_bench/backends/humming.py).

  python3 scripts/check_humming.py [--op int4_gemm|nvfp4_gemm] [--groups 128,channel,none]
                                   [--shape M,K,N ...] [--backends humming,triton] [--no-time]

Per format (int4 groups 16, 32, 64, 128, 256, channel and unscaled; NVFP4)
and shape (M 1, 16, 64 at K = N = 8192, and two ragged ones: N 1000, K 4112
padded by humming to 4128), one line each as it is done:
  decode   humming's own dequantization (HummingWeightSchema.dequant_tensors,
           its GPU unpack and dequant kernels) of the operands we hand it,
           against ours: "exact" bit for bit (NVFP4: (code x E4M3) x tensor
           scale, its order, against ours in that order);
  then each backend's output against the fp32 reference (rel err, ok or
  incorrect) and, unless --no-time, p50 us under the runner's graph timing
  (rotating copies > 2x L2), the weight-read floor at the measured copy
  bandwidth and its %. A shape the settings or the backend cannot take is a
  "skipped" line saying why. Exit status 0 when nothing failed, else 1.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's qgemm_bench

import torch  # noqa: E402

from qgemm_bench import operators  # noqa: E402
from qgemm_bench.backends import humming as hb  # noqa: E402
from qgemm_bench.backends import registry  # noqa: E402
from qgemm_bench.errors import InputError  # noqa: E402
from qgemm_bench.harness import environment  # noqa: E402
from qgemm_bench.harness.args import Parser  # noqa: E402
from qgemm_bench.harness.measure import Settings, measure  # noqa: E402
from qgemm_bench.harness.plan import parse_shape  # noqa: E402
from qgemm_bench.operators import formats  # noqa: E402
from qgemm_bench.operators.common import rel_error  # noqa: E402
from qgemm_bench.types import Case, Shape  # noqa: E402

GROUPS = "128,channel,none,64,32,256,16"
SHAPES = [Shape(1, 8192, 8192), Shape(16, 8192, 8192), Shape(64, 8192, 8192), Shape(17, 5248, 1000),
          Shape(3, 4112, 1000)]
SEED = 53
COLUMNS = ("op", "settings", "shape", "backend", "decode", "status", "rel err", "p50 us", "floor us", "% floor",
           "prepare s (JIT included)")


def parse_args(argv=None):
    p = Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--op", choices=("int4_gemm", "nvfp4_gemm"), help="one operator (default both)")
    p.add_argument("--groups", default=GROUPS, help=f"int4 group sizes, comma-separated (default {GROUPS})")
    p.add_argument("--shape", action="append", default=[], metavar="M,K,N", help="shapes instead of the defaults")
    p.add_argument("--backends", default="humming", help="backends to run, comma-separated (default humming)")
    p.add_argument("--no-time", action="store_true", help="accuracy only, no graph timing")
    return p.parse_args(argv)


def settings_list(op_name: str, groups: str):
    if op_name == "nvfp4_gemm":
        return [operators.get(op_name).Settings()]
    op = operators.get(op_name)
    return [op.Settings(op.parse_group_size(g)) for g in groups.split(",")]


def decode_check(op_name: str, inputs) -> str:
    """humming's own dequantization of what we hand it, against ours (fp32, [N, K])."""
    from humming.schema import HummingWeightSchema

    if op_name == "int4_gemm":
        schema, tensors = hb.int4_operands(inputs.w, inputs.scales, inputs.x.dtype)
        ours = formats.dequantize_int4(inputs.w, inputs.scales, inputs.group_size).t()
    else:
        schema, tensors = hb.nvfp4_operands(inputs.w, inputs.block_scales, inputs.tensor_scale)
        one = torch.ones((), device=inputs.w.device)
        ours = (formats.dequantize_nvfp4(inputs.w, inputs.block_scales, one) * inputs.tensor_scale.float()).t()
    theirs = HummingWeightSchema.from_config({**schema, "quant_method": "humming"}).dequant_tensors(dict(tensors))
    if theirs.shape != ours.shape:
        return f"shape {tuple(theirs.shape)} != {tuple(ours.shape)}"
    if torch.equal(theirs.float(), ours.float()):
        return "exact"
    return f"DIFFERS at {int((theirs.float() != ours.float()).sum())} of {ours.numel()}"


def check_one(case, b, inputs, ref, tol, l2, no_time: bool) -> dict:
    """The runner's measure (accuracy, then graph timing); with no_time one
    prepared call checked against the reference."""
    if not no_time:
        return measure(case, b, inputs, ref, tol, Settings(timing="graph"), l2)
    t0 = time.perf_counter()
    prepared = b.prepare(case, inputs)
    torch.cuda.synchronize(case.device)
    prepare_s = time.perf_counter() - t0
    err = rel_error(prepared.fn(), ref)
    return {"status": "ok" if err <= tol else "incorrect", "rel_err": err, "prepare_s": prepare_s}


def fmt(v, spec):
    return "" if v is None else format(v, spec)


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
        shapes = [parse_shape(s) for s in args.shape] or SHAPES
        ops = [args.op] if args.op else ["int4_gemm", "nvfp4_gemm"]
        names = [n.strip() for n in args.backends.split(",") if n.strip()]
        for op_name in ops:
            settings_list(op_name, args.groups)
            for n in names:
                registry.get(op_name, n)
    except InputError as e:
        print(f"check_humming: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("check_humming: needs a CUDA GPU", file=sys.stderr)
        return 1
    try:
        import humming  # noqa: F401
    except Exception as e:
        print(f"check_humming: cannot import humming ({type(e).__name__}: {e}); {hb.INSTALL}", file=sys.stderr)
        return 1
    dev = torch.device("cuda", torch.cuda.current_device())
    copy_gbps = environment.measure_ceilings(dev)["copy_GBps"]
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    print(f"# humming {humming.__version__} on {torch.cuda.get_device_name(dev)}; copy {copy_gbps:.0f} GB/s; "
          f"seed {SEED}; bf16", flush=True)
    print(" | ".join(COLUMNS), flush=True)
    failed = 0
    for op_name in ops:
        op = operators.get(op_name)
        backends = [registry.get(op_name, n) for n in names]
        for settings in settings_list(op_name, args.groups):
            for shape in shapes:
                head = [op_name, settings.label(), str(shape)]
                try:
                    op.validate(shape, settings)
                except InputError as e:
                    print(" | ".join(head + ["", "", f"skipped: {e}"]), flush=True)
                    continue
                case = Case(op_name, shape, torch.bfloat16, dev, settings)
                inputs = op.make_inputs(case, SEED)
                ref, tol = op.reference(inputs), op.tolerance(torch.bfloat16)
                why = (hb.int4_why_not if op_name == "int4_gemm" else hb.nvfp4_why_not)(case)
                try:
                    decode = "" if why else decode_check(op_name, inputs)
                except Exception as e:
                    decode = f"error: {type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
                failed += decode.startswith(("DIFFERS", "shape", "error"))
                floor = op.bytes(shape, torch.bfloat16, settings) / (copy_gbps * 1e9) * 1e6
                for b in backends:
                    cells = head + [b.name, decode if b.name == "humming" else ""]
                    if reason := b.why_not(case):
                        print(" | ".join(cells + [f"skipped: {reason}"]), flush=True)
                        continue
                    try:
                        f = check_one(case, b, inputs, ref, tol, l2, args.no_time)
                    except Exception as e:  # one failing case never loses the rest
                        failed += 1
                        msg = str(e).splitlines()[0][:160] if str(e) else ""
                        print(" | ".join(cells + [f"error: {type(e).__name__}: {msg}"]), flush=True)
                        torch.cuda.synchronize(dev)
                        continue
                    failed += f["status"] != "ok"
                    p50 = f.get("p50_us")
                    print(" | ".join(cells + [f["status"], f"{f['rel_err']:.2e}", fmt(p50, ".1f"), f"{floor:.2f}",
                                              fmt(p50 and 100 * floor / p50, ".0f"), f"{f['prepare_s']:.1f}"]),
                          flush=True)
                del inputs, ref
                torch.cuda.empty_cache()
    print(f"# {'all passed' if not failed else f'{failed} failed'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
