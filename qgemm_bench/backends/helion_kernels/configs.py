"""Checked-in Helion configs: the config store's helion family, one file per
GPU (configs/<gpu>/helion.json, which helion_dispatch.HelionConfigs reads
and writes: a GPU without its own takes the nearest entry of its compute
capability, and its rows say so), one entry per kernel and shape bucket, so
a default run never autotunes. This module reads no store: lookup takes
the table.

File: {"gpu": ..., "provenance": {...}, "kernels": {KERNEL: {BUCKET: ENTRY}}}, where
BUCKET is "M<m>_K<k>_N<n>" (m: M rounded up to a power of two, capped at 4096)
and ENTRY is {"config": {...helion.Config fields...}, "us": median latency
when tuned, "tuned": how it was found}. A shape without its own bucket uses
the nearest one (log2 distance, M weighted most: it picks the kernel's path;
the weight-only kernels first take the Triton table's config for the shape,
see below) and says so in its row; so does an entry without "us" (checked in
untimed, e.g. a Triton winner mirrored before the Helion kernel was timed).

Kernels: "int4_gemm" / "nvfp4_gemm" (the split path's weight_only kernel;
without the shape's own bucket, the Triton table's config of the shape's own
bucket where this GPU has one, helion_dispatch.table_config, else Helion's
nearest bucket where it is as near as the table's (helion_dispatch.nearest_ok),
else the table's nearest;
its K step is the config's "block_k", entries written before that key held
block_sizes [K step in packed rows, M, N] and still read: helion_ops
translates them), "int4_gemm_fused" / "nvfp4_gemm_fused" (the fused path,
likewise),
"split_k_gemm" / "split_k_gemm_deterministic" (the split-K GEMM's two modes;
block_sizes [BLOCK_N, BLOCK_M], block_k, split_k, optionally pdl and reduce:
without an entry it takes the Triton table's config with its PDL mode and
plane sum, helion_dispatch.split_k_default; none are checked in, as the Helion
kernel runs those configs as the Triton kernel does).
"""

from __future__ import annotations

import re
from pathlib import Path

from qgemm_bench.backends.config_buckets import bucket, nearest, read_json

FAMILY = "helion"  # the store's


class ConfigMissing(LookupError):
    """No config file for this GPU, or no entry for this kernel."""


def check_file(path: Path) -> None:
    """Refuse a config file that is not readable JSON of the layout above, in
    one line (ValueError), before a run starts rather than as error rows."""
    doc = read_json(path)
    kernels = doc.get("kernels") if isinstance(doc, dict) else None
    if not isinstance(kernels, dict):
        raise ValueError(f'{path}: expected {{"kernels": {{KERNEL: {{BUCKET: {{"config": {{...}}}}}}}}}}')
    for kernel, entries in kernels.items():
        for key, entry in (entries.items() if isinstance(entries, dict) else [(None, None)]):
            if not re.fullmatch(r"M\d+_K\d+_N\d+", str(key)) or not isinstance(entry, dict) \
                    or not isinstance(entry.get("config"), dict):
                raise ValueError(f'{path}: kernel {kernel!r}: entries must be "M<m>_K<k>_N<n>": '
                                 f'{{"config": {{...}}}}, found {key!r}')


def lookup(kernel: str, m: int, k: int, n: int, doc: dict, name: str, where: str = "",
           nearest_ok: bool = True) -> tuple[dict, str]:
    """(config dict, note) from table doc (the file `name`; where: the note
    saying which store entry it is when not the Target's own, ""). The note
    names `where` and the bucket when it is not the shape's own.
    ConfigMissing when the kernel has no entries, or (with nearest_ok False)
    none of the shape's own bucket."""
    entries = doc.get("kernels", {}).get(kernel)
    if not entries:
        raise ConfigMissing(f"{name} has no configs for kernel {kernel!r}; run with --autotune quick")
    near = nearest(entries, m, k, n)
    if near == bucket(m, k, n):
        return entries[near]["config"], "; ".join(filter(None, (where, _untimed(entries[near]))))
    if not nearest_ok:
        raise ConfigMissing(f"no helion {kernel} config of bucket {bucket(m, k, n)}")
    note = f"helion config of nearest bucket {near}"
    return entries[near]["config"], "; ".join(filter(None, (where, note, _untimed(entries[near]))))


def _untimed(entry: dict) -> str:
    return "" if entry.get("us") else f"untimed helion config ({entry.get('tuned', 'never timed')})"


def from_triton(c: dict, split: bool, decode: bool = True, fused: bool = False) -> dict:
    """A Triton weight-only, fused or split-K GEMM config ({BLOCK_M, BLOCK_N,
    BLOCK_K, SPLIT_K, DECODE_ASM, num_warps, num_stages}) as the Helion
    kernels' config, the same tiles, K step, decode, warps and stages:
    block_sizes [BLOCK_N, BLOCK_M] (N outer, as the kernels tile), block_k,
    split_k for the split kernels (split=True; the fused kernel takes one
    only where it splits K, helion_dispatch.helion_config) and decode_asm for
    the weight-only ones (decode=False: the split-K GEMM decodes nothing);
    with fused=True, ACC_SCALE and PDL as acc_scale and pdl (kernels.fused's
    arguments). Not maxnreg: Helion 1.4 takes a register cap only on
    persistent programs (on CUDA; its check is off on the interpreter), and
    these are flat ones (on the H200 such a candidate failed, InvalidConfig)."""
    out = {"block_sizes": [c["BLOCK_N"], c["BLOCK_M"]], "block_k": c["BLOCK_K"]}
    if split:
        out["split_k"] = c["SPLIT_K"]
    if decode:
        out["decode_asm"] = bool(c.get("DECODE_ASM", True))
    if c.get("ACC_SCALE") and fused:  # the fused kernel's, as its argument acc_scale
        out["acc_scale"] = True
    if c.get("PDL") and fused:  # kernels.fused's pdl argument, the same modes as split_k_parts.pdl_prologue's
        out["pdl"] = c["PDL"]
    out.update(num_warps=c["num_warps"], num_stages=c["num_stages"])
    return out
