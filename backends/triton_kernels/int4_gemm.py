"""Triton backend for int4_gemm (kernel: weight_only.py)."""

from __future__ import annotations

from backends import Backend, Prepared
from backends.triton_kernels import WEIGHT_ONLY_INTERPRETER_CONFIG, interpreter_note, why_not
from backends.triton_kernels.weight_only import INT4, weight_only_gemm


def prepare(case, inputs):
    x, w, s, g = inputs["x"], inputs["w"], inputs["scales"], inputs["group_size"]
    x, w = x.contiguous(), w.contiguous()
    cfg = WEIGHT_ONLY_INTERPRETER_CONFIG if case.device.type == "cpu" else None
    group = g if g is not None else 2  # unused without scales; any even constant
    return Prepared(lambda: weight_only_gemm(x, w, s, None, INT4, group, cfg), resident=(w, s),
                    notes=interpreter_note(case))


BACKENDS = [Backend("int4_gemm", "triton", "Triton weight-only GEMM: split-K streaming for small M, "
                    "tiled tl.dot for large M; autotuned per M bucket", prepare, why_not)]
