"""What the tuners time: each kernel family's candidate configs (no GPU
needed to list them).

- split-K GEMM (Triton): tiles from 1/8 of M and N to all of them, splits
  keeping tiles x splits within [SMs/4, 4 SMs], nearest the heuristic
  first; then warps / stages variants, the deterministic mode's second
  launch and PDL of the best (split_k.py).
- weight-only GEMM (Triton): the kernels' own curated pools
  (weight_only.split_pool, fused_gemm.pool), each with PDL 0 and 2 up to
  M = PDL_MAX_M, and the warp-specialized kernel's tiles (fused_gemm.ws_pool).
- Helion: the same pools as Helion configs, split-K a list of its own.

`pruned` is what makes a default bring-up fit its budget: the candidates
that won at an M on the nearest tuned GPU of the same compute capability
(on the H200 the H100's table: 2-6 of a pool of 5-19 per M), the bucket's
own winner first. `--full` times the whole pools.
"""

from __future__ import annotations

import json
import math

from qgemm_bench.backends.config_buckets import parse
from qgemm_bench.backends.triton_kernels import split_k_configs as skc

# ------------------------------------------------------------------ split-K GEMM (Triton)

SPLIT_BM, SPLIT_BN, SPLIT_BK = (16, 32, 64, 128), (16, 32, 64, 128), (64, 128, 256)
SPLIT_KS = (1, 2, 4, 8, 16, 32, 64, 128)
SPLIT_VARIANTS = [(w, s) for w in (4, 8) for s in (3, 4, 5)]  # (num_warps, num_stages)
SPLIT_SMEM_LIMIT = 160 * 1024  # bytes of staged a and b tiles; H100 has 227 KiB per block


def split_k_cfg(bm, bn, bk, split, warps=4, stages=3) -> dict:
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split, "num_warps": warps, "num_stages": stages}


def split_k_smem(c: dict) -> int:
    return (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * 2 * c["num_stages"]


def split_k_prior(c: dict, h: dict, m: int, n: int, sms: int) -> float:
    """Distance from the heuristic's choice h (log2 of programs / 1.5 SMs, tiles, BLOCK_K)."""
    progs = skc.tiles(m, n, c) * c["SPLIT_K"]
    return (abs(math.log2(progs / (1.5 * sms))) + 0.5 * abs(math.log2(c["BLOCK_M"] / h["BLOCK_M"]))
            + 0.5 * abs(math.log2(c["BLOCK_N"] / h["BLOCK_N"])) + 0.25 * abs(math.log2(c["BLOCK_K"] / h["BLOCK_K"])))


def split_k(m: int, k: int, n: int, sms: int) -> list[dict]:
    """The first pass's configs at 4 warps / 3 stages, the heuristic's first,
    then nearest it first: tiles from 1/8 of M and N (rounded up) to all of
    them, splits with tiles x splits in [SMs/4, 4 SMs] (the three largest
    where K allows none there)."""
    h = skc.heuristic(m, k, n, sms)
    out = []
    bm_, bn_ = skc.mn_bucket(m), skc.mn_bucket(n)
    for bm in (x for x in SPLIT_BM if bm_ // 8 <= x <= bm_):
        for bn in (x for x in SPLIT_BN if bn_ // 8 <= x <= bn_):
            for bk in SPLIT_BK:
                base = split_k_cfg(bm, bn, bk, 1)
                if split_k_smem(base) > SPLIT_SMEM_LIMIT:
                    continue
                t = skc.tiles(m, n, base)
                ok = [s for s in SPLIT_KS if skc.fits(m, k, n, {**base, "SPLIT_K": s}) and (t * s <= 4 * sms or s == 1)]
                keep = [s for s in ok if t * s >= sms / 4]
                out += [{**base, "SPLIT_K": s} for s in (keep if len(keep) >= 2 else ok[-3:])]
    rest = sorted((c for c in out if c != h), key=lambda c: (split_k_prior(c, h, m, n, sms), json.dumps(c)))
    return [h] + rest


def split_k_variants(c: dict) -> list[dict]:
    """c at the other warps / stages that fit in shared memory."""
    return [v for w, s in SPLIT_VARIANTS
            if (v := {**c, "num_warps": w, "num_stages": s}) != c and split_k_smem(v) <= SPLIT_SMEM_LIMIT]


def split_k_pdl(configs) -> list[dict]:
    """The configs with each PDL mode (split_k_parts.pdl_prologue; the second
    launch then waits in its prologue too), where they name none."""
    return [{**c, "PDL": p} for c in configs if "PDL" not in c for p in skc.PDL_MODES if p]


# The PF_ROWS twins of a config that launches with PDL 2 or 3: the prologue
# prefetching 64 or 256 rows of b instead of 16 (H200, skinny long-K shapes:
# docs/split_k.md).
SPLIT_PF_ROWS = (64, 256)


def split_k_pf(configs) -> list[dict]:
    """The configs with PDL 2 or 3 and the default prefetch, at each of SPLIT_PF_ROWS."""
    return [{**c, "PF_ROWS": r} for c in configs if c.get("PDL", 0) >= 2 and "PF_ROWS" not in c
            for r in SPLIT_PF_ROWS]


def second_launch(configs, atomic_best: dict | None = None) -> list[dict]:
    """Deterministic candidates that sum their planes in a second launch
    (REDUCE "kernel", as deterministic as the in-kernel sum): the given configs
    and the shape's atomic winner, where they split: the faster
    deterministic form at most long-K shapes on the H100, often with the
    atomic winner's tiles (docs/split_k.md)."""
    out = []
    for c in [*configs, *([atomic_best] if atomic_best else [])]:
        v = {**c, "REDUCE": "kernel"}
        if c["SPLIT_K"] > 1 and v not in out:
            out.append(v)
    return out

# ------------------------------------------------------------------ weight-only GEMM (Triton)

# The M buckets presets and the model bench run; at 1..64 both paths are
# timed and the faster one's runs (weight_only_configs.faster_path).
# The fused path above weight_only.FUSED_MAX_M runs only with TMA loads
# (int4): NVFP4 is not tuned there.
TABLE_M = {"split": (1, 16, 32, 64), "fused": (1, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)}


FORMATS = ("int4", "nvfp4")  # by FMT (formats.INT4 = 0, NVFP4 = 1)


# PDL 2 pays at small M and costs at 64 (H100), and what it saves depends on
# the config, so the table times every candidate up to here with PDL 0 and 2:
# tuned without it and given PDL after, the table missed a config that won
# only with PDL (docs/pdl.md).
PDL_MAX_M = 64


def pdl_variants(config: dict, m: int, runs_ws: bool) -> list[tuple[str, dict]]:
    """The PDL variants pdl_pass times of a config, (label, config): where its
    warp-specialized tiles run, without and with their PDL 1 and 2 (the rest of the
    config, which runs where they do not, as it is); elsewhere fused_kernel's
    (or the split path's) PDL 0 and 2 up to M = PDL_MAX_M, 0 and 1 above
    (PDL 1 the fastest mode at M = 256 on the H100: docs/pdl.md); the WS
    tiles: ws_gemm._pdl_wait, and _producer's early weights at 2 (not with
    STREAM_K)."""
    if runs_ws:
        ws = {c: v for c, v in config["WS"].items() if c != "PDL"}
        return [("ws pdl 0", {**config, "WS": ws}), ("ws pdl 1", {**config, "WS": {**ws, "PDL": 1}})] + \
            ([] if ws.get("STREAM_K") else [("ws pdl 2", {**config, "WS": {**ws, "PDL": 2}})])
    base = {c: v for c, v in config.items() if c != "PDL"}
    return [(f"pdl {p}", {**base, "PDL": p} if p else base) for p in ((0, 2) if m <= PDL_MAX_M else (0, 1))]


TUNED_AWAY = ("PDL", "WS")  # keys the table's passes add to a pool's config


def base_of(config: dict) -> dict:
    """A table config as its pool lists it: without the PDL and WS the
    later passes gave it."""
    return {c: v for c, v in config.items() if c not in TUNED_AWAY}


def weight_only_pool(fmt: int, path: str, m: int) -> list[dict]:
    """The path's curated configs at M (weight_only.split_pool,
    fused_gemm.pool); empty where the path does not run (NVFP4's fused
    path above FUSED_MAX_M has TMA configs only)."""
    from qgemm_bench.backends.triton_kernels import fused_gemm
    from qgemm_bench.backends.triton_kernels import weight_only as wo

    return list(map(wo.config_dict, wo.split_pool(m))) if path == "split" else fused_gemm.pool(m, fmt)


def winners_at(prior: dict | None, m: int) -> list[dict]:
    """The configs (and pointer_configs, and the pool configs a rot pass
    replaced: rot_of) of the prior table's entries at M ({bucket: entry} of
    one kernel), most frequent first."""
    count: dict[str, list] = {}
    for key, entry in (prior or {}).items():
        if parse(key)[0] != m:
            continue
        for c in (entry.get("config"), entry.get("pointer_config"), entry.get("rot_of")):
            if c:
                slot = count.setdefault(json.dumps(base_of(c), sort_keys=True), [0, base_of(c)])
                slot[0] += 1
    return [c for _, c in sorted(count.values(), key=lambda v: -v[0])]


def pruned(pool: list[dict], prior: dict | None, m: int, first: dict | None = None) -> list[dict]:
    """The pool's configs that won at M on the prior table (winners_at),
    `first` (the bucket's own prior winner) ahead; the whole pool where
    prior is None (--full) or has no winner of the pool at M."""
    if prior is None:
        return list(pool)
    won = [json.dumps(c, sort_keys=True) for c in winners_at(prior, m)]
    if first is not None:
        won.insert(0, json.dumps(base_of(first), sort_keys=True))
    rank = {k: i for i, k in reversed(list(enumerate(won)))}
    keep = [c for c in pool if json.dumps(base_of(c), sort_keys=True) in rank]
    keep.sort(key=lambda c: rank[json.dumps(base_of(c), sort_keys=True)])
    return keep or list(pool)


WS_KEEP = 2  # the most frequent WS winners at an M timed beside the bucket's own


def ws_pruned(tiles: list[dict], prior: dict | None, m: int, key: str | None = None) -> list[dict]:
    """The warp-specialized tiles to time at M: the bucket's own WS winner
    on the prior table and the WS_KEEP most frequent at M there (none
    where WS never won at M: the pass is skipped), all of them with prior
    None (--full)."""
    if prior is None:
        return list(tiles)
    strip = lambda w: {c: v for c, v in w.items() if c != "PDL"}  # noqa: E731
    count: dict[str, list] = {}
    for name, e in prior.items():
        if parse(name)[0] == m and "WS" in e.get("config", {}):
            slot = count.setdefault(json.dumps(strip(e["config"]["WS"]), sort_keys=True), [0, False])
            slot[0] += 1
            slot[1] |= name == key
    keep = sorted(count, key=lambda w: (not count[w][1], -count[w][0]))
    keep = [w for w in keep if count[w][1]] + [w for w in keep if not count[w][1]][:WS_KEEP]
    return [t for t in tiles if json.dumps(strip(t), sort_keys=True) in keep]


def with_pdl(pool: list[dict], prior: dict | None, m: int) -> list[dict]:
    """The pool with PDL 2 variants, as the table times up to M =
    PDL_MAX_M: of every config with prior None (--full), else of those
    that won at M on the prior table with PDL (the others won without it
    wherever they won: their PDL twin is left out)."""
    if prior is None:
        twins = pool
    else:
        won = [base_of(c) for key, e in prior.items() if parse(key)[0] == m
               and (c := e.get("rot_of", e["config"])).get("PDL")]  # rot_of: a ROT winner's pool config
        twins = [c for c in pool if base_of(c) in won]
    return pool + [{**c, "PDL": 2} for c in twins if not c.get("PDL")]


def pdl_won_at(prior: dict | None, m: int, key: str | None = None) -> bool:
    """Whether PDL won on the prior table at the bucket `key` (where the
    prior has it), else at any bucket of M (True with prior None)."""
    if prior is None:
        return True
    won = lambda e: bool(e["config"].get("PDL") or e["config"].get("WS", {}).get("PDL"))  # noqa: E731
    if key in prior:
        return won(prior[key])
    return any(parse(name)[0] == m and won(e) for name, e in prior.items())


ROT_SPLITS = (2, 4, 8, 16)  # the rot pass's SPLIT_K: the split pool's, and 16
ROT_VARIANTS = 1 + len(ROT_SPLITS)  # rot_variants of a split config: itself, its twin at each split


def rot_pass_at(fmt: str, path: str, m: int, prior: dict | None, key: str | None = None) -> bool:
    """Whether tune_unit (and the plan's count of it) ends the unit with the
    rot pass: NVFP4's fused path up to the split-K tiles' M, with no prior
    (--full), or where ROT_DECODE won on the prior table at the bucket `key`
    (where the prior has it), else at any bucket of M. Not where the prior
    never ran the pass (the H100's table): a bring-up's 25 minutes have no
    room for it there, so it runs after (docs/tuning.md)."""
    from qgemm_bench.backends.triton_kernels.fused_gemm import SPLIT_POOL_MAX_M

    if fmt != "nvfp4" or path != "fused" or m > SPLIT_POOL_MAX_M:
        return False
    if prior is None:
        return True
    if key in prior:
        return bool(prior[key]["config"].get("ROT_DECODE"))
    return any(parse(name)[0] == m and e["config"].get("ROT_DECODE") for name, e in prior.items())


def prior_first(prior: dict | None, key: str) -> dict | None:
    """The bucket's winner on the prior table as a pool holds it, the
    first candidate tune_unit times: its config, or where a rot pass gave
    it ROT_DECODE (which no pool holds) the config that pass replaced
    (rot_of; the unit's own rot pass times ROT_DECODE again)."""
    entry = (prior or {}).get(key, {})
    return entry.get("rot_of", entry.get("config"))


def split_outrun(split: dict | None, fused: dict | None, m: int) -> bool:
    """Whether the prior table's fused path timed faster than its split path
    at every bucket of M where it timed both (at least one): there the split
    path only serves where the fused one cannot run, and its unit times the
    bucket's own prior winner alone (unit_pool). The H100 entry: fused
    faster at 63 of the 64 buckets of M <= 64; the H200 tune (pruned by it,
    every split candidate timed) agreed at 62, the other two by 1.7 and
    2.2% (nvfp4 4096x4096 at M = 1 and 16)."""
    timed = lambda e: isinstance((e or {}).get("us"), (int, float))  # noqa: E731
    both = [(e, fused[key]) for key, e in (split or {}).items()
            if parse(key)[0] == m and timed(e) and timed((fused or {}).get(key))]
    return bool(both) and all(f["us"] < e["us"] for e, f in both)


def unit_pool(fmt: int, path: str, m: int, prior: dict | None, first: dict | None = None,
              rival: dict | None = None) -> list[dict]:
    """The table candidates of one weight-only unit (tuning/weight_only.py
    tune_unit; tuning/plan.py counts them): the path's pool pruned by the
    prior table's winners at M (pruned), with PDL twins up to PDL_MAX_M
    (with_pdl); a split path the prior's fused path outran at M (rival: its
    fused entries, split_outrun) the bucket's own prior winner alone; the
    prior winner `first` (as stored, with its PDL) ahead."""
    pool = pruned(weight_only_pool(fmt, path, m), prior, m, first)
    if path == "split" and first is not None and split_outrun(prior, rival, m):
        pool = [c for c in pool if base_of(c) == base_of(first)] or pool
    if m <= PDL_MAX_M:
        pool = with_pdl(pool, prior, m)
    if first is not None:
        own = {c: v for c, v in first.items() if c != "WS"}  # its WS tiles: the ws pass times them
        pool.sort(key=lambda c: c != own)
    return pool


# ------------------------------------------------------------------ Helion

def helion_sk(bm, bn, bk, split, warps=4, stages=4):
    """A split-K GEMM candidate in its Helion form (configs.from_triton of the Triton config)."""
    return {"block_sizes": [bn, bm], "block_k": bk, "split_k": split, "num_warps": warps, "num_stages": stages}


HELION_SPLIT_K = [helion_sk(16, 16, 64, 16), helion_sk(16, 32, 64, 16), helion_sk(16, 32, 128, 8),
                  helion_sk(32, 32, 64, 16), helion_sk(64, 64, 64, 8), helion_sk(16, 16, 128, 32),
                  helion_sk(64, 64, 128, 4), helion_sk(64, 32, 64, 16)]

HELION_WEIGHT_ONLY_M = (1, 16, 64, 128, 256, 512)
HELION_KN = (8192, 8192)  # the one layer Helion's weight-only buckets are tuned at (others: nearest)
HELION_SPLIT_K_SHAPES = [(16, 16384, 16), (64, 32768, 64), (256, 65536, 256)]
# The Helion split-K kernels the tuner writes (helion_ops.SplitK): the
# operator's two modes, by the backend that runs each.
SPLIT_K_KERNELS = {"split_k_gemm": "helion", "split_k_gemm_deterministic": "helion_deterministic"}


def helion_path(op: str, m: int, shape=None, device=None) -> str:
    """The path the Helion backend takes at M (with shape and device, a
    torch device or a Target: helion_dispatch.weight_only_path, the
    faster path where the weight_only store entry it uses timed both)."""
    from qgemm_bench.backends import helion_dispatch, triton_dispatch

    if op in SPLIT_K_KERNELS:
        return "split_k"
    if shape is None or device is None:
        return triton_dispatch.path_for(m)
    from qgemm_bench.operators.formats import INT4, NVFP4

    return helion_dispatch.weight_only_path(m, NVFP4 if op == "nvfp4_gemm" else INT4, shape[1], shape[2],
                                            target_of(device))


def target_of(device):
    """A Target for a torch device (target.of) or the Target given."""
    from qgemm_bench.target import Target, of

    return device if isinstance(device, Target) else of(device)


def helion_kernel(op: str, m: int, shape=None, device=None) -> str:
    """The config file's kernel name for this op and M (helion_ops.WeightOnly)."""
    return f"{op}_fused" if helion_path(op, m, shape, device) == "fused" else op


# The fused kernel's TMA / persistent variants (helion_fused_variants) in
# every fused unit of `qgemm-bench tune`: off, as the one-GPU plan has no
# room (issue 52: 24 min; the variants add 46 candidates, 80 s, at the H200's
# units). `python -m qgemm_bench.tuning.helion --variants` and
# scripts/helion_ab.py time them.
HELION_VARIANTS = False
# Where the int4 fused unit also times its first candidate on fragment-order
# weights (frag): where the weight path is much of a K block (on the H200 the
# 4-warp frag twin of the M = 256 entry ran 61 us against 75; at M = 1024
# 4 warps ran 23x slower than the entry, 4596 us against 203).
HELION_FRAG_MAX_M = 256
# From this M every candidate's frag twin, not only the first's: the first's
# won at most M = 256 layers, and others kept tiles whose twin was never timed
# (docs/helion.md).
HELION_FRAG_ALL_MIN_M = 128
# Where the fused kernel scales each K step's product (acc_scale) rather
# than its weights: fused_gemm's ACC_SCALE paid on split-K tiles at M <= 64.
HELION_ACC_MAX_M = 64
# Where a fused unit's winner is also timed with TMA loads (tuning.helion's
# tma pass): on the H200 they won at M = 1 (NVFP4 by 8%, int4 by 1%) and
# lost at 16 and 64; from int4's M = 128, where x is read K-innermost, TMA
# loads in fragment order won by 11% at M = 256 and 15% at 1024 (NVFP4's
# TMA tiles there returned NaN: docs/helion.md).
HELION_TMA_TWIN_MAX_M = 1
HELION_TMA_FRAG_MIN_M = 128


def helion(op: str, m: int, shape=None, device=None, prior: dict | None = None,
           variants: bool | None = None) -> list[dict]:
    """The Helion kernel's candidates at M: the Triton kernels' own pools as
    Helion configs (configs.from_triton); prior (the Triton table's entries
    of the kernel, {bucket: entry}): only those that won at M there
    (pruned), as the Triton default does. variants (default
    HELION_VARIANTS): the fused path's then followed by
    helion_fused_variants of its first."""
    from qgemm_bench.backends.helion_kernels.configs import from_triton
    from qgemm_bench.backends.triton_kernels import fused_gemm, weight_only

    p = helion_path(op, m, shape, device)
    if p == "split_k":  # first the Triton table's config (helion_ops' fallback: a saved entry must beat it)
        from qgemm_bench.backends.helion_dispatch import split_k_default

        table = [split_k_default(op != "split_k_gemm", *shape, target_of(device))[0]] \
            if shape and device is not None else []
        if table and table[0].get("pdl") in (1, 2):  # and launching the next kernel after the K loop (docs/pdl.md)
            table.append({**table[0], "pdl": 3})
        return table + [c for c in HELION_SPLIT_K if c not in table and max(c["block_sizes"]) <= max(16, m)]
    if p == "split":
        pool = list(map(weight_only.config_dict, weight_only.split_pool(m)))
        return [from_triton(c, split=True) for c in pruned(pool, prior, m)]
    if p == "fused":
        from qgemm_bench.backends.helion_dispatch import helion_config
        from qgemm_bench.operators.formats import INT4, NVFP4

        out = []  # the pool's TMA and pointer-load twins are one Helion config (the pointer loads' form)
        for c in pruned(fused_gemm.pool(m, NVFP4 if op == "nvfp4_gemm" else INT4), prior, m):
            # Its split explicit, 1 too: without the key a run fills in the Triton table's split for the
            # shape (helion_ops), so the candidate would be timed, and saved, as another config.
            h = {**helion_config(c, "fused", acc_scale=True), "split_k": c.get("SPLIT_K", 1)}
            # On the Triton kernel's tiled weights where they apply: the twin won at most entries (docs/helion.md).
            h = helion_tiled_twin(h) or h
            # An int4 ACC_SCALE config (with its register cap) and its twin
            # without, PDL aside: one of them, the one Triton's own
            # measurements favour at this M (fused_gemm's ACC_SCALE). NVFP4's
            # (one dot a K step) is not timed against its twin yet: both.
            twin = next((o for o in out if _plain(o) == _plain(h)), None)
            if op == "nvfp4_gemm":
                if h not in out:
                    out.append(h)
            elif twin is None:
                out.append(h)
            elif twin != h and (m <= HELION_ACC_MAX_M) == bool(h.get("acc_scale")) != bool(twin.get("acc_scale")):
                out[out.index(twin)] = h
        if out and (twin := bf16_twin(op, out[0])) is not None and twin not in out:
            out.append(twin)
        for i, c in enumerate(list(out if m >= HELION_FRAG_ALL_MIN_M else out[:1])):
            twin = frag_twin(op, m, c)
            # Past the first, none whose fp32 accumulator takes over 128 registers a thread (the 4-warp
            # [128, 256] twin ran far slower than its entry at M = 1024: docs/helion.md).
            if twin is not None and twin not in out and (i == 0 or _acc_regs(twin) <= 128):
                out.append(twin)
        if out and (HELION_VARIANTS if variants is None else variants):
            out += [v for v in helion_fused_variants(out[0], m) if v not in out]
        return out
    return []


def bf16_twin(op: str, c: dict) -> dict | None:
    """NVFP4 fused config c's twin on FusedGemm's bf16 block scales
    (kernels.fused's bf16_scales: no conversion in the loop; docs/helion.md),
    where c is not one; None for int4."""
    return {**c, "bf16_scales": True} if op == "nvfp4_gemm" and not c.get("bf16_scales") else None


def tma_twin(c: dict) -> dict | None:
    """Helion fused config c with its x and weight tiles by tensor
    descriptors (kernels.fused's `tma`, Helion's tensor_descriptor
    indexing), where c is not one already; without rot and tiled, which
    TMA loads drop (helion_ops), so a winner is stored as it runs."""
    if c.get("tma"):
        return None
    return {**{k: v for k, v in c.items() if k not in ("rot", "tiled")}, "tma": True, "indexing": "tensor_descriptor"}


def tma_twin_at(op: str, m: int):
    """The twin a fused unit's winner at M is timed against in the TMA pass
    (tuning.helion.twin_passes), or None: tma_twin up to
    HELION_TMA_TWIN_MAX_M; int4 from HELION_TMA_FRAG_MIN_M, tma_twin in
    fragment order (helion_ops.frag_tile_ok takes it on any warps where the
    kernel reads by TMA with x K-innermost)."""
    if m <= HELION_TMA_TWIN_MAX_M:
        return tma_twin
    return tma_frag_twin if op == "int4_gemm" and m >= HELION_TMA_FRAG_MIN_M else None


def tma_frag_twin(c: dict) -> dict | None:
    """tma_twin(c) on int4's fragment-order weights."""
    twin = tma_twin(c)
    return None if twin is None else {**twin, "frag": True}


def pdl2_twin(c: dict) -> dict | None:
    """Helion fused config c launched early (pdl 2), where it is not."""
    return None if c.get("pdl") else {**c, "pdl": 2}


# Calls the TMA pass checks its configs over: the int4 twin from M = 128 is an
# 8-warp fragment-order tile at M = 1024 (helion_ops.frag_tile_ok).
TMA_CHECK_CALLS = 30


def helion_rot_twin(c: dict) -> dict | None:
    """NVFP4 Helion fused config c on ROT_DECODE's permuted weights
    (helion_ops' rot), on pointer loads (rot takes no tma), where it is not
    one already (a rot config on tma runs without it: it gets its twin):
    what tuning.helion's --rot-pass times each entry against."""
    if c.get("rot") and not c.get("tma"):
        return None
    return {**{k: v for k, v in c.items() if k not in ("tma", "indexing")}, "rot": True}


def helion_table_twin(op: str, shape, c: dict, target, store=None) -> dict | None:
    """Helion fused config c's twin on the Triton table's config for the
    shape (its own bucket only; its pointer-load config where it reads by
    TMA): that tile, K step, split, warps, stages, ACC_SCALE and PDL, with
    what a Triton config does not name as c has it (NVFP4's bf16_scales and
    rot, tiled) and, for int4, fragment order where helion_ops takes it in that
    tile (frag_tile_ok; K order reads byte by byte). None where the table
    has no entry of the bucket or the twin is c: what tuning.helion's
    --table-pass times each entry against (the tuner's pools time the
    table's tiles, but int4's frag twin of the first candidate only below
    HELION_FRAG_ALL_MIN_M)."""
    from qgemm_bench.backends.helion_dispatch import helion_config
    from qgemm_bench.backends.helion_ops import frag_tile_ok
    from qgemm_bench.backends.triton_dispatch import weight_only_entry
    from qgemm_bench.backends.triton_kernels import weight_only_configs
    from qgemm_bench.operators.formats import INT4, NVFP4

    fmt = NVFP4 if op == "nvfp4_gemm" else INT4
    e = weight_only_entry(target, store)
    found = weight_only_configs.lookup(fmt, "fused", *shape, e.gpu, e.table, tma=False)
    if found is None or found[1]:  # a note: the nearest bucket's, not the shape's own
        return None
    t = found[0]
    twin = {**helion_config(t, "fused", acc_scale=True), "split_k": t.get("SPLIT_K", 1)}
    twin.update({k: c[k] for k in ("bf16_scales", "rot", "tiled") if c.get(k)})
    if op == "int4_gemm" and shape[0] <= HELION_FRAG_MAX_M and frag_tile_ok({**twin, "frag": True}):
        twin["frag"] = True
    if c.get("frag") and not twin.get("frag"):  # K order: byte-wide reads, slower in every tile timed
        return None
    # A twin that only leaves out what the entry adds (TMA loads, a persistent grid) is not the table's tile.
    return None if all(twin.get(k) == c.get(k) for k in TABLE_TWIN_KEYS) else twin


def helion_tiled_twin(c: dict) -> dict | None:
    """Fused config c's twin on the Triton fused kernel's tiled weights
    (kernels.fused's tiled: a 64-row tile's 128 k one contiguous 4 KB run),
    where helion_ops takes tiled (helion_ops.tiled_ok) and c is not tiled:
    what tuning.helion's --tiled-pass times each entry against."""
    from qgemm_bench.backends.helion_ops import tiled_ok

    twin = {**c, "tiled": True}
    return None if c.get("tiled") or not tiled_ok(twin) else twin


def helion_split_twin(shape, c: dict, sms: int) -> dict | None:
    """Fused config c's twin with twice its K split, where c's programs
    (its tiles times its split; not a persistent grid) leave some of the
    GPU's sms without one, where the Triton kernel splits K or runs
    stream-K (docs/helion.md): what tuning.helion's --split-pass times each
    entry against; none where each split is one K step already."""
    m, k, n = shape
    bn, bm = c["block_sizes"][:2]
    split = c.get("split_k", 1)
    if str(c.get("pid_type", "flat")).startswith("persistent") or -(-n // bn) * -(-m // bm) * split >= sms:
        return None
    if split >= -(-k // c["block_k"]):  # a K step a split already: a twice split would be the same kernel
        return None
    return {**c, "split_k": 2 * split}


TABLE_TWIN_KEYS = ("block_sizes", "block_k", "split_k", "num_warps", "num_stages", "acc_scale", "pdl", "frag")


def helion_twin_passes(op: str, m: int) -> list[tuple]:
    """The passes a Helion fused unit at M ends with, (label, twin_of,
    check_calls) in order (tuning.helion.twin_passes; the plan counts two
    timings each): the PDL 2 twin up to PDL_MAX_M (as the Triton table's
    pdl pass: the pools carry no PDL), then the TMA twin where tma_twin_at
    has one."""
    out = [("PDL 2", pdl2_twin, 1)] if m <= PDL_MAX_M else []
    tma = tma_twin_at(op, m)
    if tma is not None:
        out.append(("TMA", tma, TMA_CHECK_CALLS))
    return out


def frag_twin(op: str, m: int, c: dict) -> dict | None:
    """int4 fused config c's twin on fragment-order weights (helion_ops'
    frag: fewer instructions a K block) where it applies and c is not one:
    M <= HELION_FRAG_MAX_M; a tile wider than helion_ops.FRAG_MAX_BLOCK_M
    rows on 4 warps (helion_ops.frag_tile_ok)."""
    from qgemm_bench.backends.helion_ops import frag_tile_ok

    if op != "int4_gemm" or m > HELION_FRAG_MAX_M or c.get("frag"):
        return None
    twin = {**c, "frag": True}
    return twin if frag_tile_ok(twin) else {**twin, "num_warps": 4}


HELION_SMEM = 200 * 1024  # bytes of staged x and weight tiles a deeper pipeline may take (H100/H200: 227 KiB)
L2_GROUP = 8  # N tiles a persistent program's group spans (Helion's l2_groupings), where M has 2+ tiles


def _acc_regs(h: dict) -> float:
    """A Helion fused config's fp32 accumulator registers per thread."""
    bn, bm = h["block_sizes"][:2]
    return bn * bm / (32 * h["num_warps"])


def _plain(h: dict) -> dict:
    """A Helion fused config without acc_scale, the register cap that goes
    with it, and its PDL mode."""
    return {k: v for k, v in h.items() if k not in ("acc_scale", "maxnreg", "pdl")}


def helion_fused_variants(c: dict, m: int) -> list[dict]:
    """What Helion can express of the Triton path's TMA and persistent
    kernels, as variants of the fused kernel's config c (the unit's first
    candidate) at M, at most 4, by rule:
    - "tma": x and weight tiles by tensor descriptors (kernels.fused's
      K-step views, the `tma` argument, with Helion's indexing
      tensor_descriptor; the output store too);
    - persistent programs, pointer loads: persistent_blocked;
    - both: tma and persistent_interleaved (the Triton TMA kernel's loads
      on a persistent grid);
    each persistent one grouping L2_GROUP N tiles (l2_groupings) where M
    has more than one tile (consecutive programs then share weight tiles);
    - "deeper": tma one pipeline stage deeper (num_stages + 1: Helion 1.4
      drops range_num_stages under tensor_descriptor indexing,
      tile_strategy.get_tl_range_kwargs) where the stages' x and weight
      tiles fit HELION_SMEM.
    Not range_warp_specializes: Helion 1.4 offers it from compute capability
    10.0 only (language/loops._supports_warp_specialize), not on sm_90."""
    bn, bm = c["block_sizes"]
    bk, stages = c["block_k"], c["num_stages"]
    tma = tma_twin(c) or c
    group = {"l2_groupings": [L2_GROUP]} if -(-m // bm) > 1 else {}
    out = [tma, {**c, "pid_type": "persistent_blocked", **group},
           {**tma, "pid_type": "persistent_interleaved", **group}]
    stage_bytes = bk * bm * 2 + bn * bk // 2  # x in 16 bits, the weights' packed bytes
    if (stages + 1) * stage_bytes <= HELION_SMEM:
        out.append({**tma, "num_stages": stages + 1})
    return out
