"""Who was fastest at each shape, and how our kernels stand against the peers.

- ours: the kernels this project writes (triton, triton_deterministic, helion, helion_deterministic).
- peers: what a user would otherwise pick: cublas (dense bf16 on dequantized
  weights), tinygemm, fbgemm, gemlite, humming and torch_compile.
- the baseline (eager `torch`, or --baseline) is neither: it is the unit
  speedups are counted in, not a competitor.
Only correct (`ok`) rows count: an incorrect row's time is never a win.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import geometric_mean

from tabulate import tabulate

from qgemm_bench.harness.results import OK, SKIPPED, UNAVAILABLE, Row

OURS = ("triton", "triton_deterministic", "helion", "helion_deterministic")
PEERS = ("cublas", "tinygemm", "fbgemm", "gemlite", "humming", "torch_compile")


def sig(v: float, digits: int = 3) -> str:
    """v with `digits` significant digits, never in e-notation and never
    rounded to zero: 0.00123 stays 0.00123 (CPU runs' TFLOP/s), 1234.5 -> 1234."""
    if v == 0 or not math.isfinite(v):
        return f"{v:g}"
    if abs(v) >= 10 ** (digits - 1):
        return f"{v:.0f}"
    return f"{v:.{digits - 1 - math.floor(math.log10(abs(v)))}f}"


@dataclass
class Standing:
    shape: str
    fastest: Row | None  # the fastest correct row
    runner_up: Row | None
    best_peer: Row | None
    ours: dict[str, Row]  # our backends' correct rows at this shape
    ran: frozenset = frozenset()  # ours that ran here, correct or not (not skipped, not unavailable)


def standings(rows: list[Row]) -> list[Standing]:
    """Per shape, in the order shapes were measured."""
    by_shape: dict[str, list[Row]] = {}
    for r in rows:
        by_shape.setdefault(r.shape, []).append(r)
    out = []
    for shape, rs in by_shape.items():
        ok = sorted((r for r in rs if r.status == OK and r.p50_us), key=lambda r: r.p50_us)
        peers = [r for r in ok if r.backend in PEERS]
        out.append(Standing(shape, ok[0] if ok else None, ok[1] if len(ok) > 1 else None,
                            peers[0] if peers else None, {r.backend: r for r in ok if r.backend in OURS},
                            frozenset(r.backend for r in rs if r.backend in OURS
                                      and r.status not in (SKIPPED, UNAVAILABLE))))
    return out


# Where ours is behind the fastest peer by at most this factor, the count says so apart: runs of one
# store move that much a row (results/h200/README.md). The count itself stays strict.
TIE = 1.03


def markdown(rows: list[Row], peers: bool = True) -> list[str]:
    """The report's "Fastest per shape" section (empty when nothing ran
    correctly), with how often each of ours is at or under the fastest peer,
    then helion_section; peers=False leaves out ours against the peers and
    against each other (a CPU run: interpreter times)."""
    table = standings(rows)
    if not any(s.fastest for s in table):
        return []
    ours = [b for b in OURS if any(b in s.ours for s in table)] if peers else []
    headers = ["shape MxKxN", "fastest", "p50 us", "lead"] + [f"{b} vs best peer" for b in ours]
    lines = []
    for s in table:
        if s.fastest is None:
            lines.append([s.shape, "none correct", "", ""] + [""] * len(ours))
            continue
        lead = (f"{sig(s.runner_up.p50_us / s.fastest.p50_us)}x over {s.runner_up.backend}"
                if s.runner_up else "the only correct row")
        cells = [s.shape, s.fastest.backend, f"{s.fastest.p50_us:.1f}", lead]
        for b in ours:
            mine = s.ours.get(b)
            if mine is None or s.best_peer is None:
                cells.append("" if mine is None else "no peer ran")
            else:
                cells.append(f"{sig(s.best_peer.p50_us / mine.p50_us)}x ({s.best_peer.backend} "
                             f"{s.best_peer.p50_us:.1f} us)")
        lines.append(cells)
    why = ("\"<ours> vs best peer\" = the fastest peer's p50 / ours (above 1: ours is faster). Peers: "
           + ", ".join(PEERS) + "; ours: " + ", ".join(OURS) + "; the baseline is neither."
           if peers else "No ours-against-peers ratios: CPU and Triton-interpreter times do not compare with "
           "kernels'.")
    counts = []
    for b in ours:
        # Where it ran: a shape where it was incorrect or failed counts as not under, never drops out.
        both = [s for s in table if b in s.ran and s.best_peer is not None]
        if both:
            at = sum(b in s.ours and s.ours[b].p50_us <= s.best_peer.p50_us for s in both)
            near = sum(b in s.ours and s.best_peer.p50_us < s.ours[b].p50_us <= s.best_peer.p50_us * TIE
                       for s in both)
            bad = sum(b not in s.ours for s in both)
            counts.append(f"{b} at or under the fastest peer at {at} of {len(both)} shapes"
                          + (f" ({bad} not correct)" if bad else "")
                          + (f", within {round(100 * (TIE - 1))}% of it at {near} more" if near else "") + ".")
    return ["## Fastest per shape", "",
            tabulate(lines, headers=headers, tablefmt="github", disable_numparse=True), "",
            f"lead = the runner-up's p50 / the fastest's p50. {why} Correct rows only."] + \
        (["", " ".join(counts)] if counts else []) + (helion_section(table) if peers else [])


# Helion's kernels against the Triton/Gluon ones doing the same work (issue
# 55's measure: at most PARITY at every shape).
PAIRS = (("helion", "triton"), ("helion_deterministic", "triton_deterministic"))
PARITY = 1.2


def helion_section(table: list[Standing]) -> list[str]:
    """The report's "Helion against Triton" section: per pair of PAIRS and M,
    the geometric mean of helion p50 / triton p50 over the shapes where both
    ran correctly, the worst shape and how many are above PARITY. Empty
    where no shape has a pair."""
    out = []
    for h, t in PAIRS:
        ratios = [(s.ours[h], s.ours[h].p50_us / s.ours[t].p50_us) for s in table if h in s.ours and t in s.ours]
        if not ratios:
            continue
        by_m: dict[int, list] = {}
        for r, q in ratios:
            by_m.setdefault(r.M, []).append((r, q))
        lines = []
        for m, rq in [*sorted(by_m.items()), ("all", ratios)]:
            worst = max(rq, key=lambda x: x[1])
            lines.append([str(m), str(len(rq)), sig(geometric_mean([q for _, q in rq])),
                          f"{sig(worst[1])} ({worst[0].shape})", str(sum(q > PARITY for _, q in rq))])
        out += ["", f"{h} / {t} (p50 ratio, same shape, same run; below 1: {h} faster):", "",
                tabulate(lines, headers=["M", "shapes", "geomean", "worst", f"above {PARITY}"], tablefmt="github",
                         disable_numparse=True)]
    return ["", "## Helion against Triton"] + out if out else []
