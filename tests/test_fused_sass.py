"""scripts/fused_sass.py compiles the fused kernel for sm_90 on a machine
without a GPU (Triton's bundled ptxas, nvdisasm, cuobjdump) and reports its
main loop: the loop with the wgmmas, counted by opcode."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import load_script

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("args,wgmmas", [(["--fmt", "nvfp4", "--split", "2", "--k", "512"], 16),
                                         (["--tile", "128x64x64", "--tma", "--k", "512"], 4),
                                         (["--tile", "256x64x64", "--tma", "--group", "32", "--k", "512"], 4),
                                         (["--ws", "--tile", "64x64x128", "--stages", "4", "--k", "512"], 8),
                                         # a decode-size x tile (wgmma n16), two programs a tile
                                         (["--ws", "--ws-splits", "2", "--tile", "16x64x128", "--stages", "8",
                                           "--k", "512"], 8),
                                         (["--ws", "--fmt", "nvfp4", "--tile", "128x128x64", "--k", "512"], 4),
                                         (["--ws", "--tile", "128x128x128", "--group", "32", "--k", "512"], 8),
                                         (["--ws", "--ws-stream-k", "--tile", "256x128x64", "--k", "512"], 4),
                                         (["--ws", "--ws-split", "2", "--tile", "64x64x64", "--stages", "6", "--k",
                                           "512"], 4)])
def test_the_main_loop_of_the_sm90_kernel_is_counted(tmp_path, args, wgmmas):
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "fused_sass.py"), *args, "--out", str(tmp_path / "k")],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert "sm_90:" in lines[0] and "registers" in lines[0] and "shared memory" in lines[0], lines
    assert ("group 32" in lines[0]) == ("--group" in args), lines
    assert lines[1].startswith("main loop (one K block): ") and lines[1].endswith(" instructions"), lines
    counts = dict(item.rsplit(" ", 1) for item in lines[2].strip().split(", "))
    # BLOCK_K 128 / 64 k per block: 8 / 4 wgmma k-steps of 16 per warpgroup (two HGMMA per step at 64 rows x
    # BLOCK_N 128 with 4 warps).
    assert int(counts["HGMMA"]) == wgmmas and sum(map(int, counts.values())) == int(lines[1].split()[-2])
    assert (tmp_path / "k.sass").read_text().count("HGMMA") >= wgmmas
    assert "UTMALDG" in counts if "--tma" in args else "UTMALDG" not in counts
    assert re.fullmatch(r"writes to a pending wgmma's A-operand registers: \d+", lines[3]), lines
    if "--ws" in args and "nvfp4" in args:  # NVFP4's scales: a [BLOCK_K / 16, BLOCK_N] box of bf16
        assert "tensordesc<4x128xbf16" in (tmp_path / "k.ttgir").read_text()
    if "--ws" in args and "--group" in args:  # int4 groups of 32: a [BLOCK_K / 32, BLOCK_N] box
        assert "tensordesc<4x128xbf16" in (tmp_path / "k.ttgir").read_text()
    # K_SPLIT 2: the second consumer's sum handed over in the output tiles' buffer viewed as fp32.
    assert ("memdesc_reinterpret" in (tmp_path / "k.ttgir").read_text()) == ("--ws-split" in args)


@pytest.mark.parametrize("mode", [["--ws-splits", "2"], ["--ws-stream-k"]])
def test_ws_partial_sums_meet_through_one_release_and_a_fence(tmp_path, mode):
    # SPLITS 2 (ws_gemm._splits_meet) and stream-K (_sk_consumer): a plane
    # stored and loaded four floats at a time (ws_gemm._plane_view: 16 bytes
    # a thread, 512 contiguous a warp), then, after a barrier of the warpgroup's
    # 128 threads (not the whole CTA), one release add by one thread
    # (_count_in, predicated); the last spins on a volatile load, acquires
    # with a fence (_wait_count) and zeroes the count after another barrier.
    # No acquiring atomics and no add per thread. (Triton 3.9 writes the
    # unused-result add as red, 3.6 as atom.)
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "fused_sass.py"), "--ws", *mode, "--tile",
                        "128x128x64", "--stages", "4", "--k", "512", "--out", str(tmp_path / "k")],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    ptx = (tmp_path / "k.ptx").read_text()
    adds = re.findall(r"^\s*(@%p\d+ )?(?:atom|red)\.global\.gpu\.release\.add", ptx, re.M)
    assert len(adds) == 2 and all(adds), adds  # one per consumer warpgroup's code, each predicated
    assert ptx.count("fence.acq_rel.gpu") == 2 and "acquire" not in ptx
    assert "ld.volatile.global" in ptx and re.search(r"bar\.sync\s+\d+, 128;", ptx)
    assert "st.global.v4.b32" in ptx and "ld.global.cg.v4.b32" in ptx
    assert "st.global.v2" not in ptx and "ld.global.cg.v2" not in ptx and "ld.global.cg.b32" not in ptx
    bad = subprocess.run([sys.executable, str(REPO / "scripts" / "fused_sass.py"), *mode],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert bad.returncode != 0 and mode[0] in bad.stderr.strip().splitlines()[-1]


def load_fused_sass():
    return load_script("fused_sass")


def test_writes_to_a_pending_wgmma_a_operand_are_counted_across_the_back_edge():
    # A loop body as nvdisasm prints it: the HGMMA reads R20-R23; DEPBAR.LE 1
    # keeps it pending; the write to R22 at the loop's top (reached again
    # after the back edge) and the LDS.64 into R23-R24 count, the writes to
    # R30 and, after DEPBAR.LE 0, to R21 do not.
    body = ["        /*0100*/                   IMAD R22, R1, 0x2, RZ ;",
            "        /*0110*/                   LDS.64 R23, [R2] ;",
            "        /*0120*/                   MOV R30, R4 ;",
            "        /*0130*/                   WARPGROUP.ARRIVE ;",
            "        /*0140*/                   HGMMA.64x128x16.F32.BF16 R24, R20, gdesc[UR16], R24, gsb0 ;",
            "        /*0150*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;",
            "        /*0160*/              @P0 BRA `(.L_x_0) ;"]
    mod = load_fused_sass()
    assert mod.operand_overwrites(body) == 2
    assert mod.operand_overwrites(body[:-2] + ["        /*0150*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;",
                                                 "        /*0158*/                   MOV R21, R4 ;", body[-1]]) == 0
    assert mod.dest_width("LDSM.16.M88.4") == 4 and mod.dest_width("LDG.E.128") == 4
    assert mod.dest_width("IMAD.WIDE.U32") == 2 and mod.dest_width("LOP3.LUT") == 1


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


def test_scale8_converts_the_scale_bytes_in_the_loop(tmp_path):
    # SCALE8 (NVFP4): the E4M3 bytes' hardware conversion and pack to bf16 (F2FP) and the x 2^118 (FMUL) in
    # the loop; without it the bf16 scales need neither; 8 bytes of scales a thread (LDG.E.64) not 16.
    def run(*extra):
        out = tmp_path / ("s8" if extra else "plain")
        r = subprocess.run([sys.executable, str(REPO / "scripts" / "fused_sass.py"), "--fmt", "nvfp4", "--tile",
                            "16x128x128", "--split", "2", "--k", "1024", "--out", str(out), *extra],
                           capture_output=True, text=True, cwd=REPO, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        lines = r.stdout.splitlines()
        assert ("scale8" in lines[0]) == bool(extra), lines
        return dict(item.rsplit(" ", 1) for item in lines[2].strip().split(", ")), Path(f"{out}.sass").read_text()

    plain, plain_sass = run()
    s8, s8_sass = run("--scale8")
    assert "F2FP" not in plain and "FMUL" not in plain and int(s8["F2FP"]) >= 2 and "FMUL" in s8
    assert "F2FP.F16.E4M3.UNPACK_B" in s8_sass and "LDG.E.64" in s8_sass and "LDG.E.128" in plain_sass


def bundled_cuda_tools() -> bool:
    """Triton's wheel carries ptxas, nvdisasm and cuobjdump (compiling for sm_90 offline needs them)."""
    import importlib.util

    spec = importlib.util.find_spec("triton")
    bin_dir = Path(spec.origin).parent / "backends" / "nvidia" / "bin" if spec and spec.origin else None
    return bool(bin_dir) and all((bin_dir / t).exists() for t in ("ptxas", "nvdisasm", "cuobjdump"))


@pytest.mark.parametrize("args,wgmmas", [(["--probe-stage", "2", "--warps", "4"], 0),
                                         (["--probe-stage", "3", "--warps", "8", "--halves"], 8)])
def test_the_probe_stage_kernel_loop_is_counted(args, wgmmas):
    # decode_probe.stage_kernel at 16x128x128 split 8 acc, K = 8192 (fewer K blocks a split and ptxas
    # unrolls the loop): S2 (decode, no wgmma) and S3 HALVES at 8 warps
    # (two half-K groups of 4 k-steps: 8 HGMMA a warp, docs/fused_gemm.md's table).
    if not bundled_cuda_tools():
        pytest.skip("this Triton has no bundled CUDA tools: no offline sm_90 compile")
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "fused_sass.py"), "--tile", "16x128x128", "--split",
                        "8", "--acc", *args], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    found = re.match(rf"stage_kernel S{args[1]} int4 16x128x128 split 8 w{args[3]} s3 acc(?: halves)? K=8192, "
                     r"sm_90: (\d+) registers, \d+ bytes of shared memory, \d+ local-memory", lines[0])
    assert found and 0 < int(found.group(1)) <= 255, lines
    assert lines[1].startswith("main loop (one K block): ") and lines[1].endswith(" instructions"), lines
    counts = dict(item.rsplit(" ", 1) for item in lines[2].strip().split(", "))
    assert int(counts.get("HGMMA", 0)) == wgmmas and sum(map(int, counts.values())) == int(lines[1].split()[-2])
    assert int(counts["LOP3"]) > 0 and "BRA" in counts  # the decode, and the back branch


def test_fused_kernel_halves_at_8_warps_compiles_capped_without_spills():
    # fused_kernel with HALVES (fused_gemm.halved: FusedGemm takes this 8-warp split-K config only with it):
    # the M = 1 tile at 8 warps capped at 64 registers, no spills, two half-K groups of 4 wgmma k-steps.
    if not bundled_cuda_tools():
        pytest.skip("this Triton has no bundled CUDA tools: no offline sm_90 compile")
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "fused_sass.py"), "--tile", "16x128x128", "--split",
                        "8", "--warps", "8", "--acc", "--halves", "--maxnreg", "64"], capture_output=True, text=True,
                       cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    found = re.match(r"int4 16x128x128 split 8 w8 s3 acc halves r64 K=8192, sm_90: (\d+) registers, \d+ bytes of "
                     r"shared memory, 0 local-memory", lines[0])
    assert found and int(found.group(1)) <= 64, lines
    counts = dict(item.rsplit(" ", 1) for item in lines[2].strip().split(", "))
    assert int(counts["HGMMA"]) == 8 and lines[3].endswith(": 0"), lines


@pytest.mark.parametrize("args,named", [(["--probe-stage", "2", "--halves", "--acc"], "--halves"),
                                        (["--halves", "--acc", "--tma"], "--halves"),
                                        (["--halves", "--acc", "--group", "64"], "--halves"),
                                        (["--probe-table", "--k", "1024"], "--probe-table"),
                                        (["--probe-stage", "3", "--tma"], "--probe-stage"),
                                        (["--scale8"], "--scale8"),
                                        (["--fmt", "nvfp4", "--scale8", "--tma"], "--scale8")])
def test_probe_options_out_of_range_end_in_one_line(args, named):
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "fused_sass.py"), *args], capture_output=True,
                       text=True, cwd=REPO, timeout=300)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.strip().startswith(f"error: {named}"), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
