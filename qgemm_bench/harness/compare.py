"""Compare two runs row by row: the CI perf-regression report.

A row is matched on (op, backend, shape, dtype, settings). Its latency ratio is
new median / base median, with a bootstrap confidence interval from the raw
samples and a two-sided Mann-Whitney U test. A row regresses only when the
ratio is beyond the threshold AND the difference is significant; beyond the
threshold but not significant is "noisy". Memory is compared exactly, and a
correct -> incorrect flip fails whatever the time.

When both runs measured every row in MIN_ROUNDS or more rounds (runner
--repeats), the round is the unit instead: samples within one round share the
GPU's clock state of that moment. On the H100, power-capped cuBLAS GEMMs ran
at 1395-1680 MHz and their round medians moved up to 14% within one process
(152 -> 174 us at 1024x14336x4096) while each round's samples stayed tight,
so a sample-level test calls such moves significant. With rounds, the ratio
is that of the round medians' geometric means, with Welch's t-test and its
interval on their logarithms.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import mannwhitneyu, ttest_ind
from scipy.stats import t as student_t

from qgemm_bench.errors import InputError
from qgemm_bench.harness.outputs import WriteError, write_atomic
from qgemm_bench.harness.results import INCORRECT, OK, UNAVAILABLE, Row, load, settings_key

REGRESSED, IMPROVED, UNCHANGED, NOISY = "regressed", "improved", "unchanged", "noisy"
ADDED, REMOVED, INCOMPARABLE = "added", "removed", "incomparable"
STATUS_ORDER = [INCORRECT, REGRESSED, INCOMPARABLE, NOISY, IMPROVED, REMOVED, ADDED, UNCHANGED]

# Defaults. THRESHOLD is the 10%. Kernels under SMALL_US get the looser
# SMALL_THRESHOLD: graph-timed medians of ~10 us kernels move a few percent
# between processes (0.1-1.6% between runs in one process on the H100).
THRESHOLD = 0.10
SMALL_THRESHOLD = 0.15
SMALL_US = 20.0
ALPHA = 0.01  # significance level (Mann-Whitney U, or Welch's t on rounds)
CONFIDENCE = 0.95
BOOTSTRAP = 2000
MIN_ROUNDS = 3  # per side, for the round-level test (fewer: too few degrees of freedom)
MEM_REL, MEM_ABS_MIB = 0.01, 1.0  # a memory increase beyond max(1%, 1 MiB) flags
# A sample-level change whose fastest tenth moved less than this is noted: on
# the H100 a split-K config whose calls take 3.9 or 5.7 us (whole replays in
# one mode or the other) drew a 3.9 median in one run and 4.6 in the next at
# the same code (64x4096x128, 80e8f4d -> 08019ba), p10 3.88 -> 3.91.
FLOOR_SAME_REL = 0.02

# What must match for timings to be comparable (run metadata keys).
FINGERPRINT = ["gpu", "capability", "driver", "torch", "triton", "helion", "cuda"]
FINGERPRINT_SETTINGS = ["timing", "dtype", "op_settings"]


@dataclass
class Options:
    threshold: float = THRESHOLD
    small_threshold: float = SMALL_THRESHOLD
    small_us: float = SMALL_US
    alpha: float = ALPHA
    seed: int = 0
    allow_removed: bool = False
    allow_empty: bool = False  # a comparison that timed no row in both runs passes


@dataclass
class Compared:
    op: str
    backend: str
    shape: str
    dtype: str
    settings: str  # the label, for display
    status: str
    gating: bool = False  # makes the comparison fail (exit 1)
    base_us: float | None = None
    new_us: float | None = None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    threshold: float | None = None
    note: str = ""


def key(r: Row) -> tuple:
    return (r.op, r.backend, r.M, r.K, r.N, r.dtype, settings_key(r.settings))


def load_run(path: str) -> tuple[dict, list[Row]]:
    if path == "":  # Path("") is the current folder: an unset $BASE would compare whatever run is there
        raise InputError("compare '': expected a run folder or its results.json")
    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: no such run folder or JSON file")
    if p.is_dir() and not (p / "results.json").exists():
        what = (f"rows.jsonl but no results.json (the run did not finish; rebuild it with: python runner.py "
                f"report {path})") if (p / "rows.jsonl").exists() else "no results.json"
        raise InputError(f"{path}: {what}")
    meta, rows = load(p)  # InputError naming the file and what is wrong in it
    if not rows:
        raise InputError(f"{path}: holds no rows (nothing to compare)")
    keys = [key(r) for r in rows]
    if len(set(keys)) != len(keys):
        raise InputError(f"{path}: the same (op, backend, shape, dtype, settings) appears twice")
    return meta, rows


def fingerprint(meta: dict) -> dict:
    fp = {k: meta.get(k) for k in FINGERPRINT}
    s = meta.get("settings", {})
    fp.update({k: s.get(k) for k in FINGERPRINT_SETTINGS})
    # Runs before settings were structured recorded only the label.
    fp["op_settings"] = s.get("op_settings_label", s.get("op_settings"))
    return fp


def fingerprint_diff(base: dict, new: dict) -> list[tuple[str, object, object]]:
    a, b = fingerprint(base), fingerprint(new)
    diff = [(k, a[k], b[k]) for k in a if a[k] != b[k]]
    # Two operators first, where both runs name theirs (older metadata may not: the rows do).
    ops = [m.get("settings", {}).get("op") if isinstance(m.get("settings"), dict) else None for m in (base, new)]
    if all(ops) and ops[0] != ops[1]:
        diff.insert(0, ("op", *ops))
    return diff


def store_diff(base: dict, new: dict) -> list[tuple[str, str, str]]:
    """The kernel families whose config store file (by hash, else note)
    differs between two runs (metadata.store, recorded since 1eb372c for
    every family, whichever the backends read; [] where either run lacks
    it), each side as "<gpu> <hash> (<date>)" or its note. Not a mismatch:
    a re-tune is what a comparison measures; the report says it changed."""
    a, b = base.get("store"), new.get("store")
    if not isinstance(a, dict) or not isinstance(b, dict):
        return []

    def text(v, width: int) -> str:  # one table cell: no line breaks or pipes, at most `width` characters
        t = " ".join(str(v).split()).replace("|", "/")
        return t if len(t) <= width else t[:width - 3] + "..."

    def label(e) -> str:
        if not isinstance(e, dict):
            return "not recorded" if e is None else f"unreadable record ({type(e).__name__})"
        if isinstance(e.get("sha256"), str):  # the hash and the date's day, cut as they are
            return f"{text(e.get('gpu'), 20)} {text(e['sha256'][:8], 8)} ({text(str(e.get('date', '?'))[:10], 10)})"
        return text(e.get("note", "no hash"), 80)

    def ident(e) -> str:
        if isinstance(e, dict):
            e = e.get("sha256") if isinstance(e.get("sha256"), str) else e.get("note")
        return json.dumps(e, sort_keys=True, default=str)

    return [(f, label(a.get(f)), label(b.get(f))) for f in sorted(set(a) | set(b), key=str)
            if ident(a.get(f)) != ident(b.get(f))]


def ratio_ci(base: np.ndarray, new: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """Percentile bootstrap of median(new) / median(base)."""
    b = np.median(rng.choice(base, (BOOTSTRAP, base.size)), axis=1)
    n = np.median(rng.choice(new, (BOOTSTRAP, new.size)), axis=1)
    tail = 100 * (1 - CONFIDENCE) / 2
    lo, hi = np.percentile(n / b, [tail, 100 - tail])
    return float(lo), float(hi)


def rounds_test(base_rounds, new_rounds) -> tuple[float, float, float, float]:
    """(ratio, CI low, CI high, p) from per-round medians: Welch's t on logs."""
    lb, ln = np.log(np.asarray(base_rounds, float)), np.log(np.asarray(new_rounds, float))
    diff = float(ln.mean() - lb.mean())
    vb, vn = lb.var(ddof=1) / lb.size, ln.var(ddof=1) / ln.size
    se = math.sqrt(vb + vn)
    if se == 0.0:  # every round identical on both sides
        p, half = (1.0 if diff == 0 else 0.0), 0.0
    else:
        p = float(ttest_ind(ln, lb, equal_var=False).pvalue)
        df = (vb + vn) ** 2 / (vb**2 / (lb.size - 1) + vn**2 / (ln.size - 1))  # Welch-Satterthwaite
        half = float(student_t.ppf(1 - (1 - CONFIDENCE) / 2, df)) * se
    return math.exp(diff), math.exp(diff - half), math.exp(diff + half), p


def _memory_note(b: Row, n: Row) -> str:
    grew = []
    for name, label in (("weight_mib", "weight"), ("peak_extra_mib", "peak")):
        x, y = getattr(b, name), getattr(n, name)
        if x is not None and y is not None and y - x > max(MEM_REL * x, MEM_ABS_MIB):
            grew.append(f"{label} memory {x:.1f} -> {y:.1f} MiB")
    return "; ".join(grew)


def compare_row(b: Row, n: Row, opt: Options, rng: np.random.Generator) -> Compared:
    c = Compared(n.op, n.backend, n.shape, n.dtype, n.settings_label, UNCHANGED, base_us=b.p50_us, new_us=n.p50_us)
    if n.status == INCORRECT:
        c.status = INCORRECT
        c.gating = b.status != INCORRECT
        c.note = n.reason if c.gating else f"incorrect in both runs: {n.reason}"
        return c
    if b.status not in (OK, INCORRECT) or n.status != OK:
        c.status = INCOMPARABLE
        if b.status == OK:  # it ran correctly before and no longer runs
            c.gating = True
            c.note = f"new run: {n.status}: {n.reason}"
        else:
            c.note = f"base run: {b.status}: {b.reason}"
        return c
    if b.timing != n.timing or len(b.samples_us) < 3 or len(n.samples_us) < 3:
        # Both ran, yet they cannot be compared: a measurement a CI gate would pass unseen (--allow-empty: may).
        c.status, c.gating = INCOMPARABLE, not opt.allow_empty
        c.note = (f"timed with {b.timing} vs {n.timing}" if b.timing != n.timing
                  else "fewer than 3 raw samples on a side")
        return c

    bs, ns = np.asarray(b.samples_us, float), np.asarray(n.samples_us, float)
    if min(len(b.round_p50_us), len(n.round_p50_us)) >= MIN_ROUNDS:
        c.ratio, c.ci_low, c.ci_high, c.p_value = rounds_test(b.round_p50_us, n.round_p50_us)
        rounds_note = f"rounds {len(b.round_p50_us)} vs {len(n.round_p50_us)}"
    else:
        c.ratio = float(np.median(ns) / np.median(bs))
        c.ci_low, c.ci_high = ratio_ci(bs, ns, rng)
        p = float(mannwhitneyu(bs, ns, alternative="two-sided").pvalue)
        c.p_value = p if math.isfinite(p) else 1.0  # identical constant samples: no evidence of a change
        rounds_note = ""
    c.threshold = opt.small_threshold if np.median(bs) < opt.small_us else opt.threshold
    significant = c.p_value < opt.alpha
    beyond = c.ratio > 1 + c.threshold or c.ratio < 1 / (1 + c.threshold)
    if beyond:
        c.status = (REGRESSED if c.ratio > 1 else IMPROVED) if significant else NOISY
    c.gating = c.status == REGRESSED
    notes = [rounds_note] if rounds_note else []
    if not rounds_note and c.status != UNCHANGED:
        fb, fn = float(np.percentile(bs, 10)), float(np.percentile(ns, 10))
        if abs(fn / fb - 1) <= FLOOR_SAME_REL:
            notes.append(f"fastest tenth unchanged (p10 {fb:.3g} -> {fn:.3g} us): the median moved, not the floor; "
                         "with --repeats 3 compare tests rounds")
    if b.status == INCORRECT:
        notes.append("was incorrect, now correct")
    if mem := _memory_note(b, n):
        notes.append(mem)
        c.status, c.gating = REGRESSED, True
    c.note = "; ".join(notes)
    return c


def removed(b: Row, opt: Options) -> Compared:
    """A row of BASE that NEW lacks: a backend or shape that disappeared
    fails the comparison (unless --allow-removed), except one that never ran
    in BASE (unavailable there: nothing measured is lost)."""
    c = Compared(b.op, b.backend, b.shape, b.dtype, b.settings_label, REMOVED, base_us=b.p50_us)
    if b.status == UNAVAILABLE:
        c.note = f"unavailable in base: {b.reason}"
    elif opt.allow_removed:
        c.note = "missing from new (allowed: --allow-removed)"
    else:
        c.gating, c.note = True, "missing from new (pass --allow-removed if intended)"
    return c


def compare(base_rows: list[Row], new_rows: list[Row], opt: Options) -> list[Compared]:
    rng = np.random.default_rng(opt.seed)
    base = {key(r): r for r in base_rows}
    new = {key(r): r for r in new_rows}
    out = []
    for k, n in new.items():
        if k in base:
            out.append(compare_row(base[k], n, opt, rng))
        else:
            out.append(Compared(n.op, n.backend, n.shape, n.dtype, n.settings_label, ADDED, new_us=n.p50_us,
                                note="" if n.status == OK else f"{n.status}: {n.reason}"))
    for k, b in base.items():
        if k not in new:
            out.append(removed(b, opt))
    return out


def counts(rows: list[Compared]) -> dict[str, int]:
    return {s: sum(r.status == s for r in rows) for s in STATUS_ORDER if any(r.status == s for r in rows)}


def failed(rows: list[Compared], opt: Options | None = None) -> bool:
    """Whether the comparison fails: a gating row, or (given the options)
    nothing compared without --allow-empty."""
    empty = opt is not None and not opt.allow_empty and bool(nothing_compared(rows))
    return empty or any(r.gating for r in rows)


def nothing_compared(rows: list[Compared]) -> str:
    """Why no row was compared ("" when one was: timed in both runs, or
    checked incorrect): a comparison that compared nothing must not pass a CI gate."""
    if any(r.ratio is not None or r.status == INCORRECT for r in rows):
        return ""
    if not rows:
        return "no rows"
    c = counts(rows)
    first = next((r for r in rows if r.note), rows[0])
    return (f"no row was timed in both runs ({', '.join(f'{v} {k}' for k, v in c.items())}; e.g. {first.backend} "
            f"{first.shape}: {first.note or first.status})")


def geomeans(rows: list[Compared]) -> list[list]:
    """Per operator / backend: geometric mean of the ratios of timed rows."""
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        if r.ratio is not None:
            groups.setdefault((r.op, r.backend), []).append(r.ratio)
    return [[op, be, len(v), math.exp(sum(map(math.log, v)) / len(v)), min(v), max(v)]
            for (op, be), v in sorted(groups.items())]


# A run folder's own files: compare's --output or --plot must not replace them.
RUN_FILES = ("results.json", "rows.jsonl", "metadata.json", "results.csv", "report.md", "errors.log", "latency.png",
             "speedup.png", "roofline.png", "memory.png", "tokens_per_s.png")


def _check_writable(option: str, path: str | None, inputs: tuple[str, ...] = ()) -> None:
    """Refuse an output path that cannot be written, or that would replace
    one of the runs compared (or a file of their folders), before any work."""
    if path is None:
        return
    if path == "":
        raise InputError(f"{option} '': expected a file name")
    p = Path(path)
    try:
        if p.is_dir():
            raise InputError(f"{option} {path}: is a folder; expected a file name")
        if p.exists() and not p.is_file():  # the report is renamed into place: /dev/null would become a file
            raise InputError(f"{option} {path}: not a regular file (a device, pipe or socket); give a file name, "
                             "or no --output to print the report")
        if not p.parent.is_dir():
            raise InputError(f"{option} {path}: no such folder {p.parent}")
        target = p.resolve()
        for given in inputs:
            q = Path(given).resolve()
            ours = [q / f for f in RUN_FILES] if q.is_dir() else [q, *(q.parent / f for f in RUN_FILES)]
            if target in ours or any(f.exists() and p.exists() and os.path.samefile(f, p) for f in ours):
                raise InputError(f"{option} {path}: is {target.name} of the run {given}, which compare reads; "
                                 "write the report elsewhere")
    except OSError as e:  # a name too long, a symlink loop
        raise InputError(f"{option} {path}: {e.strerror or type(e).__name__}") from None


def main(args) -> int:
    """`runner.py compare`: 0 clean (or --warn-only), 1 regression or correctness
    failure, 2 incomparable runs (raised as InputError) or bad usage."""
    opt = Options(threshold=args.threshold, small_threshold=args.small_threshold, small_us=args.small_us,
                  alpha=args.alpha, allow_removed=args.allow_removed,
                  allow_empty=getattr(args, "allow_empty", False))
    finite = all(math.isfinite(v) for v in (opt.threshold, opt.small_threshold, opt.small_us))
    if not (finite and opt.threshold > 0 and opt.small_threshold > 0 and opt.small_us >= 0 and 0 < opt.alpha < 1):
        raise InputError("--threshold and --small-threshold must be finite and > 0, --small-us finite and >= 0, "
                         "and --alpha in (0, 1)")
    from qgemm_bench.harness import compare_report as render

    if args.plot and Path(args.plot).suffix.lower() not in render.PLOT_FORMATS:
        raise InputError(f"--plot {args.plot}: expected a file ending in {', '.join(render.PLOT_FORMATS)}")
    _check_writable("--plot", args.plot, (args.base, args.new))
    _check_writable("--output", args.output, (args.base, args.new))
    if args.plot and args.output and Path(args.plot).resolve() == Path(args.output).resolve():
        raise InputError(f"--plot and --output are the same file ({args.output})")
    base_meta, base_rows = load_run(args.base)
    new_meta, new_rows = load_run(args.new)
    mismatch = fingerprint_diff(base_meta, new_meta)
    if mismatch and not args.allow_mismatch:
        diff = "; ".join(f"{k}: {a!r} vs {b!r}" for k, a, b in mismatch)
        raise InputError(f"runs are not comparable ({diff}); pass --allow-mismatch to compare anyway")
    rows = compare(base_rows, new_rows, opt)
    plot = None
    try:
        if args.plot:
            render.plot_ratios(rows, Path(args.plot))
            plot = Path(args.plot).name
        report = render.render(args.format, rows, base_meta, new_meta, opt, mismatch, plot)
        if args.output:
            write_atomic(Path(args.output), report)
    except WriteError as e:
        raise InputError(str(e)) from None
    if args.output:
        print(render.summary_line(rows, opt))
        print(f"report: {args.output}")
    else:
        print(report, end="")
    if (empty := nothing_compared(rows)) and not opt.allow_empty:
        print(f"error: nothing was compared: {empty}; pass --allow-empty to accept that", file=sys.stderr)
    return 1 if failed(rows, opt) and not args.warn_only else 0


if __name__ == "__main__":  # `python -m qgemm_bench.harness.compare BASE NEW` is `runner.py compare BASE NEW`
    from qgemm_bench.cli import main as _main

    sys.exit(_main(["compare", *sys.argv[1:]]))
