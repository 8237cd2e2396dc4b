"""A benchmark run: from a Plan to a written run folder; and the listings."""

from __future__ import annotations

import datetime
import sys
import time
import warnings
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path

import torch

from qgemm_bench import operators
from qgemm_bench.backends import checks, registry
from qgemm_bench.configs import store as config_store
from qgemm_bench.errors import InputError
from qgemm_bench.harness import distributed, environment, outputs, plan, report, shards, signals, warm
from qgemm_bench.harness.assemble import assemble
from qgemm_bench.harness.outputs import WriteError
from qgemm_bench.harness.sweep import Outcome, run
from qgemm_bench.target import Target
from qgemm_bench.types import Case, dtype_name


def default_folder(p: plan.Plan) -> Path:
    """results/runs/<date>-<op>-<device>; RunFolder.claim_new adds -2, -3 ...
    when another run started in the same second took it."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    where = "cpu" if p.device.type == "cpu" else torch.cuda.get_device_name(p.device).split()[-1]
    return environment.runs_dir() / f"{stamp}-{p.op.NAME}-{where.lower()}"


@contextmanager
def _quiet_interpreter(device: torch.device):
    """The Triton interpreter evaluates masked-off lanes too; casting their
    arbitrary (never stored) values to fp16 overflows and numpy warns, though
    every row is checked against the reference. Silence that warning only."""
    with warnings.catch_warnings():
        if device.type == "cpu":
            warnings.filterwarnings("ignore", message="overflow encountered in cast", category=RuntimeWarning,
                                    module=r"triton\.runtime\.interpreter")
        yield


def metadata(p: plan.Plan, args, shapes: list) -> dict:
    meta = environment.collect(p.device)
    meta["ceilings"] = p.ceilings
    meta["target"] = p.target.to_json() if p.target is not None else None
    meta["store"] = config_store.DEFAULT.fingerprint(p.target) if p.target is not None else None
    meta["settings"] = {
        "op": p.op.NAME, "backends": [b.name for b in p.backends], "baseline": p.backends[0].name,
        "shapes": args.shapes, "n_shapes": len(shapes), "shape_list": [str(s) for s in shapes],
        "dtype": dtype_name(p.dtype), "op_settings": p.op_settings.as_dict(),
        "op_settings_label": p.op_settings.label(),
        "timing": p.measure.timing if p.device.type == "cuda" else "cpu-wall",
        "warmup_ms": p.measure.warmup_ms, "rep_ms": p.measure.rep_ms, "repeats": p.repeats, "seed": p.seed,
        "stall_timeout_s": p.stall_s,
        **p.backend_meta,
        "argv": getattr(args, "argv", sys.argv[1:]),  # main(argv)'s, where a caller passed its own
    }
    return meta


def execute(args) -> int:
    """A run: plan, claim the folder, measure, write. Exit 0 done, 1 stopped
    by a lost CUDA context or outputs that could not be written, 2 bad usage
    (before anything is measured), 130 Ctrl-C, 143 SIGTERM. Under torchrun
    every rank measures its share and rank 0 writes (distributed.py)."""
    start = time.perf_counter()
    world = distributed.from_env()
    if world is not None:
        args.device = distributed.start(world, args.device)
    try:
        with environment.threads_kept():  # a CPU run's one thread (one_cpu_thread) ends with it
            return _execute(args, world, start)
    finally:
        if world is not None:
            distributed.stop()


def _execute(args, world, start: float) -> int:
    # Under torchrun, torchrun's SIGTERM (once a peer died) may land while rank 0 still plans: held, it
    # stops the run as one in the setup below does, and rank 0 still writes what the others measured.
    with signals.deferred() if world is not None else nullcontext([]) as planning:
        p = plan.build(args, world)
        folder = outputs.claim_run_folder(args.output_dir, lambda: default_folder(p), world)
        all_shapes = list(p.shapes)
        if world is not None:
            p.rank = world.rank
            costs = [distributed.cost(p.op, s, p.dtype, p.op_settings) for s in all_shapes]
            p.shapes = [all_shapes[i] for i in distributed.shard(all_shapes, costs, world.size)[world.rank]]
    try:
        # The setup is short: a Ctrl-C or SIGTERM there (under torchrun, once a peer died) stops the run
        # before the warm-up, and rank 0 still gathers and writes what the others measured.
        with signals.deferred() as early:
            if p.device.type == "cpu":
                environment.one_cpu_thread()
                if world is None or world.main:
                    print("note: CPU run: latencies are wall-clock CPU timings, not comparable with GPU numbers",
                          file=sys.stderr)
            else:
                torch.cuda.set_device(p.device)
                environment.pin_triton_cache()
                environment.cache_autotuning()
                t0 = time.perf_counter()
                p.ceilings = environment.measure_ceilings(p.device)
                p.phase_s["ceilings"] = time.perf_counter() - t0
                p.l2_bytes = torch.cuda.get_device_properties(p.device).L2_cache_size
            p.target = Target.from_device(p.device, p.ceilings)
            jobs = getattr(args, "compile_jobs", None)  # Python callers' args may lack it
            if jobs is None:
                jobs = warm.default_jobs(p.device, len(p.shapes), getattr(args, "autotune", "none"),
                                         ranks=world.size if world is not None else 1)
            meta = metadata(p, args, all_shapes)
            meta["settings"]["compile_jobs"] = jobs
            if world is None or world.main:
                try:
                    folder.write_metadata(meta)  # what `runner.py report DIR` rebuilds a killed run with
                except WriteError as e:
                    raise InputError(str(e)) from None

        def conclude(outcome) -> int:  # a stalled run, from the watchdog's thread
            folder.close()
            _times(p, meta, start)
            return _conclude(p, args, meta, folder, outcome, start)

        try:
            if planning or early:
                raise signals.as_interrupt((planning + early)[0])
            summary = warm.warm_up(p, args, jobs, folder.log_error)
        except KeyboardInterrupt as e:  # as above
            outcome = Outcome(stopped=signals.describe(e), exit_code=signals.exit_code(e))
        else:
            if summary and (world is None or world.main):
                print(summary, file=sys.stderr)
            with _quiet_interpreter(p.device):
                outcome = run(p, folder, conclude)
    finally:
        folder.close()
    _times(p, meta, start)
    if world is None:
        return _conclude(p, args, meta, folder, outcome, start)
    got = shards.gather(world, p, meta, outcome)
    if got is None:  # a rank > 0: rank 0 writes
        return 0
    # Past the gather the measuring is over: a SIGTERM now (torchrun's, once a peer died) waits for the outputs.
    with signals.deferred() as late:
        code = _conclude(p, args, meta, folder, shards.merge(world, p, meta, got, all_shapes, folder.path), start)
    return code or (128 + late[0] if late else 0)


def _times(p: plan.Plan, meta: dict, start: float) -> None:
    meta["wall_s"] = round(time.perf_counter() - start, 2)  # to the last row; writing the outputs follows
    meta["phase_s"] = {k: round(v, 2) for k, v in sorted(p.phase_s.items(), key=lambda kv: -kv[1])}
    if p.warm_up:
        meta["compile_warm_up"] = p.warm_up


def _conclude(p: plan.Plan, args, meta: dict, folder, outcome, start: float) -> int:
    """Write a finished or stopped run's metadata and outputs; its exit status."""
    meta["interrupted"] = bool(outcome.stopped)
    meta["stopped"] = outcome.stopped
    with signals.deferred() as late:
        with suppress(WriteError):  # "stopped" tells a rebuild that the sweep ended, and how
            folder.write_metadata(meta)
        code = finish(folder.path, outcome.records, meta, p.op.PLOT_X, not args.no_plots, outcome)
        print(f"\n{report.wall_time(meta, time.perf_counter() - start)}")
        print(f"results: {folder.path}")
    return code or (128 + late[0] if late else 0)


def finish(path: Path, records, meta: dict, x: str, plots: bool, outcome=None) -> int:
    """Pool the records into rows, write every output, print the table and
    what went wrong; the exit status (0 when nothing did)."""
    rows = assemble(records, meta)
    _, failures = outputs.write_all(path, rows, meta, x, plots)
    print(report.console(rows, meta["settings"]["baseline"]))
    code = 0
    if outcome is not None and outcome.stopped:
        code = outcome.exit_code
        if outcome.exit_code in signals.EXIT_CODES:
            print(f"\n{outcome.stopped}: {len(rows)} row(s) kept", file=sys.stderr)
        else:
            extra = f"; {outcome.skipped} (shape, backend) not run" if outcome.skipped else ""
            print(f"\nerror: the run stopped early: {outcome.stopped}{extra}", file=sys.stderr)
    for f in failures:
        print(f"error: {f}", file=sys.stderr)
    if failures:
        print(f"error: rows.jsonl keeps every measured row; rebuild the rest with: "
              f"python runner.py report {path}", file=sys.stderr)
        code = code or 1
    return code


def list_ops(op_name: str | None = None) -> str:
    """The operators (op_name's alone, when given) with their presets and defaults."""
    lines = []
    for op in [operators.get(op_name)] if op_name else operators.all_ops():
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
            if why is None and device.type == "cpu" and b.name in report.ON_CPU:
                here += f": {report.ON_CPU[b.name]}"
            lines.append(f"  {b.name:<{width}}  {b.summary} [{here}]")
    return "\n".join(lines)
