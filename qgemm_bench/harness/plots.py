"""PNG plots of a run: latency (with the weight-read floor and the fastest
peer), speedup, roofline, memory. Correct rows only.

A layer (K, N; M, N for split-K) measured at two or more x values gets a
panel of lines against x; when every layer has one x value (the smoke preset,
a single --shape) the figure is one bar chart over the shapes instead, since a
line of one point is a lone dot on a meaningless axis. The legend is the
figure's, built from what was drawn. matplotlib is imported when drawing, so
report.py can ask what will be drawn without loading it."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pandas as pd

from qgemm_bench.backends.checks import INTERPRETER
from qgemm_bench.harness.outputs import write_atomic
from qgemm_bench.harness.ranking import PEERS
from qgemm_bench.harness.results import OK

NO_ROOFLINE = ("no roofline: every row has the same arithmetic intensity (one shape), so it would be one "
               "column of dots; latency.png compares the backends")
FLOOR = "weight-read floor (min bytes / {bw:.0f} GB/s)"


def _figure(**kw):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(layout="constrained", **kw)
    FigureCanvasAgg(fig)
    return fig


def _grid(n: int):
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig = _figure(figsize=(4.2 * cols + 1.6, 3.4 * rows))
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes


def _save(fig, path: Path) -> str:
    """PNG bytes in memory, then written whole (outputs.write_atomic)."""
    buf = io.BytesIO()
    fig.savefig(buf, dpi=100, format="png")
    write_atomic(path, buf.getvalue())
    return path.name


def _legend(fig) -> None:
    """One legend for the figure: each label drawn anywhere in it, once."""
    seen = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside right center", fontsize=7)


def _x_axis(ax, values, x: str) -> None:
    """log2 x with ticks at the measured values, written as integers."""
    from matplotlib.ticker import FixedLocator, NullLocator

    ticks = sorted(set(values))
    ax.set_xscale("log", base=2)
    if len(ticks) == 1:  # a lone point: a factor of 2 either side, not 2^-1..2^1 around it
        ax.set_xlim(ticks[0] / 2, ticks[0] * 2)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(int(t)) for t in ticks], fontsize=7, rotation=45 if len(ticks) > 7 else 0)
    ax.set_xlabel(x)


def min_bytes(g: pd.DataFrame, by: str) -> pd.Series:
    """The operator's minimum bytes per value of `by` (GB/s x p50, the same for
    every backend at a shape)."""
    timed = g[g.gbps.notna() & g.p50_us.notna()]
    return (timed.gbps * 1e9 * timed.p50_us * 1e-6).groupby(timed[by]).first().sort_index()


def _floor_and_peer(ax, g: pd.DataFrame, x: str, meta: dict) -> None:
    """The weight-read floor (the operator's minimum bytes at the measured
    copy bandwidth) and, where peers ran at two or more x, the fastest peer."""
    bw = (meta.get("ceilings") or {}).get("copy_GBps")
    by = min_bytes(g, x)
    if bw and not by.empty:
        ax.plot(by.index, by.values / (bw * 1e9) * 1e6, color="black", ls="--", lw=1, marker="_", ms=10,
                label=FLOOR.format(bw=bw))
    peers = g[g.backend.isin(PEERS)]
    best = peers.groupby(x).p50_us.min().sort_index()
    if len(best) > 1:  # a band of one point would not show
        ax.plot(best.index, best.values, color="grey", lw=6, alpha=0.3, zorder=0, label="fastest peer")


def _shape_labels(df: pd.DataFrame) -> list[str]:
    """Shapes "MxKxN" in the order they were measured."""
    return list(dict.fromkeys(f"{m}x{k}x{n}" for m, k, n in zip(df.M, df.K, df.N, strict=True)))


def _bars(df: pd.DataFrame, y: str, ylabel: str, title: str, logy=True, hline=None, meta=None):
    """One bar per backend and shape, shapes along x (the weight-read floor as
    a black dash over each shape's bars when the ceilings were measured)."""
    df = df.assign(shape=[f"{m}x{k}x{n}" for m, k, n in zip(df.M, df.K, df.N, strict=True)])
    shapes = _shape_labels(df)
    table = df.groupby(["shape", "backend"], sort=False)[y].min().unstack("backend").reindex(shapes)
    fig = _figure(figsize=(max(7.5, 0.35 * len(shapes) * table.shape[1] + 4), 4.2))
    ax = fig.subplots()
    width = 0.8 / table.shape[1]
    for i, backend in enumerate(table.columns):
        vals = table[backend]
        keep = vals.notna()
        xs = [j + (i - (table.shape[1] - 1) / 2) * width for j in range(len(shapes))]
        ax.bar([p for p, k in zip(xs, keep, strict=True) if k], vals[keep].values, width, label=backend)
    bw = ((meta or {}).get("ceilings") or {}).get("copy_GBps")
    if y == "p50_us" and bw:
        by = min_bytes(df, "shape").reindex(shapes)
        ax.hlines(by.values / (bw * 1e9) * 1e6, [j - 0.45 for j in range(len(shapes))],
                  [j + 0.45 for j in range(len(shapes))], colors="black", linestyles="--", lw=1.2,
                  label=FLOOR.format(bw=bw))
    values = table.stack()
    if logy and values.max() > 30 * values.min():  # a narrower range reads better on a linear axis
        ax.set_yscale("log")
    if hline is not None:
        ax.axhline(hline, color="grey", lw=0.8, ls="--")
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels(shapes, fontsize=8, rotation=30 if len(shapes) > 4 else 0)
    ax.set_xlabel("shape M x K x N")
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    fig.suptitle(title)
    _legend(fig)
    return fig


def one_x_per_layer(df: pd.DataFrame, x: str) -> bool:
    """Whether every layer was measured at one x value only (plotted as bars)."""
    group_cols = [c for c in ("M", "K", "N") if c != x]
    return bool((df.groupby(group_cols)[x].nunique() <= 1).all())


def _per_group(df: pd.DataFrame, x: str, y: str, ylabel: str, title: str, logy=True, hline=None,
               extra=None, meta=None):
    if one_x_per_layer(df, x):
        return _bars(df, y, ylabel, title.format(vs="per shape"), logy, hline, meta)
    title = title.format(vs=f"vs {x}")
    group_cols = [c for c in ("M", "K", "N") if c != x]
    groups = list(df.groupby(group_cols, sort=False))
    fig, axes = _grid(len(groups))
    for ax, (key, g) in zip(axes, groups, strict=False):  # spare axes stay hidden
        for backend, b in g.groupby("backend", sort=False):
            b = b.sort_values(x)
            ax.plot(b[x], b[y], marker="o", label=backend)
        _x_axis(ax, g[x], x)
        if logy:
            ax.set_yscale("log")
        if hline is not None:
            ax.axhline(hline, color="grey", lw=0.8, ls="--")
        if extra is not None:
            extra(ax, g)
        ax.set_title(", ".join(f"{c}={v}" for c, v in zip(group_cols, key, strict=True)), fontsize=9)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(title)
    _legend(fig)
    return fig


def _tag(meta: dict) -> str:
    s = meta["settings"]
    return f"{s['op']}, {s['dtype']}, {meta.get('gpu') or 'CPU'}"


def latency_figure(df: pd.DataFrame, meta: dict, x: str):
    return _per_group(df, x, "p50_us", "p50 latency (us)", "latency {vs} — " + _tag(meta),
                      extra=lambda ax, g: _floor_and_peer(ax, g, x, meta), meta=meta)


def speedup_figure(df: pd.DataFrame, meta: dict, x: str):
    base = meta["settings"]["baseline"]
    return _per_group(df, x, "speedup", f"speedup vs {base}", f"speedup over {base} {{vs}} — {_tag(meta)}",
                      hline=1.0)


def roofline_drawn(df: pd.DataFrame) -> bool:
    """A roofline needs two arithmetic intensities (flops / minimum bytes
    depends on the shape alone): one shape would be one column of dots."""
    ok = df[(df.status == OK) & df.tflops.notna() & df.gbps.notna() & (df.gbps > 0)]
    return (ok.tflops / ok.gbps).map(lambda v: float(f"{v:.6g}")).nunique() > 1


def write(rows_df: pd.DataFrame, meta: dict, x: str, folder: Path) -> list[str]:
    """Writes the plots into folder; returns their file names. The speedup
    plot leaves out rows the Triton interpreter timed (an emulation's time)."""
    keep = (rows_df.status == OK) & rows_df.p50_us.notna()
    df = rows_df[keep].copy()
    if df.empty:
        return []
    written = [_save(latency_figure(df, meta, x), folder / "latency.png")]
    emulated = rows_df.reason.fillna("").str.contains(INTERPRETER, regex=False)
    sp = rows_df[keep & ~emulated & rows_df.speedup.notna()]
    if not sp.empty:
        written.append(_save(speedup_figure(sp, meta, x), folder / "speedup.png"))
    if roofline_drawn(df):
        written.append(_roofline(df, meta, folder / "roofline.png"))
    written.append(_memory(df, x, _tag(meta), folder / "memory.png"))
    return written


def _roofline(df: pd.DataFrame, meta: dict, path: Path) -> str:
    fig = _figure(figsize=(7.5, 4.5))
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
    ax.set_title(f"roofline — {_tag(meta)}", fontsize=10)
    _legend(fig)
    return _save(fig, path)


def _memory(df: pd.DataFrame, x: str, tag: str, path: Path) -> str:
    fig = _figure(figsize=(12, 4))
    left, right = fig.subplots(1, 2)
    group_cols = [c for c in ("M", "K", "N") if c != x]
    w = df.groupby(group_cols + ["backend"], sort=False).weight_mib.max().unstack("backend")
    w.index = [" ".join(f"{c}={v}" for c, v in zip(group_cols, k, strict=True)) for k in w.index]
    w.plot.bar(ax=left, fontsize=7, legend=False)
    left.set_ylabel("resident weight MiB")
    left.set_title("weight footprint", fontsize=10)
    peak = df[df.peak_extra_mib.notna()]
    if peak.empty:
        right.text(0.5, 0.5, "peak memory is measured on CUDA only", ha="center", va="center")
        right.set_axis_off()
    elif peak[x].nunique() < 2:  # one x value: bars per shape, not lone dots
        p = peak.assign(shape=[f"{m}x{k}x{n}" for m, k, n in zip(peak.M, peak.K, peak.N, strict=True)])
        p.groupby(["shape", "backend"], sort=False).peak_extra_mib.max().unstack("backend") \
            .reindex(_shape_labels(peak)).plot.bar(ax=right, fontsize=7, legend=False, rot=0)
        right.set_ylabel("peak extra MiB per call")
    else:
        for backend, b in peak.groupby("backend", sort=False):
            pk = b.groupby(x).peak_extra_mib.max()
            right.plot(pk.index, pk.values, marker="o", label=backend)
        _x_axis(right, peak[x], x)
        right.set_ylabel("peak extra MiB per call (max over shapes)")
    right.set_title("peak extra memory per call", fontsize=10)
    fig.suptitle(f"memory — {tag}")
    _legend(fig)
    return _save(fig, path)
