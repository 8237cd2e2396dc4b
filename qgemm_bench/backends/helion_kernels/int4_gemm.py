"""Helion backend for int4_gemm (kernel: kernels.weight_only)."""

from __future__ import annotations

from qgemm_bench.backends import Backend
from qgemm_bench.backends.helion_kernels import why_not
from qgemm_bench.backends.helion_kernels.weight_only import INT4, prepare


def _prepare(case, inputs):
    return prepare(case, "int4_gemm", inputs["x"], inputs["w"], inputs["scales"], None, INT4, inputs["group_size"])


BACKENDS = [Backend("int4_gemm", "helion", "Helion weight-only GEMM (split-K for small M, tiled hl.dot "
                    "for large M); checked-in configs per GPU and shape bucket", _prepare, why_not)]
