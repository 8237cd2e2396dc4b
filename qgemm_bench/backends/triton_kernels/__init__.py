"""Our Triton kernels. Named triton_kernels so it cannot shadow the triton
package. Importing these modules imports triton: on CPU, TRITON_INTERPRET=1
must be set first (the runner and tests/conftest.py do)."""

from __future__ import annotations

import os

import torch


def why_not(case) -> str | None:
    """Triton runs on CUDA, or on CPU tensors under the interpreter (fp16 only:
    the interpreter has no bfloat16)."""
    if case.device.type == "cuda":
        return None
    if os.environ.get("TRITON_INTERPRET") != "1":
        return "needs CUDA, or TRITON_INTERPRET=1 for CPU tensors"
    if case.dtype == torch.bfloat16:
        return "the Triton interpreter has no bfloat16; use --dtype float16 on CPU"
    return None


def interpreter_note(case) -> str:
    return "Triton interpreter (CPU)" if case.device.type == "cpu" else ""


# Explicit configs for the interpreter, where autotuning cannot time anything:
# few, large programs keep the CPU time down.
WEIGHT_ONLY_INTERPRETER_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "SPLIT_K": 2,
                                  "num_warps": 4, "num_stages": 1}
SPLIT_K_INTERPRETER_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 64, "SPLIT_K": 4,
                              "num_warps": 4, "num_stages": 1}


def autotune_bench(kernel_call, quantiles):
    """The autotuners' timer: do_bench with 5 ms warm-up and 25 ms per config
    (Triton's 25/100 ms made a default llama sweep spend ~9 s per shape in
    autotuning on the H100). Results are cached on disk (cache_results)."""
    from triton.testing import do_bench

    return do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)
