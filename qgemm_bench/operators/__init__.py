"""The operators: WHAT is measured. One module per operator, same interface:
NAME, SUMMARY, PRESETS, CPU_PRESET/GPU_PRESET, DEFAULT_SETTINGS, DEFAULT_BASELINE,
PLOT_X, describe, validate, make_inputs, reference, flops, bytes, tolerance."""

from __future__ import annotations

import importlib
from types import ModuleType

from qgemm_bench.operators.common import InputError

NAMES = ("int4_gemm", "nvfp4_gemm", "split_k_gemm")


def get(name: str) -> ModuleType:
    if name not in NAMES:
        raise InputError(f"unknown operator {name!r}; choose one of: {', '.join(NAMES)}")
    return importlib.import_module(f"qgemm_bench.operators.{name}")
