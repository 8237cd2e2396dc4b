"""Tables for the console and the markdown report."""

from __future__ import annotations

import math

from tabulate import tabulate

from qgemm_bench.backends.checks import INTERPRETER
from qgemm_bench.harness import drift, ranking
from qgemm_bench.harness.ranking import sig
from qgemm_bench.harness.results import OK, Row, frame, interpreted

# What a backend named for its CUDA path computes on another device.
ON_CPU = {"cublas": "torch.matmul on the CPU (cuBLAS is CUDA-only; the name is its CUDA path)"}

HEADERS = ["shape MxKxN", "backend", "status", "p50 us", "p20-p80 us", "FLOP/s", "bytes/s",
           "%SOL", "speedup", "weight MiB", "peak MiB", "rel err"]
PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def _f(v, fmt: str) -> str:
    return "" if v is None else format(v, fmt)


def _sig(v, digits: int = 3, suffix: str = "") -> str:
    return "" if v is None else sig(v, digits) + suffix


def si(v, scale: float = 1.0) -> str:
    """v * scale with 3 significant digits and an SI prefix that keeps it in
    [1, 1000): 712 TFLOP/s is "712 T", 848 kFLOP/s "848 k" (a CPU run), never
    0.000000848 or 8.5e-7."""
    if v is None:
        return ""
    x = v * scale
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    x = float(f"{x:.3g}")  # rounded first: 999.96 G is 1.00 T, not 1000 G
    for factor, prefix in PREFIXES:
        if abs(x) >= factor:
            return f"{sig(x / factor)} {prefix}".rstrip()
    return f"{x:.3g}"


def _mib(v) -> str:
    return "" if v is None else format(v, ".2f" if v >= 1 or v == 0 else ".2g")


def table_rows(rows: list[Row]) -> list[list[str]]:
    out = []
    for r in rows:
        timed = r.p50_us is not None
        out.append([
            r.shape, r.backend, r.status,
            _f(r.p50_us, ".1f"),
            f"{r.p20_us:.1f}-{r.p80_us:.1f}" if timed else "",
            si(r.tflops, 1e12), si(r.gbps, 1e9), _sig(r.sol_pct, 2),
            # A speedup is shown only for correct rows (never for incorrect ones), and not for the
            # interpreter's, whose time is an emulation's.
            _sig(r.speedup, 3, "x") if r.speedup is not None and r.status == OK and not interpreted(r) else "",
            _mib(r.weight_mib), _mib(r.peak_extra_mib), _f(r.rel_err, ".1e"),
        ])
    return out


def _without_interpreter(reason: str) -> str:
    return "; ".join(p for p in reason.split("; ") if p != INTERPRETER)


def problems(rows: list[Row], baseline: str | None = None) -> list[str]:
    """Run-level notes (what a CPU run's names mean, which backends the Triton
    interpreter ran: said once; a baseline that ran nowhere), then one per row
    that failed or carries a reason."""
    on_cpu = sorted({r.backend for r in rows if r.device == "cpu" and r.backend in ON_CPU})
    emulated = list(dict.fromkeys(r.backend for r in rows if interpreted(r)))
    notes = [f"{b} on cpu: {ON_CPU[b]}" for b in on_cpu]
    base = [r for r in rows if r.backend == baseline]
    if base and all(r.status != OK for r in base):  # e.g. --baseline tinygemm on a CPU
        notes.append(f"no speedups: the baseline {baseline} did not run correctly at any shape "
                     f"({base[0].status}: {base[0].reason}); choose one that runs here with --baseline")
    elif base and all(interpreted(r) for r in base if r.status == OK):  # e.g. --baseline triton on a CPU
        notes.append(f"no speedups: the baseline {baseline} ran in the Triton interpreter (its times are Python "
                     "emulating the kernel); choose one that runs natively here with --baseline")
    if emulated:
        notes.append(f"Triton interpreter (CPU): {', '.join(emulated)} ran in it; their times are the "
                     "interpreter's, so no speedup is shown for them")
    gpu = [r for r in rows if r.device.startswith("cuda")]
    moved, n = drift.drifted(gpu)
    if moved:
        d, worst = moved[0]
        notes.append(f"{len(moved)} of {n} GPU rows ran more than {100 * drift.THRESHOLD:g}% slower in the second "
                     f"half of their timing window than in the first (up to {100 * d:.1f}%, {worst.backend} at "
                     f"{worst.shape}; on the H200 the power state steps inside a window, docs/measuring.md): ranks "
                     "within that spread are ties, rounds in alternating order (--repeats) even it out; "
                     "scripts/window_drift.py lists the rows")
    apart, n = drift.rounds_apart(gpu)
    if apart:
        d, worst = apart[0]
        notes.append(f"{len(apart)} of {n} GPU rows' rounds differ by more than {100 * drift.ROUNDS_THRESHOLD:g}% "
                     f"(up to {100 * d:.1f}%, {worst.backend} at {worst.shape}: "
                     f"{' / '.join(f'{x:.4g}' for x in worst.round_p50_us)} us): their pooled p50 can land between "
                     "the rounds; each round's p50 is in results.json (round_p50_us)")
    for r in rows:
        reason = _without_interpreter(r.reason)
        if r.status != OK or reason:
            notes.append(f"{r.shape} {r.backend}: {r.status}" + (f": {reason}" if reason else ""))
    return notes


def on_gpu(rows: list[Row]) -> bool:
    """Peers are compared only where every timed row is a GPU's (never the
    CPU's wall clock or the interpreter's)."""
    timed = [r for r in rows if r.p50_us is not None]
    return bool(timed) and all(r.device.startswith("cuda") for r in timed)


def console(rows: list[Row], baseline: str) -> str:
    text = tabulate(table_rows(rows), headers=HEADERS, tablefmt="simple", disable_numparse=True)
    notes = problems(rows, baseline)
    if notes:
        text += "\n\nnotes:\n" + "\n".join(f"  {n}" for n in notes)
    return text + f"\n\nspeedup = {baseline} p50 / backend p50 (same shape, same run)"


def wall_time(meta: dict, total_s: float) -> str:
    """One line: where the run's time went (the largest phases first)."""
    phases = ", ".join(f"{k} {v:.0f}" for k, v in list(meta.get("phase_s", {}).items())[:8])
    return f"wall time {total_s:.0f} s (to the last row {meta.get('wall_s', 0):.0f} s: {phases})"


def markdown(rows: list[Row], meta: dict, plots: list[str]) -> str:
    s = meta["settings"]
    timing = s["timing"] if meta.get("gpu") else "cpu-wall (CPU timings: never compare with GPU numbers)"
    phases = list(meta.get("phase_s", {}).items())
    lines = [
        f"# {s['op']} — {meta.get('gpu') or 'CPU'}",
        "",
        f"{len(rows)} rows; {sum(r.status == OK for r in rows)} ok. "
        + (f"**Stopped early ({meta.get('stopped') or 'interrupted'}): partial results.**"
           if meta.get("interrupted") else "")
        # `runner.py report DIR` left a cut-off line of rows.jsonl out (rebuild.py)
        + (f" **Rebuilt from rows.jsonl: {meta['rebuild_note']}.**" if meta.get("rebuild_note") else ""),
        "",
        tabulate([
            ["date", meta["date"]], ["device", meta["device"]], ["gpu", meta.get("gpu") or "none"],
            ["driver", meta.get("driver") or ""], ["torch / triton / helion",
                                                    f"{meta['torch']} / {meta['triton']} / {meta['helion']}"],
            ["git commit", meta.get("git_commit") or ""], ["dtype", s["dtype"]],
            ["op settings", s.get("op_settings_label", s["op_settings"])], ["timing", timing],
            ["warmup / rep (ms) x repeats", f"{s['warmup_ms']} / {s['rep_ms']} x {s.get('repeats', 1)}"],
            ["baseline", s["baseline"]],
            *([["ranks (torchrun)", f"{meta['world_size']}: " + "; ".join(
                f"rank {rk['rank']} {rk.get('gpu') or rk.get('device') or '?'} ({rk.get('device') or 'did not report'}"
                f"{', ' + rk['host'] if rk.get('host') else ''}, {rk.get('n_shapes', 0)} shapes)"
                for rk in meta.get("ranks", []))]] if meta.get("world_size") else []),
            # the six largest phases (results.json has every one)
            ["wall time (s)", f"{meta['wall_s']:.0f} ("
             + ", ".join(f"{k} {v:.0f}" for k, v in phases[:6]) + (", ..." if len(phases) > 6 else "") + ")"
             if meta.get("wall_s") is not None else ""],
            ["ceilings", ", ".join(f"{k} {v:.0f}" for k, v in meta.get("ceilings", {}).items()) or "n/a"],
            *([["environment", " ".join(f"{k}={v}" for k, v in meta["env"].items())]] if meta.get("env") else []),
        ], headers=["", ""], tablefmt="github"),
        "",
        "## Results",
        "",
        tabulate(table_rows(rows), headers=HEADERS, tablefmt="github", disable_numparse=True),
        "",
        f"speedup = {s['baseline']} p50 / backend p50, same shape, same run; shown only for correct rows. "
        "FLOP/s and bytes/s (the operator's minimum bytes / p50) with an SI prefix (T = 1e12, G = 1e9, "
        "M = 1e6, k = 1e3). %SOL = the floor time (bytes at the copy bandwidth or flops at the bf16 matmul rate, "
        "whichever is larger) / p50.",
    ]
    if fastest := ranking.markdown(rows, peers=on_gpu(rows)):
        lines += [""] + fastest
    if floor := floor_section(rows):
        lines += [""] + floor
    notes = problems(rows, s["baseline"])
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    if plots:
        from qgemm_bench.harness.plots import NO_ROOFLINE, roofline_drawn

        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
        if "roofline.png" not in plots and not roofline_drawn(frame(rows)):
            lines += ["", NO_ROOFLINE + "."]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ % of the weight-read floor

SMALL_M = 16  # decode batch sizes where the weights dominate every byte moved


def floor_section(rows: list[Row]) -> list[str]:
    """The report's "% of the weight-read floor" section: per backend, the
    geometric mean of pct_of_floor over its correct rows, all and M <= 16.
    Empty when no row has one (CPU runs, split-K)."""
    from statistics import geometric_mean  # here: this section is one self-contained block

    by: dict[str, list[Row]] = {}
    for r in rows:
        if r.status == OK and r.pct_of_floor:
            by.setdefault(r.backend, []).append(r)
    if not by:
        return []
    means = {b: geometric_mean([r.pct_of_floor for r in rs]) for b, rs in by.items()}
    table = []
    for b in sorted(by, key=lambda b: -means[b]):
        small = [r.pct_of_floor for r in by[b] if r.M <= SMALL_M]
        table.append([b, str(len(by[b])), sig(means[b], 3), str(len(small)),
                      sig(geometric_mean(small), 3) if small else ""])
    return ["## % of the weight-read floor", "",
            tabulate(table, headers=["backend", "rows", "geomean %", f"rows M <= {SMALL_M}",
                                     f"geomean % M <= {SMALL_M}"], tablefmt="github", disable_numparse=True), "",
            "floor = the operator's bytes (weights + scales + x + y) at the run's copy bandwidth; % = 100 x floor / "
            "p50 per row, geometric mean over the backend's correct rows (a backend that skipped shapes is averaged "
            "over fewer rows: compare the counts)."]
