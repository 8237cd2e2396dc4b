"""What the checked-in config tables share (Helion's configs/<gpu>.json, the
Triton weight-only and split-K tables): reading their JSON, and the shape
buckets of the first two, "M<m>_K<k>_N<n>" with M rounded up to a power of
two (types.m_bucket), K and N exact; a shape without its own bucket takes
the nearest one by log2 distance, M weighted most (it picks the kernel's
path and tile heights)."""

from __future__ import annotations

import json
import math
from pathlib import Path

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
    """The shape's own bucket when `keys` has it, else the nearest (ties: the
    smaller key string, so the choice never depends on file order)."""
    want = bucket(m, k, n)
    return want if want in keys else min(keys, key=lambda key: (distance(want, key), key))


def read_json(path) -> object:
    """A table file's JSON, or ValueError in one line."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a readable JSON file ({e})") from None


def dumps(doc: dict, key: str, sort: bool = False) -> str:
    """A table file's text with one entry per line under doc[key][GROUP], so
    a re-tune's diff stays readable (sort: each group's entries by bucket)."""
    head = {k: v for k, v in doc.items() if k != key}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()] + [f" {json.dumps(key)}: {{"]
    groups = list(doc[key].items())
    for i, (group, entries) in enumerate(groups):
        items = sorted(entries.items(), key=lambda kv: parse(kv[0])) if sort else list(entries.items())
        lines.append(f"  {json.dumps(group)}: {{")
        lines += [f"   {json.dumps(name)}: {json.dumps(entry)}" + ("," if j < len(items) - 1 else "")
                  for j, (name, entry) in enumerate(items)]
        lines.append("  }" + ("," if i < len(groups) - 1 else ""))
    return "\n".join(lines + [" }", "}", ""])
