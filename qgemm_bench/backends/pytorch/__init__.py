"""torch-side backends: eager dequant+matmul (the baseline), dense matmul on the
unquantized weights (cuBLAS on CUDA), torch.compile, and torch's tinygemm."""

from __future__ import annotations

import functools

import torch

# One static compilation per shape: in a real model every layer's weight shape
# is a constant of its graph. (Automatic-dynamic shapes, torch's default, went
# fully dynamic after the second shape and ran 16x4096x6144 int4 at 336 us vs
# eager's 274 us on the H100.) A sweep compiles once per shape and dtype.
RECOMPILE_LIMIT = 1024


@functools.cache
def compiled(fn):
    """torch.compile(fn, dynamic=False), shared by every shape of a sweep.

    Past dynamo's recompile limit torch.compile silently runs eager code; we
    raise the limit and make hitting it an error, so an eager number is never
    labelled torch_compile.
    """
    cfg = torch._dynamo.config
    cfg.recompile_limit = max(cfg.recompile_limit, RECOMPILE_LIMIT)
    cfg.fail_on_recompile_limit_hit = True
    return torch.compile(fn, dynamic=False)
