"""What the config store's family tables share (configs/<gpu>/helion.json,
weight_only.json, split_k.json): reading and writing their JSON (the
store's read_json and dumps), and the shape buckets of the first two,
"M<m>_K<k>_N<n>" with M rounded up to a power of two (types.m_bucket), K
and N exact; a shape without its own bucket takes
the nearest one by log2 distance, M weighted most (it picks the kernel's
path and tile heights)."""

from __future__ import annotations

import math

from qgemm_bench.configs.store import dumps, read_json  # noqa: F401 (the store's: one copy)
from qgemm_bench.types import m_bucket

M_WEIGHT = 4.0  # an M bucket apart counts as much as 4 powers of two in K or N


def bucket(m: int, k: int, n: int) -> str:
    return f"M{m_bucket(m)}_K{k}_N{n}"


def parse(key: str) -> tuple[int, int, int]:
    m, k, n = (int(p[1:]) for p in key.split("_"))
    return m, k, n


def distance(a: str, b: str) -> float:
    (ma, ka, na), (mb, kb, nb) = parse(a), parse(b)
    return M_WEIGHT * abs(math.log2(ma / mb)) + abs(math.log2(ka / kb)) + abs(math.log2(na / nb))


def nearest(keys, m: int, k: int, n: int) -> str:
    """The shape's own bucket when `keys` has it, else the nearest. Ties go to
    the smaller M (M = 4 between M1 and M16 runs M1's split-K config, the
    faster there: results/h200/README.md, session 50), then the smaller key
    string, so the choice never depends on file order."""
    want = bucket(m, k, n)
    return want if want in keys else min(keys, key=lambda key: (distance(want, key), parse(key)[0], key))
