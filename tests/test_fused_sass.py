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


# (arguments, wgmmas in the main loop); all compiled in one child process (support.script_runs).
MAIN_LOOPS = [(["--fmt", "nvfp4", "--split", "2", "--k", "512"], 16),
              # the output parts of an RMSNorm between two GEMMs (split_k_parts._store), in the split epilogue
              (["--split", "2", "--k", "512", "--residual", "--rms-scale"], 16),
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
                "512"], 4)]


def test_the_main_loop_of_the_sm90_kernel_is_counted(tmp_path):
    from tests.support import script_runs

    runs = script_runs("fused_sass", [[*args, "--out", tmp_path / f"k{i}"] for i, (args, _) in enumerate(MAIN_LOOPS)])
    for i, ((args, wgmmas), r) in enumerate(zip(MAIN_LOOPS, runs, strict=True)):
        main_loop_is_counted(args, wgmmas, r, tmp_path / f"k{i}")


def main_loop_is_counted(args, wgmmas, r, out):
    assert r.returncode == 0, (args, r.stderr[-2000:])
    lines = r.stdout.splitlines()
    assert "sm_90:" in lines[0] and "registers" in lines[0] and "shared memory" in lines[0], lines
    assert ("group 32" in lines[0]) == ("--group" in args), lines
    assert lines[1].startswith("main loop (one K block): ") and lines[1].endswith(" instructions"), lines
    counts = dict(item.rsplit(" ", 1) for item in lines[2].strip().split(", "))
    # BLOCK_K 128 / 64 k per block: 8 / 4 wgmma k-steps of 16 per warpgroup (two HGMMA per step at 64 rows x
    # BLOCK_N 128 with 4 warps).
    assert int(counts["HGMMA"]) == wgmmas and sum(map(int, counts.values())) == int(lines[1].split()[-2])
    assert Path(f"{out}.sass").read_text().count("HGMMA") >= wgmmas
    assert "UTMALDG" in counts if "--tma" in args else "UTMALDG" not in counts
    assert re.fullmatch(r"writes to a pending wgmma's A-operand registers: \d+", lines[3]), lines
    # RMS_SCALE's rsqrt, RESIDUAL's sums of squares and two more stores (h * weight, the sums): not in the loop
    assert ("MUFU.RSQ" in Path(f"{out}.sass").read_text()) == ("--rms-scale" in args)
    if "--ws" in args and "nvfp4" in args:  # NVFP4's scales: a [BLOCK_K / 16, BLOCK_N] box of bf16
        assert "tensordesc<4x128xbf16" in Path(f"{out}.ttgir").read_text()
    if "--ws" in args and "--group" in args:  # int4 groups of 32: a [BLOCK_K / 32, BLOCK_N] box
        assert "tensordesc<4x128xbf16" in Path(f"{out}.ttgir").read_text()
    # K_SPLIT 2: the second consumer's sum handed over in the output tiles' buffer viewed as fp32.
    assert ("memdesc_reinterpret" in Path(f"{out}.ttgir").read_text()) == ("--ws-split" in args)


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


@pytest.mark.parametrize("mode", [["--ws-splits", "4", "--tile", "16x64x128", "--stages", "8"],
                                  ["--ws-stream-k", "--tile", "256x128x64"],
                                  ["--ws-split", "2", "--tile", "64x64x64", "--stages", "6"]])
def test_ws_no_plain_store_lands_on_an_initialized_barrier(tmp_path, mode):
    # Triton places warp_specialize's captured values (here SPLITS' runtime
    # block count: K 5376 is 42 blocks, the last split 12) in shared memory it
    # thinks free, over a barrier no partition uses; a plain store over an
    # initialized mbarrier is undefined in PTX, and on the H200 it hung
    # 16x64x128 s8 split 4 at 257 x 5248 x 1000 (docs/ws_gemm.md). So a
    # barrier is initialized only where a partition uses it (K_SPLIT 2's).
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "fused_sass.py"), "--ws", *mode, "--k", "5376",
                        "--out", str(tmp_path / "k")], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    ptx = (tmp_path / "k.ptx").read_text()
    bases = set(re.findall(r"mov\.b32\s+(%r\d+), global_smem;", ptx))
    offset = {reg: int(c) for reg, base, c in re.findall(r"add\.s32\s+(%r\d+), (%r\d+), (\d+);", ptx)
              if base in bases} | {b: 0 for b in bases}
    inits = re.findall(r"mbarrier\.init\.shared::cta\.b64 \[(%r\d+)\]", ptx)
    assert inits and all(reg in offset for reg in inits), inits  # every barrier's offset known: nothing missed
    barriers = {offset[reg] for reg in inits}
    stores = [int(c) for c in re.findall(r"st\.shared(?:\.v\d)?\.b\d+\s+\[global_smem\+(\d+)\]", ptx)]
    assert stores, "no captured values or partition states stored: the test would check nothing"
    assert not [c for c in stores if any(b <= c < b + 8 for b in barriers)], (sorted(barriers), stores)


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
    from tests.support import script_runs

    def read(r):
        assert r.returncode == 0, r.stderr[-2000:]
        lines = r.stdout.splitlines()
        counts = dict(item.rsplit(" ", 1) for item in lines[2].strip().split(", "))
        return int(lines[0].split("sm_90: ")[1].split(" registers")[0]), counts

    base = ["--tile", "16x128x128", "--split", "8", "--k", "4096"]
    (_, plain), (regs, acc) = map(read, script_runs("fused_sass", [base, [*base, "--acc", "--maxnreg", "128"]]))
    assert "HMUL2" in plain and "HMUL2" not in acc and "FFMA" in acc and regs <= 128


def test_scale8_converts_the_scale_bytes_in_the_loop(tmp_path):
    # SCALE8 (NVFP4): the E4M3 bytes' hardware conversion and pack to bf16 (F2FP) and the x 2^118 (FMUL) in
    # the loop; without it the bf16 scales need neither; 8 bytes of scales a thread (LDG.E.64) not 16.
    from tests.support import script_runs

    def argv(*extra):
        return ["--fmt", "nvfp4", "--tile", "16x128x128", "--split", "2", "--k", "1024", "--out",
                tmp_path / ("s8" if extra else "plain"), *extra]

    def read(r, extra):
        out = tmp_path / ("s8" if extra else "plain")
        assert r.returncode == 0, r.stderr[-2000:]
        lines = r.stdout.splitlines()
        assert ("scale8" in lines[0]) == bool(extra), lines
        return dict(item.rsplit(" ", 1) for item in lines[2].strip().split(", ")), Path(f"{out}.sass").read_text()

    runs = script_runs("fused_sass", [argv(), argv("--scale8")])
    (plain, plain_sass), (s8, s8_sass) = read(runs[0], ()), read(runs[1], ("--scale8",))
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


# High words as nvdisasm -hex prints them in Triton 3.6's NVFP4 16x128x128 split 8 loop (sm_90), decoded by
# hand from bit 41 up: stall 4 bits, yield 1 (clear: yield), write barrier 3, read barrier 3 (7: none), wait
# mask 6, reuse 4.
KNOWN_CONTROLS = [
    # S2R R11, SR_CTAID.Y: 0x731, its variable-latency result on scoreboard 1
    (0x000E620000002600, (1, False, 1, None, 0, 0)),
    # LDGDEPBAR: 0x711, the cp.async groups on scoreboard 0, the one DEPBAR.LE SB0 counts
    (0x000E220000000000, (1, False, 0, None, 0, 0)),
    # DEPBAR.LE SB0, 0x2 (the scoreboard and count in its low word): 0x7e4, stall 4 and yield
    (0x000FC80000000000, (4, True, None, None, 0, 0)),
    # STS.128 [R113+0x7000], R16: 0x101f1, waits for SB5, holds R16-R19 on SB1 until read
    (0x0203E20000000C00, (1, False, None, 1, 0b100000, 0)),
    # PRMT R53, R48.reuse, 0x5410, R49.reuse: 0xa17f2, waits for an LDSM's SB1, reuses slots a and c
    (0x142FE40000000031, (2, False, None, None, 0b10, 0b101)),
]


@pytest.mark.parametrize("high,fields", KNOWN_CONTROLS)
def test_control_bits_of_hand_checked_instructions(high, fields):
    assert tuple(load_fused_sass().control(high)) == fields


def test_nvdisasm_puts_reuse_where_the_control_bits_do(tmp_path):
    # The reuse flags are the one field nvdisasm prints (.reuse on the operand): the PRMT above with its
    # four flags rewritten, as a raw sm_90 binary, read back by nvdisasm and by controls().
    if not bundled_cuda_tools():
        pytest.skip("this Triton has no bundled CUDA tools")
    mod = load_fused_sass()
    low, high = 0x0000541030357816, 0x142FE40000000031
    variants = (0b0000, 0b0001, 0b0100, 0b0101)
    words = [(low, high & ~(0xF << 58) | flags << 58) for flags in variants]
    (tmp_path / "raw.bin").write_bytes(b"".join(w.to_bytes(8, "little") for pair in words for w in pair))
    listing = subprocess.run([mod.tool("nvdisasm"), "-b", "SM90", "-hex", str(tmp_path / "raw.bin")],
                             capture_output=True, text=True, check=True).stdout
    ctl = mod.controls(listing)
    lines = [line for line in listing.splitlines() if mod.ADDRESS.match(line)]
    assert len(lines) == len(variants) and sorted(ctl) == [0, 16, 32, 48], listing
    for line, flags, addr in zip(lines, variants, sorted(ctl), strict=True):
        assert "PRMT R53, R48" in line and ctl[addr].reuse == flags and ctl[addr].wait == 0b10, line
        assert ("R48.reuse" in line, "R49.reuse" in line) == (bool(flags & 1), bool(flags & 4)), line


def test_schedule_of_a_hand_made_loop():
    # stalls 1 1 1 2 4 2 1 5 (17 a pass); the DEPBAR at the top (at most 1 group pending) waits for the
    # LDGDEPBAR of the pass before last, 17 + 17 - 3 cycles before; the PRMT for the LDSM issued 8 cycles
    # before it, the IADD3 for the LDGSTS's address registers (read barrier) 9 before; SB3 has no setter.
    mod = load_fused_sass()
    C = mod.Control
    loop = [("DEPBAR.LE SB0, 0x1", C(1, False, None, None, 0, 0)),
            ("LDSM.16.M88.4 R4, [R2]", C(1, False, 1, None, 0, 0)),
            ("LDGSTS.E.BYPASS.128 [R3], desc[UR4][R6.64]", C(1, False, None, 2, 0, 0)),
            ("LDGDEPBAR", C(2, False, 0, None, 0, 0)),
            ("IMAD R8, R9, 0x2, RZ", C(4, False, None, None, 0, 0)),
            ("PRMT R10, R4, 0x5410, R5", C(2, False, None, None, 0b10, 0)),
            ("IADD3 R6, R6, 0x80, RZ", C(1, False, None, None, 0b1100, 0)),
            ("@P0 BRA `(.L_x_0)", C(5, True, None, None, 0, 0))]
    body = [".L_x_0:"] + [f"        /*{0x100 + 16 * i:04x}*/                   {text} ;" for i, (text, _) in
                          enumerate(loop)]
    s = mod.schedule(body, {0x100 + 16 * i: c for i, (_, c) in enumerate(loop)})
    assert (s["cycles"], s["instructions"], s["yields"]) == (17, 8, 1)
    assert s["by_opcode"]["IMAD"] == 4 and s["by_opcode"]["BRA"] == 5
    assert s["waits"] == [(0x100, "DEPBAR", 0, [("LDGDEPBAR", "W", 31)]), (0x150, "PRMT", 1, [("LDSM", "W", 8)]),
                          (0x160, "IADD3", 2, [("LDGSTS", "R", 9)]), (0x160, "IADD3", 3, [])]


def test_stalls_reads_the_sm90_loop_controls(tmp_path):
    # --stalls on a compiled kernel; its -hex listing (--out) agrees with what nvdisasm prints: .reuse exactly
    # where the reuse flags are set, the scoreboard each DEPBAR.LE SBn counts written by the LDGDEPBARs, no
    # scoreboard set by a fixed-latency ALU or FMA instruction, every scoreboard waited for set somewhere.
    if not bundled_cuda_tools():
        pytest.skip("this Triton has no bundled CUDA tools: no offline sm_90 compile")
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "fused_sass.py"), "--fmt", "nvfp4", "--split", "2",
                        "--k", "512", "--stalls", "--out", str(tmp_path / "k")], capture_output=True, text=True,
                       cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    count = int(lines[1].split()[-2])
    found = re.fullmatch(r"static schedule \(.*\): (\d+) stall cycles over (\d+) instructions \(.*\), \d+ yield",
                         lines[4])
    assert found and int(found.group(2)) == count and count <= int(found.group(1)) <= 15 * count, lines[4]
    waits = int(re.match(r"  scoreboard waits: (\d+),", lines[6]).group(1))
    assert waits > 0 and len(lines) == 7 + waits, lines
    assert all(re.fullmatch(r"    [0-9a-f]{4} [A-Z0-9_]+ waits SB[0-5]: (nothing the loop set|[A-Z0-9_]+ \([WR]\) "
                            r"\d+ cycles before(, [A-Z0-9_]+ \([WR]\) \d+ cycles before)*)", x) for x in lines[7:])
    mod = load_fused_sass()
    listing = (tmp_path / "k.hex").read_text()
    ctl = mod.controls(listing)
    text = {int(a.group(1), 16): line for line in listing.splitlines() if (a := mod.ADDRESS.match(line))}
    assert set(ctl) == set(text) and len(ctl) > count
    assert all(bool(ctl[a].reuse) == (".reuse" in line) for a, line in text.items())
    ops = {a: mod.OPCODE.match(line).group(1) for a, line in text.items()}
    fixed = [a for a, op in ops.items() if op in ("IMAD", "LOP3", "PRMT", "IADD3", "SHF", "HMUL2", "FFMA", "SEL")]
    assert fixed and all(ctl[a].write is None and ctl[a].read is None for a in fixed)
    counted = {int(m.group(1)) for line in text.values() if (m := mod.DEPBAR_SB.search(line))}
    assert counted and counted == {ctl[a].write for a, op in ops.items() if op == "LDGDEPBAR"}
    set_ = {b for c in ctl.values() for b in (c.write, c.read)}
    assert {b for c in ctl.values() for b in range(6) if c.wait >> b & 1} <= set_
