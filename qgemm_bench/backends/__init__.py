"""The backends: HOW an operator is computed.

A backend's `prepare(case, inputs)` does all setup (repacking, dequantizing,
config lookup) and returns a `Prepared` whose `fn` is the zero-argument callable
that gets timed. `why_not(case)` says why it cannot run here (None if it can);
it must not import heavy optional packages or touch the GPU beyond what the
case already says.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from qgemm_bench.operators.common import Case, InputError

# Modules holding BACKENDS lists, in the order their backends are listed and run.
MODULES = {
    "int4_gemm": ["qgemm_bench.backends.pytorch.int4_gemm", "qgemm_bench.backends.triton_kernels.int4_gemm",
                  "qgemm_bench.backends.helion_kernels.int4_gemm"],
    "nvfp4_gemm": ["qgemm_bench.backends.pytorch.nvfp4_gemm", "qgemm_bench.backends.triton_kernels.nvfp4_gemm",
                   "qgemm_bench.backends.helion_kernels.nvfp4_gemm"],
    "split_k_gemm": ["qgemm_bench.backends.pytorch.split_k_gemm", "qgemm_bench.backends.triton_kernels.split_k_gemm",
                     "qgemm_bench.backends.helion_kernels.split_k_gemm"],
}


@dataclass
class Prepared:
    fn: Callable[[], torch.Tensor]
    # The weight-side tensors `fn` reads on every call (its resident footprint).
    resident: tuple = ()
    notes: str = ""
    # Reported by backends that compile or autotune in prepare (seconds).
    compile_s: float | None = None
    autotune_s: float | None = None


@dataclass(frozen=True)
class Backend:
    op: str
    name: str
    summary: str
    prepare: Callable[[Case, dict], Prepared]
    why_not: Callable[[Case], str | None] = field(default=lambda case: None)


def cuda_only(case: Case) -> str | None:
    return None if case.device.type == "cuda" else "needs a CUDA device"


def for_op(op: str) -> list[Backend]:
    found = []
    for module in MODULES[op]:
        found.extend(importlib.import_module(module).BACKENDS)
    return found


def select(op: str, names: list[str] | None, baseline: str) -> list[Backend]:
    """The backends to run, baseline first; unknown names are an InputError."""
    known = {b.name: b for b in for_op(op)}
    wanted = list(names) if names else list(known)
    for name in [*wanted, baseline]:
        if name not in known:
            raise InputError(f"unknown backend {name!r} for {op}; choose from: {', '.join(known)}")
    if baseline in wanted:
        wanted.remove(baseline)
    return [known[baseline]] + [known[n] for n in wanted]
