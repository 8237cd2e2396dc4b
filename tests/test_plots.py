"""Plots and report.md a person reads at a glance: every PNG of a smoke run
(a real CPU run), a single-shape run and a default-preset run (rows built in
the results schema, no kernels run) holds drawn data; one M per layer gives
bars, several give lines against M; the legend lists only what is drawn; no
matplotlib warning (they fail these tests); report.md's numbers fit."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from matplotlib import image

from qgemm_bench.backends.checks import INTERPRETER
from qgemm_bench.harness import plots, report
from qgemm_bench.harness.assemble import assemble
from qgemm_bench.harness.results import OK, Row, frame, row_from_dict
from qgemm_bench.operators import int4_gemm
from qgemm_bench.types import Shape

pytestmark = pytest.mark.filterwarnings("error")  # a matplotlib (or pandas) warning fails the test

REPO = Path(__file__).resolve().parent.parent
H200 = {"copy_GBps": 4100.0, "bf16_matmul_TFLOPs": 780.0}
# p50 = weight-read floor x a backend's factor (+ launch), in the shape a GPU run has
FACTOR = {"torch": 9.0, "cublas": 3.5, "tinygemm": 1.4, "triton": 1.2, "helion": 1.5}


def meta(gpu="NVIDIA H200", ceilings=H200, dtype="bfloat16"):
    return {"settings": {"op": "int4_gemm", "dtype": dtype, "baseline": "torch", "op_settings": {"group_size": 128},
                         "timing": "graph" if gpu else "cpu-wall", "warmup_ms": 25, "rep_ms": 100},
            "gpu": gpu, "ceilings": ceilings, "date": "2026-11-28", "device": "cuda:0" if gpu else "cpu",
            "torch": "2.13", "triton": "3.9", "helion": "1.4", "wall_s": 80.0,
            "phase_s": {f"prepare {b}": 10.0 for b in FACTOR} | {"inputs": 1.0, "measure triton": 2.0}}


def gpu_rows(shapes, m):
    """Rows of a GPU run, one per backend and shape, through assemble (which
    derives FLOP/s, bytes/s, %SOL and speedup as a run does)."""
    recs = []
    for s in shapes:
        nbytes = int4_gemm.bytes(s, torch.bfloat16, int4_gemm.Settings())
        floor_us = max(nbytes / (H200["copy_GBps"] * 1e9), int4_gemm.flops(s, int4_gemm.Settings()) / 780e12) * 1e6
        for b, f in FACTOR.items():
            us = floor_us * f + 3.0
            samples = [us * 0.99, us, us * 1.01]
            recs.append((0, Row(op="int4_gemm", backend=b, M=s.M, K=s.K, N=s.N, dtype="bfloat16",
                                settings={"group_size": 128}, settings_label="group=128", device="cuda:0",
                                timing="graph", status=OK, samples_us=samples, p50_us=us, p20_us=samples[0],
                                p80_us=samples[2], weight_mib=nbytes / 2**20, peak_extra_mib=0.5 * (b == "torch"))))
    return assemble(recs, m)


def drawn(png: Path) -> None:
    """The PNG is not blank: many distinct, non-white pixels."""
    px = image.imread(png)[..., :3]
    assert px.std() > 0.05, png.name
    assert (px.min(axis=2) < 0.9).mean() > 0.02, png.name  # > 2% of pixels carry ink


def write_and_check(rows, m, x, folder):
    folder.mkdir()
    names = plots.write(frame(rows), m, x, folder)
    for name in names:
        drawn(folder / name)
    md = report.markdown(rows, m, names)
    return names, md


def series(fig):
    """(label, points) of every line with data and the number of bars, over the figure."""
    lines = [(ln.get_label(), len(ln.get_xdata())) for ax in fig.axes for ln in ax.get_lines()
             if len(ln.get_xdata())]
    bars = sum(len(c) for ax in fig.axes for c in ax.containers)
    return lines, bars


def legend_labels(fig):
    return [t.get_text() for lg in fig.legends for t in lg.get_texts()]


def test_default_preset_draws_lines_against_m_with_floor_and_peer(tmp_path):
    m = meta()
    rows = gpu_rows(int4_gemm.PRESETS["llama"], m)
    names, md = write_and_check(rows, m, "M", tmp_path / "run")
    assert names == ["latency.png", "speedup.png", "roofline.png", "memory.png"]
    fig = plots.latency_figure(frame(rows), m, "M")
    lines, bars = series(fig)
    layers = {(s.K, s.N) for s in int4_gemm.PRESETS["llama"]}
    assert bars == 0 and len([a for a in fig.axes if a.get_visible() and a.get_lines()]) == len(layers)
    per_m = len({s.M for s in int4_gemm.PRESETS["llama"]})
    assert ("triton", per_m) in lines and ("fastest peer", per_m) in lines
    labels = legend_labels(fig)
    assert labels[:5] == list(FACTOR) and "fastest peer" in labels and labels[5].startswith("weight-read floor")
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks == [str(v) for v in sorted({s.M for s in int4_gemm.PRESETS["llama"]})]  # the measured M, as M


def test_a_single_shape_draws_bars_and_no_roofline(tmp_path):
    m = meta()
    rows = gpu_rows([Shape(16, 8192, 8192)], m)
    names, md = write_and_check(rows, m, "M", tmp_path / "run")
    assert names == ["latency.png", "speedup.png", "memory.png"]
    assert plots.NO_ROOFLINE in md
    fig = plots.latency_figure(frame(rows), m, "M")
    lines, bars = series(fig)
    assert bars == len(FACTOR) and lines == []  # no lone dots; the floor a dash over the bars
    labels = legend_labels(fig)
    assert sorted(labels) == sorted([*FACTOR, "weight-read floor (min bytes / 4100 GB/s)"])
    assert "fastest peer" not in labels  # not drawn on bars, so not in the legend
    assert "per shape" in fig.get_suptitle()


def test_a_smoke_run_on_cpu_draws_bars(tmp_path):
    """A real run of the smoke preset (the natively run backends: seconds)."""
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-W", "error::UserWarning", str(REPO / "runner.py"), "--op", "int4_gemm",
                        "--backends", "cublas", "--rep", "1", "--warmup", "0", "--output-dir", str(out)],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stderr, r.stderr
    doc = json.loads((out / "results.json").read_text())
    rows = [row_from_dict(d) for d in doc["rows"]]
    for name in ("latency.png", "speedup.png", "roofline.png", "memory.png"):
        drawn(out / name)
    fig = plots.latency_figure(frame(rows), doc["metadata"], "M")
    lines, bars = series(fig)
    assert lines == [] and bars == 2 * len(int4_gemm.PRESETS["smoke"])  # torch and cublas at each shape
    assert legend_labels(fig) == ["torch", "cublas"]  # no floor (no ceilings on a CPU), no peer band
    assert "vs best peer" not in (out / "report.md").read_text()  # CPU times are not compared with peers


def test_a_cpu_report_says_triton_interpreter_once_and_shows_no_speedup_for_it(tmp_path):
    m = meta(gpu=None, ceilings={}, dtype="float16")
    recs = []
    for s in int4_gemm.PRESETS["smoke"]:
        for b, us, reason in (("torch", 30.0, ""), ("cublas", 10.0, ""), ("triton", 2e4, INTERPRETER),
                              ("helion", 4e4, f"{INTERPRETER}; helion config of nearest bucket M1_K128_N64")):
            recs.append((0, Row(op="int4_gemm", backend=b, M=s.M, K=s.K, N=s.N, dtype="float16", settings={},
                                device="cpu", timing="cpu-wall", status=OK, reason=reason, samples_us=[us] * 3,
                                p50_us=us, p20_us=us, p80_us=us, weight_mib=0.01)))
    rows = assemble(recs, m)
    names, md = write_and_check(rows, m, "M", tmp_path / "run")
    assert md.count("Triton interpreter") == 1 and "triton, helion ran in it" in md
    assert md.count("helion config of nearest bucket M1_K128_N64") == len(int4_gemm.PRESETS["smoke"])
    assert "vs best peer" not in md  # CPU and interpreter times are not compared with peers
    results = md.split("## Results")[1].split("##")[0]
    speedups = {line.split("|")[2].strip(): line.split("|")[9].strip() for line in results.splitlines()
                if line.startswith("| ") and "---" not in line and "shape" not in line}
    assert speedups == {"torch": "1.00x", "cublas": "3.00x", "triton": "", "helion": ""}
    fig = plots.speedup_figure(frame([r for r in rows if not report.interpreted(r)]), m, "M")
    assert sorted(legend_labels(fig)) == ["cublas", "torch"]


def test_a_run_records_the_qgemm_and_inductor_variables_set_and_its_report_shows_them(tmp_path, monkeypatch):
    """What changes a run without a flag (QGEMM_PDL=0, TORCHINDUCTOR_*) is in
    its metadata and report.md; other variables and QGEMM_GIT_COMMIT (the
    commit itself) are not; with none set, no line."""
    from qgemm_bench.harness import environment

    for k in [k for k in os.environ if k.startswith(environment.RECORDED_ENV_PREFIXES)]:
        monkeypatch.delenv(k)
    assert environment.recorded_env() == {}
    monkeypatch.setenv("QGEMM_PDL", "0")
    monkeypatch.setenv("TORCHINDUCTOR_ENABLE_PDL", "1")
    monkeypatch.setenv("QGEMM_GIT_COMMIT", "abc1234")
    monkeypatch.setenv("SOME_OTHER", "x")
    env = environment.collect(torch.device("cpu"))["env"]
    assert env == {"QGEMM_PDL": "0", "TORCHINDUCTOR_ENABLE_PDL": "1"}
    rows = gpu_rows(int4_gemm.PRESETS["smoke"], meta())
    _, md = write_and_check(rows, {**meta(), "env": env}, "M", tmp_path / "run")
    assert re.search(r"\| environment +\| QGEMM_PDL=0 TORCHINDUCTOR_ENABLE_PDL=1 +\|", md), md[:800]
    _, md = write_and_check(rows, meta(), "M", tmp_path / "run2")
    assert "environment" not in md


def test_report_numbers_have_three_significant_digits_and_fitting_units(tmp_path):
    m = meta()
    rows = gpu_rows(int4_gemm.PRESETS["llama"], m)
    md = report.markdown(rows, m, [])
    results = md.split("## Results")[1].split("##")[0]
    body = [[c.strip() for c in line.strip("|").split("|")] for line in results.splitlines()
            if line.startswith("| ") and "---" not in line][1:]
    assert len(body) == len(rows)
    for cells in body:
        for cell in cells[5:7]:  # FLOP/s, bytes/s
            assert re.fullmatch(r"(\d{3}|\d{2}\.\d|\d\.\d\d) [TGMk]?", cell), cell
    cpu = Row(op="int4_gemm", backend="torch", M=1, K=128, N=64, dtype="float16", settings={}, device="cpu",
              timing="cpu-wall", status=OK, p50_us=1e4, p20_us=1e4, p80_us=1e4, tflops=8.48e-10, gbps=1.2e-4)
    assert report.table_rows([cpu])[0][5:7] == ["848", "120 k"]  # never 0.000000000848
    # the six largest phases of seven, then "..." (the row stays one screen wide)
    assert re.search(r"\| wall time \(s\) +\| 80 \(prepare torch 10, [^|]*helion 10, inputs 1, \.\.\.\) +\|", md)
    assert INTERPRETER not in md
