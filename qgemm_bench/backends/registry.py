"""The backend registry: HOW an operator is computed, and who can compute it.

A backend is a `prepare(case, inputs) -> Prepared` function registered with
`@backend(op, name, summary, why_not)` in one module of BACKEND_MODULES.
`prepare` does all setup (repacking, dequantizing, config lookup, compiling)
outside the timed region; `Prepared.fn` is the zero-argument callable that
gets timed. Weight-only backends (int4_gemm, nvfp4_gemm) also give `apply`:
the prepared weights applied to any [M', K] activation (QuantLinear's
forward). `why_not(case)` says why a backend cannot run here (None if it
can); it must not import heavy optional packages or touch the GPU.

Backend modules may also own command-line options: `add_arguments(parser)`
and `configure(args, device) -> dict` (called once before a run; raise
InputError on bad values; returns what the run's metadata should record);
and, for runs over several processes (torchrun), `rank_state()` (what a rank
has to hand over, picklable) and `merge_rank_states(states) -> [notes]`
(rank 0 applies every rank's). The harness calls them for every module, by
no name.

Adding a backend: one module with its `@backend` functions, plus its line in
BACKEND_MODULES (the order there is the order backends run and are listed).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import torch

from qgemm_bench.errors import InputError
from qgemm_bench.types import Case

BACKEND_MODULES = (
    "qgemm_bench.backends.torch_ops",
    "qgemm_bench.backends.tinygemm",
    "qgemm_bench.backends.fbgemm",
    "qgemm_bench.backends.gemlite",
    "qgemm_bench.backends.humming",
    "qgemm_bench.backends.triton_ops",
    "qgemm_bench.backends.helion_ops",
)


@dataclass
class Prepared:
    fn: Callable[[], torch.Tensor]
    # The weight-side tensors `fn` reads on every call (its resident footprint).
    resident: tuple = ()
    notes: str = ""
    # Reported by backends that compile or autotune in prepare (seconds).
    compile_s: float | None = None
    autotune_s: float | None = None
    # Weight-only backends: the same prepared weights applied to a new
    # activation [M', K] -> [M', N] in the activation's dtype.
    apply: Callable[[torch.Tensor], torch.Tensor] | None = None
    # Those that can also do an RMSNorm's parts in the GEMM's store: apply with FusedGemm's residual,
    # norm_weight and rms keywords, the sums of squares laid out as backends/norm_parts.py says.
    apply_parts: Callable[..., object] | None = None
    # Those whose apply_parts also takes swiglu=True: x is h = [gate | up] [M', 2K] and the GEMM's input
    # silu(gate) * up (the triton backend: fused_gemm's SWIGLU prologue).
    swiglu: bool = False
    # Those whose apply_parts also takes swiglu_out=True: the weight's columns are (gate, up) pairs and the
    # result silu(gate) * up [M', N / 2] (the triton backend: fused_gemm's SWIGLU_OUT epilogue).
    swiglu_out: bool = False


def _can_run(case: Case) -> str | None:
    return None


@dataclass(frozen=True)
class Backend:
    op: str
    name: str
    summary: str
    prepare: Callable[[Case, object], Prepared]
    why_not: Callable[[Case], str | None] = field(default=_can_run)
    # JIT-compiles into a cache that other processes read (Triton's or
    # torch.compile's on-disk caches, nvcc cubins): the harness may compile it
    # ahead in worker processes (harness/warm.py).
    compiles: bool = False


_registered: dict[str, dict[str, Backend]] = {}


def backend(op: str, name: str, summary: str, why_not: Callable[[Case], str | None] | None = None,
            compiles: bool = False):
    """Register the decorated `prepare(case, inputs) -> Prepared` as backend `name` of `op`
    (compiles: see Backend.compiles)."""
    def register(prepare):
        by_name = _registered.setdefault(op, {})
        if name in by_name:
            raise RuntimeError(f"backend {name!r} of {op} registered twice")
        by_name[name] = Backend(op, name, summary, prepare, why_not or _can_run, compiles)
        return prepare
    return register


def modules() -> list[ModuleType]:
    """The backend modules, imported (registering their backends) on first use."""
    return [importlib.import_module(m) for m in BACKEND_MODULES]


def _rank(b: Backend) -> int:
    """Position of the backend's module in BACKEND_MODULES (others last)."""
    module = b.prepare.__module__
    return BACKEND_MODULES.index(module) if module in BACKEND_MODULES else len(BACKEND_MODULES)


def for_op(op: str) -> list[Backend]:
    """The op's backends in BACKEND_MODULES order, whatever order they were imported in."""
    modules()
    return sorted(_registered.get(op, {}).values(), key=_rank)


def get(op: str, name: str) -> Backend:
    known = {b.name: b for b in for_op(op)}
    if name not in known:
        raise InputError(f"unknown backend {name!r} for {op}; choose from: {', '.join(known)}")
    return known[name]


def select(op: str, names: list[str] | None, baseline: str) -> list[Backend]:
    """The backends to run, baseline first; unknown or repeated names are an InputError."""
    known = {b.name: b for b in for_op(op)}
    wanted = list(names) if names is not None else list(known)
    repeated = sorted({n for n in wanted if wanted.count(n) > 1})
    if repeated:
        raise InputError(f"--backends names {', '.join(repeated)} more than once")
    for name in [*wanted, baseline]:
        if name not in known:
            raise InputError(f"unknown backend {name!r} for {op}; choose from: {', '.join(known)}")
    if baseline in wanted:
        wanted.remove(baseline)
    return [known[baseline]] + [known[n] for n in wanted]


def add_arguments(parser) -> None:
    """Every backend module's own command-line options."""
    for m in modules():
        if hasattr(m, "add_arguments"):
            m.add_arguments(parser)


def configure(args, device: torch.device) -> dict:
    """Hand the parsed options to every backend module that owns some; returns
    what they report for the run's metadata."""
    meta = {}
    for m in modules():
        if hasattr(m, "configure"):
            meta.update(m.configure(args, device) or {})
    return meta


def rank_states() -> dict:
    """Each backend module's state to hand to rank 0 (torchrun)."""
    return {m.__name__: m.rank_state() for m in modules() if hasattr(m, "rank_state")}


def merge_rank_states(states: list[dict]) -> list[str]:
    """Rank 0: hand every rank's states to their modules; their notes."""
    notes = []
    for m in modules():
        if hasattr(m, "merge_rank_states"):
            notes += m.merge_rank_states([s.get(m.__name__) for s in states])
    return notes
