"""What a `qgemm-bench tune` will tune: its units, their expected cost, and
how they spread over ranks and the time budget.

A unit is one store entry: a weight-only table entry (format, path, Llama
layer, M), a split-K shape (both modes), a Helion bucket. Its cost is the
expected seconds on an H100/H200-class GPU, from the candidates it will
time: a weight-only candidate checked (with its graph captures and its
share of the compiles ~0.2 s) and timed in a round of the runner's windows
(25 + 100 ms), the TABLE_KEEP fastest of each pass in a second, reversed
round (an estimate, not yet measured on the H200); a Helion config 1.25 s
(the H200 store's helion.json after the layer tunes on one GPU: 709 s of
tune_s over 581 candidates, first compiles included; 1.02 on two GPUs, 1.75
on four, where the ranks' compiles shared the host's CPUs); a split-K shape 12.5 s (its tuner
spends the share it is given, by candidates and never less than its floor,
split_k.SHAPE_FLOOR_S = 12 s, with the prior GPU's winner timed first: the
preset's 37 shapes 12-17 s each; 540 s for them on the H100 timed every
candidate of most; 8 s a shape, the guess before the floor, left the H200's
small shapes 1-9 of their 20-60 candidates). The dry run prints these; the budget hands
each unit its share of the time left by cost, so the command ends on time
whatever the model gets wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

from qgemm_bench.harness import distributed
from qgemm_bench.tuning import candidates as cands

FAMILIES = ("split_k", "helion", "weight_only")  # the order a rank runs them in (split-K as one batch)
OPS = ("int4_gemm", "nvfp4_gemm", "split_k_gemm")
BACKENDS = ("triton", "helion")
GROUPS = ("32", "64", "channel")  # int4 groups with their own WS config (--groups)

CANDIDATE_S = 0.45  # a weight-only candidate: checked, then two rounds of the runner's windows
ROUND_S = 0.125  # one of those rounds: the runner's 25 + 100 ms windows
UNIT_S = 0.5  # a unit's inputs and rotating copies
HELION_CANDIDATE_S = 1.25  # measured: the H200 layer tunes (see the module doc)
SPLIT_K_SHAPE_S = 12.5  # the floor and a little (see the module doc)

# The default budget: 24.2 minutes on one GPU, 14 on two or more (the issue's
# 25 and 15, less start-up: imports, the ceilings, the first compiles; the
# H200 bring-up's took 13 s, and 21 s for its --resume: results/h200/README.md).
BUDGET_S = {1: 1450.0, 2: 840.0}


def pass_s(n: int) -> float:
    """Expected seconds of one weight-only pass over n candidates: each
    checked and timed once, the TABLE_KEEP fastest once more."""
    from qgemm_bench.tuning.weight_only import TABLE_KEEP

    return (CANDIDATE_S - ROUND_S) * n + ROUND_S * min(n, TABLE_KEEP)


@dataclass(frozen=True)
class Unit:
    family: str  # the store family: weight_only | split_k | helion
    op: str
    path: str  # weight_only: split | fused; split_k: both modes; helion: the op's path at M
    shape: tuple[int, int, int]
    candidates: int  # how many it is expected to time
    cost: float  # expected seconds

    @property
    def id(self) -> str:
        m, k, n = self.shape
        return f"{self.family}/{self.op}/{self.path}/{m}x{k}x{n}"

    @property
    def fmt(self) -> str:
        return "nvfp4" if self.op == "nvfp4_gemm" else "int4"


def weight_only_units(formats, ms, prior: dict | None, groups=(), layers=None) -> list[Unit]:
    """Every (format, path, layer, M in TABLE_M[path] and ms) whose path
    runs there; the layers the Llama presets' (K, N), or `layers` (tune
    --layers). prior: the nearest tuned GPU's weight_only table
    (None: whole pools)."""
    from qgemm_bench.backends.config_buckets import bucket
    from qgemm_bench.backends.triton_kernels import weight_only_configs as woc
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_pool
    from qgemm_bench.backends.triton_kernels.weight_only import FUSED_MAX_M
    from qgemm_bench.operators.common import LLAMA3_8B_KN, LLAMA3_70B_KN

    out = []
    kernels = (prior or {}).get("kernels", {})
    for fmt_id, fmt in enumerate(cands.FORMATS):
        if fmt not in formats:
            continue
        op = woc.FORMATS[fmt_id]
        for path in ("split", "fused"):
            entries = None if prior is None else kernels.get(woc.kernel(fmt_id, path), {})
            rival = None if prior is None else kernels.get(woc.kernel(fmt_id, "fused" if path == "split" else "split"))
            for m in cands.TABLE_M[path]:
                if ms is not None and m not in ms:
                    continue
                if not cands.weight_only_pool(fmt_id, path, m):
                    continue
                for k, n in sorted(layers) if layers else LLAMA3_8B_KN + LLAMA3_70B_KN:
                    first = cands.prior_first(entries, bucket(m, k, n))
                    passes = [len(cands.unit_pool(fmt_id, path, m, entries, first, rival))]  # tune_unit's
                    if path == "fused" and ws_pool(m):
                        # ACC tiles are timed at int4 group 128 only (ws_gemm.acc_runs)
                        plain = [t for t in ws_pool(m) if not t.get("ACC")]
                        pool = ws_pool(m) if fmt == "int4" else plain
                        tiles = len(cands.ws_pruned(pool, entries, m, bucket(m, k, n)))
                        passes += ([tiles + 1] if tiles else []) + ([len(plain) + 1] * len(groups)
                                                                    if fmt == "int4" else [])
                    if m > cands.PDL_MAX_M and cands.pdl_won_at(entries, m, bucket(m, k, n)):
                        passes.append(2)
                    if cands.rot_pass_at(fmt, path, m, entries, bucket(m, k, n)):
                        passes.append(cands.ROT_VARIANTS)
                    if path == "fused" and m > FUSED_MAX_M:
                        passes.append(2)  # against dequantize + cuBLAS
                    out.append(Unit("weight_only", op, path, (m, k, n), sum(passes),
                                    UNIT_S + sum(map(pass_s, passes))))
    return out


def split_k_units(sms: int = 132) -> list[Unit]:
    from qgemm_bench.operators import split_k_gemm

    return [Unit("split_k", "split_k_gemm", "both", tuple(s), len(cands.split_k(*s, sms)), SPLIT_K_SHAPE_S)
            for s in split_k_gemm.PRESETS["skinny"]]


def helion_kns(layers: bool = False) -> list[tuple[int, int]]:
    """The (K, N) of Helion's weight-only buckets: HELION_KN (K = N = 8192),
    and with layers every layer of the llama preset (the default run's)."""
    from qgemm_bench.operators.common import LLAMA3_8B_KN, LLAMA3_70B_KN

    kns = [cands.HELION_KN]
    return kns + [kn for kn in LLAMA3_8B_KN + LLAMA3_70B_KN if kn not in kns] if layers else kns


def helion_units(ops, formats, ms, prior: dict | None, target, kns=None, variants: bool | None = None) -> list[Unit]:
    """Helion's buckets: the weight-only ops at each (K, N) of kns (default
    HELION_KN, K = N = 8192) and each M of ms (default HELION_WEIGHT_ONLY_M;
    an M where Helion dequantizes + cuBLAS has nothing to tune), split-K at
    HELION_SPLIT_K_SHAPES. variants: candidates.helion's (default
    HELION_VARIANTS)."""
    out = []
    for op in ops:
        if op == "split_k_gemm":
            shapes = cands.HELION_SPLIT_K_SHAPES
        elif ("nvfp4" if op == "nvfp4_gemm" else "int4") in formats:
            # --ms names the M to tune (any the fused path takes: 1024's buckets too), else the default M.
            shapes = [(m, k, n) for k, n in kns or [cands.HELION_KN]
                      for m in (cands.HELION_WEIGHT_ONLY_M if ms is None else sorted(ms))]
        else:
            continue
        for shape in shapes:
            kernel = cands.helion_kernel(op, shape[0], shape, target)
            pruning = None if prior is None else prior.get("kernels", {}).get(kernel, {})
            n = len(cands.helion(op, shape[0], shape, target, prior=pruning, variants=variants))
            if n and kernel.endswith("_fused"):  # tuning.helion.twin_passes: the winner and a twin, timed again
                n += 2 * len(cands.helion_twin_passes(op, shape[0]))
            if n:
                out.append(Unit("helion", op, kernel, tuple(shape), n, UNIT_S + HELION_CANDIDATE_S * n))
    return out


def shares(units: list[Unit], size: int) -> list[list[Unit]]:
    """Each rank's units, balanced by cost (harness.distributed.shard), in
    plan order."""
    parts = distributed.shard(units, [u.cost for u in units], size)
    return [[units[i] for i in part] for part in parts]


BUDGET_MARGIN = 1.5  # the default budget's room over the expected time (the cost model is an estimate)


def default_budget(units: list[Unit], size: int) -> float:
    """BUDGET_MARGIN x the longest rank's expected seconds, at most
    BUDGET_S: past its budget a tune starts no unit (--resume does), and
    the split-K tuner spends all of the share it is given."""
    longest = max((sum(u.cost for u in part) for part in shares(units, size)), default=0.0)
    return min(BUDGET_MARGIN * longest, BUDGET_S[min(size, 2)])


def unit_stop(now: float, deadline: float, unit: Unit, left: float, shape_budget: float | None) -> float:
    """When a unit should stop starting new work: its share of the time
    left by cost (`left`: the cost of this unit and the rank's later ones),
    at most --shape-budget-s."""
    share = max(0.0, deadline - now) * unit.cost / max(left, 1e-9)
    if shape_budget is not None:
        share = min(share, shape_budget)
    return now + share
