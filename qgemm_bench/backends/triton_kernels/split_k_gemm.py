"""Triton backends for split_k_gemm (kernel: split_k.py)."""

from __future__ import annotations

from qgemm_bench.backends import Backend, Prepared
from qgemm_bench.backends.triton_kernels import SPLIT_K_INTERPRETER_CONFIG, interpreter_note, why_not
from qgemm_bench.backends.triton_kernels.split_k import ATOMIC, DETERMINISTIC, SplitKGemm


def _prepare(mode):
    def prepare(case, inputs):
        a, b, bias = inputs["a"].contiguous(), inputs["b"].contiguous(), inputs["bias"]
        cfg = SPLIT_K_INTERPRETER_CONFIG if case.device.type == "cpu" else None
        gemm = SplitKGemm(a, b, bias, mode, cfg)
        resident = (b,) if bias is None else (b, bias)
        return Prepared(gemm, resident=resident, notes=interpreter_note(case))
    return prepare


BACKENDS = [
    Backend("split_k_gemm", "triton", "Triton split-K, fp32 atomics, finished by the tile's last program "
            "(one launch); autotuned split count", _prepare(ATOMIC), why_not),
    Backend("split_k_gemm", "triton_deterministic", "Triton split-K, per-split partials summed in split "
            "order by the tile's last program: bit-identical run to run", _prepare(DETERMINISTIC), why_not),
]
