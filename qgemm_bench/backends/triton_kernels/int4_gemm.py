"""Triton backend for int4_gemm (kernel: weight_only.py)."""

from __future__ import annotations

from qgemm_bench.backends import Backend, Prepared
from qgemm_bench.backends.triton_kernels import WEIGHT_ONLY_INTERPRETER_CONFIG, interpreter_note, why_not
from qgemm_bench.backends.triton_kernels.weight_only import INT4, WeightOnlyGemm


def prepare(case, inputs):
    x, w, s, g = inputs["x"], inputs["w"], inputs["scales"], inputs["group_size"]
    x, w = x.contiguous(), w.contiguous()
    cfg = WEIGHT_ONLY_INTERPRETER_CONFIG if case.device.type == "cpu" else None
    group = g if g is not None else 2  # unused without scales; any even constant
    gemm = WeightOnlyGemm(x, w, s, None, INT4, group, cfg)
    return Prepared(gemm, resident=(w, s), notes="; ".join(filter(None, (interpreter_note(case), gemm.note))))


BACKENDS = [Backend("int4_gemm", "triton", "Triton weight-only GEMM: one-launch split-K streaming for "
                    "small M (autotuned per M bucket); for large M a Triton dequantize, then cuBLAS",
                    prepare, why_not)]
