"""Which config the Triton split-K GEMM (split_k.py) runs at a shape, in a
table the caller hands in: the config store's split_k family
(configs/<gpu>/split_k.json, which triton_dispatch.split_k_entry reads: a
GPU without its own takes the nearest entry of its compute capability), so
a default run never autotunes. This module reads no store, only the table:

    {"gpu": null | NAME,            # null: any GPU; else only this GPU (and those it serves) uses the entries
     "provenance": {"commit", "date", "command", "rounds", "versions", ...,
                    "passes": [{"pass", "command", "commit", "date",
                                "entries": {MODE: [keys]}, ...}]},
     "format": "qgemm-bench split_k configs v1",
     "sms": 132,                    # the SM count the entries were chosen for
     "entries": {"atomic" | "deterministic":
                 {"M<m>_K<k>_N<n>": {"config": {"BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K",
                                                "num_warps", "num_stages",
                                                optional "REDUCE", "PDL", "PF_ROWS"},
                                     "tuned": "how it was found", "us": ..., "cublas_us": ...}}}}

`qgemm-bench tune` writes this file (on a GPU: the timed winners;
`python -m qgemm_bench.tuning.split_k --seed-only`: the heuristic's choices,
no GPU, each entry's "tuned" SEED_NOTE). The provenance says how, in fields:
the tune (or the run alone, or the seed, its "pass") that wrote the file,
then "passes": one record per later run of the tuner alone
(tuning/journal.add_pass: its command, commit, date, the entries it timed,
"keep_faster": true where an entry changed only where it timed faster);
"earlier": the provenance of tunes whose entries the file still holds. A
shape is looked up:
1. exact (mode, M, K, N) entry;
2. else the nearest entry of the same bucket (M and N rounded up to a power
   of two >= 16, K to the nearest power of two; nearest by log2 distance),
   its split count cut until every split has >= 2 K blocks;
3. else the heuristic below, with the Target's SM count.
A table of another GPU (its "gpu" differs from the one lookup is given) is
not used: step 3. The CPU (the interpreter) has no store entry: step 3.

Any config may name a PDL mode (split_k_parts.pdl_prologue: 0 off, 1 launch
overlap, 2 and a prefetch of b's first rows, 3 as 2 with the next kernel
launched after the main loop).
Deterministic configs may name who sums the planes (REDUCE, see
split_k_parts.py), each in a fixed order: "last" (the default: the tile's
last program, in split order) or "kernel" (a second, small launch). In an atomic entry "last" means
atomics (finished by the tile's last program); "kernel" runs the per-split
planes and the second launch instead: the tuner puts the deterministic winner
there where it timed faster than every atomic config (with PDL the second
launch costs little, and the planes avoid atomic traffic).
Helion's split-K kernel runs these configs too, PDL and REDUCE included
(helion_dispatch.split_k_default).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from qgemm_bench.backends import config_buckets
from qgemm_bench.backends.config_buckets import read_json
from qgemm_bench.target import CPU_SMS

FAMILY = "split_k"  # the store's
FORMAT = "qgemm-bench split_k configs v1"
SEED_NOTE = "heuristic seed, not yet tuned"
MODES = ("atomic", "deterministic")  # split_k.ATOMIC = 0, DETERMINISTIC = 1
DEFAULT_SMS = CPU_SMS  # the interpreter's stand-in and the seed's (target.py)
MIN_BLOCK = 16  # tl.dot needs every tile dimension >= 16
MAX_TILE = 64  # the heuristic's largest BLOCK_M / BLOCK_N
MAX_SPLIT = 128
CONFIG_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "num_warps", "num_stages")
REDUCES = ("last", "kernel")  # the codes split_k_parts.finish takes: their indices
PDL_MODES = (0, 1, 2, 3)  # a config's "PDL": split_k_parts.pdl_prologue's modes (both tables check them)
# A config's "PF_ROWS": the rows of b split_k_kernel's PDL 2 / 3 prologue prefetches
# from its K range (a power of two; 16 where absent). docs/split_k.md.
PF_ROWS_DEFAULT, PF_ROWS_MAX = 16, 4096


def pow2_ceil(v: int) -> int:
    return 1 << max(0, v - 1).bit_length()


def key(m: int, k: int, n: int) -> str:
    return f"M{m}_K{k}_N{n}"


def parse_key(text: str) -> tuple[int, int, int]:
    found = re.fullmatch(r"M(\d+)_K(\d+)_N(\d+)", text)
    if not found:
        raise ValueError(f"bad split_k table key {text!r}: expected M<m>_K<k>_N<n>")
    m, k, n = (int(g) for g in found.groups())
    return m, k, n


def mn_bucket(v: int) -> int:
    """M or N rounded up to a power of two, at least one 16-wide tile."""
    return max(MIN_BLOCK, pow2_ceil(v))


def k_bucket(k: int) -> int:
    """K rounded to the nearest power of two (in log2)."""
    return 1 << round(math.log2(max(k, 1)))


def bucket(m: int, k: int, n: int) -> tuple[int, int, int]:
    return mn_bucket(m), k_bucket(k), mn_bucket(n)


def describe(c: dict) -> str:
    """A config as rows and logs print it: 16x32x128 split 32 w4 s3 (then
    "reduce kernel" where REDUCE is not the default, "tma" for the fused
    kernel's TMA loads, "tma-x" for x's only, "acc" for its ACC_SCALE, "fold" for FOLD, "ahead" for
    SCALE_AHEAD, "scale8" for SCALE8, "short" for SHORT_DECODE, "rot" for ROT_DECODE, "r128" for a maxnreg cap,
    "pdl" and the mode for PDL, "pf" and the rows of b a split-K config's PDL prologue prefetches, where not the
    default 16; last "ws" and its tiles for the warp-specialized kernel's, where it runs: an "acc" or "pdl"
    after "ws" is its tiles')."""
    text = (f"{c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']} split {c['SPLIT_K']} "
            f"w{c.get('num_warps', 4)} s{c.get('num_stages', 3)}")
    reduce = c.get("REDUCE", "last")
    text = text if reduce == "last" else f"{text} reduce {reduce}"
    text = f"{text} {'tma' if c.get('TMA_W', True) else 'tma-x'}" if c.get("TMA") else text
    text = f"{text} acc" if c.get("ACC_SCALE") else text
    text = f"{text} fold" if c.get("FOLD") else text
    text = f"{text} ahead" if c.get("SCALE_AHEAD") else text
    text = f"{text} scale8" if c.get("SCALE8") else text
    text = f"{text} short" if c.get("SHORT_DECODE") else text
    text = f"{text} rot" if c.get("ROT_DECODE") else text
    text = f"{text} r{c['maxnreg']}" if c.get("maxnreg") else text
    text = f"{text} pdl{c['PDL']}" if c.get("PDL") else text
    text = f"{text} pf{c['PF_ROWS']}" if c.get("PF_ROWS", PF_ROWS_DEFAULT) != PF_ROWS_DEFAULT else text
    return f"{text} ws {ws_label(c['WS'])}" if c.get("WS") else text


def ws_label(w: dict) -> str:
    """A config's WS tiles in a few characters ("256x128x64 s3"; "k2" for
    K_SPLIT 2, "split 2" for SPLITS 2, "group 8" for M_GROUP 8, "acc" for ACC 1, "pdl" for PDL 1, "pdl2" for 2)."""
    text = f"{w['BLOCK_M']}x{w['BLOCK_N']}x{w['BLOCK_K']} s{w['num_stages']}"
    text = f"{text} k{w['K_SPLIT']}" if w.get("K_SPLIT", 1) != 1 else text
    text = f"{text} split {w['SPLITS']}" if w.get("SPLITS", 1) != 1 else text
    text = f"{text} skew {w['SKEW']}" if w.get("SKEW") else text
    text = f"{text} stream-K" if w.get("STREAM_K") else text
    text = f"{text} group {w['M_GROUP']}" if w.get("M_GROUP", 1) != 1 else text
    text = f"{text} acc" if w.get("ACC") else text
    return f"{text} pdl{'' if w.get('PDL') == 1 else w['PDL']}" if w.get("PDL") else text


def tiles(m: int, n: int, c: dict) -> int:
    return -(-m // c["BLOCK_M"]) * -(-n // c["BLOCK_N"])


def k_blocks(k: int, c: dict) -> int:
    return -(-k // c["BLOCK_K"])


def fits(m: int, k: int, n: int, c: dict) -> bool:
    """Every split gets >= 2 K blocks (or there is one split)."""
    return c["SPLIT_K"] == 1 or k_blocks(k, c) >= 2 * c["SPLIT_K"]


def check_config(c: dict, mode: str | None = None) -> None:
    """A config the kernel can run: power-of-two tiles >= 16, SPLIT_K >= 1,
    REDUCE one of REDUCES, PDL one of PDL_MODES, PF_ROWS (with PDL 2, 3) a
    power of two up to PF_ROWS_MAX. (mode: kept for the callers;
    every config suits both modes.)"""
    missing = [x for x in CONFIG_KEYS if x not in c]
    if missing:
        raise ValueError(f"split_k config {c} lacks {', '.join(missing)}")
    for x in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
        v = c[x]
        if not isinstance(v, int) or v < MIN_BLOCK or v & (v - 1):
            raise ValueError(f"split_k config {x}={v!r}: must be a power of two >= {MIN_BLOCK}")
    if not isinstance(c["SPLIT_K"], int) or c["SPLIT_K"] < 1:
        raise ValueError(f"split_k config SPLIT_K={c['SPLIT_K']!r}: must be an integer >= 1")
    if c.get("PDL", 0) not in PDL_MODES:
        raise ValueError(f"split_k config PDL={c['PDL']!r}: must be one of {', '.join(map(str, PDL_MODES))}")
    reduce = c.get("REDUCE", "last")
    if reduce not in REDUCES:
        raise ValueError(f"split_k config REDUCE={reduce!r}: must be one of {', '.join(map(repr, REDUCES))}")
    rows = c.get("PF_ROWS", PF_ROWS_DEFAULT)
    if not isinstance(rows, int) or isinstance(rows, bool) or rows < 1 or rows > PF_ROWS_MAX or rows & (rows - 1):
        raise ValueError(f"split_k config PF_ROWS={rows!r}: must be a power of two <= {PF_ROWS_MAX}")
    if "PF_ROWS" in c and c.get("PDL", 0) < 2:
        raise ValueError(f"split_k config PF_ROWS={rows}: the rows PDL 2 and 3 prefetch, so with PDL 2 or 3 only")


def fit(m: int, k: int, n: int, c: dict, sms: int = DEFAULT_SMS) -> dict:
    """c adapted to a shape it was not chosen for: the split count halved until
    every split has >= 2 K blocks and tiles x splits <= 4x the SMs."""
    c = dict(c)
    while c["SPLIT_K"] > 1 and (not fits(m, k, n, c) or tiles(m, n, c) * c["SPLIT_K"] > 4 * sms):
        c["SPLIT_K"] //= 2
    return c


def heuristic(m: int, k: int, n: int, sms: int = DEFAULT_SMS) -> dict:
    """Tiles no larger than M and N rounded up (16..64); the largest power-of-two
    split with tiles x splits <= 2x the SMs (so 1-2x: every SM busy, one or two
    waves); BLOCK_K 128 for small tiles, 64 where 128 or the tiles leave too few
    K blocks; then the split halved until every split has >= 2 K blocks."""
    c = {"BLOCK_M": min(MAX_TILE, mn_bucket(m)), "BLOCK_N": min(MAX_TILE, mn_bucket(n)),
         "BLOCK_K": 128, "SPLIT_K": 1, "num_warps": 4, "num_stages": 3}
    if c["BLOCK_M"] + c["BLOCK_N"] > 96:  # 64x64 tiles: 3 stages of 64-deep K fit any GPU's shared memory
        c["BLOCK_K"] = 64
    t = tiles(m, n, c)
    split = 1
    while split * 2 <= MAX_SPLIT and t * split * 2 <= 2 * sms:
        split *= 2
    c["SPLIT_K"] = split
    if not fits(m, k, n, c):
        c["BLOCK_K"] = 64
    while not fits(m, k, n, c):
        c["SPLIT_K"] //= 2
    return c


# ------------------------------------------------------------------ the table


def check_table(doc, where: str = "split_k table") -> dict:
    """doc if it has the layout above, else ValueError in one line."""
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), dict):
        raise ValueError(f'{where}: expected {{"entries": {{MODE: {{"M<m>_K<k>_N<n>": {{"config": ...}}}}}}}}')
    for mode, entries in doc["entries"].items():
        if mode not in MODES or not isinstance(entries, dict):
            raise ValueError(f"{where}: mode {mode!r} must be one of {', '.join(MODES)} and hold a dict")
        for name, entry in entries.items():
            parse_key(name)
            if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
                raise ValueError(f'{where}: {mode} {name}: expected {{"config": {{...}}}}')
            check_config(entry["config"], mode)
    return doc


def read_table(path: Path) -> dict:
    return check_table(read_json(path), str(path))


def seed_table(shapes, sms: int = DEFAULT_SMS) -> dict:
    """A table holding the heuristic's choice for each shape in both modes
    (its provenance is the writer's: tuning/split_k.py --seed-only)."""
    return {
        "gpu": None,
        "format": FORMAT,
        "sms": sms,
        "entries": {mode: {key(*s): {"config": heuristic(*s, sms), "tuned": SEED_NOTE} for s in shapes}
                    for mode in MODES},
    }


def dumps(doc: dict) -> str:
    """The file's text: one entry per line, so diffs of a re-tune stay readable."""
    return config_buckets.dumps(doc, "entries")


def usable(doc: dict, gpu: str | None) -> bool:
    """A table applies where it names no GPU, or names this one (gpu None: CPU)."""
    return doc.get("gpu") in (None, gpu) or gpu is None


def has_entry(mode: str, m: int, k: int, n: int, gpu: str | None, doc: dict | None = None) -> bool:
    """Whether the table (doc; None: none) has the shape's own entry for the mode on this GPU."""
    doc = {} if doc is None else doc
    return usable(doc, gpu) and key(m, k, n) in doc.get("entries", {}).get(mode, {})


def lookup(mode: str, m: int, k: int, n: int, sms: int = DEFAULT_SMS, gpu: str | None = None,
           doc: dict | None = None) -> tuple[dict, str]:
    """(config, where it came from) for this mode and shape (see the module
    doc) in table doc (None: no table, the heuristic)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    doc = {} if doc is None else doc
    entries = doc.get("entries", {}).get(mode, {}) if usable(doc, gpu) else {}

    def source(entry: dict) -> str:
        seed = doc.get("gpu") is None and str(entry.get("tuned", "")).startswith(SEED_NOTE)
        return "heuristic seed" if seed else f"table ({doc.get('gpu') or 'any GPU'})"

    exact = entries.get(key(m, k, n))
    if exact is not None:
        return fit(m, k, n, exact["config"], sms), f"{source(exact)}: {m}x{k}x{n}"
    want = bucket(m, k, n)
    near = [(sum(abs(math.log2(a / b)) for a, b in zip((m, k, n), parse_key(name), strict=True)), name)
            for name in entries if bucket(*parse_key(name)) == want]
    if near:
        _, name = min(near)
        return fit(m, k, n, entries[name]["config"], sms), f"{source(entries[name])}: nearest {name.replace('_', ' ')}"
    return heuristic(m, k, n, sms), f"heuristic ({sms} SMs; no table entry near {m}x{k}x{n})"
