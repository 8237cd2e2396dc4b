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
from qgemm_bench.harness import environment
from qgemm_bench.harness.measure import Settings
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
    # Wall seconds by phase, filled by the sweep: "inputs" (inputs and
    # references), "prepare <backend>" (prepare, first call with its compiling
    # and autotuning, accuracy and memory checks), "measure <backend>"
    # (rotating copies, graph capture, replays).
    phase_s: dict = field(default_factory=dict)


def parse_shape(text: str) -> Shape:
    parts = text.replace("x", ",").split(",")
    try:
        m, k, n = (int(p) for p in parts)
    except ValueError:
        raise InputError(f"--shape {text!r}: expected three integers M,K,N") from None
    return Shape(m, k, n)


def op_settings(args, op: ModuleType):
    """The operator's settings from its own flags; another operator's flag is an error."""
    for other in operators.all_ops():
        if other is op:
            continue
        for dest, flag in other.FLAGS.items():
            if getattr(args, dest, None) not in (None, False):
                raise InputError(f"{flag} applies to {other.NAME} only, not {op.NAME}")
    return op.settings_from_args(args)


def choose_shapes(args, op: ModuleType, settings, device: torch.device) -> list[Shape]:
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
        raise InputError(f"no shape of preset {preset!r} fits the settings {settings.label()}")
    return shapes


def backend_names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [n.strip() for n in text.split(",") if n.strip()]


def choose_backends(args, op: ModuleType, dtype, device, settings, shapes) -> list[Backend]:
    names = backend_names(args.backends)
    chosen = registry.select(op.NAME, names, args.baseline or op.DEFAULT_BASELINE)
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


def build(args) -> Plan:
    op = operators.get(args.op)
    device = environment.resolve_device(args.device)
    if device.type == "cpu":
        checks.use_interpreter_on_cpu()  # before any backend imports triton
    if device.type == "cpu" and args.timing is not None:
        raise InputError("--timing applies to CUDA runs; CPU runs are timed with a wall clock")
    dtype = parse_dtype(args.dtype) if args.dtype else (torch.bfloat16 if device.type == "cuda" else torch.float16)
    if args.warmup < 0 or args.rep <= 0:
        raise InputError("--warmup must be >= 0 and --rep > 0 (milliseconds)")
    if args.repeats < 1:
        raise InputError("--repeats must be >= 1")
    backend_meta = registry.configure(args, device)
    settings = op_settings(args, op)
    shapes = choose_shapes(args, op, settings, device)
    chosen = choose_backends(args, op, dtype, device, settings, shapes)
    return Plan(op=op, backends=chosen, shapes=shapes, dtype=dtype, device=device, op_settings=settings,
                measure=Settings(timing=args.timing or "graph", warmup_ms=args.warmup, rep_ms=args.rep),
                seed=args.seed, repeats=args.repeats, backend_meta=backend_meta)
