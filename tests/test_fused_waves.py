"""scripts/fused_waves.py: programs an SM from registers, shared memory and
threads, the cap that fits one more, and a run over a small table compiled
for sm_90 without a GPU (Triton's bundled ptxas, as scripts/fused_sass.py)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import load_script

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def waves():
    return load_script("fused_waves")


def test_programs_an_sm_take_the_tightest_limit(waves):
    per_sm = waves.ctas_per_sm  # (registers, warps, shared bytes): fused_sass's
    assert per_sm(80, 4, 20 * 1024) == 6  # 80 x 128 = 10240 registers a program
    assert per_sm(72, 4, 20 * 1024) == 7
    assert per_sm(95, 4, 20 * 1024) == 5  # allocated as 96
    assert per_sm(64, 4, 58 * 1024) == 3  # shared memory: 228 KB / (58 + 1) KB
    assert per_sm(32, 8, 1024) == 8  # threads: 2048 / 256
    assert [waves.cap_for(c, 128) for c in (4, 5, 6, 7, 8)] == [128, 96, 80, 72, 64]
    assert all(per_sm(waves.cap_for(c, t), t // 32, 0) >= c for c in range(1, 9) for t in (128, 256))


def test_a_table_is_compiled_and_its_waves_and_cap_printed(tmp_path):
    c = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "SPLIT_K": 4, "DECODE_ASM": True, "num_warps": 4,
         "num_stages": 3, "ACC_SCALE": True}
    table = {"gpu": "h200", "kernels": {"int4_gemm_fused": {
        "M1_K512_N28672": {"config": c}, "M128_K512_N28672": {"config": {**c, "BLOCK_M": 128}},
        "M16_K512_N64": {"config": {**c, "WS": {"BLOCK_M": 16}}}}}}
    (tmp_path / "t.json").write_text(json.dumps(table))
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "fused_waves.py"), "--table", str(tmp_path / "t.json"),
                        "--formats", "int4"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = r.stdout.splitlines()[1:]
    assert len(rows) == 1 and rows[0].startswith("int4 M1_K512_N28672: "), r.stdout  # not M 128, not WS
    regs, smem, per_sm, grid, waves_ = rows[0].split(": ")[1].split(";")[0].split(" / ")
    assert int(grid) == 448 * 4 and float(waves_.split()[0]) == pytest.approx(1792 / (132 * int(per_sm)), abs=0.01)


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "bad.json").write_text("[1]")
    for args in (["--formats", "int8"], ["--table", str(tmp_path / "none.json")],
                 ["--table", str(tmp_path / "bad.json")]):
        r = subprocess.run([sys.executable, str(REPO / "scripts" / "fused_waves.py"), *args], capture_output=True,
                           text=True, cwd=REPO, timeout=120)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
