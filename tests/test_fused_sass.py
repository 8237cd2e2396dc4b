"""scripts/fused_sass.py compiles the fused kernel for sm_90 on a machine
without a GPU (Triton's bundled ptxas, nvdisasm, cuobjdump) and reports its
main loop: the loop with the wgmmas, counted by opcode."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("args,wgmmas", [(["--fmt", "nvfp4", "--split", "2", "--k", "512"], 16),
                                         (["--tile", "128x64x64", "--tma", "--k", "512"], 4)])
def test_the_main_loop_of_the_sm90_kernel_is_counted(tmp_path, args, wgmmas):
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "fused_sass.py"), *args, "--out", str(tmp_path / "k")],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert "sm_90:" in lines[0] and "registers" in lines[0] and "shared memory" in lines[0], lines
    assert lines[1].startswith("main loop (one K block): ") and lines[1].endswith(" instructions"), lines
    counts = dict(item.rsplit(" ", 1) for item in lines[2].strip().split(", "))
    # BLOCK_K 128 / 64 k per block: 8 / 4 wgmma k-steps of 16 per warpgroup (two HGMMA per step at 64 rows x
    # BLOCK_N 128 with 4 warps).
    assert int(counts["HGMMA"]) == wgmmas and sum(map(int, counts.values())) == int(lines[1].split()[-2])
    assert (tmp_path / "k.sass").read_text().count("HGMMA") >= wgmmas
    assert "UTMALDG" in counts if "--tma" in args else "UTMALDG" not in counts


def test_acc_scale_and_a_register_cap_show_in_the_sass():
    # ACC_SCALE: the scales multiply the fp32 product (FFMA), not the decoded
    # weights (HMUL2); --maxnreg 128 holds 16x128x128 split 8 acc to 128 (167
    # without, with Triton 3.6; 128 with 3.9).
    def run(*extra):
        r = subprocess.run([sys.executable, str(REPO / "scripts" / "fused_sass.py"), "--tile", "16x128x128",
                            "--split", "8", "--k", "4096", *extra], capture_output=True, text=True, cwd=REPO,
                           timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        lines = r.stdout.splitlines()
        counts = dict(item.rsplit(" ", 1) for item in lines[2].strip().split(", "))
        return int(lines[0].split("sm_90: ")[1].split(" registers")[0]), counts

    _, plain = run()
    regs, acc = run("--acc", "--maxnreg", "128")
    assert "HMUL2" in plain and "HMUL2" not in acc and "FFMA" in acc and regs <= 128
