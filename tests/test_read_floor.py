"""The read-floor probe (qgemm_bench/harness/read_floor.py) reads every word
once, under the interpreter, and its script fails in one line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from qgemm_bench.harness import read_floor
from tests.support import run_script_in_process

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "read_floor.py"


@pytest.mark.parametrize("reader", read_floor.READERS)
@pytest.mark.parametrize("words", [1, 513, 10_007, 200_003])
def test_every_reader_reads_every_word(reader, words):
    g = torch.Generator().manual_seed(words)
    src = torch.randint(-2**31, 2**31 - 1, (words,), dtype=torch.int32, generator=g)
    # 2 "SMs": at 200_003 words every persistent reader's programs loop over
    # several chunks (and the one-chunk readers launch dozens of programs)
    warps, unroll, per_sm = reader
    chunks = -(-words // (warps * 32 * 4 * unroll))
    assert read_floor.grid_of(words, reader, 2) == (min(chunks, 2 * per_sm) if per_sm else chunks)
    if words == 200_003 and per_sm:
        assert chunks > read_floor.grid_of(words, reader, 2)  # programs loop
    got, want = read_floor.read_sums(src, reader, sms=2)
    assert got == want


def test_a_reader_that_skips_a_word_is_caught():
    src = torch.ones(4096, dtype=torch.int32)
    got, want = read_floor.read_sums(src[:-1], read_floor.READERS[0], sms=2)
    assert got == want == 4095
    got, _ = read_floor.read_sums(src, read_floor.READERS[0], sms=2)
    src[-1] = 2  # the sum sees the last word: a reader stopping short would not
    assert read_floor.read_sums(src, read_floor.READERS[0], sms=2)[0] == got + 1


def test_the_reader_refuses_what_its_int32_offsets_cannot_address():
    assert read_floor.words_for(10) == 3 and read_floor.words_for(0) == 1
    huge = torch.empty(2**31, dtype=torch.int32, device="meta")
    with pytest.raises(ValueError, match="up to 2\\*\\*31 words"):
        read_floor.read(huge, huge, read_floor.READERS[0], sms=2)


@pytest.mark.parametrize("argv, says", [
    (["--op", "nope"], "unknown operator 'nope'"),
    (["--preset", "nope"], "--preset 'nope'"),
    (["--shape", "5,300"], "expected three integers"),
    (["--baseline", "/nonexistent"], "--baseline /nonexistent: no such file"),
    (["--from", "/nonexistent.json"], "--from /nonexistent.json: no such file"),
    (["--from", "x.json", "--shape", "16,4096,16"], "--from re-renders a measured table: --shape do not apply"),
])
def test_script_bad_input_is_one_line(tmp_path, argv, says, request, monkeypatch, capsys):
    # The first case as its own process (the imports and exit); the others
    # differ in their arguments only.
    own = request.node.callspec.indices["argv"] == 0
    code, stderr = script_usage([tmp_path / "o.md", *argv], own, monkeypatch, capsys)
    assert code == 2
    assert stderr.strip().count("\n") == 0 and says in stderr, stderr
    assert not (tmp_path / "o.md").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU message")
def test_script_without_gpu_says_so(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "o.md"), "--shape", "16,4096,16"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().startswith("error: read_floor.py needs a CUDA GPU")


def run_script(*argv):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, argv)], capture_output=True, text=True, timeout=120)


def script_usage(argv, own_process, monkeypatch, capsys) -> tuple[int, str]:
    """(exit code, stderr) of the script refusing argv: as its own process, or
    (on a CPU, where it stops right after its argument checks, and its runs as
    a process are test_script_bad_input_is_one_line's first case and
    test_script_without_gpu_says_so) run here, sparing a process start."""
    if own_process or torch.cuda.is_available():
        r = run_script(*argv)
        return r.returncode, r.stderr
    code, _, stderr = run_script_in_process(SCRIPT, argv, monkeypatch, capsys)
    return code, stderr


def test_script_re_renders_a_measured_table_beside_a_newer_baseline(tmp_path):
    measured = {"meta": {"op": "split_k_gemm", "dtype": "bfloat16", "gpu": "H100", "baseline": None},
                "rows": [{"shape": "16x4096x16", "bytes": 262656, "copy_floor_us": 0.09, "read_us": 1.92,
                          "read_GBps": 137.0, "empty_us": 1.1, "reader": [8, 4, 0], "backends": {"triton": 9.9}},
                         {"shape": "64x8192x64", "bytes": 2105344, "copy_floor_us": 0.71, "read_us": 2.59,
                          "read_GBps": 814.0, "empty_us": 1.1, "reader": [8, 4, 0], "backends": {}},
                         {"shape": "256x65536x256", "bytes": 67239936, "error": "OutOfMemoryError: CUDA out of",
                          "backends": {}}]}
    src = tmp_path / "m.json"
    src.write_text(json.dumps(measured))
    def row(op, backend, shape, status, p50, settings):
        m, k, n = shape
        return {"op": op, "backend": backend, "M": m, "K": k, "N": n, "dtype": "bfloat16", "settings": settings,
                "device": "cuda:0", "timing": "graph", "status": status, "p50_us": p50}

    run = tmp_path / "run"
    run.mkdir()
    no_bias, bias = {"bias": False}, {"bias": True}
    (run / "results.json").write_text(json.dumps({"metadata": {}, "rows": [
        row("split_k_gemm", "triton", (16, 4096, 16), "ok", 2.71, no_bias),
        row("split_k_gemm", "torch", (16, 4096, 16), "ok", 5.84, no_bias),
        row("split_k_gemm", "torch", (16, 4096, 16), "ok", 7.77, bias),  # other settings: not these bytes
        row("split_k_gemm", "triton", (64, 8192, 64), "error", None, no_bias),
        row("split_k_gemm", "triton", (256, 65536, 256), "ok", 32.1, no_bias),
        row("int4_gemm", "triton", (16, 4096, 16), "ok", 99.0, {"group_size": 128})]}))
    csv = run / "results.csv"  # named as the run's CSV: its results.json is read
    out = tmp_path / "o.md"
    r = run_script(out, "--from", src, "--baseline", csv)
    assert r.returncode == 0, r.stderr
    lines = out.read_text().splitlines()
    assert ("| shape MxKxN | MiB | copy floor us | read us | read GB/s | empty launch us | torch us | triton us |"
            in lines)
    assert "| 16x4096x16 | 0.25 | 0.09 | 1.92 | 137 | 1.10 | 5.84 | 2.71 |" in lines  # the newer p50s, not 9.9
    assert "| 64x8192x64 | 2.01 | 0.71 | 2.59 | 814 | 1.10 |  |  |" in lines  # an error row shows no number
    assert "| 256x65536x256 | 64.12 | failed: OutOfMemoryError: CUDA out of |  |  |  |  | 32.10 |" in lines
    again = json.loads(out.with_suffix(".json").read_text())
    assert again["rows"][0]["backends"] == {"triton": 2.71, "torch": 5.84} and again["meta"]["baseline"] == str(csv)


@pytest.mark.parametrize("doc, says", [
    ([1], "not a read_floor.py JSON"),
    ({"meta": {}, "rows": []}, "not a read_floor.py JSON (KeyError: 'op')"),
    ({"meta": {"op": "split_k_gemm", "dtype": "bfloat16", "gpu": "x"}, "rows": [{"shape": "16x4096x16"}]},
     "not a read_floor.py JSON (KeyError: 'bytes')"),
    ({"meta": {"op": "split_k_gemm", "dtype": "bfloat16", "gpu": "x"},
      "rows": [{"shape": "16x40", "bytes": 1, "copy_floor_us": 1, "read_us": 1, "read_GBps": 1, "empty_us": 1}]},
     "not a read_floor.py JSON (ValueError"),
    ("not json", "not a read_floor.py JSON (JSONDecodeError"),
])
def test_script_refuses_a_malformed_measured_table_in_one_line(tmp_path, doc, says, monkeypatch, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    code, stderr = script_usage([tmp_path / "o.md", "--from", bad], False, monkeypatch, capsys)
    assert code == 2 and stderr.strip().count("\n") == 0 and says in stderr, stderr
    assert not (tmp_path / "o.md").exists()


def test_script_refuses_a_baseline_that_is_no_run_in_one_line(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "results.json"
    bad.write_text("a,b\n1,2\n")
    code, stderr = script_usage([tmp_path / "o.md", "--baseline", bad], False, monkeypatch, capsys)
    assert code == 2 and stderr.strip().count("\n") == 0
    assert stderr.startswith(f"error: --baseline {bad}: not JSON"), stderr
