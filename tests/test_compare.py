"""runner.py compare on synthetic runs with known answers."""

import json
import re

import numpy as np
import pytest

import runner
from qgemm_bench.harness import compare
from qgemm_bench.harness.outputs import results_json
from qgemm_bench.harness.results import ERROR, INCORRECT, OK, Row

META = {"gpu": "NVIDIA H100 80GB HBM3", "capability": "9.0", "driver": "580.1", "torch": "2.11.0",
        "triton": "3.6.0", "helion": "1.4.0", "cuda": "13.0", "git_commit": "abc", "date": "2026-11-22",
        "settings": {"timing": "graph", "dtype": "bfloat16", "op_settings": "group=128"}}


def row(backend="triton", M=16, us=100.0, spread=0.5, n=60, seed=0, status=OK, **kw) -> Row:
    rng = np.random.default_rng(seed)
    samples = [float(x) for x in us + spread * rng.standard_normal(n)] if status in (OK, INCORRECT) else []
    fields = dict(op="int4_gemm", backend=backend, M=M, K=8192, N=8192, dtype="bfloat16", settings={"group_size": 128},
                  settings_label="group=128",
                  device="cuda:0", timing="graph" if samples else "", status=status, samples_us=samples,
                  p50_us=float(np.median(samples)) if samples else None, weight_mib=32.0, peak_extra_mib=0.25)
    fields.update(kw)
    return Row(**fields)


def write(path, rows, **meta):
    path.mkdir(parents=True)
    m = json.loads(json.dumps(META))
    for k, v in meta.items():
        (m["settings"] if k in m["settings"] else m)[k] = v
    (path / "results.json").write_text(results_json(rows, m))
    return str(path)


def run_compare(tmp_path, base_rows, new_rows, *args, new_meta=None, capsys=None):
    base = write(tmp_path / "base", base_rows)
    new = write(tmp_path / "new", new_rows, **(new_meta or {}))
    out = tmp_path / "report.json"
    code = runner.main(["compare", base, new, "--format", "json", "--output", str(out), *args])
    doc = json.loads(out.read_text()) if out.exists() else None
    return code, doc


def statuses(doc):
    return {(r["backend"], r["shape"]): r["status"] for r in doc["rows"]}


def test_clear_regression_fails(tmp_path):
    code, doc = run_compare(tmp_path, [row(us=100)], [row(us=130, seed=1)])
    assert code == 1 and doc["failed"]
    r = doc["rows"][0]
    assert r["status"] == "regressed" and r["ratio"] == pytest.approx(1.3, rel=0.01)
    assert r["ci_low"] > 1.25 and r["ci_high"] < 1.35 and r["p_value"] < 1e-10


def test_improvement_passes(tmp_path):
    code, doc = run_compare(tmp_path, [row(us=100)], [row(us=70, seed=1)])
    assert code == 0 and statuses(doc)[("triton", "16x8192x8192")] == "improved"


def test_small_change_inside_threshold_is_unchanged(tmp_path):
    # 3% slower and clearly significant, but inside the 10% threshold.
    code, doc = run_compare(tmp_path, [row(us=100)], [row(us=103, seed=1)])
    assert code == 0 and doc["rows"][0]["status"] == "unchanged" and doc["rows"][0]["p_value"] < 1e-6


def test_large_change_without_significance_is_noisy(tmp_path):
    base = row(us=100, spread=40, n=6, seed=3)
    new = row(us=100, spread=40, n=6, seed=3)
    new.samples_us = [x * 1.15 for x in base.samples_us[:3]] + [x * 1.15 for x in base.samples_us[3:]]
    new.samples_us[0] = base.samples_us[0] * 0.6  # overlap, so the shift is not significant
    new.p50_us = float(np.median(new.samples_us))
    code, doc = run_compare(tmp_path, [base], [new])
    r = doc["rows"][0]
    assert r["ratio"] > 1.1 and r["p_value"] >= 0.01
    assert code == 0 and r["status"] == "noisy"


def test_small_kernels_get_the_looser_threshold(tmp_path):
    base = [row(M=1, us=10, spread=0.05), row(M=16, us=100, spread=0.5)]
    new = [row(M=1, us=11.2, spread=0.05, seed=1), row(M=16, us=112, spread=0.5, seed=1)]
    code, doc = run_compare(tmp_path, base, new)
    s = statuses(doc)
    assert s[("triton", "1x8192x8192")] == "unchanged"  # +12% < 15% for a 10 us kernel
    assert s[("triton", "16x8192x8192")] == "regressed"  # +12% > 10%
    assert code == 1
    code, doc = run_compare(tmp_path / "again", base, new, "--small-threshold", "0.1")
    assert statuses(doc)[("triton", "1x8192x8192")] == "regressed"


def test_accuracy_flip_fails_whatever_the_time(tmp_path):
    code, doc = run_compare(tmp_path, [row(us=100)],
                            [row(us=50, seed=1, status=INCORRECT, reason="relative error 0.3 > tolerance 0.01")])
    assert code == 1 and doc["rows"][0]["status"] == "incorrect" and "relative error" in doc["rows"][0]["note"]


def test_incorrect_in_both_runs_is_reported_but_not_new(tmp_path):
    bad = dict(status=INCORRECT, reason="relative error 0.3 > tolerance 0.01")
    code, doc = run_compare(tmp_path, [row(**bad)], [row(seed=1, **bad)])
    assert code == 0 and doc["rows"][0]["status"] == "incorrect"


def test_a_row_that_stops_running_fails(tmp_path):
    code, doc = run_compare(tmp_path, [row()], [row(status=ERROR, reason="CompilationError: boom")])
    assert code == 1 and doc["rows"][0]["status"] == "incomparable" and "boom" in doc["rows"][0]["note"]


@pytest.mark.parametrize("field,new_value,flags", [
    ("peak_extra_mib", 2.5, True),  # +2.25 MiB
    ("weight_mib", 33.0, False),  # +1 MiB on 32: within max(1%, 1 MiB)
    ("weight_mib", 48.0, True),
])
def test_memory_is_compared_exactly(tmp_path, field, new_value, flags):
    code, doc = run_compare(tmp_path, [row()], [row(seed=1, **{field: new_value})])
    assert (code == 1) == flags
    assert (doc["rows"][0]["status"] == "regressed") == flags
    if flags:
        assert "memory" in doc["rows"][0]["note"]


def test_added_and_removed_rows(tmp_path):
    code, doc = run_compare(tmp_path, [row("triton"), row("cublas")], [row("triton", seed=1), row("helion")])
    assert code == 0
    assert statuses(doc) == {("triton", "16x8192x8192"): "unchanged", ("cublas", "16x8192x8192"): "removed",
                             ("helion", "16x8192x8192"): "added"}


def test_fingerprint_mismatch_is_incomparable(tmp_path, capsys):
    code, doc = run_compare(tmp_path, [row()], [row(seed=1)], new_meta={"triton": "3.5.0"})
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and doc is None
    assert len(err) == 1 and "not comparable" in err[0] and "triton: '3.6.0' vs '3.5.0'" in err[0]
    code, doc = run_compare(tmp_path / "again", [row()], [row(seed=1)], "--allow-mismatch",
                            new_meta={"timing": "events"})
    assert code == 0 and doc["fingerprint_mismatch"] == [{"key": "timing", "base": "graph", "new": "events"}]


def test_warn_only_exits_zero(tmp_path):
    code, doc = run_compare(tmp_path, [row(us=100)], [row(us=130, seed=1)], "--warn-only")
    assert code == 0 and doc["failed"]


def test_markdown_report(tmp_path, capsys):
    base = write(tmp_path / "base", [row("triton", us=100), row("cublas", us=50), row("tinygemm")])
    new = write(tmp_path / "new", [row("triton", us=130, seed=1), row("cublas", us=50, seed=1),
                                   row("helion", us=40)])
    code = runner.main(["compare", base, new, "--plot", str(tmp_path / "ratios.png")])
    md = capsys.readouterr().out
    assert code == 1
    assert md.startswith("# qgemm-bench comparison\n\n**FAIL: 4 rows: 1 regressed, 1 removed, 1 added, 1 unchanged")
    changed = md.split("## Changed rows")[1].split("<details>")[0]
    assert "**regressed**" in changed and "removed" in changed and "added" in changed
    assert "unchanged" not in changed  # unchanged rows only in the folded full table
    geomean = md.split("## Geometric mean")[1].split("##")[0]
    assert re.search(r"\| int4_gemm +\| triton +\| +1 \| +1\.(29|30)\d \|", geomean), geomean
    assert "![ratios](ratios.png)" in md and (tmp_path / "ratios.png").stat().st_size > 0


def test_text_format_and_same_run(tmp_path, capsys):
    base = write(tmp_path / "base", [row("triton"), row("cublas", us=40)])
    code = runner.main(["compare", base, base, "--format", "text"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("ok: 2 rows: 2 unchanged") and "**" not in out


@pytest.mark.parametrize("setup,message", [
    ("missing", "no such run folder"),
    ("unfinished", "rows.jsonl but no results.json"),
    ("garbage", "not a qgemm-bench results file"),
])
def test_bad_inputs_are_one_line_exit_2(tmp_path, capsys, setup, message):
    good = write(tmp_path / "good", [row()])
    bad = tmp_path / "bad"
    if setup == "unfinished":
        bad.mkdir()
        (bad / "rows.jsonl").write_text("{}\n")
    elif setup == "garbage":
        bad = tmp_path / "bad.json"
        bad.write_text("{\"rows\": 3}")
    code = runner.main(["compare", good, str(bad)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err


def rounds_row(round_us, spread=0.3, n=20, seed=0, **kw) -> Row:
    """A row measured in rounds: tight samples around each round's own level."""
    rng = np.random.default_rng(seed)
    rounds = [list(us + spread * rng.standard_normal(n)) for us in round_us]
    samples = [float(x) for r in rounds for x in r]
    return row(samples_us=samples, p50_us=float(np.median(samples)),
               round_p50_us=[float(np.median(r)) for r in rounds], **kw)


def test_rounds_absorb_clock_drift_between_rounds(tmp_path):
    # The H100 A/A pattern: each round tight, the rounds' levels 10% apart
    # (power-capped clocks). Sample-level tests call the ~9% shift significant.
    base = rounds_row([52, 56, 53], seed=1)
    new = rounds_row([58, 60, 54], seed=2)
    code, doc = run_compare(tmp_path, [base], [new], "--threshold", "0.05")
    r = doc["rows"][0]
    assert r["note"] == "rounds 3 vs 3" and r["p_value"] > 0.01 and r["ci_low"] < 1 < r["ci_high"]
    assert r["status"] == "noisy" and code == 0
    # The same samples without their rounds: a confident (false) regression.
    base.round_p50_us, new.round_p50_us = [], []
    code, doc = run_compare(tmp_path / "flat", [base], [new], "--threshold", "0.05")
    assert doc["rows"][0]["status"] == "regressed" and code == 1


def test_rounds_still_catch_a_real_regression(tmp_path):
    code, doc = run_compare(tmp_path, [rounds_row([100, 103, 99], seed=1)], [rounds_row([130, 128, 133], seed=2)])
    r = doc["rows"][0]
    expected = np.exp(np.mean(np.log(r_new := [130, 128, 133])) - np.mean(np.log([100, 103, 99])))
    assert r["status"] == "regressed" and code == 1 and r_new
    assert r["ratio"] == pytest.approx(expected, rel=0.01) and r["p_value"] < 0.01 and r["ci_low"] > 1.2


def test_rounds_need_three_on_both_sides(tmp_path):
    code, doc = run_compare(tmp_path, [rounds_row([100, 101, 99])], [rounds_row([130, 131], seed=2)])
    assert doc["rows"][0]["note"] == "" and doc["rows"][0]["status"] == "regressed"


def test_identical_rounds_are_unchanged(tmp_path):
    r = rounds_row([100, 100, 100], spread=0.0)
    code, doc = run_compare(tmp_path, [r], [r])
    assert code == 0 and doc["rows"][0]["status"] == "unchanged" and doc["rows"][0]["p_value"] == 1.0


def test_bootstrap_interval_covers_the_true_ratio():
    rng = np.random.default_rng(5)
    base = 100 + rng.standard_normal(200)
    new = 120 + rng.standard_normal(200)
    lo, hi = compare.ratio_ci(base, new, np.random.default_rng(0))
    assert lo < 1.2 < hi and hi - lo < 0.01
