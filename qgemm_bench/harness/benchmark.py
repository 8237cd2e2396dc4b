"""A benchmark run: from a Plan to a written run folder; and the listings."""

from __future__ import annotations

import datetime
import sys
import time
from pathlib import Path

import torch

from qgemm_bench import operators
from qgemm_bench.backends import checks, registry
from qgemm_bench.harness import environment, plan, plots, report
from qgemm_bench.harness.results import RunFolder, frame
from qgemm_bench.harness.sweep import run
from qgemm_bench.types import Case, dtype_name


def default_folder(p: plan.Plan) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    where = "cpu" if p.device.type == "cpu" else torch.cuda.get_device_name(p.device).split()[-1]
    return environment.REPO / "results" / "runs" / f"{stamp}-{p.op.NAME}-{where.lower()}"


def execute(args) -> int:
    start = time.perf_counter()
    p = plan.build(args)
    out_dir = Path(args.output_dir) if args.output_dir else default_folder(p)
    RunFolder.check_new(out_dir)
    if p.device.type == "cpu":
        print("note: CPU run: latencies are wall-clock CPU timings, not comparable with GPU numbers",
              file=sys.stderr)
    else:
        torch.cuda.set_device(p.device)
        t0 = time.perf_counter()
        p.ceilings = environment.measure_ceilings(p.device)
        p.phase_s["ceilings"] = time.perf_counter() - t0
        p.l2_bytes = torch.cuda.get_device_properties(p.device).L2_cache_size
    folder = RunFolder(out_dir)
    meta = environment.collect(p.device)
    meta["ceilings"] = p.ceilings
    meta["settings"] = {
        "op": p.op.NAME, "backends": [b.name for b in p.backends], "baseline": p.backends[0].name,
        "shapes": args.shapes, "n_shapes": len(p.shapes), "dtype": dtype_name(p.dtype),
        "op_settings": p.op_settings.as_dict(), "op_settings_label": p.op_settings.label(),
        "timing": p.measure.timing if p.device.type == "cuda" else "cpu-wall",
        "warmup_ms": p.measure.warmup_ms, "rep_ms": p.measure.rep_ms, "repeats": p.repeats, "seed": p.seed,
        **p.backend_meta,
        "argv": sys.argv[1:],
    }
    rows, interrupted = run(p, folder)
    meta["interrupted"] = interrupted
    meta["wall_s"] = round(time.perf_counter() - start, 2)  # to the last row; writing the outputs follows
    meta["phase_s"] = {k: round(v, 2) for k, v in sorted(p.phase_s.items(), key=lambda kv: -kv[1])}
    folder.write(rows, meta)
    df = frame(rows)
    written = [] if args.no_plots else plots.write(df, meta, p.op.PLOT_X, folder.path)
    (folder.path / "report.md").write_text(report.markdown(rows, meta, written), encoding="utf-8")
    print(report.console(rows, p.backends[0].name))
    if interrupted:
        print(f"\ninterrupted: {len(rows)} row(s) kept", file=sys.stderr)
    print(f"\n{report.wall_time(meta, time.perf_counter() - start)}")
    print(f"results: {folder.path}")
    return 130 if interrupted else 0


def list_ops() -> str:
    lines = []
    for op in operators.all_ops():
        presets = ", ".join(f"{p} ({len(s)})" for p, s in op.PRESETS.items())
        lines.append(f"{op.NAME}: {op.SUMMARY}\n  presets: {presets}; default: {op.CPU_PRESET} on CPU, "
                     f"{op.GPU_PRESET} on CUDA; baseline: {op.DEFAULT_BASELINE}; settings: {op.Settings().label()}")
    return "\n".join(lines)


def list_backends(op_name: str | None, device_name: str) -> str:
    device = environment.resolve_device(device_name)
    if device.type == "cpu":
        checks.use_interpreter_on_cpu()  # as a CPU run does
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float16
    ops = [operators.get(op_name)] if op_name else operators.all_ops()
    width = max(len(b.name) for op in ops for b in registry.for_op(op.NAME))
    lines = []
    for op in ops:
        shape = op.PRESETS[op.GPU_PRESET if device.type == "cuda" else op.CPU_PRESET][0]
        lines.append(f"{op.NAME}:")
        for b in registry.for_op(op.NAME):
            why = b.why_not(Case(op.NAME, shape, dtype, device, op.Settings()))
            here = "runs here" if why is None else f"not here: {why}"
            lines.append(f"  {b.name:<{width}}  {b.summary} [{here}]")
    return "\n".join(lines)
