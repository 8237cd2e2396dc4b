"""The decode preset (Llama-3 layers at M <= 64), each weight-only row's % of
the weight-read floor, and the report's geometric means of it."""

import math
from types import SimpleNamespace

import pytest
import torch

from qgemm_bench.errors import InputError
from qgemm_bench.harness import plan, report
from qgemm_bench.harness.assemble import assemble
from qgemm_bench.harness.results import INCORRECT, OK, Row, load
from qgemm_bench.operators import int4_gemm, nvfp4_gemm, split_k_gemm
from qgemm_bench.types import Shape

CPU = torch.device("cpu")
H200 = {"copy_GBps": 4180.0, "bf16_matmul_TFLOPs": 780.0}
LLAMA_KN = {(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096),  # 8B: qkv, o, gate+up, down
            (8192, 10240), (8192, 8192), (8192, 57344), (28672, 8192)}  # 70B


# ------------------------------------------------------------------ the preset


@pytest.mark.parametrize("op", [int4_gemm, nvfp4_gemm])
def test_decode_preset_is_every_llama_layer_at_decode_batch_sizes(op):
    shapes = op.PRESETS["decode"]
    assert len(shapes) == len(set(shapes)) == 8 * 7
    assert {(s.K, s.N) for s in shapes} == LLAMA_KN
    assert {s.M for s in shapes} == {1, 2, 4, 8, 16, 32, 64}
    assert Shape(1, 8192, 8192) in shapes and Shape(64, 14336, 4096) in shapes
    for s in shapes:
        op.validate(s, op.Settings())


def choose(op, settings):
    return plan.choose_shapes(SimpleNamespace(shape=None, shapes="decode"), op, settings, CPU, torch.float16)


def test_decode_preset_drops_or_refuses_shapes_a_group_size_does_not_fit(capsys):
    kept = choose(int4_gemm, int4_gemm.Settings(4096))  # 14336 is not a multiple of 4096
    assert len(kept) == 7 * 7 and all(s.K != 14336 for s in kept)
    assert "skipping 7 shape(s) of preset 'decode'" in capsys.readouterr().err
    with pytest.raises(InputError, match="no shape of preset 'decode' fits the settings group=96"):
        choose(int4_gemm, int4_gemm.Settings(96))
    assert len(choose(int4_gemm, int4_gemm.Settings("channel"))) == 56
    assert len(choose(nvfp4_gemm, nvfp4_gemm.Settings())) == 56
    with pytest.raises(InputError, match="unknown preset 'decode' for split_k_gemm"):
        plan.choose_shapes(SimpleNamespace(shape=None, shapes="decode"), split_k_gemm, split_k_gemm.Settings(),
                           CPU, torch.float16)


# ------------------------------------------------------------------ the floor


def record(op, backend, shape, us, settings, status=OK, device="cuda:0", dtype="bfloat16"):
    m, k, n = shape
    return 0, Row(op=op, backend=backend, M=m, K=k, N=n, dtype=dtype, settings=settings, device=device,
                  timing="graph", status=status, samples_us=[us], p50_us=us, p20_us=us, p80_us=us)


def meta(ceilings):
    return {"settings": {"op": "int4_gemm", "dtype": "bfloat16", "baseline": "torch"}, "ceilings": ceilings}


def test_floor_against_a_hand_count():
    # int4 group 128, 1x8192x8192, bf16: x 8192*2 + weights 8192*8192/2 + scales 64*8192*2 + y 8192*2 bytes.
    hand = 16384 + 33554432 + 1048576 + 16384
    assert int4_gemm.bytes(Shape(1, 8192, 8192), torch.bfloat16, int4_gemm.Settings(128)) == hand
    # NVFP4: codes 8192*8192/2, E4M3 scales 512*8192, the fp32 tensor scale.
    hand4 = 16384 + 33554432 + 4194304 + 4 + 16384
    recs = [record("int4_gemm", "triton", (1, 8192, 8192), 20.0, {"group_size": 128}),
            record("nvfp4_gemm", "triton", (1, 8192, 8192), 25.0, {"unscaled": False}),
            record("split_k_gemm", "triton", (16, 4096, 16), 9.0, {"bias": False})]
    int4, fp4, split = assemble(recs, meta(H200))
    assert int4.floor_us == pytest.approx(hand / 4180e9 * 1e6, rel=1e-12)
    assert int4.floor_us == pytest.approx(8.2861, abs=1e-4)  # the 8.3 us
    assert int4.pct_of_floor == pytest.approx(100 * int4.floor_us / 20.0, rel=1e-12)
    assert fp4.floor_us == pytest.approx(hand4 / 4180e9 * 1e6, rel=1e-12)
    assert fp4.pct_of_floor == pytest.approx(100 * hand4 / 4180e9 * 1e6 / 25.0, rel=1e-12)
    assert split.floor_us is None and split.pct_of_floor is None  # not a weight-only op
    assert split.sol_pct is not None


def test_cpu_rows_have_no_floor(tmp_path):
    recs = [record("int4_gemm", "torch", (1, 128, 64), 50.0, {"group_size": 128}, device="cpu", dtype="float16")]
    (row,) = assemble(recs, meta({}))
    assert row.gbps is not None and row.floor_us is None and row.pct_of_floor is None
    assert report.floor_section([row]) == []


def test_rows_written_before_the_floor_fields_still_load(tmp_path):
    import json

    (row,) = assemble([record("int4_gemm", "triton", (1, 8192, 8192), 20.0, {"group_size": 128})], meta(H200))
    d = row.to_dict()
    del d["floor_us"], d["pct_of_floor"]
    (tmp_path / "results.json").write_text(json.dumps({"metadata": meta(H200), "rows": [d]}))
    _, (back,) = load(tmp_path)
    assert back.floor_us is None and back.p50_us == 20.0


# ------------------------------------------------------------------ the report section


def synthetic_rows():
    """Two backends over three M at one layer; pct_of_floor set by hand."""
    pct = {"triton": {1: 40.0, 16: 90.0, 64: 20.0}, "humming": {1: 50.0, 16: 50.0, 64: 50.0}}
    rows = []
    for b, by_m in pct.items():
        for m, p in by_m.items():
            _, r = record("int4_gemm", b, (m, 8192, 8192), 10.0, {"group_size": 128})
            r.floor_us, r.pct_of_floor = p / 10, p
            rows.append(r)
    _, bad = record("int4_gemm", "fbgemm", (1, 8192, 8192), 1.0, {"group_size": 128}, status=INCORRECT)
    bad.floor_us, bad.pct_of_floor = 900.0, 9000.0  # fast but wrong: never counted
    _, base = record("int4_gemm", "torch", (1, 8192, 8192), 500.0, {"group_size": 128})
    base.floor_us, base.pct_of_floor = 8.0, 1.6
    return rows + [bad, base]


def test_floor_section_gives_each_backends_geometric_means():
    lines = report.floor_section(synthetic_rows())
    assert lines[0] == "## % of the weight-read floor"
    body = [line for line in "\n".join(lines).splitlines() if line.startswith("| ") and "---" not in line][1:]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in body]
    # Sorted by the overall mean: humming 50, triton (40*90*20)^(1/3) = 41.6; M <= 16: sqrt(40*90) = 60.
    assert cells[0] == ["humming", "3", "50.0", "2", "50.0"]
    assert cells[1][:2] == ["triton", "3"] and float(cells[1][2]) == pytest.approx(math.cbrt(40 * 90 * 20), abs=0.05)
    assert cells[1][3:] == ["2", "60.0"]
    assert cells[2] == ["torch", "1", "1.60", "1", "1.60"]
    assert not any(c[0] == "fbgemm" for c in cells)


def test_markdown_report_carries_the_section_only_when_rows_have_a_floor():
    m = {**meta(H200), "date": "d", "device": "cuda:0", "gpu": "NVIDIA H200", "torch": "t", "triton": "t",
         "helion": "h"}
    m["settings"] = {**m["settings"], "op_settings": {}, "timing": "graph", "warmup_ms": 1, "rep_ms": 1}
    rows = synthetic_rows()
    assert "## % of the weight-read floor" in report.markdown(rows, m, [])
    for r in rows:
        r.floor_us = r.pct_of_floor = None
    assert "weight-read floor" not in report.markdown(rows, m, [])
