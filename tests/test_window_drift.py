"""scripts/window_drift.py on a made-up run: a row whose samples step up
halfway is listed with its drift, a steady one and one with too few
samples are not; a path that is no run ends in one line, exit 2."""

import json

from qgemm_bench.harness.outputs import results_json
from qgemm_bench.harness.results import OK, Row
from tests.support import load_script


def row(backend, samples, status=OK):
    return Row(op="int4_gemm", backend=backend, M=4096, K=4096, N=28672, dtype="bfloat16", settings={},
               device="cuda:0", timing="graph", status=status, samples_us=samples, p50_us=samples[0])


def test_a_step_inside_the_window_is_listed(tmp_path, capsys):
    rows = [row("fbgemm", [100.0] * 20 + [118.0] * 20), row("triton", [100.0, 101.0] * 20),
            row("cublas", [100.0] * 5 + [130.0] * 5), row("humming", [100.0] * 20 + [130.0] * 20, "incorrect")]
    (tmp_path / "results.json").write_text(results_json(rows, {"settings": {}}))
    assert json.loads((tmp_path / "results.json").read_text())["rows"][0]["samples_us"][-1] == 118.0
    assert load_script("window_drift").main([str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert " 1 of 2 rows ran more than 5% slower in the second half of their window" in out[0], out
    assert out[1].split()[:2] == ["18.0%", "fbgemm"] and out[-1] == "  by backend: fbgemm 1"


def test_not_a_run_is_one_line(tmp_path, capsys):
    assert load_script("window_drift").main([str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
