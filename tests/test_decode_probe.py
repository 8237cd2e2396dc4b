"""scripts/decode_probe.py's kernels, under the interpreter: the read stage
reads every weight word and each K block's scales once (their xors checked,
int4 BLOCK with and without ACC_SCALE, SUB, NVFP4; a launch that skips rows
caught), the dot stage's splits and the GEMV sum to the reference, on ragged
N. (The whole probe on the CPU: `python scripts/decode_probe.py
--cpu-smoke`, about 90 s.)"""

from types import SimpleNamespace

import pytest
import torch

from qgemm_bench.backends.triton_kernels import fused_gemm
from qgemm_bench.backends.triton_ops import weight_args
from qgemm_bench.operators import int4_gemm, nvfp4_gemm
from qgemm_bench.operators.common import rel_error
from qgemm_bench.target import Target
from qgemm_bench.types import Case, Shape
from tests.support import load_script, seed

DT = torch.float16  # the interpreter has no bfloat16


@pytest.fixture(scope="module")
def probe():
    return load_script("decode_probe")


def operands(fmt: str, m: int, k: int, n: int, config: dict):
    """(x, FusedGemm with the K-major weights, fp32 reference) of a fresh random case."""
    op = int4_gemm if fmt == "int4" else nvfp4_gemm
    settings = int4_gemm.Settings(128) if fmt == "int4" else nvfp4_gemm.Settings()
    s = seed()
    print(f"seed {s}")
    inputs = op.make_inputs(Case(op.NAME, Shape(m, k, n), DT, torch.device("cpu"), settings), s)
    fg = fused_gemm.FusedGemm(*weight_args(op.NAME, inputs), config=config, target=Target.cpu())
    return inputs.x, fg, op.reference(inputs)


def ts_of(fg):
    return fg.ts if fg.ts is not None else torch.ones(())


# (format, BLOCK_K, ACC_SCALE): int4 g128's BLOCK scales without ACC_SCALE (S1 xors _scales' [BLOCK_N, 2] tile,
# whose two columns hold the same row: xor-ed whole it is 0) and with (the per-block row), SUB (BLOCK_K 256: two
# group rows a block), NVFP4's block scales (with ACC_SCALE: S3 one dot a K block, as fused_kernel).
READ_CASES = [("int4", 128, True), ("int4", 128, False), ("int4", 256, False), ("nvfp4", 128, False),
              ("nvfp4", 128, True)]


@pytest.mark.parametrize(("fmt", "block_k", "acc"), READ_CASES)
def test_the_stages_read_every_word_and_the_dot_sums_to_the_reference(probe, fmt, block_k, acc):
    c = fused_gemm.config(16, 64, block_k, 2, 4, 2, acc=acc)
    x, fg, ref = operands(fmt, 3, 512, 192, c)  # N = 192: three 64-row tiles of the layout's 256 padded rows
    km = fg.kmajor
    out = probe.stage_out(probe.READ, 3, fg.n, c, x.device)
    probe.stage_launch(probe.READ, x, km.wt, km.scales, ts_of(fg), out, fg, c)
    assert probe.word_xor(out[0::2]) == probe.word_xor(km.wt)  # the padding is zeros: xor of the whole tensor
    # the scales each K block reads, xor-ed as loaded
    assert probe.word_xor(out[1::2]) == probe.scale_xor(km.scales, 512, fg.group, fg.n, 64, block_k)
    short = SimpleNamespace(n=128, fmt=fg.fmt, group=fg.group)  # a launch over two of the three tiles misses words
    out = probe.stage_out(probe.READ, 3, 128, c, x.device)
    probe.stage_launch(probe.READ, x, km.wt, km.scales, ts_of(fg), out, short, c)
    assert probe.word_xor(out[0::2]) != probe.word_xor(km.wt)
    # exactly the two tiles' scales (16-bit xors of few distinct E4M3 values can collide: no != check)
    assert probe.word_xor(out[1::2]) == probe.scale_xor(km.scales, 512, fg.group, 128, 64, block_k)

    plane = probe.stage_out(probe.DOT, 3, fg.n, c, x.device)
    probe.stage_launch(probe.DOT, x, km.wt, km.scales, ts_of(fg), plane, fg, c)
    tol = int4_gemm.tolerance(DT)
    assert rel_error(plane, ref) <= tol
    probe.stage_launch(probe.DOT, x, km.wt, km.scales, ts_of(fg), plane, fg, c)  # adds, never stores
    assert rel_error(plane, 2 * ref) <= tol


def test_the_fold_stages_sum_to_the_reference(probe):
    # FOLD (int4, ACC_SCALE): S3 takes the offset off each block's product, as fused_kernel does; S2
    # decodes with the offset on (its sums then differ from the unfolded decode's).
    c = {**fused_gemm.config(16, 64, 128, 2, 4, 2, acc=True), "FOLD": True}
    x, fg, ref = operands("int4", 3, 512, 192, c)
    km = fg.kmajor
    plane = probe.stage_out(probe.DOT, 3, fg.n, c, x.device)
    probe.stage_launch(probe.DOT, x, km.wt, km.scales, ts_of(fg), plane, fg, c)
    assert rel_error(plane, ref) <= int4_gemm.tolerance(DT)
    sums = [probe.stage_out(probe.DECODE, 3, fg.n, c, x.device) for _ in range(2)]
    for out, cc in zip(sums, (c, {**c, "FOLD": False}), strict=True):
        probe.stage_launch(probe.DECODE, x, km.wt, km.scales, ts_of(fg), out, fg, cc)
    assert torch.isfinite(sums[0]).all() and not torch.equal(sums[0], sums[1])


@pytest.mark.parametrize("m", [1, 3])
def test_the_gemv_matches_the_reference(probe, m):
    x, fg, ref = operands("int4", m, 512, 192, fused_gemm.config(16, 64, 128, 2))
    km = fg.kmajor
    out = torch.empty(m, fg.n, dtype=DT)
    ws, count = torch.zeros(m * fg.n), torch.zeros(3, dtype=torch.int32)
    for _ in range(2):  # the workspace and counters are left zeroed for the next call
        out.zero_()
        probe.gemv_launch(x, km.wt, km.scales, out, ws, count, fg, 64, 2, 4, 2)
        assert rel_error(out, ref) <= int4_gemm.tolerance(DT)
    assert not ws.any() and not count.any()


@pytest.mark.parametrize("block_k", [128, 64])
def test_the_halves_dot_sums_to_the_reference(probe, block_k):
    # HALVES (S3 w8's candidate): each K block's weights and x as two half-K tiles; BLOCK_K 64 takes the
    # second half of each 128-k tile row's block too (its offsets within the row).
    c = {**fused_gemm.config(16, 64, block_k, 2, 8, 2, acc=True), "HALVES": True}
    x, fg, ref = operands("int4", 3, 512, 192, c)
    km = fg.kmajor
    plane = probe.stage_out(probe.DOT, 3, fg.n, c, x.device)
    probe.stage_launch(probe.DOT, x, km.wt, km.scales, ts_of(fg), plane, fg, c)
    assert rel_error(plane, ref) <= int4_gemm.tolerance(DT)


def test_the_halves_kernel_rows(probe, monkeypatch):
    # S4 halves: fused_kernel itself with HALVES at M <= 16 beside S4 kernel and S4 fold, at 8 warps capped at 64
    # registers and at 4 warps r128 (the interpreter: 4 warps, no cap), each a config FusedGemm takes (config_for:
    # the 8-warp split-K one only with HALVES) that runs HALVES' loop (halved).
    rows = []
    monkeypatch.setattr(probe, "kernel_row", lambda probe_, lay, m, c, name: rows.append((m, name, c)))
    monkeypatch.setattr(probe, "stage_row", lambda *a, **k: None)
    c = fused_gemm.config(16, 128, 128, 8, 4, 3, acc=True, maxnreg=128)
    for smoke in (False, True):
        rows.clear()
        for m in (1, 16, 64):
            probe.fold_rows(SimpleNamespace(smoke=smoke), SimpleNamespace(fmt="int4"), m, c)
        halves = [(m, r["num_warps"], r.get("maxnreg")) for m, name, r in rows if name == "S4 halves"]
        want = [(4, None)] if smoke else [(8, 64), (4, 128)]
        assert halves == [(m, w, r) for m in (1, 16) for w, r in want]
        assert [name for m, name, _ in rows if m == 64] == ["S4 kernel", "S4 fold"]
    x, fg, _ = operands("int4", 1, 1024, 128, c)
    for _, name, r in rows:
        if name == "S4 halves":
            assert r["HALVES"] and not r.get("FOLD") and fused_gemm.halved(fg.fmt, fg.group, fg.k, r)
    fg.config = {**c, "num_warps": 8, "maxnreg": 64, "HALVES": True}
    with pytest.raises(ValueError, match="wrong sums on sm_90"):
        fg.config_for(1)  # refused unless the caller checks every call, as kernel_row does
    fg.unchecked = True
    assert fg.config_for(1)["num_warps"] == 8 and probe.HALVES_CHECK_CALLS >= 30


def test_a_failing_variant_is_its_row_and_the_smoke_counts_it(probe):
    # On the GPU a variant that raises is one line and the rest go on; the smoke, where every kernel must run,
    # exits 1 on it (main: probe.failed).
    p = probe.Probe(probe.parse_args(["--cpu-smoke"]))

    def boom():
        raise RuntimeError("no such tile")

    p.row("int4", 1, "S1 read", "cfg", 1.0, 1, boom)
    assert p.failed == 1 and p.rows[-1]["error"] == "RuntimeError" and "failed: RuntimeError" in p.lines[-1]
