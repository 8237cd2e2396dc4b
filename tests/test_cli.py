"""The CLI: error paths, a smoke run writing every output, failures as rows;
the GPU timing paths (marked gpu)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import runner
from qgemm_bench.backends.registry import Backend, Prepared
from qgemm_bench.errors import InputError
from qgemm_bench.harness import results
from qgemm_bench.harness.outputs import SAMPLE_DECIMALS
from tests.support import extra_backends, needs_gpu

REPO = Path(__file__).resolve().parent.parent
OUTPUTS = ["rows.jsonl", "results.csv", "results.json", "report.md",
           "latency.png", "speedup.png", "roofline.png", "memory.png"]


def cli(*args):
    return subprocess.run([sys.executable, str(REPO / "runner.py"), *args], capture_output=True, text=True,
                          cwd=REPO, timeout=300)


@pytest.mark.parametrize("args,message", [
    (["--op", "int3_gemm"], "unknown operator 'int3_gemm'"),
    (["--op", "int4_gemm", "--backends", "torch,cutlass"], "unknown backend 'cutlass'"),
    (["--op", "int4_gemm", "--baseline", "nope"], "unknown backend 'nope'"),
    (["--op", "int4_gemm", "--shape", "1,2"], "expected three integers M,K,N"),
    # A leading '-' used to make argparse say only "expected one argument".
    (["--op", "int4_gemm", "--shape", "-1,128,16"], "--shape '-1,128,16': sizes must be positive integers"),
    (["--op", "int4_gemm", "--shape", "0,128,64"], "sizes must be positive integers"),
    (["--op", "int4_gemm", "--shape", "1.5,128,64"], "sizes must be positive integers"),
    # 10**12 in any dimension: refused before allocating anything.
    (["--op", "int4_gemm", "--shape", "1000000000000,128,64"], "needs at least"),
    (["--op", "int4_gemm", "--shape", "1,1000000000000,64"], "needs at least"),
    (["--op", "int4_gemm", "--shape", "1,128,1000000000000"], "needs at least"),
    (["--op", "split_k_gemm", "--shape", "16,1000000000000,16"], "needs at least"),
    (["--op", "int4_gemm", "--shape", "1,129,64"], "K=129 is odd"),
    (["--op", "int4_gemm", "--shape", "1,192,64"], "not divisible by group_size=128"),
    (["--op", "int4_gemm", "--group-size", "3"], "positive even integer"),
    (["--op", "int4_gemm", "--group-size", "abc"], "expected an even integer"),
    (["--op", "nvfp4_gemm", "--shape", "1,40,64"], "block size 16"),
    (["--op", "int4_gemm", "--dtype", "float64"], "unsupported dtype 'float64'"),
    (["--op", "int4_gemm", "--device", "cuda"], "no CUDA device"),
    (["--op", "int4_gemm", "--device", "tpu"], "--device 'tpu'"),
    (["--op", "nvfp4_gemm", "--group-size", "64"], "--group-size applies to int4_gemm only"),
    (["--op", "int4_gemm", "--bias"], "--bias applies to split_k_gemm only"),
    (["--op", "int4_gemm", "--shapes", "huge"], "unknown preset 'huge'"),
    (["--op", "int4_gemm", "--timing", "events"], "CPU runs are timed with a wall clock"),
    (["--op", "int4_gemm", "--rep", "0"], "argument --rep: '0' is out of range"),
    # Non-finite and out-of-range numbers: refused up front (inf warm-up hung, nan ran every row as an error).
    (["--op", "int4_gemm", "--warmup", "inf"], "argument --warmup: must be a finite number, not 'inf'"),
    (["--op", "int4_gemm", "--warmup", "nan"], "argument --warmup: must be a finite number, not 'nan'"),
    (["--op", "int4_gemm", "--rep", "nan"], "argument --rep: must be a finite number"),
    (["--op", "int4_gemm", "--rep", "inf"], "argument --rep: must be a finite number"),
    (["--op", "int4_gemm", "--rep", "-inf"], "argument --rep: must be a finite number"),
    (["--op", "int4_gemm", "--warmup", "-1"], "argument --warmup: '-1' is out of range"),
    (["--op", "int4_gemm", "--warmup", "1e12"], "argument --warmup: '1e12' is out of range"),
    (["--op", "int4_gemm", "--rep", "abc"], "argument --rep: expected a number, not 'abc'"),
    (["--op", "int4_gemm", "--seed", "99999999999999999999999"], "argument --seed: '99999999999999999999999' is "
                                                                 "out of range"),
    (["--op", "int4_gemm", "--seed", "-1"], "argument --seed: '-1' is out of range"),
    (["--op", "int4_gemm", "--seed", "1.5"], "argument --seed: expected an integer"),
    (["--op", "int4_gemm", "--repeats", "0"], "argument --repeats: '0' is out of range"),
    (["--op", "int4_gemm", "--repeats", "nan"], "argument --repeats: expected an integer"),
    (["--op", "int4_gemm", "--stall-timeout", "-1"], "argument --stall-timeout: '-1' is out of range"),
    (["--op", "int4_gemm", "--stall-timeout", "inf"], "argument --stall-timeout: must be a finite number"),
    (["--op", "int4_gemm", "--stall-timeout", "1e9"], "argument --stall-timeout: '1e9' is out of range"),
    (["--model", "tiny", "--stall-timeout", "-1"], "argument --stall-timeout: '-1' is out of range"),
    (["--model", "tiny", "--stall-timeout", "1e9"], "argument --stall-timeout: '1e9' is out of range"),
    # The sweep's options with --model were ignored without a word.
    (["--model", "tiny", "--shapes", "llama", "--autotune", "full"],
     "--shapes, --autotune: the GEMM benchmarks' (--op), not --model's"),
    (["--model", "tiny", "--repeats", "3"], "--repeats: the GEMM benchmarks' (--op)"),
    (["--model", "tiny", "--group-size", "64"], "--group-size: the GEMM benchmarks' (--op)"),
    # And --model's own options with --op.
    (["--op", "int4_gemm", "--unfused", "--lm-head"], "--lm-head, --unfused: --model's, not the GEMM benchmarks'"),
    (["--op", "int4_gemm", "--batch", "1,16"], "--batch: --model's, not the GEMM benchmarks' (--op)"),
    (["--op", "int4_gemm", "--autotune-budget", "-inf"], "--autotune-budget must be a finite number"),
    (["--op", "int4_gemm", "--autotune-budget", "nan"], "--autotune-budget must be a finite number"),
    # Ignored without --autotune: the run went on with the checked-in configs.
    (["--op", "int4_gemm", "--autotune-budget", "60"], "--autotune-budget needs --autotune quick or full"),
    (["--op", "int4_gemm", "--group-size", "-2"], "positive even integer"),
    # --backends: ',' used to run everything; repeated names gave duplicate rows.
    (["--op", "int4_gemm", "--backends", ","], "--backends ',': an empty name"),
    (["--op", "int4_gemm", "--backends", "torch,,cublas"], "an empty name"),
    (["--op", "int4_gemm", "--backends", "torch,torch,cublas"], "names torch more than once"),
    (["--op", "int4_gemm", "--shape", "1,128,64", "--shape", "1x128x64"], "--shape names 1x128x64 more than once"),
    (["--op", "int4_gemm", "--baseline", ""], "--baseline '': expected a backend name"),  # ran with torch's
    # argparse's own errors: one line too, no usage block.
    (["--op", "int4_gemm", "--timing", "bogus"], "argument --timing: invalid choice: 'bogus'"),
    (["--op", "int4_gemm", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["--op", "int4_gemm", "--shape"], "argument --shape: expected one argument"),
    ([], "--op (a GEMM benchmark) or --model"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, capsys, tmp_path):
    if "--device" in args and args[args.index("--device") + 1] == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    # In-process (an exception would escape main); one real process below.
    code = runner.main([*args, "--output-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not (tmp_path / "run").exists()  # nothing half-written


def test_bad_input_in_a_real_process():
    r = cli("--op", "int4_gemm", "--shape", "1,129,64")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == ["error: shape 1x129x64: K=129 is odd; int4 packs two values per byte "
                                             "along K"]


@pytest.mark.parametrize("text,message", [
    ("{not json", "not a readable JSON file"),
    ('{"gpu": "h100"}', 'expected {"kernels"'),
    ('{"kernels": {"weight_only": {"M16": {"config": {}}}}}', "found 'M16'"),
    ('{"kernels": {"weight_only": {"M16_K64_N64": {"us": 1}}}}', "found 'M16_K64_N64'"),
    ('{"kernels": {"weight_only": []}}', "kernel 'weight_only'"),
])
def test_bad_helion_configs_file_is_refused_before_the_run(text, message, capsys, tmp_path):
    bad = tmp_path / "configs.json"
    bad.write_text(text)
    code = runner.main(["--op", "int4_gemm", "--helion-configs", str(bad), "--output-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--helion-configs" in lines[0] and message in lines[0], err
    assert not (tmp_path / "run").exists()


def test_a_helion_configs_file_on_cpu_is_said_unused_in_the_row(tmp_path):
    # On CPU the interpreter runs its own tiles: a row that took the file's config silently would mislead.
    good = tmp_path / "configs.json"
    good.write_text('{"kernels": {"int4_gemm_fused": {"M1_K128_N64": {"config": {"block_sizes": [16, 64]}}}}}')
    out = tmp_path / "run"
    assert runner.main(["--op", "int4_gemm", "--backends", "helion", "--shape", "1,128,64", "--device", "cpu",
                        "--rep", "1", "--warmup", "0", "--no-plots", "--helion-configs", str(good),
                        "--output-dir", str(out)]) == 0
    rows = [r for r in json.loads((out / "results.json").read_text())["rows"] if r["backend"] == "helion"]
    assert rows and all(r["status"] == "ok" and "--helion-configs not used on CPU" in r["reason"] for r in rows)


def test_output_dir_that_holds_files_is_refused(tmp_path):
    (tmp_path / "old.txt").write_text("x")
    r = cli("--op", "int4_gemm", "--output-dir", str(tmp_path))
    assert r.returncode == 2 and "already holds files" in r.stderr


def test_help_and_listings(capsys):
    # --list-ops as its own process (its imports, its exit status; the CPU
    # listing below is one too), --help and an operator's backends in this one.
    r = cli("--list-ops")
    assert r.returncode == 0 and all(op in r.stdout for op in ("int4_gemm", "nvfp4_gemm", "split_k_gemm"))
    with pytest.raises(SystemExit) as e:
        runner.main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "--timing" in out and "rotating" in out
    assert runner.main(["--list-backends", "--op", "int4_gemm"]) == 0
    out = capsys.readouterr().out
    assert "tinygemm" in out and "needs a CUDA device" in out
    # With --model: the model's backends, bf16 and the weight-only operators' (not split-K's)
    assert runner.main(["--list-backends", "--model", "tiny"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--model backends: bf16") and "nvfp4_gemm:" in out and "split_k_gemm" not in out
    # --list-ops with --op lists that operator alone (it ignored --op, a bad one too); the two listings are one
    # or the other (the second was dropped without a word).
    assert runner.main(["--list-ops", "--op", "nvfp4_gemm"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("nvfp4_gemm: ") and "int4_gemm" not in out and "split_k_gemm" not in out
    for argv, message in ((["--list-ops", "--op", "bogus"], "unknown operator 'bogus'"),
                          (["--list-ops", "--list-backends"], "not allowed with argument --list-ops")):
        assert runner.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU listing")
def test_list_backends_on_cpu_says_what_runs_and_stays_aligned():
    from qgemm_bench.backends import registry

    r = cli("--list-backends")
    assert r.returncode == 0, r.stderr
    lines = {line.split()[0]: line for line in r.stdout.splitlines() if line.startswith("  ")}
    # The runner runs triton and helion in the interpreter on CPU: the listing must not say otherwise.
    for name in ("triton", "helion", "triton_deterministic"):
        assert "[runs here" in lines[name], lines[name]
    assert "[runs here: torch.matmul on the CPU" in lines["cublas"]
    # Every summary starts in one column, the longest name (triton_deterministic) included.
    columns = set()
    for op in ("int4_gemm", "nvfp4_gemm", "split_k_gemm"):
        for b in registry.for_op(op):
            line = next(v for v in r.stdout.splitlines() if v.startswith(f"  {b.name} ") and b.summary in v)
            columns.add(line.index(b.summary))
    assert len(columns) == 1, columns


def read_run(folder: Path):
    doc = json.loads((folder / "results.json").read_text())
    return doc["metadata"], doc["rows"]


def test_smoke_run_writes_every_output(tmp_path, capsys):
    out = tmp_path / "run"
    code = runner.main(["--op", "int4_gemm", "--backends", "torch,cublas", "--rep", "5", "--warmup", "1",
                        "--output-dir", str(out)])
    assert code == 0
    for name in OUTPUTS:
        assert (out / name).stat().st_size > 0, name
    meta, rows = read_run(out)
    assert len(rows) == 4 * 2  # smoke shapes x backends
    assert meta["settings"]["dtype"] == "float16" and meta["settings"]["timing"] == "cpu-wall"
    assert meta["torch"] == torch.__version__ and "date" in meta and "git_commit" in meta
    assert meta["wall_s"] > 0 and {"inputs", "prepare torch", "measure cublas"} <= set(meta["phase_s"])
    assert meta["interrupted"] is False and meta["stopped"] == ""
    for r in rows:
        assert r["status"] == "ok" and r["timing"] == "cpu-wall"
        assert len(r["samples_us"]) >= 3 and r["p20_us"] <= r["p50_us"] <= r["p80_us"]
        assert r["rel_err"] <= r["tolerance"] and r["tflops"] > 0 and r["gbps"] > 0
    assert [r["speedup"] for r in rows if r["backend"] == "torch"] == [1.0] * 4
    meta2, loaded = results.load(out)
    assert meta2 == meta and [r.to_dict() for r in loaded] == rows
    assert rows[0]["settings"] == {"group_size": 128} and rows[0]["settings_label"] == "group=128"
    csv = pd.read_csv(out / "results.csv")
    assert len(csv) == 8 and "samples_us" not in csv.columns
    assert len((out / "rows.jsonl").read_text().splitlines()) == 8
    printed = capsys.readouterr().out
    assert "1x128x64" in printed and "speedup = torch p50" in printed and "\nwall time " in printed


def test_failing_and_wrong_backends_become_rows(tmp_path, monkeypatch):
    def boom(case, inputs):
        raise RuntimeError("kernel exploded\nsecond line")

    def wrong(case, inputs):
        x = inputs.x
        return Prepared(lambda: torch.zeros(x.shape[0], case.shape.N, dtype=x.dtype) + 1)

    def cannot(case):
        return "needs a unicorn"

    extra_backends(monkeypatch, "int4_gemm", [
        Backend("int4_gemm", "boom", "raises", boom), Backend("int4_gemm", "wrong", "wrong answer", wrong),
        Backend("int4_gemm", "nope", "unavailable", boom, cannot)])
    out = tmp_path / "run"
    code = runner.main(["--op", "int4_gemm", "--backends", "boom,wrong,nope", "--shape", "3,256,40",
                        "--shape", "1,128,64", "--rep", "2", "--warmup", "0", "--output-dir", str(out)])
    assert code == 0
    _, rows = read_run(out)
    by = {(r["backend"], r["M"]): r for r in rows}
    assert len(rows) == 2 * 4
    for m in (3, 1):
        assert by[("torch", m)]["status"] == "ok"
        assert by[("boom", m)]["status"] == "error"
        assert by[("boom", m)]["reason"] == "RuntimeError: kernel exploded"
        assert by[("wrong", m)]["status"] == "incorrect" and by[("wrong", m)]["speedup"] is None
        assert by[("nope", m)]["status"] == "unavailable" and by[("nope", m)]["reason"] == "needs a unicorn"
    assert "kernel exploded" in (out / "errors.log").read_text()
    report = (out / "report.md").read_text()
    assert "incorrect" in report and "relative error" in report


def test_ctrl_c_keeps_what_was_measured(tmp_path, monkeypatch):
    calls = {"n": 0}

    def interrupt_second_shape(case, inputs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        x, wd = inputs.x, inputs.w
        return Prepared(lambda: x @ torch.zeros(case.shape.K, case.shape.N, dtype=x.dtype), resident=(wd,))

    extra_backends(monkeypatch, "int4_gemm", [Backend("int4_gemm", "ctrlc", "interrupts", interrupt_second_shape)])
    out = tmp_path / "run"
    code = runner.main(["--op", "int4_gemm", "--backends", "ctrlc", "--rep", "2", "--warmup", "0",
                        "--output-dir", str(out)])
    assert code == 130
    meta, rows = read_run(out)
    assert meta["interrupted"] is True
    assert [(r["backend"], r["M"]) for r in rows] == [("torch", 1), ("ctrlc", 1), ("torch", 3)]
    assert (out / "report.md").exists() and len((out / "rows.jsonl").read_text().splitlines()) == 3


def test_repeats_interleave_backends_and_pool_samples(tmp_path, monkeypatch):
    from qgemm_bench.operators import int4_gemm

    order = []

    def traced(name, wrong_on_round=None):
        def prepare(case, inputs):
            order.append(name)
            y = int4_gemm.reference(inputs).to(inputs.x.dtype)
            if order.count(name) == wrong_on_round:
                y = y + 1
            return Prepared(lambda: y.clone())
        return prepare

    extra_backends(monkeypatch, "int4_gemm", [Backend("int4_gemm", "a", "right", traced("a")),
                                             Backend("int4_gemm", "b", "wrong on round 2", traced("b", 2))])
    out = tmp_path / "run"
    code = runner.main(["--op", "int4_gemm", "--backends", "a,b", "--shape", "1,128,64", "--repeats", "3",
                        "--rep", "2", "--warmup", "0", "--no-plots", "--output-dir", str(out)])
    assert code == 0
    meta, rows = read_run(out)
    assert meta["settings"]["repeats"] == 3
    # Interleaved round by round, [torch, a, b] reversed in odd rounds (sweep.round_order).
    assert order == ["a", "b", "b", "a", "a", "b"]
    by = {r["backend"]: r for r in rows}
    assert list(by) == ["torch", "a", "b"]
    for r in (by["torch"], by["a"]):
        assert r["status"] == "ok" and len(r["samples_us"]) >= 9  # 3 rounds of >= 3 samples
        # results.json keeps the samples to SAMPLE_DECIMALS (the p50 is of the unrounded ones): within that
        assert r["p50_us"] == pytest.approx(float(np.median(r["samples_us"])), abs=10.0 ** -SAMPLE_DECIMALS)
        assert len(r["round_p50_us"]) == 3 and min(r["round_p50_us"]) <= r["p50_us"] <= max(r["round_p50_us"])
    assert by["b"]["status"] == "incorrect" and by["b"]["speedup"] is None  # one bad round taints the row


def test_autotune_flags_are_checked(capsys, tmp_path):
    for args, message in [(["--autotune", "quick"], "--autotune needs a CUDA device"),
                          (["--save-configs"], "--save-configs needs --autotune")]:
        code = runner.main(["--op", "int4_gemm", *args, "--output-dir", str(tmp_path / "run")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and message in err[0], err


# ------------------------------------------------------------------ GPU


@pytest.mark.gpu
@needs_gpu
def test_graph_timing_rotates_past_l2():
    from qgemm_bench.backends import registry
    from qgemm_bench.harness import timing
    from qgemm_bench.harness.measure import copies_needed
    from qgemm_bench.operators import int4_gemm
    from tests.support import case

    cuda = torch.device("cuda", 0)
    c = case(int4_gemm, (1, 4096, 4096), torch.bfloat16, cuda)
    backend = registry.get("int4_gemm", "cublas")  # a 32 MiB bf16 weight
    inputs = int4_gemm.make_inputs(c, 0)
    p = backend.prepare(c, inputs)
    out = p.fn()
    l2 = torch.cuda.get_device_properties(cuda).L2_cache_size
    n = copies_needed(c, inputs, p, out, l2)
    assert n * 32 * 2**20 >= 2 * l2 and n >= 2
    fns = [p.fn] + [backend.prepare(c, inputs.clone()).fn for _ in range(n - 1)]
    t = timing.time_graph(fns, warmup_ms=5, rep_ms=20)
    assert t.mode == "graph" and len(t.samples_us) >= 10 and t.calls_per_sample % n == 0
    assert all(s > 0 for s in t.samples_us)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("mode", ["graph", "events"])
def test_runner_on_cuda(tmp_path, mode):
    out = tmp_path / "run"
    code = runner.main(["--op", "int4_gemm", "--shape", "16,4096,4096", "--shape", "3,1024,1004",
                        "--timing", mode, "--rep", "20", "--output-dir", str(out)])
    assert code == 0
    doc = json.loads((out / "results.json").read_text())
    meta, rows = doc["metadata"], doc["rows"]
    assert meta["gpu"] and meta["ceilings"]["copy_GBps"] > 100 and meta["settings"]["timing"] == mode
    assert {"torch", "cublas", "torch_compile", "tinygemm", "triton", "helion"} <= {r["backend"] for r in rows}
    for r in rows:
        if r["backend"] == "tinygemm" and r["N"] == 1004:
            assert r["status"] == "unavailable" and "N % 8" in r["reason"]
            continue
        if r["status"] == "unavailable":  # an optional peer that is not installed
            continue
        assert r["status"] == "ok", r
        assert r["timing"] == mode and r["peak_extra_mib"] is not None and r["sol_pct"] > 0
    assert (out / "roofline.png").exists()


def test_stall_timeout_defaults_on_cuda_only_and_without_helion_autotune():
    # plan.build's and the model bench's default: args.STALL_S on CUDA, off
    # (0) on CPU and where Helion's autotuner may search longer; a given value
    # (0: off) stays; under torchrun always off.
    from types import SimpleNamespace

    from qgemm_bench.harness import args as types
    from qgemm_bench.harness import plan

    def stall(device, autotune="none", given=None, world=None):
        a = SimpleNamespace(stall_timeout=given, autotune=autotune)
        return plan.stall_timeout_s(a, torch.device(device), world)

    assert stall("cuda") == types.STALL_S and stall("cpu") == 0.0
    assert stall("cuda", "quick") == 0.0 and stall("cuda", "full") == 0.0
    assert stall("cpu", given=5.0) == 5.0 and stall("cuda", given=0.0) == 0.0
    assert stall("cuda", world=object()) == 0.0 and stall("cpu", given=5.0, world=object()) == 0.0
    with pytest.raises(InputError, match="--stall-timeout must be in"):
        stall("cpu", given=-1.0)


@pytest.mark.parametrize("argv0, name", [("/venv/bin/qgemm-bench", "qgemm-bench"), ("runner.py", "runner.py"),
                                         ("/x/pytest", "runner.py")])
def test_usage_lines_name_the_command_as_typed(monkeypatch, argv0, name):
    """`qgemm-bench --help` said `usage: runner.py` and `runner.py tune
    --help` `qgemm-bench tune`: each names the command it was run as."""
    from qgemm_bench import cli
    from qgemm_bench.tuning import command

    monkeypatch.setattr(sys, "argv", [argv0])
    progs = [cli.parser().prog, cli.compare_parser().prog, cli.report_parser().prog, command.parser().prog]
    assert progs == [name, f"{name} compare", f"{name} report", f"{name} tune"]


@pytest.mark.parametrize("omp", [None, "2"])
def test_a_cpu_run_times_on_one_thread_and_gives_the_count_back(tmp_path, monkeypatch, omp):
    """On a shared 2-core machine torch's spin-waiting threads made a
    17x384x96 dequant+matmul 46x slower and its row's speedup 57x: CPU runs
    time on one intra-op thread unless OMP_NUM_THREADS says, record it, and
    leave the caller's count as it was."""
    if omp is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert runner.main(["--op", "int4_gemm", "--shape", "3,256,40", "--backends", "torch", "--device", "cpu",
                            "--rep", "1", "--warmup", "0", "--output-dir", str(tmp_path / "run")]) == 0
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert meta["torch_threads"] == (1 if omp is None else 2)


@pytest.mark.parametrize("argv, message", [
    (["comapre", "a", "b"], "error: 'comapre' is not a command: did you mean 'compare'? the commands are compare"),
    (["tiny"], "error: 'tiny' is not a command: the commands are compare, report and tune; a sweep or model run "
               "starts with an option"),
])
def test_a_bare_word_that_is_no_command_is_one_line(argv, message, capsys):
    assert runner.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message), err


def test_a_folder_given_as_helion_configs_is_named_a_folder(tmp_path, capsys):
    code = runner.main(["--op", "int4_gemm", "--helion-configs", str(tmp_path), "--output-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"error: --helion-configs {tmp_path}: is a folder; expected a file"], err
