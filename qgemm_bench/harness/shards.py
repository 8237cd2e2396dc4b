"""Under torchrun: the ranks' shares of a sweep brought together on rank 0.

Every rank sends rank 0 its records and its facts (host, GPU, ceilings, phase
times). Rank 0 puts the records back in plan order; a rank that does not
report (its process died, the gather failed) costs its rows: rank 0 reads
what that rank streamed to rows.rank<r>.jsonl (on one host) and records an
`error` row for every (shape, backend) of its share still missing.
"""

from __future__ import annotations

import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from qgemm_bench.backends import registry
from qgemm_bench.harness import distributed, signals
from qgemm_bench.harness.plan import Plan
from qgemm_bench.harness.results import ERROR, Row
from qgemm_bench.harness.sweep import Outcome
from qgemm_bench.types import dtype_name


def _facts(world, p: Plan, meta: dict, outcome: Outcome) -> dict:
    return {"rank": world.rank, "host": platform.node(), "device": str(p.device), "gpu": meta.get("gpu"),
            "ceilings": p.ceilings, "n_shapes": len(p.shapes), "wall_s": meta.get("wall_s"),
            "phase_s": meta.get("phase_s"), "stopped": outcome.stopped, "exit_code": outcome.exit_code,
            "skipped": outcome.skipped, "records": outcome.records, "backend_state": registry.rank_states()}


def _lost(rank: int, size: int, p: Plan, all_shapes: list, folder: Path, why: str) -> dict:
    """What rank 0 can recover of a rank that did not report."""
    from qgemm_bench.harness.rebuild import read_records

    records = []
    path = folder / f"rows.rank{rank}.jsonl"
    if path.is_file():
        try:
            records, _ = read_records(path)
        except Exception:  # noqa: BLE001 - whatever it holds, the error rows below cover the share
            records = []
    done = {(r.M, r.K, r.N, r.backend) for _, r in records}
    costs = [distributed.cost(p.op, s, p.dtype, p.op_settings) for s in all_shapes]
    share = distributed.shard(all_shapes, costs, size)[rank]
    reason = f"not reported: rank {rank}'s rows did not reach rank 0 at the gather ({why})"
    for i in share:
        m, k, n = all_shapes[i]
        for b in p.backends:
            if (m, k, n, b.name) not in done:
                records.append((0, Row(op=p.op.NAME, backend=b.name, M=m, K=k, N=n, dtype=dtype_name(p.dtype),
                                       settings=p.op_settings.as_dict(), settings_label=p.op_settings.label(),
                                       device="", timing="", status=ERROR, reason=reason, rank=rank)))
    return {"rank": rank, "host": None, "device": None, "gpu": None, "ceilings": {}, "n_shapes": len(share),
            "stopped": reason, "exit_code": 1, "skipped": 0, "records": records, "backend_state": {}}


@dataclass
class Gathered:
    """What rank 0 holds after the gather."""
    mine: dict  # rank 0's own report
    reports: list[dict] | None  # every rank's, in rank order; None when the gather failed
    failure: str  # why it failed ("" when it did not)
    seconds: float


def gather(world, p: Plan, meta: dict, outcome: Outcome) -> Gathered | None:
    """Send this rank's share to rank 0; there, what arrived (None on other
    ranks). A Ctrl-C or SIGTERM while waiting (torchrun sends SIGTERM once a
    peer died) ends the wait: rank 0 still writes the run, other ranks stop."""
    t0 = time.perf_counter()
    mine = _facts(world, p, meta, outcome)
    stop: KeyboardInterrupt | None = None
    try:
        reports = distributed.gather(mine, world)
        failure = ""
    except KeyboardInterrupt as e:
        reports, failure, stop = None, f"rank {world.rank} was {signals.describe(e)} while waiting", e
    except Exception as e:  # noqa: BLE001 - a dead peer: rank 0 still writes what it has
        text = str(e).splitlines()[0] if str(e) else ""
        text = text.split("] ", 1)[-1] if text.startswith("[") else text  # gloo prefixes its source path
        reports, failure = None, f"{type(e).__name__}: {text[:120]}"
    if not world.main:
        if failure:
            print(f"rank {world.rank}: could not send its rows to rank 0 ({failure}); they are in "
                  f"rows.rank{world.rank}.jsonl", file=sys.stderr)
        if stop is not None:
            raise stop
        return None
    if stop is not None and not mine["stopped"]:  # rank 0's own share was whole; the run still ended here
        mine = {**mine, "stopped": signals.describe(stop), "exit_code": signals.exit_code(stop)}
    return Gathered(mine, reports, failure, time.perf_counter() - t0)


def merge(world, p: Plan, meta: dict, got: Gathered, all_shapes: list, folder: Path) -> Outcome:
    """Rank 0: the whole run's Outcome (and meta["ranks"], meta["world_size"])."""
    t0 = time.perf_counter()
    reports = got.reports
    if reports is None:
        reports = [got.mine] + [_lost(r, world.size, p, all_shapes, folder, got.failure)
                                for r in range(1, world.size)]
    order = {str(s): i for i, s in enumerate(all_shapes)}
    records = [rec for rep in reports for rec in rep["records"]]
    records.sort(key=lambda rec: order.get(f"{rec[1].M}x{rec[1].K}x{rec[1].N}", len(order)))  # stable
    stops = [f"rank {rep['rank']}: {rep['stopped']}" for rep in reports if rep["stopped"]]
    codes = [rep["exit_code"] for rep in reports if rep["exit_code"]]
    meta["world_size"] = world.size
    meta["ranks"] = [{k: v for k, v in rep.items() if k not in ("records", "exit_code", "skipped", "backend_state")}
                     for rep in reports]
    if notes := registry.merge_rank_states([rep["backend_state"] for rep in reports]):
        meta["backend_notes"] = notes
        print("\n".join(notes), file=sys.stderr)
    meta["phase_s"] = {"gather": round(got.seconds + time.perf_counter() - t0, 2), **(meta.get("phase_s") or {})}
    merged = Outcome(records=records, stopped="; ".join(stops), exit_code=max(codes, default=0),
                     skipped=sum(rep["skipped"] for rep in reports))
    if merged.exit_code and merged.exit_code != 1 and merged.exit_code not in signals.EXIT_CODES:
        merged.exit_code = 1
    return merged
