"""The read-floor probe (qgemm_bench/harness/read_floor.py) reads every word
once, under the interpreter, and its script fails in one line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from qgemm_bench.harness import read_floor

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "read_floor.py"


@pytest.mark.parametrize("reader", read_floor.READERS)
@pytest.mark.parametrize("words", [1, 513, 10_007])
def test_every_reader_reads_every_word(reader, words):
    g = torch.Generator().manual_seed(words)
    src = torch.randint(-2**31, 2**31 - 1, (words,), dtype=torch.int32, generator=g)
    # 2 "SMs": the persistent readers loop over several chunks per program
    got, want = read_floor.read_sums(src, reader, sms=2)
    assert got == want


def test_a_reader_that_skips_a_word_is_caught():
    src = torch.ones(4096, dtype=torch.int32)
    got, want = read_floor.read_sums(src[:-1], read_floor.READERS[0], sms=2)
    assert got == want == 4095
    got, _ = read_floor.read_sums(src, read_floor.READERS[0], sms=2)
    src[-1] = 2  # the sum sees the last word: a reader stopping short would not
    assert read_floor.read_sums(src, read_floor.READERS[0], sms=2)[0] == got + 1


def test_copies_exceed_twice_l2_within_memory():
    assert read_floor.copies(2**20, 50 * 2**20, 80 * 2**30) == 100
    assert read_floor.copies(64 * 2**20, 50 * 2**20, 80 * 2**30) == 2
    assert read_floor.copies(64 * 2**20, 50 * 2**20, 256 * 2**20) == 2  # half of free memory
    assert read_floor.copies(2**30, 50 * 2**20, 2**30) == 1
    assert read_floor.words_for(10) == 3


@pytest.mark.parametrize("argv, says", [
    (["--op", "nope"], "unknown operator 'nope'"),
    (["--preset", "nope"], "--preset 'nope'"),
    (["--shape", "5,300"], "expected three integers"),
    (["--baseline", "/nonexistent.csv"], "--baseline /nonexistent.csv: no such file"),
])
def test_script_bad_input_is_one_line(tmp_path, argv, says):
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "o.md"), *argv], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and says in r.stderr, r.stderr
    assert not (tmp_path / "o.md").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU message")
def test_script_without_gpu_says_so(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "o.md"), "--shape", "16,4096,16"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().startswith("error: read_floor.py needs a CUDA GPU")


def test_script_re_renders_a_measured_table_beside_a_newer_baseline(tmp_path):
    measured = {"meta": {"op": "split_k_gemm", "dtype": "bfloat16", "gpu": "H100", "baseline": None},
                "rows": [{"shape": "16x4096x16", "bytes": 262656, "copy_floor_us": 0.09, "read_us": 1.92,
                          "read_GBps": 137.0, "empty_us": 1.1, "reader": [8, 4, 0], "backends": {"triton": 9.9}},
                         {"shape": "64x8192x64", "bytes": 2105344, "copy_floor_us": 0.71, "read_us": 2.59,
                          "read_GBps": 814.0, "empty_us": 1.1, "reader": [8, 4, 0], "backends": {}}]}
    src = tmp_path / "m.json"
    src.write_text(json.dumps(measured))
    csv = tmp_path / "results.csv"
    csv.write_text("op,backend,M,K,N,dtype,status,p50_us\n"
                   "split_k_gemm,triton,16,4096,16,bfloat16,ok,2.71\n"
                   "split_k_gemm,torch,16,4096,16,bfloat16,ok,5.84\n"
                   "split_k_gemm,triton,64,8192,64,bfloat16,failed,\n"
                   "int4_gemm,triton,16,4096,16,bfloat16,ok,99\n")
    out = tmp_path / "o.md"
    r = subprocess.run([sys.executable, str(SCRIPT), str(out), "--from", str(src), "--baseline", str(csv)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = out.read_text().splitlines()
    assert ("| shape MxKxN | MiB | copy floor us | read us | read GB/s | empty launch us | torch us | triton us |"
            in lines)
    assert "| 16x4096x16 | 0.25 | 0.09 | 1.92 | 137 | 1.10 | 5.84 | 2.71 |" in lines  # the newer p50s, not 9.9
    assert "| 64x8192x64 | 2.01 | 0.71 | 2.59 | 814 | 1.10 |  |  |" in lines  # a failed row shows no number
    again = json.loads(out.with_suffix(".json").read_text())
    assert again["rows"][0]["backends"] == {"triton": 2.71, "torch": 5.84} and again["meta"]["baseline"] == str(csv)
    bad = tmp_path / "bad.json"
    bad.write_text("[1]")
    r = subprocess.run([sys.executable, str(SCRIPT), str(out), "--from", str(bad)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "not a read_floor.py JSON" in r.stderr
