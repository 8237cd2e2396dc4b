"""The comparison's report: markdown for a CI job summary or a PR comment,
plain text, JSON, and a plot of the ratios with their intervals."""

from __future__ import annotations

import io
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
from tabulate import tabulate

from qgemm_bench.harness.compare import (
    IMPROVED,
    MIN_ROUNDS,
    NOISY,
    REGRESSED,
    STATUS_ORDER,
    UNCHANGED,
    Compared,
    Options,
    counts,
    failed,
    geomeans,
    store_diff,
)
from qgemm_bench.harness.outputs import write_atomic

TABLE_HEADERS = ["status", "op", "backend", "shape MxKxN", "settings", "base us", "new us", "ratio",
                 "95% CI", "p", "note"]


def _f(v, fmt):
    return "" if v is None else format(v, fmt)


def _table_rows(rows: list[Compared], bold: bool = True) -> list[list[str]]:
    return [[f"**{r.status}**" if r.gating and bold else r.status, r.op, r.backend, r.shape, r.settings,
             _f(r.base_us, ".1f"), _f(r.new_us, ".1f"), _f(r.ratio, ".3f"),
             f"{r.ci_low:.3f}-{r.ci_high:.3f}" if r.ci_low is not None else "", _f(r.p_value, ".1g"),
             r.note] for r in rows]


def _by_ratio(rows: list[Compared]) -> list[Compared]:
    order = {s: i for i, s in enumerate(STATUS_ORDER)}
    return sorted(rows, key=lambda r: (order[r.status], -(r.ratio or 0)))


def summary_line(rows: list[Compared], opt: Options) -> str:
    c = counts(rows)
    verdict = "FAIL" if failed(rows, opt) else "ok"
    parts = ", ".join(f"{v} {k}" for k, v in c.items())
    return (f"{verdict}: {len(rows)} rows: {parts} (threshold {opt.threshold:.0%}, "
            f"{opt.small_threshold:.0%} under {opt.small_us:g} us; significance p < {opt.alpha:g})")


def _run_label(meta: dict) -> str:
    return f"{(meta.get('git_commit') or 'unknown commit')[:12]} ({meta.get('date', '?')})"


def markdown(rows, base_meta, new_meta, opt: Options, mismatch, plot: str | None = None) -> str:
    lines = ["# qgemm-bench comparison", "", f"**{summary_line(rows, opt)}**", "",
             f"base: {_run_label(base_meta)} · new: {_run_label(new_meta)} · GPU: {new_meta.get('gpu') or 'CPU'}",
             ""]
    for name, meta in (("base", base_meta), ("new", new_meta)):
        if meta.get("interrupted"):
            lines += [f"**The {name} run stopped early** ({meta.get('stopped') or 'interrupted'}): "
                      "its missing rows show as removed or added.", ""]
    if mismatch:
        lines += ["**The runs' fingerprints differ** (compared anyway, `--allow-mismatch`):", "",
                  tabulate([[k, a, b] for k, a, b in mismatch], headers=["", "base", "new"], tablefmt="github"),
                  ""]
    if stores := store_diff(base_meta, new_meta):
        lines += ["The runs' config store files differ (tuned configs changed between them; a family the "
                  "compared backends do not read changes nothing):", "",
                  tabulate([[f, a, b] for f, a, b in stores], headers=["family", "base", "new"], tablefmt="github"),
                  ""]
    gm = geomeans(rows)
    if gm:
        lines += ["## Geometric mean of new/base latency", "",
                  tabulate([[op, be, n, f"{g:.3f}", f"{lo:.3f}", f"{hi:.3f}"] for op, be, n, g, lo, hi in gm],
                           headers=["op", "backend", "rows", "geomean", "min", "max"], tablefmt="github"), ""]
    changed = [r for r in _by_ratio(rows) if r.status != UNCHANGED]
    lines += ["## Changed rows", ""]
    lines += [tabulate(_table_rows(changed), headers=TABLE_HEADERS, tablefmt="github", disable_numparse=True)
              if changed else "None.", ""]
    if plot:
        lines += [f"![ratios]({plot})", ""]
    lines += ["<details><summary>All rows</summary>", "",
              tabulate(_table_rows(_by_ratio(rows)), headers=TABLE_HEADERS, tablefmt="github",
                       disable_numparse=True), "", "</details>", "",
              "ratio = new median / base median; CI: percentile bootstrap of that ratio; p: two-sided "
              "Mann-Whitney U on the raw samples. Rows noted \"rounds\" (both runs with --repeats >= "
              f"{MIN_ROUNDS}) use the round medians instead: ratio of their geometric means, Welch's t-test "
              "and its interval on their logs. A row regresses when its ratio is beyond the threshold and "
              "p < alpha; beyond the threshold without significance it is noisy."]
    return "\n".join(lines) + "\n"


def text(rows, base_meta, new_meta, opt: Options, mismatch) -> str:
    out = [summary_line(rows, opt), f"base: {_run_label(base_meta)}", f"new:  {_run_label(new_meta)}"]
    if mismatch:
        out.append("fingerprints differ: " + "; ".join(f"{k}: {a} -> {b}" for k, a, b in mismatch))
    if stores := store_diff(base_meta, new_meta):
        out.append("config store files differ: " + "; ".join(f"{f}: {a} -> {b}" for f, a, b in stores))
    table = _table_rows(_by_ratio(rows), bold=False)
    headers = TABLE_HEADERS
    if len({r.settings for r in rows}) <= 1:  # one settings for every row: the column says nothing
        headers, table = [h for h in TABLE_HEADERS if h != "settings"], [r[:4] + r[5:] for r in table]
    out += ["", tabulate(table, headers=headers, tablefmt="simple", disable_numparse=True)]
    if any(r.note.startswith("rounds") for r in rows):  # else ratio = new us / base us, as it reads
        out += ["", "base us / new us: medians of the pooled samples; rows noted \"rounds\" take their ratio, CI "
                "and p from the round medians (ratio of geometric means, Welch's t on logs)"]
    return "\n".join(out) + "\n"


def as_json(rows, base_meta, new_meta, opt: Options, mismatch) -> str:
    doc = {"summary": summary_line(rows, opt), "failed": failed(rows, opt), "counts": counts(rows),
           "options": asdict(opt), "base": {k: base_meta.get(k) for k in ("git_commit", "date")},
           "new": {k: new_meta.get(k) for k in ("git_commit", "date")},
           "fingerprint_mismatch": [{"key": k, "base": a, "new": b} for k, a, b in mismatch],
           "store_diff": [{"family": f, "base": a, "new": b} for f, a, b in store_diff(base_meta, new_meta)],
           "rows": [asdict(r) for r in _by_ratio(rows)]}
    return json.dumps(doc, indent=1) + "\n"


PLOT_FORMATS = (".png", ".svg", ".pdf")


def plot_ratios(rows: list[Compared], path: Path) -> None:
    from matplotlib.figure import Figure

    timed = [r for r in _by_ratio(rows) if r.ratio is not None]
    fig = Figure(figsize=(10, max(3, 0.18 * len(timed) + 1)))
    ax = fig.subplots()
    y = np.arange(len(timed))
    colors = {REGRESSED: "tab:red", IMPROVED: "tab:green", NOISY: "tab:orange"}
    ax.errorbar([r.ratio for r in timed], y,
                xerr=[[r.ratio - r.ci_low for r in timed], [r.ci_high - r.ratio for r in timed]], fmt="none",
                ecolor="gray")
    ax.scatter([r.ratio for r in timed], y, c=[colors.get(r.status, "tab:blue") for r in timed], zorder=3)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_yticks(y, [f"{r.backend} {r.shape}" for r in timed], fontsize=6)
    ax.set_xscale("log")
    ax.set_xlabel("new / base median latency (95% CI)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, format=path.suffix.lstrip(".").lower())
    write_atomic(path, buf.getvalue())


def render(fmt, rows, base_meta, new_meta, opt, mismatch, plot) -> str:
    if fmt == "md":
        return markdown(rows, base_meta, new_meta, opt, mismatch, plot)
    if fmt == "json":
        return as_json(rows, base_meta, new_meta, opt, mismatch)
    return text(rows, base_meta, new_meta, opt, mismatch)
