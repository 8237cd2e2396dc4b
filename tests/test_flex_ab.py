"""scripts/flex_ab.py: --cpu-smoke compiles the decode step's flex attention
on CPU Inductor and runs our split-KV kernel on the interpreter, checks both
against the fp32 reference and times them; a wrong
variant is reported WRONG and not timed; bad input ends in one line, exit 2."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "flex_ab.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def flex_ab():
    sys.path.insert(0, str(ROOT / "scripts"))
    import flex_ab

    return flex_ab


def test_cpu_smoke_checks_and_times_the_default():
    r = run("--cpu-smoke")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("case B=1 HQ=4 HKV=2 cache 256 pos 200") and "seed 0" in lines[0]
    labels = {" ".join(line.split()[1:-1]) for line in lines[1:]}  # "TIME LABEL (ROUNDS)", fastest first
    assert labels == {"default", "triton", "triton BLOCK_N=32", "triton BLOCK_N=64", "triton BLOCK_N=128", "triton w2",
                      "triton w8"}, \
        r.stdout
    assert all(float(line.split()[0]) > 0 for line in lines[1:]), r.stdout


@pytest.mark.parametrize("args, match", [
    ([], "--case B,HQ,HKV: at least one"),
    (["--case", "1,32,6"], "HQ a multiple of HKV"),
    (["--case", "1,32"], "HQ a multiple of HKV"),
    (["--case", "1,32,8", "--split", "2,2"], "positive and each once"),
    (["--case", "1,32,8", "--pos", "640"], "must be under --cache 640"),
])
def test_bad_input_is_one_line_and_exit_2(args, match):
    r = run(*args)
    assert r.returncode == 2 and match in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_reference_catches_a_wrong_attention(flex_ab, monkeypatch, capsys):
    """Keys past the position counted: the reference (keys 0..pos) differs."""
    from qgemm_bench.model import decode

    seed = torch.seed() % 2**31
    print(f"seed {seed}")
    monkeypatch.setattr(decode, "flex_decode", lambda q, k, v, pos, scale=None, opts=None:
                        flex_ab.reference(q, k, v, k.shape[2] - 1, scale).to(q.dtype))
    bad = flex_ab.run_case((1, 4, 2), [], 256, 100, 1, torch.device("cpu"), torch.float32, seed)
    assert bad == 1 and "WRONG default" in capsys.readouterr().out
