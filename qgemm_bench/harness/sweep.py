"""The sweep: every shape x backend x round, one record each, whatever fails.

Each record goes to rows.jsonl the moment it is measured (a kill loses at
most the one in flight); assemble.py pools the rounds into rows. The sweep
stops early on Ctrl-C / SIGTERM, on a lost CUDA context (the rest is
recorded as `skipped`), or when rows.jsonl cannot be written. A backend
that outlives plan.stall_s at one shape stops the process (watchdog.py):
its row an error, the rest `skipped`, then `conclude` writes the outputs.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from tqdm import tqdm

from qgemm_bench.backends.registry import Backend
from qgemm_bench.errors import one_line
from qgemm_bench.harness import capacity, faults, signals
from qgemm_bench.harness.faults import ContextLost
from qgemm_bench.harness.measure import measure
from qgemm_bench.harness.outputs import RunFolder, WriteError
from qgemm_bench.harness.plan import Plan
from qgemm_bench.harness.results import ERROR, OOM, SKIPPED, UNAVAILABLE, Row
from qgemm_bench.harness.watchdog import Watchdog, stall_reason
from qgemm_bench.types import Case, dtype_name


@dataclass
class Outcome:
    records: list[tuple[int, Row]] = field(default_factory=list)  # (round, row) in measuring order
    stopped: str = ""  # why the sweep ended before its last record ("" when it did not)
    exit_code: int = 0  # 130 Ctrl-C, 143 SIGTERM, 1 lost CUDA context, a stall or rows.jsonl unwritable
    skipped: int = 0  # (shape, backend) pairs recorded as not run


def run(plan: Plan, folder: RunFolder, conclude: Callable[[Outcome], int] | None = None) -> Outcome:
    """Measure everything; records are appended to the folder as measured.
    conclude(outcome): writes a stalled run's outputs (from the watchdog's
    thread, before the process exits with its return value)."""
    out = Outcome()
    # disable=None: no bar when stderr is not a terminal (CI logs).
    bar = tqdm(total=len(plan.shapes) * len(plan.backends) * plan.repeats, unit="run", dynamic_ncols=True,
               leave=False, disable=None)

    def stalled(step) -> int:
        case, backend, r = step
        out.stopped = stall_reason(f"{backend.name} at {case.shape}", plan.stall_s)
        out.exit_code = 1
        try:
            _emit(folder, out.records, r, _row(plan, case, backend, status=ERROR, reason=out.stopped))
        except WriteError:
            pass  # the record is kept for results.json, if that can be written
        out.skipped = _skip_the_rest(plan, folder, out.records, f"not run: {backend.name} stalled at {case.shape}")
        bar.close()
        return conclude(out) if conclude else out.exit_code

    watch = Watchdog(plan.stall_s, stalled)
    frozen_before = gc.get_freeze_count()  # a caller's own frozen objects stay frozen
    try:
        for shape in plan.shapes:
            case = Case(plan.op.NAME, shape, plan.dtype, plan.device, plan.op_settings, plan.target)
            _run_shape(plan, case, folder, bar, out.records, watch)
    except KeyboardInterrupt as e:
        out.stopped, out.exit_code = signals.describe(e), signals.exit_code(e)
    except ContextLost as e:
        out.stopped, out.exit_code = str(e), 1
        out.skipped = _skip_the_rest(plan, folder, out.records, f"not run: {e}")
    except WriteError as e:
        out.stopped, out.exit_code = str(e), 1
    finally:
        bar.close()
        if not frozen_before:
            gc.unfreeze()  # capacity.free's frozen survivors are collectable again after the sweep
    return out


def round_order(backends: list, r: int) -> list:
    """Round r's backend order: the run's order, reversed in odd rounds
    (A B C, C B A, A B C, ...), so that over a pair of rounds every backend
    sits at the same mean position (a linear drift of clocks or temperature
    cancels) and follows different backends: what runs before a kernel moves
    its time (docs/measuring.md). A rotation would not do: it keeps each
    backend's cyclic predecessor."""
    return list(backends) if r % 2 == 0 else list(backends)[::-1]



def lost_context_line(e: BaseException) -> str | None:
    """The line an A/B script ends with when e is a lost CUDA context
    (faults.context_lost: nothing after it can run), naming what was being
    timed (time_rounds' note); None for any other error."""
    if not faults.context_lost(e):
        return None
    where = "; ".join(getattr(e, "__notes__", ())) or "outside the timing rounds"
    return f"the CUDA context was lost {where}: {one_line(e, 160)} (nothing after it ran)"


def exit_on_lost_context(body: Callable[[], int]) -> int:
    """An A/B script's body (returning its exit status), ended by a lost
    CUDA context in one line on stderr (lost_context_line) and exit 1."""
    try:
        return body()
    except Exception as e:
        if (line := lost_context_line(e)) is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 1


def time_rounds(labels: list, rounds: int, time_one, fatal=faults.context_lost) -> tuple[dict, list]:
    """The A/B scripts' rounds (path_ab.py, ws_ab.py, helion_ab.py,
    fused_ab.py): time_one(label) for each label once per round, in
    round_order; a label whose timing raises is noted ("label: timing failed
    in round r: ...") and left out of the rounds after, unless fatal(the
    exception) says it is the run's (by default a lost CUDA context: raised,
    with a note naming the label and round). Returns (label -> its rounds'
    results, notes)."""
    times: dict = {k: [] for k in labels}
    notes: list[str] = []
    for r in range(rounds):
        for k in round_order(labels, r):
            if k not in times:
                continue
            try:
                times[k].append(time_one(k))
            except Exception as e:  # noqa: BLE001 - this candidate's failure: say so, time the rest
                if fatal is not None and fatal(e):
                    e.add_note(f"while timing {k} in round {r + 1}")
                    raise
                notes.append(f"{k}: timing failed in round {r + 1}: {one_line(e, 160)}")
                del times[k]
    return times, notes


def print_rounds(times: dict, notes: list) -> int:
    """time_rounds' result as fused_ab.py and flex_ab.py print it: each note
    as FAILED timing, then each label's median over its rounds (us) and the
    rounds, fastest first. Returns how many failed."""
    for note in notes:
        print(f"  FAILED timing {note}", flush=True)
    for label, us in sorted(times.items(), key=lambda p: statistics.median(p[1])):
        print(f"  {statistics.median(us):9.2f}  {label}  ({' / '.join(f'{v:.2f}' for v in us)})", flush=True)
    return len(notes)


def _row(plan: Plan, case: Case, backend: Backend, **fields) -> Row:
    m, k, n = case.shape
    return Row(op=plan.op.NAME, backend=backend.name, M=m, K=k, N=n, dtype=dtype_name(plan.dtype),
               settings=plan.op_settings.as_dict(), settings_label=plan.op_settings.label(), device=str(plan.device),
               timing=fields.pop("timing", ""), rank=plan.rank, **fields)


def _run_shape(plan: Plan, case: Case, folder: RunFolder, bar, records: list, watch: Watchdog) -> None:
    if reason := capacity.too_large(plan.op, case):  # before allocating anything
        for b in plan.backends:
            _emit(folder, records, 0, _row(plan, case, b, status=OOM, reason=reason))
        bar.update(len(plan.backends) * plan.repeats)
        return
    t0 = time.perf_counter()
    failed = False
    try:
        inputs = plan.op.make_inputs(case, plan.seed)
        ref = plan.op.reference(inputs)
        tol = plan.op.tolerance(plan.dtype)
    except Exception as e:  # the whole shape fails (e.g. OOM making inputs)
        failed = True
        status = _failure(folder, f"{case.shape} inputs/reference", e)
        for b in plan.backends:
            _emit(folder, records, 0, _row(plan, case, b, status=status, reason=f"inputs: {one_line(e)}"))
        bar.update(len(plan.backends) * plan.repeats)
        if faults.context_lost(e):
            raise ContextLost(f"the CUDA context was lost making the inputs of {case.shape} ({one_line(e)})") from None
    finally:
        _add(plan, "inputs", time.perf_counter() - t0)
    if failed:  # out of the except block: its traceback no longer holds what the failed call allocated
        capacity.free(plan.device)
        return

    # Round-robin over the backends `plan.repeats` times, so a slow drift of
    # clocks or temperature is shared by all of them, each round in
    # round_order; every round's record is kept as soon as it is measured.
    for r in range(plan.repeats):
        for backend in round_order(plan.backends, r):
            rounds = f" [{r + 1}/{plan.repeats}]" if plan.repeats > 1 else ""
            bar.set_description(f"{case.shape} {backend.name}{rounds}")
            try:
                with watch.step((case, backend, r)):
                    row = _measure_one(plan, case, backend, inputs, ref, tol, folder)
            except ContextLost as lost:
                _emit(folder, records, r, lost.row)
                raise
            _emit(folder, records, r, row)
            bar.update()
    del inputs, ref
    capacity.free(plan.device)


def _measure_one(plan, case, backend, inputs, ref, tol, folder) -> Row:
    if reason := backend.why_not(case):
        return _row(plan, case, backend, status=UNAVAILABLE, reason=reason)
    t0, measured, failed, lost = time.perf_counter(), 0.0, False, False
    try:
        fields = measure(case, backend, inputs, ref, tol, plan.measure, plan.l2_bytes)
        measured = fields["measure_s"]
        return _row(plan, case, backend, **fields)
    except KeyboardInterrupt:
        raise
    except Exception as e:
        failed = True
        status = _failure(folder, f"{case.shape} {backend.name}", e)
        row = _row(plan, case, backend, status=status, reason=one_line(e))
        if lost := faults.context_lost(e):
            raise ContextLost(f"the CUDA context was lost after {backend.name} at {case.shape} ({one_line(e)})",
                              row) from None
        return row
    finally:
        # A full collection takes 0.1-0.3 s with the peers imported (a third of
        # a default GPU run, after every backend): per shape, and after failures.
        if failed and not lost:  # freeing touches the dead context
            capacity.free(plan.device)
        elif not lost:
            _release(plan.device)
        _add(plan, f"measure {backend.name}", measured)
        _add(plan, f"prepare {backend.name}", time.perf_counter() - t0 - measured)


def _skip_the_rest(plan: Plan, folder: RunFolder, records: list, reason: str) -> int:
    """A `skipped` row for every (shape, backend) not measured in any round."""
    done = {(r.M, r.K, r.N, r.backend) for _, r in records}
    n = 0
    for shape in plan.shapes:
        case = Case(plan.op.NAME, shape, plan.dtype, plan.device, plan.op_settings, plan.target)
        for b in plan.backends:
            if (*shape, b.name) not in done:
                try:
                    _emit(folder, records, 0, _row(plan, case, b, status=SKIPPED, reason=reason))
                except WriteError:
                    pass  # the record is kept for results.json, if that can be written
                n += 1
    return n


def _add(plan: Plan, phase: str, seconds: float) -> None:
    plan.phase_s[phase] = plan.phase_s.get(phase, 0.0) + seconds


def _failure(folder: RunFolder, where: str, e: Exception) -> str:
    """Log the traceback; the row's status for this exception."""
    folder.log_error(f"{where}:\n{traceback.format_exc()}")
    return faults.status(e)


def _emit(folder: RunFolder, records: list, round_: int, row: Row) -> None:
    records.append((round_, row))
    folder.append(row, round_)


def _release(device: torch.device) -> None:
    """After a measured backend: the young objects' cycles, and the cached
    blocks back to the driver, so the next backend's rotating copies see
    the same free memory."""
    gc.collect(1)
    if device.type == "cuda":
        try:
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - a failing CUDA call here is reported by the next row
            pass
