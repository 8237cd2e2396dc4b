"""Getting the Helion weight-only kernel (kernels.weight_only) ready for one
int4 or NVFP4 case."""

from __future__ import annotations

import torch

from qgemm_bench.backends import Prepared
from qgemm_bench.backends.helion_kernels import ready
from qgemm_bench.backends.triton_kernels.weight_only import INT4, SPLIT_PATH_MAX_M, check_inputs

MAX_BK = 128  # packed K rows per step, at most
# Interpreter config: block_sizes are [K step (packed rows), M, N].
INTERPRETER_CONFIG = {"block_sizes": [32, 16, 32], "split_k": 2, "num_warps": 4, "num_stages": 1}


def prepare(case, config_name: str, x, w, scales, tensor_scale, fmt: int, group: int | None) -> Prepared:
    from qgemm_bench.backends.helion_kernels import kernels

    x, w = x.contiguous(), w.contiguous()
    m, k = x.shape
    n = w.shape[1]
    if fmt == INT4 and scales is None:  # raw int4: one group of K with scale 1 is the same product
        scales, group = torch.ones(1, n, device=x.device, dtype=x.dtype), k
    check_inputs(x, w, scales, fmt, group or 16)
    if fmt == INT4:
        run = (group // 2) & -(group // 2)  # largest power of two dividing the group, in packed rows
        scale_after = run >= 16
        max_bk = min(run, MAX_BK) if scale_after else MAX_BK
        ts = scales  # placeholder, never read
    else:
        scale_after, max_bk, group = False, MAX_BK, 16
        ts = tensor_scale.reshape(1).float()
    atomic = m <= SPLIT_PATH_MAX_M
    args = (x.view(m, k // 2, 2), w, scales, ts, fmt, group, scale_after, max_bk, atomic)

    def fix(cfg):
        bs = list(cfg["block_sizes"])
        bs[0] = min(bs[0], max_bk)
        cfg["block_sizes"] = bs
        if not atomic:
            cfg["split_k"] = 1
        return cfg

    r = ready(config_name, kernels.weight_only, args, case, (m, k, n), INTERPRETER_CONFIG, fix)
    fn = (lambda: r.run(*args).to(x.dtype)) if atomic else (lambda: r.run(*args))
    resident = (w, scales) if fmt == INT4 else (w, scales, ts)
    return Prepared(fn, resident=resident, notes=r.notes, compile_s=r.compile_s, autotune_s=r.autotune_s)
