"""runner.py compare on synthetic runs with known answers."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import runner
from qgemm_bench.harness import compare
from qgemm_bench.harness.outputs import results_json
from qgemm_bench.harness.results import ERROR, INCORRECT, OK, UNAVAILABLE, Row

REPO = Path(__file__).resolve().parent.parent
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


def run_compare(tmp_path, base_rows, new_rows, *args, new_meta=None, base_meta=None, capsys=None):
    base = write(tmp_path / "base", base_rows, **(base_meta or {}))
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
    base = row(n=6)
    base.samples_us = [60.0, 80.0, 95.0, 105.0, 120.0, 140.0]  # widely spread (latencies stay positive)
    base.p50_us = 100.0
    new = row(n=6)
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


def test_a_removed_backend_fails_unless_allowed(tmp_path):
    code, doc = run_compare(tmp_path, [row("triton"), row("cublas")], [row("triton", seed=1), row("helion")])
    assert code == 1 and doc["summary"].startswith("FAIL: 3 rows: 1 removed, 1 added, 1 unchanged")
    assert statuses(doc) == {("triton", "16x8192x8192"): "unchanged", ("cublas", "16x8192x8192"): "removed",
                             ("helion", "16x8192x8192"): "added"}
    gone = next(r for r in doc["rows"] if r["status"] == "removed")
    assert gone["gating"] and "--allow-removed" in gone["note"]
    code, doc = run_compare(tmp_path / "allowed", [row("triton"), row("cublas")], [row("triton", seed=1)],
                            "--allow-removed")
    assert code == 0 and not doc["failed"] and statuses(doc)[("cublas", "16x8192x8192")] == "removed"


def test_a_row_unavailable_in_base_may_disappear(tmp_path):
    gone = row("tinygemm", status=UNAVAILABLE, reason="needs a CUDA device")
    code, doc = run_compare(tmp_path, [row("triton"), gone], [row("triton", seed=1)])
    assert code == 0 and statuses(doc)[("tinygemm", "16x8192x8192")] == "removed"


def test_every_row_removed_against_the_committed_baseline_fails(tmp_path, capsys):
    """A CPU run against results/h200 with --allow-mismatch used to say "ok: 240 removed", exit 0."""
    base = REPO / "results" / "h200" / "int4_gemm"
    n = len((base / "results.csv").read_text().strip().splitlines()) - 1  # the baseline's rows
    new = write(tmp_path / "new", [row("torch", M=1, K=128, N=64)], gpu=None)
    code = runner.main(["compare", str(base), new, "--allow-mismatch", "--format", "text"])
    out = capsys.readouterr().out
    assert n > 200 and code == 1 and out.startswith(f"FAIL: {n + 1} rows: {n} removed, 1 added"), out[:200]


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_a_committed_baseline_compares_clean_against_itself(gpu, capsys):
    """CI's gate reads the committed baselines: each must load and match itself, row for row."""
    base = REPO / "results" / gpu / "int4_gemm_msweep"
    code = runner.main(["compare", str(base), str(base), "--format", "text"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("ok"), out[:200]


def test_two_operators_are_named_first_when_incomparable(tmp_path, capsys):
    base = REPO / "results" / "h200" / "int4_gemm_msweep"
    assert runner.main(["compare", str(base), str(REPO / "results" / "h200" / "split_k_gemm")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: runs are not comparable (op: 'int4_gemm' vs "
                                               "'split_k_gemm'; "), err


def test_fingerprint_mismatch_is_incomparable(tmp_path, capsys):
    code, doc = run_compare(tmp_path, [row()], [row(seed=1)], new_meta={"triton": "3.5.0"})
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and doc is None
    assert len(err) == 1 and "not comparable" in err[0] and "triton: '3.6.0' vs '3.5.0'" in err[0]
    code, doc = run_compare(tmp_path / "again", [row()], [row(seed=1)], "--allow-mismatch",
                            new_meta={"timing": "events"})
    assert code == 0 and doc["fingerprint_mismatch"] == [{"key": "timing", "base": "graph", "new": "events"}]


def test_a_changed_store_file_is_said_not_refused(tmp_path, capsys):
    # A re-tune between two runs is what a comparison measures: compared, and
    # each report names the families whose store file changed (metadata.store).
    h = {"gpu": "h200", "sha256": "0123456789abcdef", "date": "2026-11-29T20:58:31+00:00"}
    base = {"weight_only": h, "split_k": h, "helion": h}
    new = {**base, "helion": {**h, "sha256": "fedcba9876543210", "date": "2026-11-30T00:55:08+00:00"}}
    code, doc = run_compare(tmp_path, [row()], [row(seed=1)], base_meta={"store": base}, new_meta={"store": new})
    assert code == 0 and doc["fingerprint_mismatch"] == []
    assert doc["store_diff"] == [{"family": "helion", "base": "h200 01234567 (2026-11-29)",
                                  "new": "h200 fedcba98 (2026-11-30)"}]
    b, n = write(tmp_path / "b", [row()], store=base), write(tmp_path / "n", [row(seed=1)], store=new)
    assert runner.main(["compare", b, n, "--format", "text"]) == 0
    assert "config store files differ: helion: h200 01234567 (2026-11-29) -> h200 fedcba98 (2026-11-30)" \
        in capsys.readouterr().out
    assert runner.main(["compare", b, n, "--format", "md"]) == 0
    assert "| helion   | h200 01234567 (2026-11-29) | h200 fedcba98 (2026-11-30) |" in capsys.readouterr().out
    code, doc = run_compare(tmp_path / "old", [row()], [row(seed=1)], new_meta={"store": new})
    assert code == 0 and doc["store_diff"] == []  # a run from before metadata.store: nothing to say
    # Records no run writes: told apart, each one table cell (a note's pipes and newlines, a long note cut).
    odd = {"weight_only": 6, "split_k": {"sha256": 5}, "helion": {"note": "a | b\nc" + "x" * 300}}
    code, doc = run_compare(tmp_path / "odd", [row()], [row(seed=1)], base_meta={"store": {**base, "weight_only": 5}},
                            new_meta={"store": odd})
    got = {d["family"]: (d["base"], d["new"]) for d in doc["store_diff"]}
    assert got["weight_only"] == ("unreadable record (int)", "unreadable record (int)")
    assert got["split_k"] == ("h200 01234567 (2026-11-29)", "no hash")
    assert got["helion"][1].startswith("a / b c") and len(got["helion"][1]) == 80 and "\n" not in got["helion"][1]
    more = {f: {**e, "tune": "x"} for f, e in base.items()}  # a field more, the same files
    code, doc = run_compare(tmp_path / "same", [row()], [row(seed=1)], base_meta={"store": base},
                            new_meta={"store": more})
    assert code == 0 and doc["store_diff"] == []


def test_a_lone_surrogate_in_metadata_is_written_escaped_not_a_traceback(tmp_path):
    # A name read from a file with bad bytes: --output encoded it to UTF-8 and raised.
    code, doc = run_compare(tmp_path, [row()], [row(seed=1)], new_meta={"git_commit": "abc\udcff"})
    assert code == 0 and doc is not None
    out = tmp_path / "report.md"
    assert runner.main(["compare", str(tmp_path / "base"), str(tmp_path / "new"), "--output", str(out)]) == 0
    assert "abc\\udcff" in out.read_text()


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
    assert "settings" not in out and "unchanged  int4_gemm" in out  # one settings for every row: no column
    # Rows that differ only in their settings (a probe: "removed torch 1x128x64" beside "added torch
    # 1x128x64", nothing to tell them apart): the text table shows the column then.
    g64 = dict(settings={"group_size": 64}, settings_label="group=64")
    new = write(tmp_path / "new", [row("triton"), row("cublas", us=40), row("cublas", us=40, **g64)])
    assert runner.main(["compare", base, new, "--format", "text"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(x.split()[:5] == ["status", "op", "backend", "shape", "MxKxN"] and "settings" in x for x in lines)
    assert any("added" in x and "group=64" in x for x in lines), lines


def test_a_comparison_that_timed_nothing_fails_unless_allowed(tmp_path, capsys):
    """Runs without samples used to compare as "incomparable", exit 0: a CI gate passed on nothing."""
    bare = [row("triton", samples_us=[]), row("cublas", samples_us=[])]
    code, doc = run_compare(tmp_path, bare, bare)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and doc["failed"] and doc["summary"].startswith("FAIL: 2 rows: 2 incomparable")
    assert err == ["error: nothing was compared: no row was timed in both runs (2 incomparable; e.g. triton "
                   "16x8192x8192: fewer than 3 raw samples on a side); pass --allow-empty to accept that"]
    unavailable = [row("tinygemm", status=UNAVAILABLE, reason="needs CUDA")]
    code, doc = run_compare(tmp_path / "b", unavailable, unavailable)
    assert code == 1 and "nothing was compared" in capsys.readouterr().err
    code, doc = run_compare(tmp_path / "c", unavailable, unavailable, "--allow-empty")
    assert code == 0 and not doc["failed"] and capsys.readouterr().err == ""
    # One row without samples among timed ones fails by itself: a measurement nobody looked at.
    code, doc = run_compare(tmp_path / "d", [row("triton"), row("cublas")],
                            [row("triton", seed=1), row("cublas", samples_us=[])])
    assert code == 1 and statuses(doc)[("cublas", "16x8192x8192")] == "incomparable"
    code, doc = run_compare(tmp_path / "e", bare, bare, "--allow-empty")
    assert code == 0 and doc["summary"].startswith("ok: 2 rows: 2 incomparable")


@pytest.mark.parametrize("target", ["base/results.json", "new/results.json", "base", "base/rows.jsonl",
                                    "link.json", "new/report.md", "new/latency.png"])
def test_output_never_replaces_a_run_compare_reads(tmp_path, capsys, target):
    base = write(tmp_path / "base", [row()])
    new = write(tmp_path / "new", [row(seed=1)])
    (tmp_path / "base" / "rows.jsonl").write_text("")
    (tmp_path / "new" / "report.md").write_text("the run's report\n")
    (tmp_path / "new" / "latency.png").write_bytes(b"a plot")
    (tmp_path / "link.json").symlink_to(tmp_path / "base" / "results.json")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    for option in ("--output", "--plot"):
        out = str(tmp_path / target)
        if option == "--plot" and not out.endswith(".png"):
            continue
        code = runner.main(["compare", base, new, option, out])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith(f"error: {option} "), err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    # Beside the runs, or a new name inside one, is fine.
    assert runner.main(["compare", base, new, "--output", str(tmp_path / "new" / "compare.md")]) == 0


def _doc(**change):
    """A valid results document, one row, with `change` applied (metadata.X / row.X / top-level keys)."""
    doc = json.loads(results_json([row()], META))
    for k, v in change.items():
        where, _, name = k.partition("__")
        target = {"meta": doc["metadata"], "row": doc["rows"][0], "doc": doc}[where]
        target[name] = v
    return json.dumps(doc)


@pytest.mark.parametrize("setup,message", [
    ("missing", "no such run folder"),
    ("unfinished", "rows.jsonl but no results.json (the run did not finish; rebuild it with: python runner.py "
                   "report"),
    ("results_is_a_folder", "results.json: is a folder; expected a file"),
    ("fifo", "results.json: not a regular file (a pipe, device or socket)"),
    ("/dev/zero", "/dev/zero: not a regular file"),
    ("[" * 100000 + "]" * 100000, "JSON nested more than 32 deep"),
    (_doc(meta__ranks=json.loads("[" * 40 + "]" * 40)), "nested more than 32"),  # parses, too deep to use
    ('{"rows": 3}', "not a qgemm-bench results file"),
    ('{"metadata": [], "rows": []}', 'not a qgemm-bench results file (expected {"metadata": {...}, "rows": [...]})'),
    ("{not json", "bad.json: not JSON (Expecting property name"),
    (_doc(meta__settings="x"), "metadata.settings must be an object, not str"),
    (_doc(doc__rows=[]), "holds no rows (nothing to compare)"),
    (_doc(doc__rows=[3]), "row 1: expected an object, not int"),
    (_doc(row__p50_us="abc"), 'row 1: p50_us="abc": expected a positive finite number or null'),
    (_doc(row__samples_us=None), "row 1: samples_us=null: expected a list of positive finite numbers"),
    (_doc(row__samples_us=[0.0, 0.0, 0.0]), "row 1: samples_us=[0.0, 0.0, 0.0]: expected a list of positive"),
    (_doc(row__samples_us=[-1.0, 2.0, 3.0]), "samples_us=[-1.0, 2.0, 3.0]: expected a list of positive"),
    (_doc(row__round_p50_us=[0.0, 1.0, 1.0]), "round_p50_us=[0.0, 1.0, 1.0]: expected a list of positive"),
    (_doc(row__settings={"group_size": {"a": 1}}), "settings={\"group_size\": {\"a\": 1}}: expected an object"),
    (_doc(row__samples_us=[1.0, "x"]), "samples_us"),
    (_doc(row__M=-1), "row 1: M=-1: expected a positive integer"),
    (_doc(row__status=3), "row 1: status=3: expected text"),
    # Shown as they are: "-16.0x over torch" for a negative p50; a dtype that matched no row of the other run.
    (_doc(row__status="bogus"), 'row 1: status="bogus": expected one of ok, incorrect, error, oom,'),
    (_doc(row__dtype="float8"), 'row 1: dtype="float8": expected bfloat16 or float16'),
    (_doc(row__p50_us=-5.0), "row 1: p50_us=-5.0: expected a positive finite number or null"),
    (_doc(row__p20_us=0.0), "row 1: p20_us=0.0: expected a positive finite number or null"),
    (_doc(row__settings=[1]), "row 1: settings=[1]: expected an object"),
    (_doc(row__settings={"split": 4}), 'row 1: settings {"split": 4} are not int4_gemm\'s'),
    (_doc(row__op="gemm9"), "row 1: unknown operator 'gemm9'"),
    (_doc(meta__model={"model": "tiny"}), "bad.json: a model benchmark run (--model); this reads the GEMM"),
    (_doc(row__speed=1.0), "row 1: unknown field 'speed'"),
    (_doc(row__settings="group=abc"), "row 1: settings 'group=abc': expected 'unscaled', 'group=channel' or"),
    (_doc(row__settings_label="unscaled"), "row 1: settings_label 'unscaled' is not the label of settings "
                                           '{"group_size": 128} (\'group=128\')'),
    (_doc(row__settings="group=64"), "row 1: settings_label 'group=128' is not the label of settings"),
    (_doc(row__settings="g128"), "row 1: settings 'g128': expected 'unscaled', 'group=channel' or 'group=<an even"),
    (_doc(row__settings="group=007"), "row 1: settings 'group=007': expected 'unscaled', 'group=channel' or"),
    (_doc(row__settings="group=3"), "row 1: settings 'group=3': expected 'unscaled', 'group=channel' or"),
    (_doc(row__settings="group=none"), "row 1: settings 'group=none': expected 'unscaled', 'group=channel' or"),
    (_doc(row__settings="bias", row__op="nvfp4_gemm"), "row 1: settings 'bias': expected 'nvfp4' or 'unscaled'"),
    (_doc(row__settings="nvfp4", row__op="split_k_gemm"), "row 1: settings 'nvfp4': expected 'bias' or 'no-bias'"),
    (_doc(row__samples_us=[1.0, 2.0, 12345.678]).replace("12345.678", "NaN"), "samples_us=[1.0, 2.0, NaN]"),
])
def test_bad_inputs_are_one_line_exit_2(tmp_path, capsys, setup, message):
    good = write(tmp_path / "good", [row()])
    bad = tmp_path / "bad"
    if setup == "unfinished":
        bad.mkdir()
        (bad / "rows.jsonl").write_text("{}\n")
    elif setup == "results_is_a_folder":
        (bad / "results.json").mkdir(parents=True)
    elif setup == "fifo":  # reading it would block for ever
        bad.mkdir()
        os.mkfifo(bad / "results.json")
    elif setup == "/dev/zero":  # reading it would never end
        bad = Path(setup)
    elif setup != "missing":
        bad = tmp_path / "bad.json"
        bad.write_text(setup)
    for args in ([good, str(bad)], [str(bad), good]):
        code = runner.main(["compare", *args])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and message in err[0], err


def test_an_empty_run_path_is_refused_not_read_as_the_current_folder(tmp_path, capsys, monkeypatch):
    good = write(tmp_path / "good", [row()])
    monkeypatch.chdir(good)  # a run folder: "" compared it with itself, exit 0
    for args in ([good, ""], ["", good]):
        code = runner.main(["compare", *args])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and err == ["error: compare '': expected a run folder or its results.json"], err


@pytest.mark.parametrize("args,message", [
    (["--plot", "out.xyz"], "--plot out.xyz: expected a file ending in .png, .svg, .pdf"),
    (["--plot", "nowhere/ratios.png"], "--plot nowhere/ratios.png: no such folder"),
    (["--output", "nowhere/report.md"], "--output nowhere/report.md: no such folder"),
    (["--threshold", "nan"], "argument --threshold: must be a finite number"),
    (["--threshold", "inf"], "argument --threshold: must be a finite number"),
    (["--threshold", "-0.1"], "argument --threshold: '-0.1' is out of range"),
    (["--small-us", "-1"], "argument --small-us: '-1' is out of range"),
    (["--alpha", "1"], "argument --alpha: '1' is out of range"),
    (["--format", "html"], "argument --format: invalid choice: 'html'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_options_are_one_line_exit_2(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    good = write(tmp_path / "good", [row()])
    code = runner.main(["compare", good, good, *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good"]  # nothing written


def test_compare_as_a_module_runs_the_comparison(tmp_path):
    base = write(tmp_path / "base", [row(us=100)])
    new = write(tmp_path / "new", [row(us=130, seed=1)])
    r = subprocess.run([sys.executable, "-m", "qgemm_bench.harness.compare", base, new, "--format", "text"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stdout.startswith("FAIL: 1 rows: 1 regressed"), (r.stdout, r.stderr)


def test_plot_formats_and_an_interrupted_run_are_said(tmp_path, capsys):
    base = write(tmp_path / "base", [row("triton"), row("cublas")])
    new = write(tmp_path / "new", [row("triton", seed=1)], interrupted=True, stopped="terminated (SIGTERM)")
    code = runner.main(["compare", base, new, "--plot", str(tmp_path / "ratios.svg")])
    md = capsys.readouterr().out
    assert code == 1 and "**The new run stopped early** (terminated (SIGTERM))" in md
    assert (tmp_path / "ratios.svg").read_text().startswith("<?xml")


def rounds_row(round_us, spread=0.3, n=20, seed=0, **kw) -> Row:
    """A row measured in rounds: tight samples around each round's own level."""
    rng = np.random.default_rng(seed)
    rounds = [list(us + spread * rng.standard_normal(n)) for us in round_us]
    samples = [float(x) for r in rounds for x in r]
    return row(samples_us=samples, p50_us=float(np.median(samples)),
               round_p50_us=[float(np.median(r)) for r in rounds], **kw)


def test_rounds_absorb_clock_drift_between_rounds(tmp_path, capsys):
    # The H100 A/A pattern: each round tight, the rounds' levels 10% apart
    # (power-capped clocks). Sample-level tests call the ~9% shift significant.
    base = rounds_row([52, 56, 53], seed=1)
    new = rounds_row([58, 60, 54], seed=2)
    code, doc = run_compare(tmp_path, [base], [new], "--threshold", "0.05")
    r = doc["rows"][0]
    assert r["note"] == "rounds 3 vs 3" and r["p_value"] > 0.01 and r["ci_low"] < 1 < r["ci_high"]
    assert r["status"] == "noisy" and code == 0
    # The text table's us columns are pooled medians, its ratio the rounds': a line says so (a reader took
    # 130.1 / 131.3 against ratio 1.136 for a bug), and only where a row used rounds.
    b, n = write(tmp_path / "b", [base]), write(tmp_path / "n", [new])
    assert runner.main(["compare", b, n, "--format", "text", "--threshold", "0.05"]) == 0
    assert "base us / new us: medians of the pooled samples" in capsys.readouterr().out
    # The same samples without their rounds: a confident (false) regression.
    base.round_p50_us, new.round_p50_us = [], []
    code, doc = run_compare(tmp_path / "flat", [base], [new], "--threshold", "0.05")
    assert doc["rows"][0]["status"] == "regressed" and code == 1
    b, n = write(tmp_path / "fb", [base]), write(tmp_path / "fn", [new])
    assert runner.main(["compare", b, n, "--format", "text", "--threshold", "0.05"]) == 1
    assert "pooled samples" not in capsys.readouterr().out


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


def test_a_median_that_moved_without_the_floor_says_so(tmp_path):
    # Bimodal samples (whole replays fast or slow, the H100 split-K case):
    # the same kernel draws a different mix of modes. Still flagged (a one-
    # round test cannot tell), but the note says the fastest tenth held.
    def mixed(slow_share, seed):
        r = np.random.default_rng(seed)
        samples = np.where(r.random(90) < slow_share, 5.7, 3.9) + 0.01 * r.standard_normal(90)
        return row(samples_us=[float(x) for x in samples], p50_us=float(np.median(samples)))

    base = mixed(0.3, 1)
    code, doc = run_compare(tmp_path, [base], [mixed(0.7, 2)])
    r = doc["rows"][0]
    assert r["status"] == "regressed" and code == 1
    assert r["note"].startswith("fastest tenth unchanged (p10 3.8") and "--repeats 3" in r["note"], r["note"]
    # A slowdown of every call moves the floor too: no such note.
    slower = [x * 1.3 for x in base.samples_us]
    code, doc = run_compare(tmp_path / "all", [base], [row(samples_us=slower, p50_us=float(np.median(slower)))])
    assert doc["rows"][0]["status"] == "regressed" and doc["rows"][0]["note"] == ""
