"""Our Helion backends: the weight-only GEMM (int4, NVFP4) and split-K, with
checked-in configs per GPU and shape bucket (helion_kernels/), and the
command-line options that re-tune them (--autotune ...). helion is imported
only when a backend is prepared."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from qgemm_bench.backends.checks import check_split_k, check_weight_only, missing, triton_why_not
from qgemm_bench.backends.registry import Prepared, backend
from qgemm_bench.errors import InputError
from qgemm_bench.operators.formats import INT4, NVFP4, NVFP4_BLOCK

MAX_BK = 128  # packed K rows per step, at most
# M up to this splits K with fp32 atomics; above, one split stores directly.
# The Triton kernel's split-path boundary (weight_only.SPLIT_PATH_MAX_M), where
# it was measured.
ATOMIC_MAX_M = 64
# Interpreter configs. Weight-only block_sizes: [K step (packed rows), M, N];
# split-K: [M, N, K step].
WEIGHT_ONLY_INTERPRETER_CONFIG = {"block_sizes": [32, 16, 32], "split_k": 2, "num_warps": 4, "num_stages": 1}
SPLIT_K_INTERPRETER_CONFIG = {"block_sizes": [16, 32, 32], "split_k": 4, "num_warps": 4, "num_stages": 1}


def why_not(case) -> str | None:
    return missing("helion", "pip install helion==1.4.0") or triton_why_not(case)  # Helion emits Triton


def add_arguments(p) -> None:
    g = p.add_argument_group("Helion backends")
    g.add_argument("--autotune", choices=["none", "quick", "full"], default="none",
                   help="none (default) uses the checked-in configs for this GPU and shape bucket (nearest "
                   "bucket when the shape has none, said in the row); quick/full re-tune with Helion's "
                   "autotuner (minutes per shape; time recorded as autotune_s)")
    g.add_argument("--autotune-budget", type=float, metavar="S",
                   help="wall-clock budget per Helion autotune in seconds (default: none)")
    g.add_argument("--save-configs", action="store_true",
                   help="with --autotune: write the winning configs into backends/helion_kernels/configs/")
    g.add_argument("--helion-configs", metavar="FILE",
                   help="take configs from this JSON file (the format of backends/helion_kernels/configs/"
                   "h100.json) instead of the checked-in one")


def configure(args, device: torch.device) -> dict:
    """Check the options and hand them to the kernels' tuning; returns them for the run's metadata."""
    from qgemm_bench.backends.helion_kernels import configs, tuning

    if args.autotune != "none" and device.type != "cuda":
        raise InputError("--autotune needs a CUDA device (the interpreter cannot time configs)")
    if args.save_configs and args.autotune == "none":
        raise InputError("--save-configs needs --autotune quick or full")
    budget = args.autotune_budget
    if budget is not None and not (0 < budget < float("inf")):
        raise InputError("--autotune-budget must be a finite number of seconds > 0")
    path = None
    if args.helion_configs:
        path = Path(args.helion_configs)
        if not path.is_file():
            raise InputError(f"--helion-configs {path}: no such file")
        try:
            configs.check_file(path)
        except ValueError as e:
            raise InputError(f"--helion-configs {e}") from None
    # Under torchrun several ranks autotune: rank 0 alone writes the file (merge_rank_states).
    ranked = int(os.environ.get("WORLD_SIZE", "1") or 1) > 1
    tuning.set_options(tuning.Options(args.autotune, budget, args.save_configs, path, defer_saves=ranked))
    return {"helion_autotune": args.autotune, "helion_configs": args.helion_configs}


def rank_state():
    """What this rank autotuned and has not saved (torchrun)."""
    from qgemm_bench.backends.helion_kernels import tuning

    return list(tuning.PENDING)


def merge_rank_states(states: list) -> list[str]:
    """Rank 0: write every rank's autotuned configs into the config files."""
    from qgemm_bench.backends.helion_kernels import configs

    saved = [configs.save(*save) for state in states for save in state or []]
    return [f"helion configs from {len(saved)} autotune(s) saved to "
            f"{', '.join(sorted({p.name for p in saved}))}"] if saved else []


def _weight_only(case, name: str, inputs, scales, tensor_scale, fmt: int, group: int | None) -> Prepared:
    """The weight-only kernel for any M: bound (and compiled) once per M it sees."""
    from qgemm_bench.backends.helion_kernels import kernels
    from qgemm_bench.backends.helion_kernels.tuning import ready

    w = inputs.w.contiguous()
    k, n = 2 * w.shape[0], w.shape[1]
    dtype = inputs.x.dtype
    if fmt == INT4 and scales is None:  # raw int4: one group of K with scale 1 is the same product
        scales, group = torch.ones(1, n, device=w.device, dtype=dtype), k
    if fmt == INT4:
        run = (group // 2) & -(group // 2)  # largest power of two dividing the group, in packed rows
        scale_after = run >= 16
        max_bk = min(run, MAX_BK) if scale_after else MAX_BK
        ts = scales  # placeholder, never read
    else:
        scale_after, max_bk, group = False, MAX_BK, NVFP4_BLOCK
        ts = tensor_scale.reshape(1).float()
    per_m = {}

    def kernel_args(x):
        m = x.shape[0]
        return (x.view(m, k // 2, 2), w, scales, ts, fmt, group, scale_after, max_bk, m <= ATOMIC_MAX_M)

    def bound(x):
        m = x.shape[0]
        if m not in per_m:
            check_weight_only(x, w, scales, fmt, group)
            atomic = m <= ATOMIC_MAX_M

            def fix(cfg):
                bs = list(cfg["block_sizes"])
                bs[0] = min(bs[0], max_bk)
                cfg["block_sizes"] = bs
                if not atomic:
                    cfg["split_k"] = 1
                return cfg

            per_m[m] = ready(name, kernels.weight_only, kernel_args(x), w.device, (m, k, n),
                             WEIGHT_ONLY_INTERPRETER_CONFIG, fix)
        return per_m[m]

    def apply(x):
        x = x.contiguous()
        out = bound(x).run(*kernel_args(x))
        return out.to(x.dtype) if x.shape[0] <= ATOMIC_MAX_M else out

    x = inputs.x.contiguous()
    r = bound(x)
    resident = (w, scales) if fmt == INT4 else (w, scales, ts)
    return Prepared(lambda: apply(x), resident=resident, notes=r.notes, compile_s=r.compile_s,
                    autotune_s=r.autotune_s, apply=apply)


@backend("int4_gemm", "helion", "Helion weight-only GEMM (split-K for small M, tiled hl.dot for large M); "
         "checked-in configs per GPU and shape bucket", why_not)
def int4(case, inputs):
    return _weight_only(case, case.op, inputs, inputs.scales, None, INT4, inputs.group_size)


@backend("nvfp4_gemm", "helion", "Helion weight-only GEMM with in-register E2M1 decode and E4M3 block "
         "scales; checked-in configs per GPU and shape bucket", why_not)
def nvfp4(case, inputs):
    bs = inputs.block_scales.contiguous()
    if bs.dtype != torch.float8_e4m3fn:
        raise ValueError(f"NVFP4 block scales must be float8_e4m3fn, not {bs.dtype}")
    return _weight_only(case, case.op, inputs, bs, inputs.tensor_scale, NVFP4, None)


@backend("split_k_gemm", "helion", "Helion split-K, fp32 atomics then a cast; bias added by the first "
         "split; checked-in configs per GPU and shape bucket", why_not)
def split_k(case, inputs):
    from qgemm_bench.backends.helion_kernels import kernels
    from qgemm_bench.backends.helion_kernels.tuning import ready

    a, b, bias = inputs.a.contiguous(), inputs.b.contiguous(), inputs.bias
    check_split_k(a, b, bias)
    m, k = a.shape
    n = b.shape[1]
    has_bias = bias is not None
    args = (a, b, bias if has_bias else b[0], has_bias)  # b[0]: a placeholder, never read
    r = ready(case.op, kernels.split_k, args, a.device, (m, k, n), SPLIT_K_INTERPRETER_CONFIG)
    return Prepared(lambda: r.run(*args).to(a.dtype), resident=(b, bias) if has_bias else (b,), notes=r.notes,
                    compile_s=r.compile_s, autotune_s=r.autotune_s)
