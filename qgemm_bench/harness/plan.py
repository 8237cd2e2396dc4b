"""From parsed command-line arguments to a Plan: the operator and its
settings, the shapes, the backends, dtype, device and measuring settings."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from types import ModuleType

import torch

from qgemm_bench import operators
from qgemm_bench.backends import checks, registry
from qgemm_bench.backends.registry import Backend
from qgemm_bench.errors import InputError
from qgemm_bench.harness import capacity, environment
from qgemm_bench.harness.args import MAX_MS, MAX_REPEATS, MAX_SEED, MAX_STALL_S, STALL_S, comma_list
from qgemm_bench.harness.measure import Settings
from qgemm_bench.target import Target
from qgemm_bench.types import Case, Shape, parse_dtype


@dataclass
class Plan:
    op: ModuleType
    backends: list[Backend]  # baseline first
    shapes: list[Shape]
    dtype: torch.dtype
    device: torch.device
    op_settings: object  # the operator's Settings
    measure: Settings
    seed: int = 0
    repeats: int = 1  # measure each (shape, backend) this many times, backends interleaved; samples pooled
    backend_meta: dict = field(default_factory=dict)  # what backend modules' options report for the metadata
    ceilings: dict = field(default_factory=dict)
    l2_bytes: int = 0
    target: Target | None = None  # what the GPU is (set with the ceilings; backends read it from the Case)
    rank: int | None = None  # under torchrun: this process's rank (rows carry it)
    stall_s: float = 0.0  # --stall-timeout (0: off): the longest one backend may take at one shape (sweep.py)
    # Wall seconds by phase, filled by the sweep: "inputs" (inputs and
    # references), "prepare <backend>" (prepare, first call with its compiling
    # and autotuning, accuracy and memory checks), "measure <backend>"
    # (rotating copies, graph capture, replays).
    phase_s: dict = field(default_factory=dict)
    # The compile warm-up (warm.py), for the metadata: its workers, wall
    # seconds, whether a stamp skipped it, and its workers' seconds by backend.
    warm_up: dict = field(default_factory=dict)


def stall_timeout_s(args, device: torch.device, world=None) -> float:
    """--stall-timeout, or its default: STALL_S on CUDA, off (0) on CPU (the
    Triton interpreter's time grows with the shape) and where Helion's
    autotuner may search longer than any default. The one rule of the sweep
    and the model bench (--model). Under torchrun (world) always off: a
    stopped rank would leave the others waiting at a collective."""
    s = getattr(args, "stall_timeout", None)  # Python callers' args may lack it
    if s is None:
        s = STALL_S if device.type == "cuda" and getattr(args, "autotune", "none") == "none" else 0.0
    if not 0 <= s <= MAX_STALL_S:
        raise InputError(f"--stall-timeout must be in [0, {MAX_STALL_S:g}] seconds")
    return 0.0 if world is not None else s


def parse_shape(text: str) -> Shape:
    parts = [p.strip() for p in text.replace("x", ",").split(",")]
    if len(parts) != 3:
        raise InputError(f"--shape {text!r}: expected three integers M,K,N (e.g. 16,8192,8192)")
    if not all(p.isdecimal() and int(p) > 0 for p in parts):
        raise InputError(f"--shape {text!r}: sizes must be positive integers: M,K,N (e.g. 16,8192,8192)")
    return Shape(*(int(p) for p in parts))


def op_settings(args, op: ModuleType):
    """The operator's settings from its own flags; another operator's flag is an error."""
    for other in operators.all_ops():
        if other is op:
            continue
        for dest, flag in other.FLAGS.items():
            if getattr(args, dest, None) not in (None, False):
                raise InputError(f"{flag} applies to {other.NAME} only, not {op.NAME}")
    return op.settings_from_args(args)


def choose_shapes(args, op: ModuleType, settings, device: torch.device, dtype: torch.dtype) -> list[Shape]:
    explicit = [parse_shape(s) for s in args.shape or []]
    if repeated := sorted({str(s) for s in explicit if explicit.count(s) > 1}):  # else measured twice, rows pooled
        raise InputError(f"--shape names {', '.join(repeated)} more than once")
    for s in explicit:
        op.validate(s, settings)  # an explicit bad shape is a usage error
        if why := capacity.never_fits(op, s, dtype, settings, device):
            raise InputError(why)
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
        raise InputError(f"no shape of preset {preset!r} fits the settings {settings.label()}")
    return shapes


def backend_names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return comma_list(text, "--backends", "name", "cublas,triton")


def choose_backends(args, op: ModuleType, dtype, device, settings, shapes) -> list[Backend]:
    names = backend_names(args.backends)
    if args.baseline == "":  # else the default baseline, as if none were given
        raise InputError("--baseline '': expected a backend name, e.g. --baseline cublas")
    chosen = registry.select(op.NAME, names, args.baseline or op.DEFAULT_BASELINE)
    if args.baseline:  # known before any work: a run with no speedup column is not what was asked for
        reasons = {chosen[0].why_not(Case(op.NAME, s, dtype, device, settings)) for s in shapes}
        if None not in reasons:
            raise InputError(f"--baseline {chosen[0].name} cannot run here ({sorted(reasons)[0]}), so no row would "
                             f"get a speedup; choose one that runs here, e.g. --baseline {op.DEFAULT_BASELINE}")
    if names is not None:
        return chosen  # asked for by name: an unavailable one shows as a row saying why
    kept = []
    for b in chosen:
        reasons = {b.why_not(Case(op.NAME, s, dtype, device, settings)) for s in shapes}
        if None in reasons or b is chosen[0]:
            kept.append(b)
        else:
            print(f"note: skipping backend {b.name}: {sorted(reasons)[0]}", file=sys.stderr)
    return kept


def build(args, world=None) -> Plan:
    op = operators.get(args.op)
    device = environment.resolve_device(args.device)
    if device.type == "cpu":
        checks.use_interpreter_on_cpu()  # before any backend imports triton
    if device.type == "cpu" and args.timing is not None:
        raise InputError("--timing applies to CUDA runs; CPU runs are timed with a wall clock")
    dtype = parse_dtype(args.dtype) if args.dtype else (torch.bfloat16 if device.type == "cuda" else torch.float16)
    # The parser refuses these already; Python callers building args get the same rules.
    if not (0 <= args.warmup <= MAX_MS and 0 < args.rep <= MAX_MS):
        raise InputError(f"--warmup must be in [0, {MAX_MS:g}] and --rep in (0, {MAX_MS:g}] (milliseconds)")
    if not 1 <= args.repeats <= MAX_REPEATS:
        raise InputError(f"--repeats must be in [1, {MAX_REPEATS}]")
    if not 0 <= args.seed <= MAX_SEED:
        raise InputError(f"--seed must be in [0, {MAX_SEED}]")
    stall_s = stall_timeout_s(args, device, world)
    backend_meta = registry.configure(args, device)
    settings = op_settings(args, op)
    shapes = choose_shapes(args, op, settings, device, dtype)
    chosen = choose_backends(args, op, dtype, device, settings, shapes)
    return Plan(op=op, backends=chosen, shapes=shapes, dtype=dtype, device=device, op_settings=settings,
                measure=Settings(timing=args.timing or "graph", warmup_ms=args.warmup, rep_ms=args.rep),
                seed=args.seed, repeats=args.repeats, backend_meta=backend_meta, stall_s=stall_s)
