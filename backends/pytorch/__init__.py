"""torch-side backends: eager dequant+matmul (the baseline), dense matmul on the
unquantized weights (cuBLAS on CUDA), torch.compile, and torch's tinygemm."""

from __future__ import annotations

import functools

import torch


@functools.cache
def compiled(fn):
    """torch.compile of `fn`, one per function so shapes share its cache.

    Past dynamo's recompile limit torch.compile silently runs eager code; we
    make it raise instead, so an eager number is never labelled torch_compile.
    """
    torch._dynamo.config.fail_on_recompile_limit_hit = True
    return torch.compile(fn)
