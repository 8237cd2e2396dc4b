"""PNG plots of a run: latency (with the weight-read floor and the fastest
peer), speedup, roofline, memory. Correct rows only."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from qgemm_bench.harness.outputs import write_atomic
from qgemm_bench.harness.ranking import PEERS
from qgemm_bench.harness.results import OK


def _grid(n: int):
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(4.2 * cols, 3.4 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes


def _save(fig: Figure, path: Path) -> str:
    """PNG bytes in memory, then written whole (outputs.write_atomic)."""
    buf = io.BytesIO()
    fig.savefig(buf, dpi=100, format="png")
    write_atomic(path, buf.getvalue())
    return path.name


def _floor_and_peer(ax, g: pd.DataFrame, x: str, meta: dict) -> None:
    """The weight-read floor (the operator's minimum bytes at the measured
    copy bandwidth) and, where peers ran, the fastest peer at each x."""
    bw = (meta.get("ceilings") or {}).get("copy_GBps")
    timed = g[g.gbps.notna() & g.p50_us.notna()]
    if bw and not timed.empty:
        # minimum bytes = GB/s x p50, the same for every backend at a shape
        by = (timed.gbps * 1e9 * timed.p50_us * 1e-6).groupby(timed[x]).first().sort_index()
        ax.plot(by.index, by.values / (bw * 1e9) * 1e6, color="black", ls="--", lw=1,
                label=f"weight-read floor (min bytes / {bw:.0f} GB/s)")
    peers = g[g.backend.isin(PEERS)]
    if not peers.empty:
        best = peers.groupby(x).p50_us.min().sort_index()
        ax.plot(best.index, best.values, color="grey", lw=6, alpha=0.3, zorder=0, label="fastest peer")


def _per_group(df: pd.DataFrame, x: str, y: str, ylabel: str, title: str, logy=True, hline=None,
               extra=None) -> Figure:
    group_cols = [c for c in ("M", "K", "N") if c != x]
    groups = list(df.groupby(group_cols, sort=False))
    fig, axes = _grid(len(groups))
    for ax, (key, g) in zip(axes, groups, strict=False):  # spare axes stay hidden
        for backend, b in g.groupby("backend", sort=False):
            b = b.sort_values(x)
            ax.plot(b[x], b[y], marker="o", label=backend)
        ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        if hline is not None:
            ax.axhline(hline, color="grey", lw=0.8, ls="--")
        if extra is not None:
            extra(ax, g)
        ax.set_title(", ".join(f"{c}={v}" for c, v in zip(group_cols, key, strict=True)), fontsize=9)
        ax.set_xlabel(x)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(title)
    return fig


def latency_figure(df: pd.DataFrame, meta: dict, x: str) -> Figure:
    s = meta["settings"]
    tag = f"{s['op']}, {s['dtype']}, {meta.get('gpu') or 'CPU'}"
    return _per_group(df, x, "p50_us", "p50 latency (us)", f"latency vs {x} — {tag}",
                      extra=lambda ax, g: _floor_and_peer(ax, g, x, meta))


def write(rows_df: pd.DataFrame, meta: dict, x: str, folder: Path) -> list[str]:
    """Writes the plots into folder; returns their file names."""
    df = rows_df[(rows_df.status == OK) & rows_df.p50_us.notna()].copy()
    if df.empty:
        return []
    s = meta["settings"]
    where = meta.get("gpu") or "CPU"
    tag = f"{s['op']}, {s['dtype']}, {where}"
    written = []

    written.append(_save(latency_figure(df, meta, x), folder / "latency.png"))

    sp = df[df.speedup.notna()]
    if not sp.empty:
        fig = _per_group(sp, x, "speedup", f"speedup vs {s['baseline']}", f"speedup vs {s['baseline']} — {tag}",
                         logy=True, hline=1.0)
        written.append(_save(fig, folder / "speedup.png"))

    written.append(_roofline(df, meta, tag, folder / "roofline.png"))
    written.append(_memory(df, x, tag, folder / "memory.png"))
    return written


def _roofline(df: pd.DataFrame, meta: dict, tag: str, path: Path) -> str:
    fig = Figure(figsize=(6.5, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    intensity = df.tflops * 1e12 / (df.gbps * 1e9)  # flop per byte (minimum bytes)
    for backend, idx in df.groupby("backend", sort=False).groups.items():
        ax.scatter(intensity[idx], df.tflops[idx], label=backend, s=14)
    c = meta.get("ceilings") or {}
    if c:
        lo, hi = max(intensity.min() / 2, 1e-2), intensity.max() * 2
        xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
        ax.plot(xs, [min(c["copy_GBps"] * 1e9 * v, c["bf16_matmul_TFLOPs"] * 1e12) / 1e12 for v in xs],
                color="black", lw=1, label="roof (measured copy BW, bf16 matmul)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / minimum byte)")
    ax.set_ylabel("TFLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"roofline — {tag}", fontsize=10)
    return _save(fig, path)


def _memory(df: pd.DataFrame, x: str, tag: str, path: Path) -> str:
    fig = Figure(figsize=(11, 4), layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    group_cols = [c for c in ("M", "K", "N") if c != x]
    w = df.groupby(group_cols + ["backend"], sort=False).weight_mib.max().unstack("backend")
    w.index = [" ".join(f"{c}={v}" for c, v in zip(group_cols, k, strict=True)) for k in w.index]
    w.plot.bar(ax=left, fontsize=7)
    left.set_ylabel("resident weight MiB")
    left.set_title("weight footprint", fontsize=10)
    if df.peak_extra_mib.notna().any():
        for backend, b in df.groupby("backend", sort=False):
            pk = b.groupby(x).peak_extra_mib.max()
            right.plot(pk.index, pk.values, marker="o", label=backend)
        right.set_xscale("log", base=2)
        right.set_xlabel(x)
        right.set_ylabel("peak extra MiB per call (max over shapes)")
        right.legend(fontsize=7)
    else:
        right.text(0.5, 0.5, "peak memory is measured on CUDA only", ha="center", va="center")
        right.set_axis_off()
    right.set_title("peak extra memory per call", fontsize=10)
    fig.suptitle(f"memory — {tag}")
    return _save(fig, path)
