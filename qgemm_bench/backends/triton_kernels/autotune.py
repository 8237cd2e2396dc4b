"""The timer our @triton.autotune kernels use."""

from __future__ import annotations


def autotune_bench(kernel_call, quantiles):
    """do_bench with 5 ms warm-up and 25 ms per config (Triton's 25/100 ms made
    a default llama sweep spend ~9 s per shape in autotuning on the H100).
    Results are cached on disk (cache_results)."""
    from triton.testing import do_bench

    return do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)
