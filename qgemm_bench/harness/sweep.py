"""The sweep: every shape x backend, one row each, whatever fails."""

from __future__ import annotations

import gc
import time
import traceback

import torch
from tqdm import tqdm

from qgemm_bench.backends.registry import Backend
from qgemm_bench.harness.measure import measure, summarize
from qgemm_bench.harness.plan import Plan
from qgemm_bench.harness.results import ERROR, OK, OOM, UNAVAILABLE, Row, RunFolder
from qgemm_bench.types import Case, Shape, dtype_name


def _short(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:300]


def _derive(row: Row, plan: Plan, shape: Shape, baseline: Row | None) -> None:
    """Throughput, speed-of-light and speedup from the median latency."""
    if row.p50_us is None:
        return
    sec = row.p50_us * 1e-6
    fl = plan.op.flops(shape, plan.op_settings)
    by = plan.op.bytes(shape, plan.dtype, plan.op_settings)
    row.tflops = fl / sec / 1e12
    row.gbps = by / sec / 1e9
    if plan.ceilings:
        floor = max(by / (plan.ceilings["copy_GBps"] * 1e9), fl / (plan.ceilings["bf16_matmul_TFLOPs"] * 1e12))
        row.sol_pct = 100 * floor / sec
    if row.status == OK and baseline is not None and baseline.status == OK and baseline.p50_us:
        row.speedup = baseline.p50_us / row.p50_us


def run(plan: Plan, folder: RunFolder) -> tuple[list[Row], bool]:
    """Measure everything; returns (rows, interrupted). Rows are appended to the
    folder as they are measured. Ctrl-C stops the sweep and keeps the rows."""
    rows: list[Row] = []
    # disable=None: no bar when stderr is not a terminal (CI logs).
    bar = tqdm(total=len(plan.shapes) * len(plan.backends), unit="run", dynamic_ncols=True, leave=False,
               disable=None)
    try:
        for shape in plan.shapes:
            case = Case(plan.op.NAME, shape, plan.dtype, plan.device, plan.op_settings)
            _run_shape(plan, case, folder, bar, rows)
    except KeyboardInterrupt:
        return rows, True
    finally:
        bar.close()
    return rows, False


def _row(plan: Plan, case: Case, backend: Backend, **fields) -> Row:
    m, k, n = case.shape
    return Row(op=plan.op.NAME, backend=backend.name, M=m, K=k, N=n, dtype=dtype_name(plan.dtype),
               settings=plan.op_settings.as_dict(), settings_label=plan.op_settings.label(), device=str(plan.device),
               timing=fields.pop("timing", ""), **fields)


def _run_shape(plan: Plan, case: Case, folder: RunFolder, bar, rows: list[Row]) -> None:
    """Appends this shape's rows to `rows` (and the folder) as each is measured,
    so an interrupt mid-shape keeps them."""
    t0 = time.perf_counter()
    try:
        inputs = plan.op.make_inputs(case, plan.seed)
        ref = plan.op.reference(inputs)
        tol = plan.op.tolerance(plan.dtype)
    except Exception as e:  # the whole shape fails (e.g. OOM making inputs)
        status = _failure(folder, f"{case.shape} inputs/reference", e)
        for b in plan.backends:
            _emit(folder, rows, _row(plan, case, b, status=status, reason=f"inputs: {_short(e)}"))
            bar.update()
        _free(plan.device)
        return
    finally:
        _add(plan, "inputs", time.perf_counter() - t0)

    _measure_backends(plan, case, inputs, ref, tol, folder, bar, rows)
    del inputs, ref
    _free(plan.device)


def _measure_backends(plan, case, inputs, ref, tol, folder, bar, rows) -> None:
    """Round-robin over the backends `plan.repeats` times (so a slow drift of
    clocks or temperature is shared by all of them); in the last round each
    backend's row, its samples pooled over the rounds, is emitted as soon as
    it is measured. An interrupt emits what earlier rounds measured."""
    measured: list[list[Row]] = [[] for _ in plan.backends]
    emitted = 0
    baseline = None

    def emit(i: int) -> None:
        nonlocal emitted, baseline
        row = _pool(measured[i])
        baseline = row if i == 0 else baseline
        _derive(row, plan, case.shape, baseline)
        _emit(folder, rows, row)
        bar.update()
        emitted = i + 1

    try:
        for r in range(plan.repeats):
            for i, backend in enumerate(plan.backends):
                rounds = f" [{r + 1}/{plan.repeats}]" if plan.repeats > 1 else ""
                bar.set_description(f"{case.shape} {backend.name}{rounds}")
                measured[i].append(_measure_one(plan, case, backend, inputs, ref, tol, folder))
                if r == plan.repeats - 1:
                    emit(i)
    finally:
        for i in range(emitted, len(plan.backends)):
            if measured[i]:
                emit(i)


def _pool(runs: list[Row]) -> Row:
    """One row from repeated measurements: the first failure if any failed,
    else the first row with every repeat's samples."""
    for r in runs:
        if r.status != OK:
            return r
    row = runs[0]
    if len(runs) == 1:
        return row
    rounds = [r.p50_us for r in runs]
    for k, v in summarize([s for r in runs for s in r.samples_us]).items():
        setattr(row, k, v)
    row.round_p50_us = rounds
    row.rel_err = max(r.rel_err for r in runs)
    row.peak_extra_mib = max((r.peak_extra_mib for r in runs if r.peak_extra_mib is not None), default=None)
    return row


def _measure_one(plan, case, backend, inputs, ref, tol, folder) -> Row:
    if reason := backend.why_not(case):
        return _row(plan, case, backend, status=UNAVAILABLE, reason=reason)
    t0, measured = time.perf_counter(), 0.0
    try:
        fields = measure(case, backend, inputs, ref, tol, plan.measure, plan.l2_bytes)
        measured = fields["measure_s"]
        return _row(plan, case, backend, **fields)
    except KeyboardInterrupt:
        raise
    except Exception as e:
        status = _failure(folder, f"{case.shape} {backend.name}", e)
        return _row(plan, case, backend, status=status, reason=_short(e))
    finally:
        _free(plan.device)
        _add(plan, f"measure {backend.name}", measured)
        _add(plan, f"prepare {backend.name}", time.perf_counter() - t0 - measured)


def _add(plan: Plan, phase: str, seconds: float) -> None:
    plan.phase_s[phase] = plan.phase_s.get(phase, 0.0) + seconds


def _failure(folder: RunFolder, where: str, e: Exception) -> str:
    """Log the traceback; the row's status for this exception."""
    folder.log_error(f"{where}:\n{traceback.format_exc()}")
    return OOM if isinstance(e, torch.cuda.OutOfMemoryError) else ERROR


def _emit(folder: RunFolder, rows: list[Row], row: Row) -> None:
    folder.append(row)
    rows.append(row)


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
