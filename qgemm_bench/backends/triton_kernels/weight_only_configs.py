"""Which config the Triton weight-only GEMM's split and fused paths
(weight_only.py, fused_gemm.py) run at a shape: a checked-in table, so a
default run never autotunes.

weight_only_configs.json beside this file:

    {"gpu": "h100",                 # only this GPU uses the entries
     "source": "how the entries were found", "versions": {...},
     "kernels": {"int4_gemm" | "nvfp4_gemm"              (the split path)
                 | "int4_gemm_fused" | "nvfp4_gemm_fused":  (the fused path)
                 {"M<m>_K<k>_N<n>": {"config": {"BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K",
                                                "DECODE_ASM", "num_warps", "num_stages"},
                                     "us": p50 when tuned, "tuned": "how"}}}}

Buckets as Helion's files (config_buckets): the shape's own, else the
nearest, and the row names it. The int4 entries were timed at group 128 and
serve every group size (the kernel picks its scale handling from the group
and BLOCK_K). On another GPU there is no entry: the split kernel autotunes
over weight_only's curated lists at run time (the row says so), the fused one
takes fused_gemm.FUSED_CONFIGS. The Helion backend runs these configs where
it has none of its own for the shape's bucket.
scripts/tune_weight_only.py table writes the file.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from qgemm_bench.backends.config_buckets import bucket, nearest, parse, read_json

TABLE_PATH = Path(__file__).resolve().parent / "weight_only_configs.json"
FORMATS = ("int4_gemm", "nvfp4_gemm")  # by FMT: formats.INT4 = 0, NVFP4 = 1
KERNELS = FORMATS + tuple(f"{f}_fused" for f in FORMATS)


def kernel(fmt: int, path: str) -> str:
    """The table's kernel name for a format and path ("split" or "fused")."""
    return FORMATS[fmt] + ("_fused" if path == "fused" else "")
CONFIG_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "num_warps", "num_stages")


def check_table(doc, where: str) -> dict:
    """doc if it has the layout above, else ValueError in one line."""
    kernels = doc.get("kernels") if isinstance(doc, dict) else None
    if not isinstance(kernels, dict):
        raise ValueError(f'{where}: expected {{"kernels": {{KERNEL: {{"M<m>_K<k>_N<n>": {{"config": ...}}}}}}}}')
    for kernel, entries in kernels.items():
        if kernel not in KERNELS or not isinstance(entries, dict):
            raise ValueError(f"{where}: kernel {kernel!r} must be one of {', '.join(KERNELS)} and hold a dict")
        for name, entry in entries.items():
            try:
                parse(name)
            except ValueError:
                raise ValueError(f"{where}: {kernel}: bad bucket {name!r}: expected M<m>_K<k>_N<n>") from None
            config = entry.get("config") if isinstance(entry, dict) else None
            if not isinstance(config, dict) or any(x not in config for x in CONFIG_KEYS):
                raise ValueError(f"{where}: {kernel} {name}: a config needs {', '.join(CONFIG_KEYS)}")
    return doc


def read_table(path: Path) -> dict:
    return check_table(read_json(path), str(path))


@cache
def table() -> dict:
    """The checked-in table (read once)."""
    return read_table(TABLE_PATH) if TABLE_PATH.exists() else {"kernels": {}}


def lookup(fmt: int, path: str, m: int, k: int, n: int, gpu: str | None,
           doc: dict | None = None) -> tuple[dict, str] | None:
    """(config, note) for the path ("split" or "fused") at this shape on GPU
    `gpu` (the note names the bucket when it is not the shape's own), or
    None: no entry for this GPU, format and path."""
    doc = table() if doc is None else doc
    entries = doc.get("kernels", {}).get(kernel(fmt, path), {}) if doc.get("gpu") == gpu else {}
    if not entries:
        return None
    near = nearest(entries, m, k, n)
    note = "" if near == bucket(m, k, n) else f"triton {path} config of nearest bucket {near}"
    return dict(entries[near]["config"]), note


def dumps(doc: dict) -> str:
    """The file's text: one entry per line, so a re-tune's diff stays readable."""
    head = {key: v for key, v in doc.items() if key != "kernels"}
    lines = ["{"] + [f" {json.dumps(key)}: {json.dumps(v)}," for key, v in head.items()] + [' "kernels": {']
    kernels = list(doc["kernels"].items())
    for i, (kernel, entries) in enumerate(kernels):
        items = sorted(entries.items(), key=lambda kv: parse(kv[0]))
        lines.append(f"  {json.dumps(kernel)}: {{")
        lines += [f"   {json.dumps(name)}: {json.dumps(entry)}" + ("," if j < len(items) - 1 else "")
                  for j, (name, entry) in enumerate(items)]
        lines.append("  }" + ("," if i < len(kernels) - 1 else ""))
    return "\n".join(lines + [" }", "}", ""])
