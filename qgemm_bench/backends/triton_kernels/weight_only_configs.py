"""Which config the Triton weight-only GEMM's split and fused paths
(weight_only.py, fused_gemm.py) run at a shape, in a table the caller
hands in: the config store's weight_only family (configs/<gpu>/
weight_only.json, which triton_dispatch.weight_only_entry reads), so a
default run never autotunes. This module reads no store, only the table:

    {"gpu": "h100",
     "provenance": {"commit", "date", "command", "rounds", "versions", ...,
                    "passes": [{"pass": "table" | "ws" | "pdl" | "scale8", "command", "commit",
                                "date", "entries": {KERNEL: [keys]}, "formats", "paths",
                                "ms", "group", "layers", "rounds", "versions"}]},
     "kernels": {"int4_gemm" | "nvfp4_gemm"              (the split path)
                 | "int4_gemm_fused" | "nvfp4_gemm_fused":  (the fused path)
                 {"M<m>_K<k>_N<n>": {"config": {"BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K",
                                                "DECODE_ASM", "num_warps", "num_stages", optional "PDL",
                                                "maxnreg", "TMA", "TMA_W", "ACC_SCALE", "FOLD",
                                                "SCALE_AHEAD", "SCALE8", "SHORT_DECODE",
                                                "ROT_DECODE", "WS", "PF_LINES" and "HALVES"
                                                (the last eleven fused only, SCALE8, SHORT_DECODE
                                                and ROT_DECODE NVFP4 pointer loads only; WS the
                                                warp-specialized kernel's tiles, which run
                                                where it runs, the rest elsewhere)},
                                     "us": p50 when tuned (the table mode: the mean of two
                                     rounds' p50), "tuned": "how",
                                     where config has TMA and pointer-load candidates were
                                     timed (M <= 1024): "pointer_config", the best without
                                     (what kernels without TMA loads mirror);
                                     above weight_only.FUSED_MAX_M (fused only):
                                     "versus_dequant_us": [config's us, dequantize +
                                     cuBLAS's us], timed in rounds of their own;
                                     at fused_gemm.WS_POOL's M: "ws_us": [the
                                     config's us without WS, with the fastest WS
                                     tiles], timed in the same rounds (the fastest
                                     stays),
                                     int4 fused only, optionally "groups": {"32" |
                                     "64" | "channel": {"config", "us", "ws_us",
                                     "tuned"}}: the config that runs at that group
                                     size instead (group_key; tuned by
                                     `tuning/weight_only.py ws --group`)}}}}

Buckets as Helion's files (config_buckets): the shape's own, else the
nearest, and the row names it. Up to M = 64 the path that timed faster at
the nearest bucket with both paths' timings runs (faster_path); above
weight_only.FUSED_MAX_M the fused kernel gives way to dequantize + cuBLAS
where the nearest fused bucket (the one whose config runs) timed that
faster (dequant_faster). The int4 entries were timed at group 128 and
serve every group size (the kernel picks its scale handling from the group
and BLOCK_K) but where an entry has its own config for the group ("groups",
looked up in the bucket the shape takes: the group-128 entries decide the
bucket). A GPU without its own entry takes the nearest store entry of its
compute capability (triton_dispatch.weight_only_entry; the rows say which); with none of that
capability the split kernel autotunes over weight_only's curated lists at
run time (the row says so), the fused one takes fused_gemm.FUSED_CONFIGS. The Helion backend runs these
configs (pointer_config where the config has TMA loads, which it lacks) where
it has none of its own for the shape's bucket.
`qgemm-bench tune` writes this GPU's file (tuning/weight_only.py). Its
provenance says how, in fields: the tune that wrote it (or the table mode
run alone over every kernel, its "pass"), then "passes": one record per
later run of a mode of tuning/weight_only.py alone (journal.add_pass: its
command, commit, date, the entries it timed and its options); "earlier":
the provenance of tunes whose entries the file still holds.
"""

from __future__ import annotations

import re
from pathlib import Path

from qgemm_bench.backends import config_buckets
from qgemm_bench.backends.config_buckets import bucket, nearest, read_json
from qgemm_bench.backends.triton_kernels.split_k_configs import PDL_MODES
from qgemm_bench.backends.triton_kernels.weight_only import FUSED_MAX_M, FUSED_ONLY  # the kernel's
from qgemm_bench.operators.formats import INT4

FAMILY = "weight_only"  # the store's
FORMATS = ("int4_gemm", "nvfp4_gemm")  # by FMT: formats.INT4 = 0, NVFP4 = 1
PATHS = ("split", "fused")
KERNELS = FORMATS + tuple(f"{f}_fused" for f in FORMATS)
CONFIG_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "num_warps", "num_stages")
MIN_TILE = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16}  # split_k_parts' counters; tl.dot's 16
GROUP_KEYS = ("32", "64", "channel")  # an int4 fused entry's "groups" (group_key)


def group_key(group: int | None, k: int) -> str:
    """An int4 group size as an entry's "groups" names it: "channel" for one
    group of all K (and unscaled, run as scales of one per channel), else
    the size ("128", the entries' own, has no override)."""
    return "channel" if group is None or group >= k else str(group)


def kernel(fmt: int, path: str) -> str:
    """The table's kernel name for a format and path ("split" or "fused")."""
    if path not in PATHS:
        raise ValueError(f"path {path!r}: the table holds {' and '.join(PATHS)} configs")
    return FORMATS[fmt] + ("_fused" if path == "fused" else "")


def check_config(config, where: str, fmt: int = INT4) -> None:
    """A config the kernels can run: power-of-two tiles at least MIN_TILE,
    SPLIT_K, warps and stages positive integers; else ValueError in one line."""
    if not isinstance(config, dict) or any(x not in config for x in CONFIG_KEYS):
        raise ValueError(f"{where}: a config needs {', '.join(CONFIG_KEYS)}")
    for x in CONFIG_KEYS:
        v = config[x]
        low = MIN_TILE.get(x, 1)
        if not isinstance(v, int) or isinstance(v, bool) or v < low or (x in MIN_TILE and v & (v - 1)):
            kind = f"a power of two >= {low}" if x in MIN_TILE else "a positive integer"
            raise ValueError(f"{where}: {x}={v!r} must be {kind}")
    for key, what in (("TMA", "fused_gemm.FusedGemm.descriptors"), ("TMA_W", "fused_gemm.fused_kernel"),
                      ("ACC_SCALE", "fused_gemm.fused_kernel"), ("FOLD", "fused_gemm.fused_kernel"),
                      ("SCALE_AHEAD", "fused_gemm.fused_kernel"),
                      ("SCALE8", "fused_gemm.fused_kernel"), ("SHORT_DECODE", "fused_gemm.fused_kernel"),
                      ("ROT_DECODE", "fused_gemm.FusedGemm.rot_runs")):
        if not isinstance(config.get(key, False), bool):
            raise ValueError(f"{where}: {key}={config[key]!r} must be true or false ({what})")
    from qgemm_bench.backends.triton_kernels.fused_gemm import scale8_refused, unknown_refused

    if why := unknown_refused(config) or scale8_refused(fmt, config):
        raise ValueError(f"{where}: {why}")
    if "WS" in config:
        from qgemm_bench.backends.triton_kernels import ws_gemm

        try:
            ws_gemm.check(config["WS"], fmt)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    reg = config.get("maxnreg")
    if reg is not None and (not isinstance(reg, int) or isinstance(reg, bool) or not 24 <= reg <= 255):
        raise ValueError(f"{where}: maxnreg={reg!r} must be an integer from 24 to 255 (registers per thread)")
    if config.get("PDL", 0) not in PDL_MODES:
        raise ValueError(f"{where}: PDL={config['PDL']!r} must be one of {', '.join(map(str, PDL_MODES))} "
                         "(split_k_parts.pdl_prologue)")


def check_table(doc, where: str) -> dict:
    """doc if it has the layout above, else ValueError in one line."""
    kernels = doc.get("kernels") if isinstance(doc, dict) else None
    if not isinstance(kernels, dict) or not isinstance(doc.get("gpu"), str):
        raise ValueError(f'{where}: expected {{"gpu": NAME, "kernels": {{KERNEL: {{"M<m>_K<k>_N<n>": '
                         '{"config": ...}}}}')
    for name, entries in kernels.items():
        if name not in KERNELS or not isinstance(entries, dict):
            raise ValueError(f"{where}: kernel {name!r} must be one of {', '.join(KERNELS)} and hold a dict")
        for key, entry in entries.items():
            found = re.fullmatch(r"M(\d+)_K(\d+)_N(\d+)", key)
            if not found or min(int(g) for g in found.groups()) <= 0:
                raise ValueError(f"{where}: {name}: bad bucket {key!r}: expected M<m>_K<k>_N<n>, all positive")
            config = entry.get("config") if isinstance(entry, dict) else None
            fmt = FORMATS.index(name.removesuffix("_fused"))
            check_config(config, f"{where}: {name} {key}", fmt)
            for opt in FUSED_ONLY:
                if opt in config and not name.endswith("_fused"):
                    raise ValueError(f"{where}: {name} {key}: {opt} is the fused kernel's only")
            if "versus_dequant_us" in entry:
                v = entry["versus_dequant_us"]
                if not name.endswith("_fused") or int(found.group(1)) <= FUSED_MAX_M or not isinstance(v, list) \
                        or len(v) != 2 or not all(isinstance(u, (int, float)) and not isinstance(u, bool) and u > 0
                                                  for u in v):
                    raise ValueError(f"{where}: {name} {key}: versus_dequant_us must be two positive numbers "
                                     f"[fused, dequant], in a fused entry above M = {FUSED_MAX_M}")
            if "ws_us" in entry:
                v = entry["ws_us"]
                if not name.endswith("_fused") or not isinstance(v, list) or len(v) != 2 or \
                        not all(isinstance(u, (int, float)) and not isinstance(u, bool) and u > 0 for u in v):
                    raise ValueError(f"{where}: {name} {key}: ws_us must be two positive numbers [fused_kernel, "
                                     "WS], in a fused entry")
            if "groups" in entry:
                groups = entry["groups"]
                if name != "int4_gemm_fused" or not isinstance(groups, dict) or set(groups) - set(GROUP_KEYS):
                    raise ValueError(f"{where}: {name} {key}: groups (int4_gemm_fused only) maps "
                                     f"{', '.join(GROUP_KEYS)} to an entry with a config")
                for g, sub in groups.items():
                    check_config(sub.get("config") if isinstance(sub, dict) else None,
                                 f"{where}: {name} {key} groups {g}", fmt)
            if "pointer_config" in entry:
                check_config(entry["pointer_config"], f"{where}: {name} {key} pointer_config", fmt)
                if entry["pointer_config"].get("TMA") or "WS" in entry["pointer_config"]:
                    raise ValueError(f"{where}: {name} {key}: pointer_config must not take TMA loads (nor WS)")
    return doc


def read_table(path: Path) -> dict:
    return check_table(read_json(path), str(path))


def entries_of(fmt: int, path: str, gpu: str | None, doc: dict | None = None) -> dict:
    """GPU `gpu`'s entries in table doc (None: no table) for a format and
    path: {bucket: entry}, empty where the table is another GPU's."""
    doc = {} if doc is None else doc
    return doc.get("kernels", {}).get(kernel(fmt, path), {}) if doc.get("gpu") == gpu else {}


def bucket_of(fmt: int, path: str, m: int, k: int, n: int, gpu: str | None, doc: dict | None = None) -> str | None:
    """The bucket whose entry serves this shape on the path (its own, else
    the nearest: config_buckets.nearest), or None: no entry."""
    entries = entries_of(fmt, path, gpu, doc)
    return nearest(entries, m, k, n) if entries else None


def lookup(fmt: int, path: str, m: int, k: int, n: int, gpu: str | None,
           doc: dict | None = None, tma: bool = True, group: str | None = None) -> tuple[dict, str] | None:
    """(config, note) for the path ("split" or "fused") at this shape on GPU
    `gpu` (the note names the bucket when it is not the shape's own), or
    None: no entry for this GPU, format and path. tma False: for a kernel
    without TMA loads, the entry's pointer_config where its config has TMA
    loads. group (group_key): the entry's own config for that int4 group
    size where it has one (as it runs: its TMA loads are usable)."""
    near = bucket_of(fmt, path, m, k, n, gpu, doc)
    if near is None:
        return None
    entries = entries_of(fmt, path, gpu, doc)
    note = "" if near == bucket(m, k, n) else f"triton {path} config of nearest bucket {near}"
    entry = entries[near]
    if group is not None and group in entry.get("groups", {}):
        return dict(entry["groups"][group]["config"]), note
    if not tma and entry["config"].get("TMA") and "pointer_config" in entry:
        return dict(entry["pointer_config"]), note
    return {c: v for c, v in entry["config"].items() if tma or c not in ("TMA", "TMA_W", "WS")}, note


def faster_path(fmt: int, m: int, k: int, n: int, gpu: str | None, doc: dict | None = None) -> str | None:
    """"split" or "fused", whichever timed faster at the nearest bucket (the
    shape's own where it has them) where GPU `gpu`'s table has both paths'
    timings (tuning/weight_only.py times both at M = 1, 16, 32, 64:
    M = 2 takes M = 1's choice, M = 3..16 M = 16's: config_buckets.nearest),
    else None."""
    timed = {p: {key: e["us"] for key, e in entries_of(fmt, p, gpu, doc).items()
                 if isinstance(e.get("us"), (int, float))} for p in PATHS}
    both = timed["split"].keys() & timed["fused"].keys()
    if not both:
        return None
    near = nearest(both, m, k, n)
    return min(PATHS, key=lambda p: timed[p][near])


def dequant_faster(fmt: int, m: int, k: int, n: int, gpu: str | None, doc: dict | None = None) -> bool:
    """Whether dequantize + cuBLAS timed faster than the fused config at the
    nearest fused bucket, the one whose config runs (tuning/weight_only.py
    table times both above weight_only.FUSED_MAX_M: versus_dequant_us);
    False where that entry has no such timing."""
    entries = entries_of(fmt, "fused", gpu, doc)
    if not entries:
        return False
    versus = entries[nearest(entries, m, k, n)].get("versus_dequant_us")
    return versus is not None and versus[1] < versus[0]


def dumps(doc: dict) -> str:
    """The file's text: one entry per line, so a re-tune's diff stays readable."""
    return config_buckets.dumps(doc, "kernels", sort=True)
