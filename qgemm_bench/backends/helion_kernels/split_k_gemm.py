"""Helion backend for split_k_gemm (kernel: kernels.split_k)."""

from __future__ import annotations

from qgemm_bench.backends import Backend, Prepared
from qgemm_bench.backends.helion_kernels import ready, why_not
from qgemm_bench.backends.triton_kernels.split_k import check_inputs

# block_sizes: [M, N, K step]
INTERPRETER_CONFIG = {"block_sizes": [16, 32, 32], "split_k": 4, "num_warps": 4, "num_stages": 1}


def _prepare(case, inputs):
    from qgemm_bench.backends.helion_kernels import kernels

    a, b, bias = inputs["a"].contiguous(), inputs["b"].contiguous(), inputs["bias"]
    check_inputs(a, b, bias)
    m, k = a.shape
    n = b.shape[1]
    has_bias = bias is not None
    args = (a, b, bias if has_bias else b[0], has_bias)  # b[0]: a placeholder, never read
    r = ready("split_k_gemm", kernels.split_k, args, case, (m, k, n), INTERPRETER_CONFIG)
    return Prepared(lambda: r.run(*args).to(a.dtype), resident=(b, bias) if has_bias else (b,), notes=r.notes,
                    compile_s=r.compile_s, autotune_s=r.autotune_s)


BACKENDS = [Backend("split_k_gemm", "helion", "Helion split-K, fp32 atomics then a cast; bias added by the "
                    "first split; checked-in configs per GPU and shape bucket", _prepare, why_not)]
