"""From parsed CLI arguments to a written run folder."""

from __future__ import annotations

import datetime
import os
import sys
from pathlib import Path

import torch

from qgemm_bench import backends
from qgemm_bench import operators
from qgemm_bench.harness import environment, plots, report
from qgemm_bench.harness.measure import Settings
from qgemm_bench.harness.results import RunFolder, frame
from qgemm_bench.harness.sweep import Plan, run
from qgemm_bench.operators.common import Case, InputError, Shape, dtype_name, parse_dtype

# Flags that belong to one operator only: (flag, attribute, operator).
OP_FLAGS = [("--group-size", "group_size", "int4_gemm"), ("--unscaled", "unscaled", "nvfp4_gemm"),
            ("--bias", "bias", "split_k_gemm")]


def parse_shape(text: str) -> Shape:
    parts = text.replace("x", ",").split(",")
    try:
        m, k, n = (int(p) for p in parts)
    except ValueError:
        raise InputError(f"--shape {text!r}: expected three integers M,K,N") from None
    return Shape(m, k, n)


def op_settings(args, op) -> dict:
    for flag, attr, owner in OP_FLAGS:
        if getattr(args, attr) not in (None, False) and owner != op.NAME:
            raise InputError(f"{flag} applies to {owner} only, not {op.NAME}")
    s = dict(op.DEFAULT_SETTINGS)
    if op.NAME == "int4_gemm" and args.group_size is not None:
        s["group_size"] = op.parse_group_size(args.group_size)
    if op.NAME == "nvfp4_gemm":
        s["unscaled"] = bool(args.unscaled)
    if op.NAME == "split_k_gemm":
        s["bias"] = bool(args.bias)
    return s


def choose_shapes(args, op, settings: dict, device: torch.device) -> list[Shape]:
    explicit = [parse_shape(s) for s in args.shape or []]
    for s in explicit:
        op.validate(s, settings)  # an explicit bad shape is a usage error
    preset = args.shapes or (None if explicit else (op.GPU_PRESET if device.type == "cuda" else op.CPU_PRESET))
    if preset is None:
        return explicit
    if preset not in op.PRESETS:
        raise InputError(f"unknown preset {preset!r} for {op.NAME}; choose from: {', '.join(op.PRESETS)}")
    kept, dropped = [], []
    for s in op.PRESETS[preset]:
        try:
            op.validate(s, settings)
            kept.append(s)
        except InputError as e:
            dropped.append(str(e))
    if dropped:
        print(f"note: skipping {len(dropped)} shape(s) of preset {preset!r} that do not fit the settings "
              f"(first: {dropped[0]})", file=sys.stderr)
    shapes = kept + [s for s in explicit if s not in kept]
    if not shapes:
        raise InputError(f"no shape of preset {preset!r} fits the settings {op.describe(settings)}")
    return shapes


def choose_backends(args, op, dtype, device, settings, shapes) -> list[backends.Backend]:
    names = [n.strip() for n in args.backends.split(",") if n.strip()] if args.backends else None
    chosen = backends.select(op.NAME, names, args.baseline or op.DEFAULT_BASELINE)
    if names:
        return chosen  # asked for by name: an unavailable one shows as a row saying why
    kept = []
    for b in chosen:
        reasons = {b.why_not(Case(op.NAME, s, dtype, device, settings)) for s in shapes}
        if None in reasons or b is chosen[0]:
            kept.append(b)
        else:
            print(f"note: skipping backend {b.name}: {sorted(reasons)[0]}", file=sys.stderr)
    return kept


def build_plan(args) -> Plan:
    op = operators.get(args.op)
    device = environment.resolve_device(args.device)
    if device.type == "cpu":
        # Triton kernels run in the interpreter on CPU; it must be chosen before
        # triton is first imported (when the backend modules load, below).
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if device.type == "cpu" and args.timing is not None:
        raise InputError("--timing applies to CUDA runs; CPU runs are timed with a wall clock")
    dtype = parse_dtype(args.dtype) if args.dtype else (torch.bfloat16 if device.type == "cuda" else torch.float16)
    if args.warmup < 0 or args.rep <= 0:
        raise InputError("--warmup must be >= 0 and --rep > 0 (milliseconds)")
    if args.repeats < 1:
        raise InputError("--repeats must be >= 1")
    if args.autotune != "none" and device.type != "cuda":
        raise InputError("--autotune needs a CUDA device (the interpreter cannot time configs)")
    if args.save_configs and args.autotune == "none":
        raise InputError("--save-configs needs --autotune quick or full")
    if args.helion_configs:
        if not Path(args.helion_configs).is_file():
            raise InputError(f"--helion-configs {args.helion_configs}: no such file")
        from qgemm_bench.backends.helion_kernels.configs import check_file  # no helion import: plain JSON
        try:
            check_file(Path(args.helion_configs))
        except ValueError as e:
            raise InputError(f"--helion-configs {e}") from None
    if args.autotune_budget is not None and args.autotune_budget <= 0:
        raise InputError("--autotune-budget must be > 0 seconds")
    settings = op_settings(args, op)
    shapes = choose_shapes(args, op, settings, device)
    chosen = choose_backends(args, op, dtype, device, settings, shapes)
    return Plan(op=op, backends=chosen, shapes=shapes, dtype=dtype, device=device, op_settings=settings,
                measure=Settings(timing=args.timing or "graph", warmup_ms=args.warmup, rep_ms=args.rep),
                seed=args.seed, repeats=args.repeats,
                backend_options={"autotune": args.autotune, "autotune_budget_s": args.autotune_budget,
                                 "save_configs": args.save_configs, "helion_configs": args.helion_configs})


def default_folder(plan: Plan) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    where = "cpu" if plan.device.type == "cpu" else torch.cuda.get_device_name(plan.device).split()[-1]
    return environment.REPO / "results" / "runs" / f"{stamp}-{plan.op.NAME}-{where.lower()}"


def execute(args) -> int:
    plan = build_plan(args)
    out_dir = Path(args.output_dir) if args.output_dir else default_folder(plan)
    RunFolder.check_new(out_dir)
    if plan.device.type == "cpu":
        print("note: CPU run: latencies are wall-clock CPU timings, not comparable with GPU numbers",
              file=sys.stderr)
    else:
        torch.cuda.set_device(plan.device)
        plan.ceilings = environment.measure_ceilings(plan.device)
        plan.l2_bytes = torch.cuda.get_device_properties(plan.device).L2_cache_size
    folder = RunFolder(out_dir)
    meta = environment.collect(plan.device)
    meta["ceilings"] = plan.ceilings
    meta["settings"] = {
        "op": plan.op.NAME, "backends": [b.name for b in plan.backends], "baseline": plan.backends[0].name,
        "shapes": args.shapes, "n_shapes": len(plan.shapes), "dtype": dtype_name(plan.dtype),
        "op_settings": plan.op.describe(plan.op_settings),
        "timing": plan.measure.timing if plan.device.type == "cuda" else "cpu-wall",
        "warmup_ms": plan.measure.warmup_ms, "rep_ms": plan.measure.rep_ms, "repeats": plan.repeats, "seed": plan.seed,
        "helion_autotune": plan.backend_options["autotune"], "helion_configs": args.helion_configs,
        "argv": sys.argv[1:],
    }
    rows, interrupted = run(plan, folder)
    meta["interrupted"] = interrupted
    folder.write(rows, meta)
    df = frame(rows)
    written = [] if args.no_plots else plots.write(df, meta, plan.op.PLOT_X, folder.path)
    (folder.path / "report.md").write_text(report.markdown(rows, meta, written), encoding="utf-8")
    print(report.console(rows, plan.backends[0].name))
    if interrupted:
        print(f"\ninterrupted: {len(rows)} row(s) kept", file=sys.stderr)
    print(f"\nresults: {folder.path}")
    return 130 if interrupted else 0


def list_ops() -> str:
    lines = []
    for name in operators.NAMES:
        op = operators.get(name)
        presets = ", ".join(f"{p} ({len(s)})" for p, s in op.PRESETS.items())
        lines.append(f"{name}: {op.SUMMARY}\n  presets: {presets}; default: {op.CPU_PRESET} on CPU, "
                     f"{op.GPU_PRESET} on CUDA; baseline: {op.DEFAULT_BASELINE}")
    return "\n".join(lines)


def list_backends(op_name: str | None, device_name: str) -> str:
    device = environment.resolve_device(device_name)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float16
    lines = []
    for name in [op_name] if op_name else operators.NAMES:
        op = operators.get(name)
        shape = op.PRESETS[op.GPU_PRESET if device.type == "cuda" else op.CPU_PRESET][0]
        lines.append(f"{name}:")
        for b in backends.for_op(name):
            why = b.why_not(Case(name, shape, dtype, device, dict(op.DEFAULT_SETTINGS)))
            here = "runs here" if why is None else f"not here: {why}"
            lines.append(f"  {b.name:<14} {b.summary} [{here}]")
    return "\n".join(lines)
