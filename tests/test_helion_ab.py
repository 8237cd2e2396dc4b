"""scripts/helion_ab.py: --cpu-smoke runs every candidate (the Helion
entry, its TMA / persistent variants, triton) checked and timed on the
interpreter; bad input ends in one line."""

import re
from pathlib import Path

import pytest

from tests.support import load_script, run_script_in_process

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "helion_ab.py"


def load():
    return load_script("helion_ab")


def test_cpu_smoke_checks_and_times_every_candidate(monkeypatch, capsys):
    import helion._compat
    import helion.runtime

    hooks = helion._compat._supports_tensor_descriptor, helion.runtime.get_num_sm
    ab = load()
    monkeypatch.setitem(ab.SMOKE, "m", [80])  # one shape: M 80 (two 32-row tiles and a part: L2 groups)
    assert ab.main(["--cpu-smoke", "--op", "int4_gemm", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "int4_gemm 80x256x72 g128: 1 rounds" in out
    rows = [line for line in out.splitlines() if line.startswith("  ") and line.strip()[0].isdigit()]
    names = {"helion entry", "helion tma", "helion persistent_blocked+l2 8",
             "helion tma+persistent_interleaved+l2 8", "helion tma+stages 2", "triton"}
    assert {n for n in names if any(f" {n} " in r for r in rows)} == names, out
    assert "WRONG" not in out and "Error" not in out and "failed" not in out, out
    assert "geometric mean over 1 shapes" in out
    assert (helion._compat._supports_tensor_descriptor, helion.runtime.get_num_sm) == hooks  # undone


def test_nvfp4_entry_and_acc_twin_get_bf16_scales_twins(monkeypatch, capsys):
    """NVFP4: the entry and its acc_scale twin, each also with bf16_scales
    switched (kernels.fused on FusedGemm's bf16 block scales), all checked
    against the reference and timed (the TMA / persistent variants left out
    here: the first test runs them)."""
    from qgemm_bench.tuning import candidates

    ab = load()
    monkeypatch.setitem(ab.SMOKE, "m", [80])
    monkeypatch.setattr(candidates, "helion_fused_variants", lambda c, m: [])
    assert ab.main(["--cpu-smoke", "--op", "nvfp4_gemm", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    timed = out.split("geometric mean")[0].splitlines()
    rows = [line for line in timed if line.startswith("  ") and line.strip()[0].isdigit()]
    names = ("helion entry", "helion acc_scale True", "helion bf16_scales True",
             "helion acc_scale True+bf16_scales True", "triton")
    assert [n for n in names if any(f" {n} " in r for r in rows)] == list(names) and len(rows) == len(names), out
    assert "WRONG" not in out and "Error" not in out, out


@pytest.mark.parametrize("argv,says", [(["--op", "fp8_gemm"], "--op"), (["--kn", "100,72"], "K a multiple"),
                                       (["--m", "0"], "positive"), (["--m", "a"], "integers"),
                                       (["--config", "{"], "not JSON"), (["--config", "[1]"], "JSON object")])
def test_bad_input_ends_in_one_line(argv, says, monkeypatch, capsys):
    code, out, err = run_script_in_process(SCRIPT, argv, monkeypatch, capsys)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1 and not out


@pytest.mark.parametrize("op_name", ["int4_gemm", "nvfp4_gemm"])
def test_a_ws_entry_adds_its_config_on_fused_kernel(op_name):
    """Where the Triton backend's entry runs the warp-specialized kernel
    (H200, 256x4096x4096), a "triton no WS" row: the same config without
    its WS tiles, on the fused_kernel path; the note names both. None where
    the entry has no WS tiles (the CPU's interpreter config)."""
    import torch

    from qgemm_bench import operators
    from qgemm_bench.configs.store import DEFAULT
    from qgemm_bench.target import Target
    from qgemm_bench.types import Case, Shape

    ab, op = load(), operators.get(op_name)
    settings = op.Settings(128) if op_name == "int4_gemm" else op.Settings()
    for target, rows in ((DEFAULT.entries()["h200"], ["triton no WS"]), (Target.cpu(), [])):
        case = Case(op_name, Shape(256, 4096, 4096), torch.float16, torch.device("cpu"), settings, target)
        added, notes = [], []
        record = added.append
        ab.add_without_ws(op, case, [op.make_inputs(case, 0)], target, lambda name, calls, r=record: r(name), notes)
        assert added == rows
        if rows:
            assert len(notes) == 1 and "'WS'" not in notes[0].split(" (the entry")[0] and "BLOCK_M" in notes[0]


def test_frag_rows_adds_fragment_order_and_four_warp_twins_of_a_wide_tile(monkeypatch, capsys):
    """--frag-rows above helion_ops.FRAG_MAX_BLOCK_M: an 8-warp entry of 128
    rows also runs on 4 warps and on fragment-order weights (both checked
    against the reference), and the guard is back after the run."""
    from qgemm_bench.backends import helion_ops

    ab = load()
    monkeypatch.setitem(ab.SMOKE, "m", [130])
    monkeypatch.setattr(helion_ops, "FUSED_INTERPRETER_CONFIG",
                        {"block_sizes": [32, 128], "block_k": 128, "num_warps": 8, "num_stages": 1})
    assert ab.main(["--cpu-smoke", "--op", "int4_gemm", "--rounds", "1", "--frag-rows", "128"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("  ") and line.strip()[0].isdigit()]
    for name in ("helion entry", "helion warps 4", "helion frag True", "helion warps 4+frag True", "triton"):
        assert any(f" {name} " in r for r in rows), (name, out)
    assert "WRONG" not in out, out
    assert helion_ops.FRAG_MAX_BLOCK_M == 64


def test_a_wide_four_warp_frag_entry_gets_its_k_order_twin_by_default(monkeypatch, capsys):
    """A stored entry in fragment order on 4 warps in a 128-row tile (what
    the tuner keeps at M = 256: helion_ops.frag_tile_ok takes it there) is
    timed against its K-order twin without --frag-rows; no 4-warp twin
    (it is on 4 already)."""
    from qgemm_bench.backends import helion_ops

    ab = load()
    monkeypatch.setitem(ab.SMOKE, "m", [130])
    monkeypatch.setattr(helion_ops, "FUSED_INTERPRETER_CONFIG",
                        {"block_sizes": [32, 128], "block_k": 128, "num_warps": 4, "num_stages": 1, "frag": True})
    assert ab.main(["--cpu-smoke", "--op", "int4_gemm", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("  ") and line.strip()[0].isdigit()]
    for name in ("helion entry", "helion frag False", "triton"):
        assert any(f" {name} " in r for r in rows), (name, out)
    assert not any("warps 4" in r for r in rows) and "WRONG" not in out, out


def test_a_wide_eight_warp_entry_gets_its_tma_frag_twin_by_default(monkeypatch, capsys):
    """A 128-row tile on 8 warps (no frag on pointer loads: helion_ops.
    frag_tile_ok) at M >= 128 is timed against its TMA twin in fragment
    order without --frag-rows, as the tuner's TMA pass times it
    (candidates.tma_frag_twin; helion_ops.tma_k_inner)."""
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.tuning import candidates

    ab = load()
    monkeypatch.setitem(ab.SMOKE, "m", [130])
    monkeypatch.setattr(candidates, "helion_fused_variants", lambda c, m: [])
    monkeypatch.setattr(helion_ops, "FUSED_INTERPRETER_CONFIG",
                        {"block_sizes": [32, 128], "block_k": 128, "num_warps": 8, "num_stages": 1})
    assert ab.main(["--cpu-smoke", "--op", "int4_gemm", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("  ") and line.strip()[0].isdigit()]
    assert any(" helion tma+frag True " in r for r in rows), out
    assert not any(" helion frag True " in r for r in rows), out  # the pointer-load tile stays in K order
    assert "WRONG" not in out, out


def test_config_adds_a_config_of_ones_own_over_the_entrys(monkeypatch, capsys):
    """--config: a Helion config of one's own (the keys it leaves out the
    entry's; tma with its tensor_descriptor indexing), checked against the
    reference and timed beside the entry, named by what it changes; the
    interpreter's 130-row shape takes the K-innermost x view (M >= 128)."""
    from qgemm_bench.tuning import candidates

    ab = load()
    monkeypatch.setitem(ab.SMOKE, "m", [130])
    monkeypatch.setattr(candidates, "helion_fused_variants", lambda c, m: [])
    assert ab.main(["--cpu-smoke", "--op", "int4_gemm", "--rounds", "1",
                    "--config", '{"block_sizes": [32, 64], "frag": true, "tma": true}']) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("  ") and line.strip()[0].isdigit()]
    name = "helion block_sizes [32, 64]+tma+frag True"
    assert any(f" {name} " in r for r in rows), out
    assert "'indexing': 'tensor_descriptor'" in out.split(f"  {name}: ")[1].splitlines()[0]
    assert "WRONG" not in out, out


def test_check_calls_reports_a_candidate_wrong_in_some_calls(monkeypatch, capsys):
    """--check-calls N: each candidate checked over N calls before it is
    timed; one wrong call of N makes it WRONG, with the count, not timed
    (here every third check in the run reads a large error)."""
    from qgemm_bench.operators import common
    from qgemm_bench.tuning import candidates

    ab = load()
    monkeypatch.setitem(ab.SMOKE, "m", [80])
    monkeypatch.setattr(candidates, "helion_fused_variants", lambda c, m: [])
    real, seen = common.rel_error, []

    def every_third_wrong(got, ref):
        seen.append(1)
        return 1.0 if len(seen) % 3 == 0 else real(got, ref)

    monkeypatch.setattr(common, "rel_error", every_third_wrong)
    assert ab.main(["--cpu-smoke", "--op", "int4_gemm", "--rounds", "1", "--check-calls", "3"]) == 0
    out = capsys.readouterr().out
    assert "helion entry: WRONG in 1 of 3 calls (relative error up to 1.00e+00" in out, out
    rows = [line for line in out.splitlines() if line.startswith("  ") and line.strip()[0].isdigit()]
    assert not rows, out  # every candidate had a wrong third call: none timed


def test_labels_name_what_a_variant_adds_rot_included():
    ab = load()
    entry = {"block_sizes": [64, 16], "block_k": 128, "num_warps": 4, "num_stages": 3}
    assert ab.label(entry, entry) == "helion entry"
    assert ab.label({**entry, "rot": True}, entry) == "helion rot True"
    assert ab.label({**entry, "rot": True, "bf16_scales": True}, entry) == "helion bf16_scales True+rot True"


def test_entry_only_times_the_entry_and_own_configs_without_variants(monkeypatch, capsys):
    """--entry-only: the store entry, --config's and triton alone (no TMA,
    persistent, acc_scale, PDL or frag twins), each checked and timed."""
    ab = load()
    monkeypatch.setitem(ab.SMOKE, "m", [80])
    assert ab.main(["--cpu-smoke", "--op", "int4_gemm", "--rounds", "1", "--entry-only",
                    "--config", '{"num_stages": 2}']) == 0
    out = capsys.readouterr().out
    rows = [m.group(1) for line in out.split("geometric mean")[0].splitlines()
            if (m := re.match(r"\s+[\d.]+\s+\S+\s+(.+?)\s{2,}", line))]
    assert sorted(rows) == ["helion entry", "helion stages 2", "triton"], out
    assert "WRONG" not in out and "Error" not in out, out
