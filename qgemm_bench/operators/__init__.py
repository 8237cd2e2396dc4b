"""The operators: WHAT is measured. One module per operator, same interface:
NAME, SUMMARY, PRESETS, CPU_PRESET/GPU_PRESET, DEFAULT_BASELINE, PLOT_X,
WEIGHT_ONLY (optional, False when absent: a weight-only GEMM, whose rows get
the weight-read floor),
Settings (a frozen dataclass: label, as_dict, from_label), FLAGS and
add_arguments / settings_from_args (the CLI flags the operator owns), Inputs
(a dataclass, the activation first), describe, validate, make_inputs,
reference, flops, bytes, tolerance."""

from __future__ import annotations

import importlib
from types import ModuleType

from qgemm_bench.errors import InputError

NAMES = ("int4_gemm", "nvfp4_gemm", "split_k_gemm")


def get(name: str) -> ModuleType:
    if name not in NAMES:
        raise InputError(f"unknown operator {name!r}; choose one of: {', '.join(NAMES)}")
    return importlib.import_module(f"qgemm_bench.operators.{name}")


def all_ops() -> list[ModuleType]:
    return [get(n) for n in NAMES]
