"""The Helion fused kernel's TMA and persistent variants (candidates.
helion_fused_variants, kernels.fused's `tma`): chosen by rule, their
generated Triton has what each asks for (tensor descriptors for x and the
weights, a persistent loop, L2 grouping, a deeper K loop), and they run
right on the interpreter (fp16, fresh random inputs, ragged shapes) against
fp64. The CPU has no tensor descriptors or SM count: both are patched in
(Helion's own test hooks: _compat._supports_tensor_descriptor,
runtime.get_num_sm)."""

import re
import time

import pytest
import torch

from qgemm_bench.backends.helion_ops import FUSED_ARGUMENTS
from qgemm_bench.operators import int4_gemm, nvfp4_gemm
from qgemm_bench.tuning import candidates as cands
from tests.support import check, interpreter, needs_gpu
from tests.test_helion_fused_split import fused_config, weight_only


@pytest.fixture
def tensor_descriptors(monkeypatch):
    import helion._compat

    monkeypatch.setattr(helion._compat, "_supports_tensor_descriptor", lambda: True)


@pytest.fixture
def sms(monkeypatch):
    import helion.runtime

    monkeypatch.setattr(helion.runtime, "get_num_sm", lambda *a, **k: 3)


@pytest.mark.parametrize("op", ["int4_gemm", "nvfp4_gemm"])
@pytest.mark.parametrize("m", [1, 64, 128, 256, 512, 1024])
def test_variants_follow_the_pool_by_rule(op, m):
    """Every pool candidate kept, in order; then at most 4 variants of the
    first, none a duplicate: tma, persistent (blocked with pointer loads,
    interleaved with tma), L2 grouping where M has 2+ tiles, one stage
    deeper where the stages fit. At the H200's entry (its table takes the
    fused kernel with split-K at M <= 64 too); the split path has none."""
    from qgemm_bench.configs.store import DEFAULT

    h200, shape = DEFAULT.entries()["h200"], (m, 8192, 8192)
    if cands.helion_path(op, m, shape, h200) != "fused":
        assert m <= 64
        assert not any(c.get("tma") or c.get("pid_type") for c in cands.helion(op, m, shape, h200, variants=True))
        pytest.skip("the split path at this M: no variants")
    full = cands.helion(op, m, shape, h200, variants=True)
    pool = cands.helion(op, m, shape, h200)  # the default (HELION_VARIANTS): the plan's
    assert pool == cands.helion(op, m, shape, h200, variants=False)
    assert full[:len(pool)] == pool and pool
    added = full[len(pool):]
    assert 3 <= len(added) <= 4 and all(v not in pool for v in added)
    first = pool[0]
    bn, bm = first["block_sizes"]
    tma = [v for v in added if v.get("tma")]
    assert all(v["indexing"] == "tensor_descriptor" for v in tma) and len(tma) == len(added) - 1
    pids = {v.get("pid_type"): v for v in added}
    assert pids["persistent_blocked"].get("tma") is None and pids["persistent_interleaved"]["tma"]
    for v in pids["persistent_blocked"], pids["persistent_interleaved"]:
        assert ("l2_groupings" in v) == (-(-m // bm) > 1)
        # by TMA without tiled (cands.tma_twin: TMA loads read the untiled rows)
        like = {k: x for k, x in first.items() if not (v.get("tma") and k == "tiled")}
        assert {k: x for k, x in v.items() if k not in ("tma", "indexing", "pid_type", "l2_groupings")} == like
    deeper = [v for v in added if v["num_stages"] != first["num_stages"]]
    fits = (first["num_stages"] + 1) * (first["block_k"] * bm * 2 + bn * first["block_k"] // 2) <= cands.HELION_SMEM
    assert len(deeper) == fits
    if fits:
        assert deeper[0] == {**{k: x for k, x in first.items() if k != "tiled"}, "tma": True,
                             "indexing": "tensor_descriptor", "num_stages": first["num_stages"] + 1}


def test_the_plan_counts_the_variants_where_they_are_on(monkeypatch):
    """HELION_VARIANTS off: the plan as before; on: every fused unit's
    variants counted at plan.HELION_CANDIDATE_S each (tune_unit times what the plan counts)."""
    from qgemm_bench.configs.store import DEFAULT
    from qgemm_bench.tuning import plan

    h200 = DEFAULT.entries()["h200"]
    prior = DEFAULT.read("h100", "weight_only")

    def units():
        return {u.id: u for u in plan.helion_units(plan.OPS, ("int4", "nvfp4"), None, prior, h200)}

    off = units()
    monkeypatch.setattr(cands, "HELION_VARIANTS", True)
    on = units()
    assert off.keys() == on.keys()
    for key, u in on.items():
        added = u.candidates - off[key].candidates
        assert (3 <= added <= 4) if u.path.endswith("_fused") else added == 0, key
        assert u.cost - off[key].cost == pytest.approx(plan.HELION_CANDIDATE_S * added)


def kernel_code(fmt: int, m: int, cfg: dict, k: int = 1024, n: int = 512) -> str:
    """kernels.fused's Triton for cfg at M (bf16, the PTX decodes: the
    GPU's; x [M, K] transposed as helion_ops passes it; int4 groups of 128)."""
    import helion

    from qgemm_bench.backends.helion_kernels import kernels
    from qgemm_bench.backends.helion_kernels.tuning import helion_settings

    group = 16 if fmt else 128
    s = torch.ones(k // group, n, dtype=torch.float8_e4m3fn if fmt else torch.bfloat16)
    split = cfg.get("split_k", 1)
    args = (torch.zeros(m, k, dtype=torch.bfloat16).t(), torch.zeros(n, k // 2, dtype=torch.uint8), s.t(),
            torch.ones(1), n, fmt, "sub" if fmt else "block", group, cfg["block_k"], True, split,
            torch.zeros(m, n) if split > 1 else None,
            torch.zeros(-(-m // 16), n // 16, dtype=torch.int32) if split > 1 else None, bool(cfg.get("tma")))
    return kernels.fused.bind(args).to_triton_code(helion.Config(**helion_settings(cfg, FUSED_ARGUMENTS)))


@pytest.mark.parametrize("op,m,l2,deeper", [("int4_gemm", 512, True, False), ("nvfp4_gemm", 64, False, True)])
def test_variant_code_has_what_was_asked(op, m, l2, deeper, tensor_descriptors):
    """The code the GPU would compile, for the H200 units' variants: x and
    weight tiles by tl.make_tensor_descriptor (a K-step view each), a
    persistent loop over the SMs (blocked: a contiguous range each), the L2
    groups, one stage more at launch; the unit's first candidate keeps its
    pointer loads."""
    from qgemm_bench.configs.store import DEFAULT

    fmt = int(op == "nvfp4_gemm")
    first = cands.helion(op, m, (m, 8192, 8192), DEFAULT.entries()["h200"], variants=False)[0]
    plain = kernel_code(fmt, m, first)
    assert "make_tensor_descriptor" not in plain and "virtual_pid" not in plain
    variants = cands.helion_fused_variants(first, m)
    assert any("l2_groupings" in v for v in variants) == l2
    assert any(v["num_stages"] > first["num_stages"] for v in variants) == deeper
    for v in variants:
        code = kernel_code(fmt, m, v)
        device, host = code[:code.index("\ndef fused(")], code[code.index("\ndef fused("):]
        if v.get("tma"):
            x = "xk" if m >= 128 else "x3"  # from M = 128 x's view keeps K innermost: its tile transposed after
            assert re.search(rf"{x}_desc = tl\.make_tensor_descriptor\({x}, ", device), v
            assert re.search(r"w3_desc = tl\.make_tensor_descriptor\(w3, ", device), v
            assert f"{x}_desc.load(" in device and "w3_desc.load(" in device
        else:
            assert "make_tensor_descriptor" not in device
        pid = v.get("pid_type")
        if pid:
            assert "for virtual_pid in tl.range(" in device and "_NUM_SM" in device
            assert ("start_pid" in device) == (pid == "persistent_blocked")
        else:
            assert "virtual_pid" not in device
        assert ("num_pid_in_group" in device) == ("l2_groupings" in v)
        assert f"num_stages={v['num_stages']})" in host


# Ragged M and N; int4 groups of 128 (one group a step) and 32 (four), a
# split of 3; NVFP4 and its K of 1040, not a multiple of the step: the tma
# argument's views need whole steps, so that kernel keeps pointer loads.
SHAPES = [(int4_gemm, (100, 1152, 72), 128, 128, 1), (int4_gemm, (65, 1152, 72), 32, 128, 3),
          (nvfp4_gemm, (100, 1152, 72), None, 128, 1), (nvfp4_gemm, (70, 1040, 40), None, 64, 2)]


@interpreter
@pytest.mark.parametrize("which", range(4))
@pytest.mark.parametrize("op,shape,group,bk,split", SHAPES)
def test_variants_run_right_on_the_interpreter(op, shape, group, bk, split, which, monkeypatch,
                                              tensor_descriptors, sms):
    import helion

    from qgemm_bench.backends.helion_kernels.tuning import helion_settings

    base = fused_config(split, bn=32, bm=32, bk=bk)
    variants = cands.helion_fused_variants(base, shape[0])
    if which >= len(variants):
        pytest.skip("no deeper variant for these tiles")
    cfg = variants[which]
    settings = {"group_size": group} if group else {}
    gemm, x, ref = weight_only(op, shape, monkeypatch, cfg, **settings)
    check(gemm(x), ref)
    r = gemm.bound(x)
    assert bool(r.config.get("tma")) == bool(cfg.get("tma"))
    code = r.run.to_triton_code(helion.Config(**helion_settings(r.config, FUSED_ARGUMENTS)))
    assert ("x3_desc" in code) == (bool(cfg.get("tma")) and shape[1] % bk == 0)
    check(gemm(x), ref)  # again: a split's workspace and counters were left zeroed


@interpreter
@pytest.mark.parametrize("op,group,split,bf16", [(int4_gemm, 128, 1, False), (nvfp4_gemm, None, 2, False),
                                                (nvfp4_gemm, None, 1, True)])
def test_tma_from_m_128_loads_x_k_innermost_and_computes_the_same(op, group, split, bf16, monkeypatch,
                                                                 tensor_descriptors, sms):
    """From M = 128 the tma variant reads x through a [steps, M, block_k]
    view (K innermost) and transposes each tile after the load; NVFP4 there
    decodes at a unit scale and multiplies its block scales after (its
    scales inside the PTX decode returned NaN on the H200); ragged M and N,
    against the fp64 reference."""
    import helion

    from qgemm_bench.backends.helion_kernels.tuning import helion_settings

    cfg = cands.helion_fused_variants(fused_config(split, bn=32, bm=64, bk=128), 130)[0]
    cfg = {**cfg, "bf16_scales": True} if bf16 else cfg
    assert cfg.get("tma")
    settings = {"group_size": group} if group else {}
    gemm, x, ref = weight_only(op, (130, 1152, 72), monkeypatch, cfg, **settings)
    check(gemm(x), ref)
    r = gemm.bound(x)
    assert bool(r.config.get("bf16_scales")) == bf16
    code = r.run.to_triton_code(helion.Config(**helion_settings(r.config, FUSED_ARGUMENTS)))
    assert "xk_desc.load(" in code and "x3_desc" not in code
    assert ("one = tl.full(" in code) == (op is nvfp4_gemm)


# acc_scale: one group a step (group 128, steps of 64 and 128; a split of
# 2 and none) applies; groups of 32 (four a step) and per channel ignore it.
@interpreter
@pytest.mark.parametrize("shape,group,bk,split", [((70, 1024, 72), 128, 128, 1), ((65, 1152, 40), 128, 64, 2),
                                                  ((100, 1152, 72), 32, 128, 1), ((80, 512, 72), "channel", 128, 2)])
def test_acc_scale_scales_each_steps_product_and_computes_the_same(shape, group, bk, split, monkeypatch):
    import helion

    from qgemm_bench.backends.helion_kernels.tuning import helion_settings

    cfg = {**fused_config(split, bn=32, bm=32, bk=bk), "acc_scale": True, "maxnreg": 128}
    gemm, x, ref = weight_only(int4_gemm, shape, monkeypatch, cfg, group_size=group)
    check(gemm(x), ref)
    r = gemm.bound(x)
    applies = group == 128
    # Where it cannot apply it is dropped; the register cap always (Helion takes none on a flat program).
    assert (r.config.get("acc_scale"), r.config.get("maxnreg")) == (True if applies else None, None)
    code = r.run.to_triton_code(helion.Config(**helion_settings(r.config, FUSED_ARGUMENTS)))
    # Its own product (a dot without the accumulator), scaled and added; else the dot accumulates.
    dots = [line for line in code.splitlines() if "tl.dot(" in line]
    assert len(dots) == 1 and ("acc=" in dots[0]) != applies, dots
    plain = {k: v for k, v in cfg.items() if k not in ("acc_scale", "maxnreg")}
    gemm2, x2, ref2 = weight_only(int4_gemm, shape, monkeypatch, plain, group_size=group)
    code2 = gemm2.bound(x2).run.to_triton_code(helion.Config(**helion_settings(plain, FUSED_ARGUMENTS)))
    assert (code != code2) == applies
    check(gemm(x), ref)  # again: a split's workspace and counters were left zeroed


def dropped(op, shape, key: str, monkeypatch):
    """(gemm, x, cfg): a fused config with `key` on, where helion_ops drops
    it: the bound config lacks it and the output is right without it."""
    cfg = {**fused_config(2, bn=32, bm=32, bk=128), key: True}
    gemm, x, ref = weight_only(op, shape, monkeypatch, cfg)
    assert key not in gemm.bound(x).config
    check(gemm(x), ref)
    return gemm, x, cfg


# bf16_scales: NVFP4 only (int4's scales are bf16 already): int4 drops it and
# runs as without (helion_ops; NVFP4's runs: tests/test_nvfp4_gemm.py).
@interpreter
def test_int4_drops_bf16_scales(monkeypatch):
    gemm, _, _ = dropped(int4_gemm, (70, 1024, 72), "bf16_scales", monkeypatch)
    assert gemm.resident(70)[1].dtype == gemm.scales.dtype and gemm._bf16_scales is None


# rot: NVFP4 on ROT_DECODE's permuted weights (the PTX decode, pointer loads); dropped where it cannot run,
# as bf16_scales: on the interpreter (fp16, no PTX) the config runs as without it, on the plain weights.
@interpreter
def test_rot_is_dropped_where_the_ptx_decode_does_not_run(monkeypatch):
    from types import SimpleNamespace

    gemm, x, cfg = dropped(nvfp4_gemm, (70, 1024, 80), "rot", monkeypatch)
    assert not gemm._wt_rot and gemm.resident(70)[0] is gemm.kmajor().wt
    gpu_bf16 = SimpleNamespace(dtype=torch.bfloat16, is_cuda=True)  # what _use_asm asks of x
    assert gemm._rot_applies(gpu_bf16, {**cfg, "decode_asm": True})
    assert not gemm._rot_applies(gpu_bf16, {**cfg, "decode_asm": True, "tma": True})
    assert not gemm._rot_applies(gpu_bf16, {**cfg, "decode_asm": False}) and not gemm._rot_applies(x, cfg)
    # N not a multiple of 16: a permuted word holds rows r and r + 8, and Helion masks the rows past N
    ragged, _, _ = weight_only(nvfp4_gemm, (70, 1024, 72), monkeypatch, cfg)
    assert not ragged._rot_applies(gpu_bf16, {**cfg, "decode_asm": True})
    int4, _, _ = weight_only(int4_gemm, (70, 1024, 72), monkeypatch, cfg)
    assert not int4._rot_applies(gpu_bf16, {**cfg, "decode_asm": True})


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("tile,split", [(([64, 16], 128, 4), 1), (([64, 16], 128, 4), 2), (([128, 16], 256, 8), 2),
                                        (([128, 128], 128, 8), 1)])
def test_rot_gives_the_plain_decode_s_output_bit_for_bit_on_gpu(tile, split):
    """Helion's fused kernel with rot reads fused_gemm.rot_words_in_register_order's
    bytes, permuted for the Triton kernel's A-operand register order: where
    Helion's generated Triton hands the PTX the same 4 bytes a call, its
    output is the plain decode's bit for bit (the same values, products and
    order), and right against fp64; anything else decodes garbage. The
    register layout may change with the tile: a few tiles, M 7 (the
    split-K decode path where the store's table takes the fused path
    there) and 100 (fused everywhere). N 208: whole groups of 16 rows (a
    ragged N drops rot: its last group's words were wrong, H200), in a
    ragged last tile."""
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels import tuning
    from qgemm_bench.operators.formats import NVFP4
    from tests.support import case, fp64, seed

    (bn, bm), bk, warps = tile
    cfg = {"block_sizes": [bn, bm], "block_k": bk, "num_warps": warps, "num_stages": 3, "split_k": split}
    ran = 0
    for m in (7, 100):
        inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, (m, 1280, 208), torch.bfloat16, torch.device("cuda")),
                                        seed())
        outs = []
        for rot in (False, True):
            with tuning.options(explicit={**cfg, "rot": rot}):
                gemm = helion_ops.WeightOnly("nvfp4_gemm", inputs.w, inputs.block_scales.contiguous(),
                                             inputs.tensor_scale, NVFP4, None)
                if gemm.path(m) != "fused":  # this GPU's table sends M to the split path: no rot there
                    break
                assert bool(gemm.bound(inputs.x).config.get("rot")) == rot
                outs.append(gemm(inputs.x))
                assert bool(gemm._wt_rot) == rot
        if len(outs) == 2:
            assert torch.equal(outs[1], outs[0]), m
            check(outs[1], fp64(inputs.x, nvfp4_gemm.dequantize(inputs)), torch.bfloat16)
            ran += 1
    assert ran, "no M took the fused path"


def test_bf16_scales_take_the_scale_conversion_out_of_the_sm90_main_loop():
    """scripts/helion_sass.py (offline sm_90, NVFP4, M = 16, 128x16 tiles,
    split 2, acc_scale): from E4M3 block scales the loop converts each
    thread's broadcast scales (F2FP) after a byte-wise trip through shared
    memory (STS.U8); with bf16_scales neither (docs/helion.md)."""
    from tests.support import script_runs
    from tests.test_fused_sass import bundled_cuda_tools

    if not bundled_cuda_tools():
        pytest.skip("this Triton has no bundled CUDA tools: no offline sm_90 compile")
    base = ["--fmt", "nvfp4", "--m", "16", "--split", "2", "--acc", "--k", "512", "--n", "256"]
    for bf16, r in zip((False, True), script_runs("helion_sass", [base, [*base, "--bf16-scales"]]), strict=True):
        assert r.returncode == 0, r.stderr[-2000:]
        lines = r.stdout.splitlines()
        assert lines[1].startswith("main loop (one K block): "), lines
        ops = dict(item.rsplit(" ", 1) for item in lines[2].strip().split(", "))
        memory = dict(item.rsplit(" ", 1) for item in lines[3].split("memory: ")[1].split(", "))
        # Relations, not one Triton version's counts (Triton 3.9 here: 686 -> 508 instructions, F2FP 32 -> 0).
        assert ("F2FP" in ops) != bf16 and ("STS.U8" in memory) != bf16, (bf16, ops, memory)


def test_rot_shortens_the_sm90_main_loop_and_takes_the_triton_kernels_byte_order(tmp_path):
    """scripts/helion_sass.py --rot (offline sm_90, NVFP4, M = 16, 128x16
    tiles, split 2): fewer main-loop instructions than the plain decode, and
    the inline asm's byte operand in the layout fused_gemm.rot_words_in_register_order
    assumes (its first two register bases: k + 1, then row + 8), which
    Helion's generated Triton need not share; --rot with int4 or --tma is
    refused in one line."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    from tests.support import script_runs
    from tests.test_fused_sass import bundled_cuda_tools

    if not bundled_cuda_tools():
        pytest.skip("this Triton has no bundled CUDA tools: no offline sm_90 compile")
    repo = Path(__file__).resolve().parent.parent
    base = ["--fmt", "nvfp4", "--m", "16", "--split", "2", "--k", "512", "--n", "256", "--bf16-scales"]
    count = {}
    runs = script_runs("helion_sass", [[*base, *(["--rot"] if rot else []), "--out", tmp_path / f"rot{int(rot)}"]
                                       for rot in (False, True)])
    for rot, r in zip((False, True), runs, strict=True):
        out = tmp_path / f"rot{int(rot)}"
        assert r.returncode == 0, r.stderr[-2000:]
        count[rot] = int(r.stdout.splitlines()[1].split(": ")[1].split()[0])
        ttgir = Path(f"{out}.ttgir").read_text()
        asm = next(line for line in ttgir.splitlines() if "tt.elementwise_inline_asm" in line and "fma.rn" in line)
        layout = re.search(r"tensor<\d+x\d+xi8, (#\w+)>", asm).group(1)
        bases = re.search(rf"^{layout} = .*?register = \[(\[\d+, \d+\]), (\[\d+, \d+\])", ttgir, flags=re.M)
        assert bases.groups() == ("[0, 1]", "[8, 0]"), bases.group(0)
        assert ("shf.r.wrap" in asm) == rot
    assert count[True] < count[False], count
    for bad in (["--fmt", "int4", "--rot"], ["--fmt", "nvfp4", "--rot", "--tma"]):
        r = subprocess.run([sys.executable, str(repo / "scripts" / "helion_sass.py"), *bad], capture_output=True,
                           text=True, cwd=repo, timeout=120)
        assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "--rot needs" in r.stderr, r.stderr


@pytest.mark.parametrize("m", [1, 16, 64, 256, 1024])
def test_the_pool_keeps_one_of_each_acc_scale_twin_by_m(m):
    """The Triton pool's ACC_SCALE configs become acc_scale ones; where an
    int4 config and its twin without both come, one stays: the acc one up to
    HELION_ACC_MAX_M, the plain one above. NVFP4 (one dot a K step, not
    timed against its twin yet) keeps both: each acc one beside its plain twin."""
    from qgemm_bench.backends.triton_kernels import fused_gemm
    from qgemm_bench.configs.store import DEFAULT
    from qgemm_bench.operators.formats import INT4

    h200, shape = DEFAULT.entries()["h200"], (m, 8192, 8192)
    if cands.helion_path("int4_gemm", m, shape, h200) != "fused":
        pytest.skip("the split path at this M")
    pool = cands.helion("int4_gemm", m, shape, h200)
    plain = [{k: v for k, v in c.items() if k not in ("acc_scale", "maxnreg", "pdl")} for c in pool]
    assert len(plain) == len({repr(sorted(c.items())) for c in plain})  # no twins left
    triton = cands.pruned(fused_gemm.pool(m, INT4), None, m)
    if any(c.get("ACC_SCALE") for c in triton):
        assert any(c.get("acc_scale") for c in pool) == (m <= cands.HELION_ACC_MAX_M)
    nv = cands.helion("nvfp4_gemm", m, shape, h200)
    plain_of = [{k: v for k, v in c.items() if k not in ("acc_scale", "maxnreg", "pdl")} for c in nv]
    twins = [p for c, p in zip(nv, plain_of, strict=True) if not c.get("acc_scale")]
    assert all(p in twins for c, p in zip(nv, plain_of, strict=True) if c.get("acc_scale")), nv


@pytest.mark.parametrize("m", [1, 16, 64, 256, 1024])
def test_int4_small_tiles_get_one_frag_twin(m):
    """int4 up to HELION_FRAG_MAX_M: the first candidate's twin on
    fragment-order weights, once, after the pool, on 4 warps where its tile
    is wider than FRAG_MAX_BLOCK_M rows (from HELION_FRAG_ALL_MIN_M every
    candidate's); NVFP4 (always in fragment order) and larger M none."""
    from qgemm_bench.backends.helion_ops import FRAG_MAX_BLOCK_M
    from qgemm_bench.configs.store import DEFAULT

    h200, shape = DEFAULT.entries()["h200"], (m, 8192, 8192)
    if cands.helion_path("int4_gemm", m, shape, h200) != "fused":
        pytest.skip("the split path at this M")
    pool = cands.helion("int4_gemm", m, shape, h200)
    frag = [c for c in pool if c.get("frag")]
    def twin(c):
        return {**c, "frag": True, **({"num_warps": 4} if c["block_sizes"][1] > FRAG_MAX_BLOCK_M else {})}

    if cands.HELION_FRAG_ALL_MIN_M <= m <= cands.HELION_FRAG_MAX_M:
        # every candidate's, but none past the first whose accumulator would take over 128 registers a thread
        plain = [c for c in pool if not c.get("frag")]
        fits = [c for i, c in enumerate(plain)
                if i == 0 or twin(c)["block_sizes"][0] * twin(c)["block_sizes"][1] <= 128 * 32 * twin(c)["num_warps"]]
        want = list(dict.fromkeys(repr(twin(c)) for c in fits))
        assert len(fits) < len(plain)  # [128, 256] on 4 warps left out
        assert [repr(c) for c in frag] == want and len(plain) + len(frag) == len(pool) and len(frag) > 1
        assert {**plain[2], "frag": True} in frag  # the split-2 tile 256x14336x4096 kept, its twin now timed
        assert pool[len(plain):] == frag  # after the pool
    elif m <= cands.HELION_FRAG_MAX_M:
        assert frag == [twin(pool[0])] and pool[-1] == twin(pool[0])
    else:
        assert frag == []
    assert not any(c.get("frag") for c in cands.helion("nvfp4_gemm", m, shape, h200))


def test_the_stored_entry_is_timed_first_then_its_frag_twin(monkeypatch):
    """tune_unit times the GPU's stored config first and, where frag applies
    and the entry has none, its frag twin second (the twin of the pool's
    first need not be the entry's: the H200's 64x8192x8192 entry, split 2,
    ran 34.0 us, its frag twin 30.0, and the tune never timed that twin)."""
    from qgemm_bench.configs.store import DEFAULT
    from qgemm_bench.tuning import helion as tuning_helion

    h200, m, shape = DEFAULT.entries()["h200"], 64, (64, 8192, 8192)
    if cands.helion_path("int4_gemm", m, shape, h200) != "fused":
        pytest.skip("the split path at this M")
    pool = cands.helion("int4_gemm", m, shape, h200)
    mine = {**pool[0], "split_k": 2, "num_stages": 5}
    assert mine not in pool
    seen = []
    monkeypatch.setattr(tuning_helion, "tune", lambda *a, **kw: seen.append(a[6]))
    kernel = cands.helion_kernel("int4_gemm", m, shape, h200)
    from qgemm_bench.backends.config_buckets import bucket

    other = {**pool[0], "split_k": 8}  # the prior GPU's entry, timed after this GPU's
    tuning_helion.tune_unit("int4_gemm", shape, torch.device("cpu"), None,
                            [{"kernels": {kernel: {bucket(*shape): {"config": mine}}}}, None,
                             {"kernels": {kernel: {bucket(*shape): {"config": other}}}}], target=h200)
    got = seen[0]
    assert got[:4] == [mine, {**mine, "frag": True}, other, {**other, "frag": True}] and all(c in got for c in pool)
    assert len(got) == len({repr(sorted(c.items())) for c in got})  # no config twice


@pytest.mark.parametrize("op", ["int4_gemm", "nvfp4_gemm"])
def test_no_candidate_caps_registers_on_a_flat_program(op):
    """Helion 1.4 refuses maxnreg unless pid_type is persistent (on CUDA; its
    interpreter does not check): the H200 tune lost the Triton winner's twin,
    16x128x128 split 8 acc r128, that way. The pool's configs carry none."""
    from qgemm_bench.configs.store import DEFAULT

    h200 = DEFAULT.entries()["h200"]
    for m in (1, 16, 64, 256, 1024):
        for c in cands.helion(op, m, (m, 8192, 8192), h200):
            assert not c.get("maxnreg") or str(c.get("pid_type")).startswith("persistent"), (m, c)


@pytest.mark.parametrize("pdl", [1, 2, 3])
@pytest.mark.parametrize("split", [1, 2])
def test_the_fused_kernel_with_pdl_waits_before_it_reads_what_a_kernel_before_writes(pdl, split, monkeypatch):
    """The Triton code Helion emits for kernels.fused with PDL: only the
    weights' side (scales, the L2 prefetch of the program's first weight
    bytes at PDL 2 and 3) before griddepcontrol.wait; x, the workspace and
    the counters after; the next kernel let in before the wait (1, 2) or
    after the K loop's last dot (3). The interpreter has no griddepcontrol:
    on a GPU it is timed (scripts/helion_ab.py)."""
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels import kernels
    from qgemm_bench.backends.helion_kernels.tuning import helion_settings

    cfg = {**fused_config(split, bn=32, bm=32, bk=128), "acc_scale": True, "pdl": pdl}
    gemm, x, _ = weight_only(int4_gemm, (70, 1024, 72), monkeypatch, cfg)
    monkeypatch.setattr(helion_ops.WeightOnly, "pdl_mode", staticmethod(lambda x, cfg: cfg.get("pdl", 0)))
    args = gemm._fused_args(x, cfg)
    assert args[-1] == pdl
    code = kernels.fused.bind(args).to_triton_code(helion_settings(cfg, FUSED_ARGUMENTS))
    body = code[code.index("def _helion_fused"):code.index("def fused(")]
    wait, launch = body.index("gdc_wait()"), body.index("gdc_launch_dependents()")
    assert body.count("gdc_wait()") == 1 and body.count("gdc_launch_dependents()") == 1
    assert wait < body.index("tl.load(xt") and ("tl.atomic" not in body or wait < body.index("tl.atomic"))
    assert ("tl.atomic" in body) == (split > 1)
    assert all(line.lstrip().startswith("sc = tl.load(st") for line in body[:wait].splitlines() if "tl.load(" in line)
    assert ("prefetch.global.L2" in body) == (pdl >= 2)
    if pdl >= 2:
        assert body.index("prefetch.global.L2") < wait and "wt + tl.minimum(" in body
    assert (launch > body.rindex("tl.dot(")) if pdl == 3 else (launch < wait)


def test_the_fused_kernel_runs_without_pdl_on_the_interpreter(monkeypatch):
    """A config's pdl is dropped where there is no griddepcontrol (the CPU),
    as split_k_parts.pdl_launch does for the Triton kernels."""
    cfg = {**fused_config(2, bn=32, bm=32, bk=128), "pdl": 2}
    gemm, x, ref = weight_only(int4_gemm, (70, 1024, 72), monkeypatch, cfg)
    assert len(gemm._fused_args(x, cfg)) == 13  # no pdl argument: the kernel's default 0
    check(gemm(x), ref)


# frag (int4 weights in fragment order, as NVFP4's and the Triton kernel's):
# groups of 128 (acc_scale and not, split 3) and of 32 (SUB: four a step);
# per channel and unscaled dropped (helion_ops._frag_scales_ok), and groups
# of 48, which are not whole runs of 32 k: K order read.
@interpreter
@pytest.mark.parametrize("shape,group,bk,split,acc", [((65, 1152, 72), 128, 128, 3, True),
                                                      ((100, 1024, 40), 128, 64, 1, False),
                                                      ((70, 1152, 72), 32, 128, 2, False),
                                                      ((65, 512, 40), "channel", 128, 1, False),
                                                      ((65, 512, 72), None, 128, 2, False),
                                                      ((65, 1152, 72), 48, 64, 1, False)])
def test_frag_reads_fragment_order_weights_and_computes_the_same(shape, group, bk, split, acc, monkeypatch):
    import helion

    from qgemm_bench.backends.helion_kernels.tuning import helion_settings

    cfg = {**fused_config(split, bn=32, bm=32, bk=bk), "frag": True, **({"acc_scale": True} if acc else {})}
    gemm, x, ref = weight_only(int4_gemm, shape, monkeypatch, cfg, group_size=group)  # None: unscaled
    check(gemm(x), ref)
    r = gemm.bound(x)
    applies = group not in (48, "channel", None)
    assert bool(r.config.get("frag")) == applies
    assert gemm.kmajor(applies).frag == applies and gemm.resident(shape[0])[0] is gemm.kmajor(applies).wt
    assert gemm._fused_args(x, r.config)[1] is gemm.kmajor(applies).wt
    code = r.run.to_triton_code(helion.Config(**helion_settings(r.config, FUSED_ARGUMENTS)))
    # The decoded halves permuted into K order (fused_gemm._in_k_order's FRAG) only with frag.
    assert ("[0, 1, 5, 3, 2, 4]" in code) == applies
    check(gemm(x), ref)  # again: a split's workspace and counters were left zeroed


# tiled (the Triton fused kernel's weight layout, kmajor_layout.TILE): int4
# in K order and fragment order, acc_scale, splits (3: uneven), NVFP4 with
# rot (dropped on the interpreter) and bf16 scales; row tiles narrower than,
# as wide as and wider than a tile's 64 rows; K steps of 32 to 128 (256
# spans two tiles: dropped, as with tma).
@interpreter
@pytest.mark.parametrize("op,shape,bn,bk,split,extra", [
    (int4_gemm, (65, 1152, 72), 64, 128, 3, {"acc_scale": True, "frag": True}),
    (int4_gemm, (66, 1024, 200), 128, 64, 1, {}),
    (int4_gemm, (70, 768, 40), 16, 32, 2, {"frag": True}),
    (nvfp4_gemm, (65, 1024, 136), 32, 128, 2, {"bf16_scales": True, "rot": True}),
    (nvfp4_gemm, (67, 768, 72), 64, 64, 4, {}),
    (int4_gemm, (65, 1024, 72), 64, 256, 1, {}),
    (int4_gemm, (65, 1024, 72), 64, 128, 1, {"tma": True, "indexing": "tensor_descriptor"}),
])
def test_tiled_reads_the_triton_kernels_tiles_and_computes_the_same(op, shape, bn, bk, split, extra, monkeypatch,
                                                                   tensor_descriptors):
    from qgemm_bench.backends.kmajor_layout import TILE, untiled

    cfg = {**fused_config(split, bn=bn, bm=32, bk=bk), "tiled": True, **extra}
    gemm, x, ref = weight_only(op, shape, monkeypatch, cfg)
    check(gemm(x), ref)
    r = gemm.bound(x)
    applies = bk <= TILE[1] and not extra.get("tma")
    assert bool(r.config.get("tiled")) == applies
    frag = bool(r.config.get("frag")) or op is nvfp4_gemm
    p = gemm.kmajor(frag, applies)
    assert p.tile == (TILE if applies else None)
    wt = gemm._fused_args(x, r.config)[1]
    assert wt is p.wt and gemm.resident(shape[0])[0] is wt
    assert list(gemm._kmajor) == [(frag, applies)]  # one copy: NVFP4's bf16 scales from it too
    if applies:  # the same bytes as the untiled copy, in tiles
        assert torch.equal(untiled(p), gemm.kmajor(frag).wt) and not torch.equal(p.wt, gemm.kmajor(frag).wt)
    check(gemm(x), ref)  # again: a split's workspace and counters were left zeroed


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("op,cfg", [
    (int4_gemm, {"block_sizes": [64, 16], "block_k": 128, "split_k": 2, "acc_scale": True, "frag": True, "pdl": 2}),
    (int4_gemm, {"block_sizes": [128, 64], "block_k": 64, "split_k": 1, "num_warps": 4}),
    (nvfp4_gemm, {"block_sizes": [128, 16], "block_k": 128, "split_k": 2, "bf16_scales": True, "rot": True}),
])
def test_tiled_gives_the_untiled_output_bit_for_bit_on_gpu(op, cfg):
    """On the GPU (bf16, the PTX decodes) the tiled kernel reads the same
    bytes into the same registers as the untiled one: the same output bit
    for bit, and right against fp64; M 1 and 100, N 200 (a ragged last
    tile, partial 64-row tile)."""
    from qgemm_bench.backends import registry
    from qgemm_bench.backends.helion_kernels import tuning
    from tests.support import case, fp64, seed

    cfg = {"decode_asm": True, "num_warps": 4, "num_stages": 3, **cfg}
    for m in (1, 100):
        c = case(op, (m, 2048, 200), torch.bfloat16, torch.device("cuda"))
        inputs = op.make_inputs(c, seed())
        outs = []
        for tiled in (False, True):
            with tuning.options(explicit={**cfg, "tiled": tiled}):
                run = registry.get(op.NAME, "helion").prepare(c, inputs).fn
                outs.append(run())
        assert torch.equal(outs[1], outs[0]), m
        check(outs[1], fp64(inputs.x, op.dequantize(inputs)), torch.bfloat16)


@pytest.mark.parametrize("pdl,bn,bk,split", [(2, 64, 128, 2), (3, 64, 128, 2), (2, 16, 128, 8), (2, 32, 64, 3),
                                            (2, 128, 128, 1)])
def test_tiled_prefetches_within_the_programs_row_tile(pdl, bn, bk, split, monkeypatch):
    """With PDL 2 and 3 the tiled kernel prefetches 32 lines of its row
    tile's K range (fused_kernel's PF_LINES), not 16 rows of the untiled
    layout, before the wait; every program's lines, computed from the
    generated code, lie inside the weights (N 240: the last 64-row tile
    holds 16-row programs that start inside it; such a program's prefetch
    once started there and ran past the weights in the last split)."""
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels import kernels
    from qgemm_bench.backends.helion_kernels.tuning import helion_settings

    cfg = {**fused_config(split, bn=bn, bm=32, bk=bk), "acc_scale": True, "pdl": pdl, "tiled": True}
    gemm, x, _ = weight_only(int4_gemm, (70, 1024, 240), monkeypatch, cfg)
    monkeypatch.setattr(helion_ops.WeightOnly, "pdl_mode", staticmethod(lambda x, cfg: cfg.get("pdl", 0)))
    args = gemm._fused_args(x, cfg)
    assert args[-1] is True and args[-5] == pdl
    code = kernels.fused.bind(args).to_triton_code(helion_settings(cfg, FUSED_ARGUMENTS))
    body = code[code.index("def _helion_fused"):code.index("def fused(")]
    assert body.index("prefetch.global.L2") < body.index("gdc_wait()")
    assert "wt + tl.minimum(" not in body
    found = re.search(r"\[wt \+ (\w+) \+ tl\.minimum\(tl\.arange\(0, 32\) \* 128, (\w+) - 128\)\]", body)
    chunk = int(re.search(r"_BLOCK_SIZE_2 = tl.constexpr\((\d+)\)", code).group(1)) if split > 1 else 0
    wt = args[1]

    def value(name: str, names: dict) -> int:  # a generated assignment, evaluated (its names first)
        if name.isdigit():
            return int(name)
        text = re.search(rf"^\s*{name} = (.+)$", body, flags=re.M).group(1)
        text = text.replace("triton_helpers.div_floor_integer", "floordiv").replace("tl.minimum", "min")
        for used in set(re.findall(r"\b(tile_end|sub|mul_\d+|add_\d+)\b", text)) - {name}:
            names = {**names, used: value(used, names)}
        return eval(text, {"floordiv": lambda a, b: a // b, "min": min, "_BLOCK_SIZE_2": chunk}, names)

    for offset_0 in range(0, gemm.n, bn):  # every program: its N tile's first row, its split's first byte
        for offset_2 in range(0, wt.shape[1], chunk) if chunk else (0,):
            names = {"offset_0": offset_0, "offset_2": offset_2}
            first, span = value(found.group(1), names), value(found.group(2), names)
            last = first + min(31 * 128, span - 128) + 128
            assert 0 <= first and last <= wt.numel(), (offset_0, offset_2, first, last, wt.numel())


@interpreter
@pytest.mark.parametrize("group,tma,kept", [("channel", True, False), (None, True, False), (128, True, True),
                                            ("channel", False, False), (None, False, False), (128, False, True)])
def test_frag_only_with_group_scales(group, tma, kept, monkeypatch, tensor_descriptors):
    """int4 fragment order is dropped for unscaled and per-channel weights
    (wrong by TMA on the H200, pending-wgmma register writes offline on
    either load; right on the interpreter), kept with group scales; the
    answer right either way."""
    cfg = {**fused_config(1, bn=64, bm=128, bk=128), "frag": True}
    if tma:
        cfg.update(tma=True, indexing="tensor_descriptor")
    gemm, x, ref = weight_only(int4_gemm, (130, 1024, 72), monkeypatch, cfg, group_size=group)  # None: unscaled
    check(gemm(x), ref)
    assert bool(gemm.bound(x).config.get("frag")) == kept


@interpreter
@pytest.mark.parametrize("bm,warps,kept", [(64, 8, True), (128, 8, False), (128, 4, True)])
def test_frag_in_wide_tiles_only_on_one_warp_group(bm, warps, kept, monkeypatch):
    """Fragment order is kept in tiles of up to FRAG_MAX_BLOCK_M rows and in
    wider ones on 4 warps; an 8-warp wide tile reads K order (wrong sums on
    the H100 and H200 there); the answer right either way."""
    cfg = {**fused_config(1, bn=32, bm=bm, bk=128), "frag": True, "num_warps": warps}
    gemm, x, ref = weight_only(int4_gemm, (bm + 2, 512, 40), monkeypatch, cfg)
    r = gemm.bound(x)
    assert bool(r.config.get("frag")) == kept and r.config["num_warps"] == warps
    check(gemm(x), ref)


@interpreter
@pytest.mark.parametrize("m,kept", [(130, True), (127, False)])
def test_frag_on_tma_loads_in_an_8_warp_wide_tile(m, kept, monkeypatch, tensor_descriptors, sms):
    """Where the kernel reads by TMA with x K-innermost (M >= 128) an
    8-warp tile wider than FRAG_MAX_BLOCK_M keeps fragment order (no
    pending wgmma operand write there offline; right over 30 calls on the
    H200); below, K order: ragged M and N, against fp64 either way. The
    generated x view shows helion_ops.K_INNER_MIN_M is the kernel's."""
    import helion

    from qgemm_bench.backends.helion_kernels.tuning import helion_settings

    cfg = {**fused_config(1, bn=32, bm=128, bk=128), "frag": True, "num_warps": 8, "tma": True,
           "indexing": "tensor_descriptor"}
    gemm, x, ref = weight_only(int4_gemm, (m, 512, 40), monkeypatch, cfg)
    r = gemm.bound(x)
    assert bool(r.config.get("frag")) == kept and r.config.get("tma") and r.config["num_warps"] == 8
    check(gemm(x), ref)
    code = r.run.to_triton_code(helion.Config(**helion_settings(r.config, FUSED_ARGUMENTS)))
    assert ("xk_desc.load(" in code) == kept and ("x3[" in code or "x3_desc" in code) != kept


def test_tma_k_inner_follows_the_kernels_rule():
    """helion_ops.tma_k_inner: tma with tensor-descriptor indexing, K a
    whole number of K steps, M from K_INNER_MIN_M; frag_tile_ok takes an
    8-warp wide tile only there."""
    from qgemm_bench.backends.helion_ops import K_INNER_MIN_M, frag_tile_ok, tma_k_inner

    c = {"block_sizes": [128, 256], "block_k": 128, "num_warps": 8, "tma": True, "indexing": "tensor_descriptor"}
    assert tma_k_inner(c, 8192, K_INNER_MIN_M) and not tma_k_inner(c, 8192, K_INNER_MIN_M - 1)
    assert not tma_k_inner(c, 8192 + 64, 1024)  # K not a whole number of steps: pointer loads
    assert not tma_k_inner({**c, "indexing": "pointer"}, 8192, 1024)
    assert not tma_k_inner({**c, "tma": False}, 8192, 1024)
    assert not frag_tile_ok(c) and frag_tile_ok(c, tma_k_inner(c, 8192, 1024))
    assert frag_tile_ok({**c, "num_warps": 4})


def test_frag_makes_the_sm90_main_loop_read_whole_words(tmp_path):
    """scripts/helion_sass.py (offline sm_90, M = 16, 128x16 tiles, split 2):
    on K-order bytes the weight tile is copied in 4-byte cp.async and read
    back a byte at a time (LDS.U8); in fragment order by 16-byte cp.async and
    ldmatrix, as the Triton kernel (docs/helion.md)."""
    from tests.support import script_runs
    from tests.test_fused_sass import bundled_cuda_tools

    if not bundled_cuda_tools():
        pytest.skip("this Triton has no bundled CUDA tools: no offline sm_90 compile")
    runs = script_runs("helion_sass", [["--m", "16", "--split", "2", "--k", "512", "--n", "256",
                                        *(["--frag"] if frag else []), "--out", tmp_path / f"k{int(frag)}"]
                                       for frag in (False, True)])
    for frag, r in zip((False, True), runs, strict=True):
        assert r.returncode == 0, r.stderr[-2000:]
        lines = r.stdout.splitlines()
        assert lines[1].startswith("main loop (one K block): "), lines
        memory = dict(item.rsplit(" ", 1) for item in lines[3].split("memory: ")[1].split(", "))
        # Relations, not one Triton version's counts (Triton 3.9 here: 64 LDS.U8 and 16 LDGSTS.E without frag).
        assert (int(memory.get("LDS.U8", 0)) > 0) != frag, memory  # byte reads of the copied tile
        assert (int(memory.get("LDGSTS.E", 0)) > 0) != frag, memory  # 4-byte cp.async
        assert (int(memory.get("LDSM.16.M88.4", 0)) > 0) == frag, memory  # ldmatrix of whole words
        assert ("[0, 1, 5, 3, 2, 4]" in (tmp_path / f"k{int(frag)}.py").read_text()) == frag


@pytest.mark.parametrize("fmt,block_k,mode", [(0, 64, "block"), (0, 128, "block"), (0, 256, "sub"), (1, 128, "sub")])
def test_the_fused_scale_mode_a_run_binds(fmt, block_k, mode):
    """helion_ops.fused_scale_mode, which _fused_args binds and
    scripts/helion_sass.py compiles with: int4 group 128 at block_k 256 is
    "sub", not "block"."""
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.operators.formats import INT4, NVFP4

    k, n = 512, 256
    w = torch.zeros(k // 2, n, dtype=torch.uint8)
    if fmt == 0:
        gemm = helion_ops.WeightOnly("int4_gemm", w, torch.ones(k // 128, n, dtype=torch.float16), None, INT4, 128)
    else:
        gemm = helion_ops.WeightOnly("nvfp4_gemm", w, torch.ones(k // 16, n, dtype=torch.uint8), torch.ones(()),
                                     NVFP4, None)
    args = gemm._fused_args(torch.zeros(2, k, dtype=torch.float16), {"block_k": block_k, "split_k": 1})
    assert args[6] == mode == helion_ops.fused_scale_mode(fmt, 128 if fmt == 0 else 16, k, block_k)


@pytest.mark.parametrize("op", ["int4_gemm", "nvfp4_gemm"])
@pytest.mark.parametrize("m", [1, 64, 256, 1024])
def test_fused_candidates_carry_their_split(op, m):
    """Every fused candidate names its split_k, 1 included: without the key a
    run fills in the Triton table's split for the shape (helion_ops), so a
    split-1 candidate would be timed and saved as another config; each is
    tiled where it can be."""
    from qgemm_bench.configs.store import DEFAULT

    h200, shape = DEFAULT.entries()["h200"], (m, 8192, 8192)
    if cands.helion_path(op, m, shape, h200) != "fused":
        pytest.skip("not the fused path at this M")
    pool = cands.helion(op, m, shape, h200, variants=True)
    assert pool and all(isinstance(c.get("split_k"), int) and c["split_k"] >= 1 for c in pool), pool
    # and reads the Triton kernel's tiled weights wherever helion_ops takes them (pointer loads, K steps <= 128)
    assert all(bool(c.get("tiled")) == (not c.get("tma") and c["block_k"] <= 128) for c in pool), pool


@pytest.mark.parametrize("twin_wins", [True, False])
def test_a_fused_unit_times_its_winner_against_the_pdl_2_twin(monkeypatch, twin_wins):
    """Up to PDL_MAX_M the fused unit's winner and its PDL 2 twin are timed
    again together (the pools carry no PDL); the twin is stored only where
    it won, with the count of the first round's configs in "tuned"; above
    PDL_MAX_M, or on the split path, no second round."""
    from qgemm_bench.configs.store import DEFAULT
    from qgemm_bench.tuning import helion as tuning_helion

    h200 = DEFAULT.entries()["h200"]
    rounds = []

    def fake(op, shape, device, l2, rep, dtype, cands, gpu, stop, target, check_calls=1):
        rounds.append(cands)
        pick = cands[-1] if len(rounds) > 1 and twin_wins else cands[0]
        info = {"us": 9.0 if pick.get("pdl") else 10.0, "tuned": f"best of {len(cands)} curated configs, graph timing",
                "tune_s": 1.0, "compile_s": 0.1}
        return {"op": "k", "shape": shape, "us": info["us"], "tune_s": 1.0, "key": "b",
                "save": ("k", *shape, "h200", pick, info), "entry": {"config": pick, **info}}

    monkeypatch.setattr(tuning_helion, "tune", fake)
    for m, fused_rounds in ((16, 2), (cands.PDL_MAX_M * 2, 1)):
        shape = (m, 8192, 8192)
        if cands.helion_path("nvfp4_gemm", m, shape, h200) != "fused":
            pytest.skip("the split path at this M")
        rounds.clear()
        got = tuning_helion.tune_unit("nvfp4_gemm", shape, torch.device("cpu"), None, target=h200)
        assert len(rounds) == fused_rounds
        first = rounds[0][0]
        if fused_rounds == 1:
            assert got["entry"]["config"] == first
            continue
        assert rounds[1] == [first, {**first, "pdl": 2}] and not first.get("pdl")
        want = {**first, "pdl": 2} if twin_wins else first
        assert got["entry"]["config"] == want and got["save"][-2] == want
        assert got["save"][-1] == {k: v for k, v in got["entry"].items() if k != "config"}
        if twin_wins:
            assert got["entry"]["tuned"].startswith(f"best of {len(rounds[0])} curated configs, then its PDL 2 twin")
            assert got["entry"]["us"] == 9.0 and got["entry"]["tune_s"] == 2.0
    rounds.clear()  # a unit whose share is spent still ends with its passes
    tuning_helion.tune_unit("nvfp4_gemm", (16, 8192, 8192), torch.device("cpu"), None, stop=time.monotonic() - 1,
                            target=h200)
    assert len(rounds) == 2
    monkeypatch.setattr(tuning_helion, "kernel_name", lambda op, m, shape, where: op)  # the split kernel's unit
    rounds.clear()
    assert tuning_helion.tune_unit("nvfp4_gemm", (16, 8192, 8192), torch.device("cpu"), None, target=h200)
    assert len(rounds) == 1


@pytest.mark.parametrize("m", [1, 16, 64, 256, 1024])
def test_nvfp4_fused_units_time_the_first_candidate_on_bf16_scales(m):
    """NVFP4's fused candidates end the pool with the first one's twin on
    FusedGemm's bf16 block scales (kernels.fused's bf16_scales), once;
    int4 (bf16 scales already) has none."""
    from qgemm_bench.configs.store import DEFAULT

    h200, shape = DEFAULT.entries()["h200"], (m, 8192, 8192)
    if cands.helion_path("nvfp4_gemm", m, shape, h200) != "fused":
        pytest.skip("the split path at this M")
    pool = cands.helion("nvfp4_gemm", m, shape, h200)
    assert [c for c in pool if c.get("bf16_scales")] == [{**pool[0], "bf16_scales": True}]
    assert not any(c.get("bf16_scales") for c in cands.helion("int4_gemm", m, shape, h200))


def test_nvfp4_times_the_stored_entry_then_its_bf16_scales_twin(monkeypatch):
    """tune_unit's first NVFP4 candidates: this GPU's stored entry, then its
    bf16_scales twin (the pool's twin is of the pool's first config, which
    need not be the entry); an entry with bf16_scales has no twin."""
    from qgemm_bench.backends.config_buckets import bucket
    from qgemm_bench.configs.store import DEFAULT
    from qgemm_bench.tuning import helion as tuning_helion

    h200, m, shape = DEFAULT.entries()["h200"], 16, (16, 8192, 8192)
    if cands.helion_path("nvfp4_gemm", m, shape, h200) != "fused":
        pytest.skip("the split path at this M")
    pool = cands.helion("nvfp4_gemm", m, shape, h200)
    kernel = cands.helion_kernel("nvfp4_gemm", m, shape, h200)
    seen = []
    monkeypatch.setattr(tuning_helion, "tune", lambda *a, **kw: seen.append(a[6]))
    for mine, twin in (({**pool[0], "split_k": 2, "num_stages": 5}, True),
                       ({**pool[0], "split_k": 2, "bf16_scales": True}, False)):
        seen.clear()
        tuning_helion.tune_unit("nvfp4_gemm", shape, torch.device("cpu"), None,
                                [{"kernels": {kernel: {bucket(*shape): {"config": mine}}}}], target=h200)
        got = seen[0]
        assert got[:2] == ([mine, {**mine, "bf16_scales": True}] if twin else [mine, pool[0]])
        assert len(got) == len({repr(sorted(c.items())) for c in got})


@pytest.mark.parametrize("tma_wins", [True, False])
def test_an_m1_fused_unit_ends_with_its_winner_against_the_tma_twin(monkeypatch, tma_wins):
    """At M <= HELION_TMA_TWIN_MAX_M the fused unit's winner after the PDL
    pass is timed again against its TMA twin (tensor-descriptor loads), kept
    only where it won and said in "tuned"; a winner on TMA already gets no
    such round."""
    from qgemm_bench.configs.store import DEFAULT
    from qgemm_bench.tuning import helion as tuning_helion

    h200, shape = DEFAULT.entries()["h200"], (1, 8192, 8192)
    if cands.helion_path("nvfp4_gemm", 1, shape, h200) != "fused" or cands.HELION_TMA_TWIN_MAX_M < 1:
        pytest.skip("no fused M = 1 unit with a TMA pass")
    rounds = []

    def fake(op, shape, device, l2, rep, dtype, cands_, gpu, stop, target, check_calls=1):
        rounds.append(cands_)
        pick = cands_[-1] if len(rounds) == 2 or (len(rounds) == 3 and tma_wins) else cands_[0]
        info = {"us": 10.0 - len(rounds), "tuned": f"best of {len(cands_)} curated configs, graph timing",
                "tune_s": 1.0, "compile_s": 0.1}
        return {"op": "k", "shape": shape, "us": info["us"], "tune_s": 1.0, "key": "b",
                "save": ("k", *shape, "h200", pick, info), "entry": {"config": pick, **info}}

    monkeypatch.setattr(tuning_helion, "tune", fake)
    got = tuning_helion.tune_unit("nvfp4_gemm", shape, torch.device("cpu"), None, target=h200)
    first = rounds[0][0]
    pdl = {**first, "pdl": 2}
    # by TMA, without the pointer loads' tiled weights (TMA reads the untiled rows)
    tma = {**{k: v for k, v in pdl.items() if k != "tiled"}, "tma": True, "indexing": "tensor_descriptor"}
    assert len(rounds) == 3 and rounds[1] == [first, pdl] and rounds[2] == [pdl, tma]
    want = tma if tma_wins else pdl
    assert got["entry"]["config"] == want and got["save"][-2] == want
    n = len(rounds[0])
    said = f"best of {n} curated configs, then its PDL 2 twin" + (", then its TMA twin (graph timing)" if tma_wins
                                                                 else " (graph timing)")
    assert got["entry"]["tuned"] == said and got["entry"]["tune_s"] == (3.0 if tma_wins else 2.0)
    rounds.clear()  # a winner on PDL 2 and TMA already: no twin, itself checked again, kept
    done = {"entry": {"config": tma, "tuned": "best of 3 curated configs, graph timing"}, "tune_s": 1.0}
    assert tuning_helion.twin_passes(done, "nvfp4_gemm", shape, torch.device("cpu"), 0) is done
    assert rounds == [[tma]]


def fake_pass_tune(rounds: list, kernel: str, twin_wins: bool):
    """A stand-in for tuning.helion.tune in a pass: records (candidates,
    check_calls) in rounds and picks the last candidate (the twin) where
    twin_wins, else the first (the entry)."""
    def fake(op, shape, device, l2, rep, dtype, cands_, gpu, stop, target, check_calls=1):
        rounds.append((cands_, check_calls))
        pick = cands_[-1] if twin_wins else cands_[0]
        info = {"us": 18.0, "tuned": f"best of {len(cands_)} curated configs, graph timing", "tune_s": 1.0}
        return {"op": kernel, "shape": shape, "us": 18.0, "tune_s": 1.0, "key": "b",
                "save": (kernel, *shape, "h200", pick, info), "entry": {"config": pick, **info}}

    return fake


def pass_keeps_a_winning_twin(monkeypatch, run, store, kernel, key, entry, twin, label, twin_wins, rerun) -> bool:
    """A pass (run(): it on one stored entry, tune faked by fake_pass_tune)
    times the entry and its twin in one round over ROT_CHECK_CALLS checked
    calls and returns the twin only where it won ("tuned" then says so);
    saved, the next run times `rerun` and keeps it. False where the entry
    won (nothing saved)."""
    from qgemm_bench.backends.helion_dispatch import save
    from qgemm_bench.tuning import helion as tuning_helion

    rounds = []
    monkeypatch.setattr(tuning_helion, "tune", fake_pass_tune(rounds, kernel, twin_wins))
    got = run()
    assert rounds == [([entry, twin], tuning_helion.ROT_CHECK_CALLS)]
    if not twin_wins:
        assert got is None
        return False
    assert got["entry"]["config"] == twin and got["entry"]["tuned"] == \
        f"best of 6 curated configs, then its {label} twin (graph timing)"
    save(*got["save"], store)
    assert store.read("h200", "helion")["kernels"][kernel][key]["config"] == twin
    rounds.clear()
    assert run() is None
    assert rounds == rerun
    return True


@pytest.mark.parametrize("twin_wins", [True, False])
def test_the_rot_pass_times_stored_nvfp4_entries_against_their_rot_twins(tmp_path, monkeypatch, twin_wins):
    """--rot-pass: the NVFP4 fused entries of the GPU's helion table at the
    asked M and layers (not int4's, not other M), each timed in one round
    against helion_rot_twin (pointer loads, rot) over ROT_CHECK_CALLS
    checked calls; the twin is the result only where it won, "tuned" then
    says so; an entry on rot already is checked again and stays."""
    from qgemm_bench.configs.store import DEFAULT
    from qgemm_bench.tuning import helion as tuning_helion
    from tests.support import table_store

    h200, shape = DEFAULT.entries()["h200"], (1, 8192, 8192)
    if cands.helion_path("nvfp4_gemm", 1, shape, h200) != "fused":
        pytest.skip("the split path at this M")
    tma = {"block_sizes": [128, 16], "block_k": 128, "split_k": 8, "decode_asm": True, "num_warps": 4,
           "num_stages": 3, "tma": True, "indexing": "tensor_descriptor"}
    twin = cands.helion_rot_twin(tma)
    assert twin == {**{k: v for k, v in tma.items() if k not in ("tma", "indexing")}, "rot": True}
    assert cands.helion_rot_twin(twin) is None
    # rot on TMA loads runs without it (helion_ops): such a config gets its twin, and a TMA twin drops rot
    assert cands.helion_rot_twin({**tma, "rot": True}) == twin
    assert "rot" not in cands.tma_twin(twin) and cands.tma_twin(twin)["tma"]
    stored = {"config": tma, "us": 20.0, "tuned": "best of 6 curated configs, graph timing", "tune_s": 3.0}
    doc = {"gpu": "h200", "kernels": {"nvfp4_gemm_fused": {"M1_K8192_N8192": stored, "M64_K8192_N8192": stored,
                                                           "M16_K4096_N4096": stored, "M1_K4096_N200": stored},
                                      "int4_gemm_fused": {"M1_K8192_N8192": stored}}}
    target, store = table_store(tmp_path, "helion", doc, h200)
    assert tuning_helion.rot_work(None, (1, 16, 32), None, "h200", store) == [
        ("nvfp4_gemm", (1, 8192, 8192)), ("nvfp4_gemm", (16, 4096, 4096))]
    assert tuning_helion.rot_work(None, (1,), [(4096, 4096)], "h200", store) == []
    assert len(tuning_helion.rot_work(None, None, None, "h200", store)) == 3  # every one N % 16 == 0
    assert tuning_helion.rot_work(["int4_gemm"], (1,), None, "h200", store) == []
    def rot():
        return tuning_helion.rot_entry("nvfp4_gemm", shape, torch.device("cpu"), 0, target, store=store)

    # once on rot: checked again alone, stays
    if not pass_keeps_a_winning_twin(monkeypatch, rot, store, "nvfp4_gemm_fused", "M1_K8192_N8192", tma, twin,
                                     "ROT", twin_wins, [([twin], tuning_helion.ROT_CHECK_CALLS)]):
        return
    monkeypatch.setattr(tuning_helion, "tune", lambda *a, **kw: None)  # the entry fails its check: said, kept
    assert tuning_helion.rot_entry("nvfp4_gemm", shape, torch.device("cpu"), 0, target, store=store) is False


@pytest.mark.parametrize("op,m,twin", [("int4_gemm", 256, "frag"), ("int4_gemm", 1024, "frag"),
                                       ("int4_gemm", 128, "frag"), ("int4_gemm", 127, None),
                                       ("nvfp4_gemm", 256, None), ("int4_gemm", 64, None), ("int4_gemm", 1, "tma")])
def test_the_tma_pass_twin_by_op_and_m(op, m, twin):
    """The TMA pass: tma_twin at M = 1; int4 from M = 128 tma_twin in
    fragment order; none between, nor for NVFP4 from 128 (NaN on the H200)."""
    c = {"block_sizes": [128, 256], "block_k": 64, "split_k": 1, "num_warps": 8, "num_stages": 4}
    of = cands.tma_twin_at(op, m)
    if twin is None:
        assert of is None
        return
    want = {**c, "tma": True, "indexing": "tensor_descriptor", **({"frag": True} if twin == "frag" else {})}
    assert of(c) == want and of(want) is None


def test_an_int4_m256_unit_ends_with_its_tma_frag_twin_checked_over_30_calls(monkeypatch):
    """From M = 128 an int4 fused unit's winner is timed again against its
    TMA twin in fragment order, that round checking each over
    TMA_CHECK_CALLS calls; no PDL pass there."""
    from qgemm_bench.configs.store import DEFAULT
    from qgemm_bench.tuning import helion as tuning_helion

    h200, shape = DEFAULT.entries()["h200"], (256, 8192, 8192)
    if cands.helion_path("int4_gemm", 256, shape, h200) != "fused":
        pytest.skip("no fused M = 256 unit")
    rounds = []

    def fake(op, shape, device, l2, rep, dtype, cands_, gpu, stop, target, check_calls=1):
        rounds.append((cands_, check_calls))
        pick = cands_[-1] if len(rounds) == 2 else cands_[0]
        info = {"us": 10.0 - len(rounds), "tuned": f"best of {len(cands_)} curated configs, graph timing",
                "tune_s": 1.0, "compile_s": 0.1}
        return {"op": "k", "shape": shape, "us": info["us"], "tune_s": 1.0, "key": "b",
                "save": ("k", *shape, "h200", pick, info), "entry": {"config": pick, **info}}

    monkeypatch.setattr(tuning_helion, "tune", fake)
    got = tuning_helion.tune_unit("int4_gemm", shape, torch.device("cpu"), None, target=h200)
    first = rounds[0][0][0]
    twin = {**{k: v for k, v in first.items() if k != "tiled"}, "tma": True, "indexing": "tensor_descriptor",
            "frag": True}
    assert len(rounds) == 2 and rounds[1] == ([first, twin], cands.TMA_CHECK_CALLS)
    assert cands.TMA_CHECK_CALLS > 1 and rounds[0][1] == 1
    assert got["entry"]["config"] == twin and got["entry"]["tuned"].endswith(", then its TMA twin (graph timing)")


@pytest.mark.parametrize("bad", [set(), {7}, {0, 29}, "stale"])
def test_wrong_calls_counts_each_call_that_misses(bad):
    """tuning.helion.wrong_calls: the calls take the input sets in turn,
    each checked against its own reference; a NaN, or the output an earlier
    call left (stale: every call after the first), counted wrong."""
    from types import SimpleNamespace

    from qgemm_bench.tuning.helion import wrong_calls

    refs, n, last = [torch.ones(4, 4), 2 * torch.ones(4, 4)], iter(range(30)), []

    def prepare(case, inputs):
        def fn():
            i = next(n)
            if bad == "stale" and last:
                return last[0]
            miss = bad != "stale" and i in bad
            out = refs[inputs] * (float("nan") if miss and i == 29 else 1.0) + (1.0 if miss and i < 29 else 0.0)
            last[:] = [out]
            return out
        return SimpleNamespace(fn=fn)

    got = wrong_calls(None, SimpleNamespace(prepare=prepare), [(0, refs[0]), (1, refs[1])], 1e-2, 30)
    assert got == (15 if bad == "stale" else len(bad))


def test_tune_refuses_a_faster_config_wrong_in_a_checked_call(monkeypatch):
    """tune(check_calls > 1): a config right in its timed call but wrong in
    one of its checked calls is not taken, however fast; with one check it
    would have been. The checks use two input sets of their own reference."""
    from qgemm_bench.harness import measure as harness_measure
    from qgemm_bench.tuning import helion as tuning_helion

    timed, checked = [], []
    monkeypatch.setattr(harness_measure, "measure", lambda *a, **k: timed.append(1) or
                        {"status": "ok", "p50_us": 10.0 / len(timed), "compile_s": 0.0})

    def wrong_calls(case, backend, checks, tol, calls):
        checked.append(checks)
        return 1 if len(checked) == 2 else 0  # the second config: one wrong call of `calls`

    monkeypatch.setattr(tuning_helion, "wrong_calls", wrong_calls)
    slow, fast = fused_config(1, bn=32, bm=16, bk=64), fused_config(2, bn=32, bm=16, bk=64)
    args = ("int4_gemm", (16, 256, 64), torch.device("cpu"), 0, 1.0, torch.float16, [slow, fast], "cpu")
    got = tuning_helion.tune(*args, check_calls=30)
    assert got["entry"]["config"] == slow and len(checked) == 2
    (a, ref_a), (b, ref_b) = checked[0]
    assert not torch.equal(a.x, b.x) and not torch.equal(ref_a, ref_b)
    timed.clear(), checked.clear()
    assert tuning_helion.tune(*args)["entry"]["config"] == fast and not checked


def test_the_table_twin_is_the_triton_entry_as_helions_with_what_triton_cannot_name():
    """helion_table_twin: the H200 table's fused config for the shape's own
    bucket (read here from its JSON), as Helion's tile [N, M], K step,
    split, warps, stages, ACC_SCALE and PDL; int4 in fragment order (a
    16-row tile), NVFP4 with the entry's bf16_scales and rot; None where
    the twin is the entry or the bucket is not the table's."""
    import json

    from qgemm_bench.configs.store import DEFAULT

    h200 = DEFAULT.entries()["h200"]
    table = json.loads(DEFAULT.path("h200", "weight_only").read_text())["kernels"]
    entry = {"block_sizes": [128, 16], "block_k": 128, "split_k": 8, "decode_asm": True, "num_warps": 4,
             "num_stages": 3, "bf16_scales": True, "rot": True}
    for op, shape in (("int4_gemm", (1, 8192, 57344)), ("nvfp4_gemm", (16, 8192, 57344))):
        t = table[f"{op}_fused"][f"M{shape[0]}_K{shape[1]}_N{shape[2]}"]["config"]
        t = table[f"{op}_fused"][f"M{shape[0]}_K{shape[1]}_N{shape[2]}"].get("pointer_config", t) \
            if t.get("TMA") else t
        want = {"block_sizes": [t["BLOCK_N"], t["BLOCK_M"]], "block_k": t["BLOCK_K"], "split_k": t["SPLIT_K"],
                "decode_asm": t["DECODE_ASM"], "num_warps": t["num_warps"], "num_stages": t["num_stages"],
                **({"acc_scale": True} if t.get("ACC_SCALE") else {}), **({"pdl": t["PDL"]} if t.get("PDL") else {}),
                **({"frag": True} if op == "int4_gemm" else {"bf16_scales": True, "rot": True})}
        mine = entry if op == "nvfp4_gemm" else {k: v for k, v in entry.items() if k not in ("bf16_scales", "rot")}
        twin = cands.helion_table_twin(op, shape, mine, h200)
        assert twin == want, (op, shape)
        assert cands.helion_table_twin(op, shape, twin, h200) is None  # the entry is the twin already
    assert cands.helion_table_twin("int4_gemm", (1, 8192, 57000), entry, h200) is None  # not a table bucket


def m1_pass_entry(block_sizes: list, split: int) -> tuple:
    """(the H200 Target, int4 1x8192x57344, a fragment-order fused config of
    those tiles and split, it as a stored entry) for the pass tests; skips
    where the H200 store sends M = 1 to the split path."""
    from qgemm_bench.configs.store import DEFAULT

    h200, shape = DEFAULT.entries()["h200"], (1, 8192, 57344)
    if cands.helion_path("int4_gemm", 1, shape, h200) != "fused":
        pytest.skip("the split path at this M")
    mine = {"block_sizes": block_sizes, "block_k": 128, "split_k": split, "decode_asm": True, "num_warps": 4,
            "num_stages": 3, "frag": True}
    return h200, shape, mine, {"config": mine, "us": 105.0, "tuned": "best of 6 curated configs, graph timing",
                               "tune_s": 3.0}


@pytest.mark.parametrize("twin_wins", [True, False])
def test_the_table_pass_times_stored_fused_entries_against_their_table_twins(tmp_path, monkeypatch, twin_wins):
    """--table-pass: the fused entries of the asked ops, M and layers, each
    timed in one round against helion_table_twin over ROT_CHECK_CALLS
    checked calls; the twin is the result only where it won."""
    from qgemm_bench.configs.store import DEFAULT
    from qgemm_bench.tuning import helion as tuning_helion
    from tests.support import table_store

    h200, shape, mine, stored = m1_pass_entry([128, 16], 8)
    doc = {"gpu": "h200", "kernels": {"int4_gemm_fused": {"M1_K8192_N57344": stored, "M64_K8192_N8192": stored},
                                      "nvfp4_gemm_fused": {"M1_K8192_N57344": {
                                          **stored, "config": {**mine, "frag": False, "bf16_scales": True}}}}}
    target, store = table_store(tmp_path, "helion", doc, h200)
    store.write("h200", "weight_only", DEFAULT.read("h200", "weight_only"),
                DEFAULT.read("h200", "weight_only")["provenance"])
    assert tuning_helion.stored_work(["int4_gemm", "nvfp4_gemm"], (1,), None, "h200", store) == [
        ("int4_gemm", shape), ("nvfp4_gemm", shape)]
    assert tuning_helion.stored_work(["int4_gemm"], None, [(8192, 8192)], "h200", store) == [
        ("int4_gemm", (64, 8192, 8192))]
    # M = 64's entry: the table's 64x8192x8192 tile is another: both have twins
    assert tuning_helion.twin_work("table", ["int4_gemm", "nvfp4_gemm"], None, None, target, store) == [
        ("int4_gemm", shape), ("int4_gemm", (64, 8192, 8192)), ("nvfp4_gemm", shape)]
    twin = cands.helion_table_twin("int4_gemm", shape, mine, target, store)
    assert twin is not None and twin != mine
    def table():
        return tuning_helion.twin_entry("table", "int4_gemm", shape, torch.device("cpu"), 0, target, store=store)

    # once the twin: nothing to time, stays
    pass_keeps_a_winning_twin(monkeypatch, table, store, "int4_gemm_fused", "M1_K8192_N57344", mine, twin, "table",
                              twin_wins, [])


def test_the_tiled_twin_is_the_entry_on_tiled_weights_where_helion_takes_them():
    """helion_tiled_twin: the config with tiled, on pointer loads and K
    steps up to a tile's 128 k only; none for a tiled config."""
    c = {"block_sizes": [64, 16], "block_k": 128, "split_k": 2, "decode_asm": True, "num_warps": 4,
         "num_stages": 3, "frag": True, "acc_scale": True, "pdl": 2}
    assert cands.helion_tiled_twin(c) == {**c, "tiled": True}
    assert cands.helion_tiled_twin({**c, "block_k": 64}) == {**c, "block_k": 64, "tiled": True}
    assert cands.helion_tiled_twin({**c, "tiled": True}) is None
    assert cands.helion_tiled_twin({**c, "block_k": 256}) is None
    assert cands.helion_tiled_twin({**c, "tma": True, "indexing": "tensor_descriptor"}) is None


def test_the_split_twin_doubles_the_split_where_the_programs_leave_sms_idle():
    """helion_split_twin: twice the K split where tiles x split < SMs (the
    H200's 132: int4 256x14336x4096's [64, 128] tile, 64 x 2 programs);
    none where the programs fill the SMs or the grid is persistent."""
    c = {"block_sizes": [64, 128], "block_k": 128, "split_k": 1, "decode_asm": True, "num_warps": 4,
         "num_stages": 3, "frag": True, "tma": True, "indexing": "tensor_descriptor"}
    assert cands.helion_split_twin((256, 14336, 4096), c, 132) == {**c, "split_k": 2}
    assert cands.helion_split_twin((256, 14336, 4096), {**c, "split_k": 2}, 132) is None  # 256 programs
    assert cands.helion_split_twin((256, 14336, 4096), {**c, "split_k": 2}, 264) == {**c, "split_k": 4}
    assert cands.helion_split_twin((257, 14336, 4096), c, 132) is None  # 64 x 3 tiles
    assert cands.helion_split_twin((256, 14336, 4096), {**c, "pid_type": "persistent_blocked"}, 132) is None
    nosplit = {k: v for k, v in c.items() if k != "split_k"}  # a config without the key: one split
    assert cands.helion_split_twin((256, 14336, 4096), nosplit, 132) == {**nosplit, "split_k": 2}
    assert cands.helion_split_twin((256, 256, 4096), c, 132) == {**c, "split_k": 2}  # two K steps
    assert cands.helion_split_twin((256, 256, 4096), {**c, "split_k": 2}, 132) is None  # one K step a split


def test_the_split_pass_takes_the_entries_whose_programs_leave_sms_idle(tmp_path):
    """--split-pass's work: the stored fused entries below the Target's SMs only."""
    from qgemm_bench.configs.store import DEFAULT
    from qgemm_bench.tuning import helion as tuning_helion
    from tests.support import table_store

    h200 = DEFAULT.entries()["h200"]
    c = {"block_sizes": [64, 128], "block_k": 128, "split_k": 1, "decode_asm": True, "num_warps": 4,
         "num_stages": 3}
    entry = {"config": c, "us": 78.5, "tuned": "best of 12 curated configs, graph timing", "tune_s": 3.0}
    doc = {"gpu": "h200", "kernels": {"int4_gemm_fused": {"M256_K14336_N4096": entry, "M256_K8192_N8192": {
        **entry, "config": {**c, "block_sizes": [64, 256]}}, "M256_K8192_N57344": entry}}}
    target, store = table_store(tmp_path, "helion", doc, h200)
    if cands.helion_path("int4_gemm", 256, (256, 14336, 4096), target) != "fused":
        pytest.skip("another path at M = 256")
    assert target.sms == 132
    # 64 x 2 and 128 x 1 programs; 896 x 2 fill the SMs
    assert tuning_helion.twin_work("split", ["int4_gemm"], None, None, target, store) == [
        ("int4_gemm", (256, 8192, 8192)), ("int4_gemm", (256, 14336, 4096))]


@pytest.mark.parametrize("twin_wins", [True, False])
def test_the_tiled_pass_times_stored_fused_entries_against_their_tiled_twins(tmp_path, monkeypatch, twin_wins):
    """--tiled-pass: the fused entries with a tiled twin (not the TMA one,
    not the 256-k one), each timed in one round against it over
    ROT_CHECK_CALLS checked calls; the twin is the result only where it won,
    and once stored it has no twin left to time."""
    from qgemm_bench.tuning import helion as tuning_helion
    from tests.support import table_store

    h200, shape, mine, stored = m1_pass_entry([64, 16], 2)
    tma = {**stored, "config": {**mine, "tma": True, "indexing": "tensor_descriptor"}}
    doc = {"gpu": "h200", "kernels": {"int4_gemm_fused": {"M1_K8192_N57344": stored, "M64_K8192_N8192": tma},
                                      "nvfp4_gemm_fused": {"M1_K8192_N57344": {
                                          **stored, "config": {**mine, "frag": False, "block_k": 256}}}}}
    target, store = table_store(tmp_path, "helion", doc, h200)
    assert tuning_helion.twin_work("tiled", ["int4_gemm", "nvfp4_gemm"], None, None, target, store) == [
        ("int4_gemm", shape)]

    def tiled():
        return tuning_helion.twin_entry("tiled", "int4_gemm", shape, torch.device("cpu"), 0, target, store=store)

    pass_keeps_a_winning_twin(monkeypatch, tiled, store, "int4_gemm_fused", "M1_K8192_N57344", mine,
                              {**mine, "tiled": True}, "tiled", twin_wins, [])
    if twin_wins:
        assert tuning_helion.twin_work("tiled", ["int4_gemm"], None, None, target, store) == []


def test_the_check_runs_each_stored_entry_explicitly_and_counts_wrong_calls(tmp_path, monkeypatch):
    """--check: the stored fused entry at a shape, run under its own config
    (tuning.options explicit) over ROT_CHECK_CALLS calls of two input sets;
    the wrong calls are returned (main exits 1 on any), a shape without a
    fused entry is skipped (None)."""
    import contextlib

    from qgemm_bench.backends.helion_kernels import tuning
    from qgemm_bench.configs.store import DEFAULT
    from qgemm_bench.tuning import helion as tuning_helion
    from tests.support import table_store

    h200, shape = DEFAULT.entries()["h200"], (64, 4096, 4096)
    if cands.helion_path("int4_gemm", 64, shape, h200) != "fused":
        pytest.skip("the split path at this M")
    mine = {"block_sizes": [64, 64], "block_k": 128, "split_k": 4, "decode_asm": True, "num_warps": 4,
            "num_stages": 3, "frag": True}
    doc = {"gpu": "h200", "kernels": {"int4_gemm_fused": {"M64_K4096_N4096": {"config": mine, "us": 12.0}}}}
    target, store = table_store(tmp_path, "helion", doc, h200)
    explicit, seen = [], []

    @contextlib.contextmanager
    def options(**kw):
        explicit.append(kw.get("explicit"))
        yield

    monkeypatch.setattr(tuning, "options", options)

    def fake(case, backend, checks, tol, calls):
        seen.append((case.shape, backend.name, len(checks), calls, [c[0] is not checks[0][0] for c in checks]))
        return 3

    monkeypatch.setattr(tuning_helion, "wrong_calls", fake)
    cpu = torch.device("cpu")
    assert tuning_helion.check_entry("int4_gemm", shape, cpu, target, store=store) == 3
    assert explicit == [mine] and seen[0][1:4] == ("helion", 2, tuning_helion.ROT_CHECK_CALLS)
    assert tuple(seen[0][0]) == shape and seen[0][4] == [False, True]  # two input sets
    assert tuning_helion.check_entry("int4_gemm", (64, 4096, 6144), cpu, target, store=store) is None
    assert len(seen) == 1
