"""From measurement records to result rows: pool each (shape, backend)'s
rounds into one row, then derive throughput, speed-of-light and speedup.

A run and `runner.py report DIR` (a rebuild from rows.jsonl) both go through
here, so a rebuilt folder holds exactly what the run would have written.
"""

from __future__ import annotations

import copy

from qgemm_bench import operators
from qgemm_bench.harness.measure import summarize
from qgemm_bench.harness.results import OK, Row, interpreted, settings_key
from qgemm_bench.types import Shape, parse_dtype


def case_key(r: Row) -> tuple:
    return (r.op, r.M, r.K, r.N, r.dtype, settings_key(r.settings))


def row_key(r: Row) -> tuple:
    return (*case_key(r), r.backend)


def pool(runs: list[Row]) -> Row:
    """One row from a backend's rounds at one shape: the first failure if any
    round failed (one bad round taints the row), else the first round's row
    with every round's samples and each round's median."""
    for r in runs:
        if r.status != OK:
            return copy.deepcopy(r)
    row = copy.deepcopy(runs[0])
    if len(runs) == 1:
        return row
    for k, v in summarize([s for r in runs for s in r.samples_us]).items():
        setattr(row, k, v)
    row.round_p50_us = [r.p50_us for r in runs]
    row.rel_err = max(r.rel_err for r in runs)
    row.peak_extra_mib = max((r.peak_extra_mib for r in runs if r.peak_extra_mib is not None), default=None)
    return row


def derive(row: Row, baseline: Row | None, ceilings: dict) -> None:
    """Throughput, speed-of-light and speedup from the median latency."""
    if row.p50_us is None:
        return
    op = operators.get(row.op)
    shape, settings = Shape(row.M, row.K, row.N), op.Settings(**row.settings)
    sec = row.p50_us * 1e-6
    fl = op.flops(shape, settings)
    by = op.bytes(shape, parse_dtype(row.dtype), settings)
    row.tflops = fl / sec / 1e12
    row.gbps = by / sec / 1e9
    if ceilings:
        floor = max(by / (ceilings["copy_GBps"] * 1e9), fl / (ceilings["bf16_matmul_TFLOPs"] * 1e12))
        row.sol_pct = 100 * floor / sec
        if getattr(op, "WEIGHT_ONLY", False):  # reading the operands once at copy speed: the decode bound
            row.floor_us = by / (ceilings["copy_GBps"] * 1e9) * 1e6
            row.pct_of_floor = 100 * row.floor_us / row.p50_us
    # Not against a baseline the Triton interpreter ran: its time is Python emulating the kernel
    if row.status == OK and baseline is not None and baseline.status == OK and baseline.p50_us \
            and not interpreted(baseline):
        row.speedup = baseline.p50_us / row.p50_us


def assemble(records: list[tuple[int, Row]], meta: dict) -> list[Row]:
    """records: (round, row) in measuring order. Rows come out in the order
    each (shape, backend) was first measured."""
    groups: dict[tuple, list[Row]] = {}
    for _, r in records:
        groups.setdefault(row_key(r), []).append(r)
    rows = [pool(g) for g in groups.values()]
    baseline = meta.get("settings", {}).get("baseline")
    base = {case_key(r): r for r in rows if r.backend == baseline}
    ceilings = meta.get("ceilings") or {}
    # Under torchrun each rank measured its own GPU's ceilings.
    per_rank = {i: rk.get("ceilings") or ceilings for i, rk in enumerate(meta.get("ranks") or [])}
    for r in rows:
        derive(r, base.get(case_key(r)), per_rank.get(r.rank, ceilings))
    return rows
