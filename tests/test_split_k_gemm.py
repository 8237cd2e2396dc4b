"""split_k_gemm: the operator against fp64 math, every backend against the
reference, our Triton and Helion split-K kernels (atomic and deterministic)
on ragged shapes with and without bias, and the tritonbench entry points.
GPU variants are marked `gpu`."""

import json
import subprocess
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch

from qgemm_bench.backends import registry
from qgemm_bench.configs.store import PROVENANCE_KEYS
from qgemm_bench.errors import InputError
from qgemm_bench.integrations import tritonbench as tb
from qgemm_bench.operators import split_k_gemm
from qgemm_bench.operators.common import rel_error
from qgemm_bench.types import Shape
from tests.support import (
    CPU,
    CUDA,
    DEV,
    DT,
    TOL,
    a_store_file,
    case,
    check,
    check_on_gpu,
    fake_target,
    fp64,
    interpreter,
    needs_gpu,
    run_backend,
    seed,
    target_for,
    triton_config,
)


def reference64(inputs):
    ref = fp64(inputs.a, inputs.b)
    return ref if inputs.bias is None else ref + inputs.bias.double()


# ------------------------------------------------------------------ the operator


@pytest.mark.parametrize("bias", [False, True])
def test_reference_vs_fp64(bias):
    inputs = split_k_gemm.make_inputs(case(split_k_gemm, (5, 1000, 7), torch.float16, CPU, bias=bias), seed())
    expected = inputs.a.double().numpy() @ inputs.b.double().numpy()
    if bias:
        assert inputs.bias.shape == (7,)
        expected = expected + inputs.bias.double().numpy()
    else:
        assert inputs.bias is None
    got = split_k_gemm.reference(inputs).double().numpy()
    assert float(np.linalg.norm(got - expected) / np.linalg.norm(expected)) < 1e-6


def test_validate_and_bytes():
    with pytest.raises(InputError, match="must be positive"):
        split_k_gemm.validate(Shape(1, 64, -3), split_k_gemm.Settings())
    assert split_k_gemm.bytes(Shape(64, 32768, 64), torch.float16, split_k_gemm.Settings(True)) == (
        (64 * 32768 * 2 + 64 * 64 + 64) * 2)
    assert Shape(64, 32768, 64) in split_k_gemm.PRESETS["skinny"]


def test_skinny_preset_holds_the_lora_shapes():
    skinny = split_k_gemm.PRESETS["skinny"]
    lora = split_k_gemm.LORA_SHAPES
    assert len(skinny) == 25 + len(lora) == 37 and len(set(skinny)) == len(skinny)
    assert all(s in skinny for s in lora) and Shape(1, 4096, 16) in lora and Shape(256, 14336, 128) in lora
    assert {s.M for s in lora} == {1, 16, 64, 256} and {s.K for s in lora} == {4096, 14336}
    assert {s.N for s in lora} == {16, 64, 128}
    assert len(split_k_gemm.PRESETS["smoke"]) == 4


# ------------------------------------------------------------------ every backend


BACKENDS = [b.name for b in registry.for_op("split_k_gemm")]


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("shape", [(16, 1024, 16), (5, 1000, 7), (64, 1024, 33)])
@pytest.mark.parametrize("bias", [False, True])
def test_every_backend_vs_reference(name, shape, bias):
    c = case(split_k_gemm, shape, bias=bias)
    if reason := registry.get("split_k_gemm", name).why_not(c):
        pytest.skip(reason)
    out, inputs, prepared = run_backend(split_k_gemm, name, c)
    check(out, split_k_gemm.reference(inputs))
    check(prepared.fn(), split_k_gemm.reference(inputs))  # a second call starts from zero again


# ------------------------------------------------------------------ our Triton kernels


cfg = triton_config


# (33, 1024, 40): several ragged M and N tiles; 16 K blocks, so every split
# has work (8 x 2) or splits of unequal length (6, 6, 4).
@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("shape", [(16, 1024, 16), (5, 1000, 7), (33, 1024, 40)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("split, bn", [(1, 32), (3, 32), (8, 32), (3, 16)])
def test_triton_kernel_vs_fp64(deterministic, shape, bias, split, bn):
    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels.split_k import ATOMIC, DETERMINISTIC

    inputs = split_k_gemm.make_inputs(case(split_k_gemm, shape, bias=bias), seed())
    gemm = make_split_k(inputs.a, inputs.b, inputs.bias, DETERMINISTIC if deterministic else ATOMIC,
                        cfg(bn=bn, bk=64, split=split), target=target_for(inputs.a))
    ref = reference64(inputs)
    check(gemm(), ref)
    check(gemm(), ref)  # the workspace and counters were left ready for the next call
    assert int(gemm.count.abs().sum()) == 0
    if not deterministic:
        assert float(gemm.ws.abs().sum()) == 0.0


def test_triton_deterministic_is_bit_identical_over_runs():
    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels.split_k import DETERMINISTIC

    inputs = split_k_gemm.make_inputs(case(split_k_gemm, (17, 4096, 40), bias=True), 3)
    gemm = make_split_k(inputs.a, inputs.b, inputs.bias, DETERMINISTIC, cfg(bn=32, bk=64, split=16),
                        target=target_for(inputs.a))
    first = gemm()
    for _ in range(4):
        assert torch.equal(gemm(), first)


def test_pdl_is_a_config_option_off_on_cpu_and_by_environment(monkeypatch):
    from qgemm_bench.backends.triton_kernels import split_k_parts

    monkeypatch.delenv("QGEMM_PDL", raising=False)
    c, gpu = cfg(PDL=2), torch.device("cuda")
    assert split_k_parts.pdl_launch(c, gpu) == {"PDL": 2, "launch_pdl": True}
    assert split_k_parts.pdl_launch(cfg(), gpu) == {"PDL": 0}
    assert split_k_parts.pdl_launch(c, torch.device("cpu")) == {"PDL": 0}  # the interpreter has no griddepcontrol
    with split_k_parts.chained_pdl():  # PDL 1 and 2 become the kernel's chained mode; nested until the outer ends
        with split_k_parts.chained_pdl():
            assert split_k_parts.pdl_launch(c, gpu) == {"PDL": 3, "launch_pdl": True}
        assert split_k_parts.pdl_launch(c, gpu) == {"PDL": 3, "launch_pdl": True}
        assert split_k_parts.pdl_launch(cfg(PDL=1), gpu) == {"PDL": 3, "launch_pdl": True}
        assert split_k_parts.pdl_launch(c, gpu, chain=0) == {"PDL": 0}  # a kernel without PDL 3
        assert split_k_parts.pdl_launch(c, gpu, chain=None) == {"PDL": 2, "launch_pdl": True}  # its own mode
        assert split_k_parts.pdl_launch(cfg(), gpu) == {"PDL": 0}  # a config without PDL keeps none
        assert split_k_parts.pdl_launch(c, torch.device("cpu")) == {"PDL": 0}
    assert split_k_parts.pdl_launch(c, gpu) == {"PDL": 2, "launch_pdl": True}
    monkeypatch.setenv("QGEMM_PDL", "0")
    assert split_k_parts.pdl_launch(c, gpu) == {"PDL": 0}
    assert configs().describe(c).endswith(" pdl2")
    assert configs().describe(cfg(PDL=3)).endswith(" pdl3")
    with pytest.raises(ValueError, match="PDL=4"):
        configs().check_config(cfg(PDL=4))


def test_the_prologues_prefetch_depth_is_a_config_option_with_twins_where_pdl_prefetches():
    from qgemm_bench.tuning.candidates import split_k_pf

    skc = configs()
    skc.check_config(cfg(PDL=3, PF_ROWS=256))
    assert skc.describe(cfg(PDL=3, PF_ROWS=256)).endswith(" pdl3 pf256")
    assert skc.describe(cfg(PDL=3, PF_ROWS=16)).endswith(" pdl3")  # the kernel's default: not named
    for bad in (24, 0, 8192, "64", True):
        with pytest.raises(ValueError, match="PF_ROWS"):
            skc.check_config(cfg(PDL=3, PF_ROWS=bad))
    for pdl in (0, 1):  # the prologue prefetches with PDL 2 and 3 only
        with pytest.raises(ValueError, match="PF_ROWS=64: the rows PDL 2 and 3 prefetch"):
            skc.check_config(cfg(PDL=pdl, PF_ROWS=64))
    # twins only where the prologue prefetches (PDL 2, 3) and the config names no depth of its own
    assert [c["PF_ROWS"] for c in split_k_pf([cfg(PDL=2), cfg(PDL=3)])] == [64, 256, 64, 256]
    assert split_k_pf([cfg(), cfg(PDL=1), cfg(PDL=3, PF_ROWS=64)]) == []


# The interpreter has no griddepcontrol: off the GPU every PDL mode launches as
# PDL 0 (split_k_parts.pdl_launch), the same interpreted computation, so there
# one mode stands for the three.
@pytest.mark.parametrize("mode, reduce", [(0, "last"), (1, "last"), (1, "kernel")])
@pytest.mark.parametrize("pdl, pf", [(1, 16), (2, 16), (3, 16), (3, 256)] if DEV.type == "cuda" else [(2, 16)])
def test_triton_kernel_with_pdl_vs_fp64(mode, reduce, pdl, pf):
    """A PDL config (on the GPU the prologue waits, and with 2 and 3
    prefetches b's first PF_ROWS rows, clamped into b at this K; REDUCE
    "kernel": the second launch waits too): the same sums, twice."""
    from qgemm_bench.backends.triton_dispatch import make_split_k

    inputs = split_k_gemm.make_inputs(case(split_k_gemm, (33, 1000, 40), bias=True), seed())
    c = cfg(bn=32, bk=64, split=8, PDL=pdl, REDUCE=reduce, **({"PF_ROWS": pf} if pf != 16 else {}))
    gemm = make_split_k(inputs.a, inputs.b, inputs.bias, mode, c, target=target_for(inputs.a))
    ref = reference64(inputs)
    check(gemm(), ref)
    check(gemm(), ref)


# ------------------------------------------------------------------ the config table


def configs():
    from qgemm_bench.backends.triton_kernels import split_k_configs

    return split_k_configs


def assert_valid(config, shape, sms=132):
    """A config the kernel runs at shape: tiles >= 16 and no larger than M and N
    rounded up, every split >= 2 K blocks, tiles x splits <= 4x the SMs."""
    skc = configs()
    m, k, n = shape
    skc.check_config(config)
    assert config["BLOCK_M"] <= skc.mn_bucket(m) and config["BLOCK_N"] <= skc.mn_bucket(n)
    assert config["BLOCK_K"] in (16, 32, 64, 128, 256)
    assert skc.fits(m, k, n, config), config
    assert config["SPLIT_K"] == 1 or skc.tiles(m, n, config) * config["SPLIT_K"] <= 4 * sms
    assert config["num_warps"] in (1, 2, 4, 8, 16) and config["num_stages"] >= 1


def test_table_covers_the_skinny_preset_in_both_modes():
    skc = configs()
    doc = skc.read_table(a_store_file("split_k"))  # the checked-in file
    assert doc["format"] == skc.FORMAT and set(doc["entries"]) == set(skc.MODES)
    for mode in skc.MODES:
        for shape in split_k_gemm.PRESETS["skinny"]:
            entry = doc["entries"][mode][skc.key(*shape)]
            assert_valid(entry["config"], shape, doc["sms"])
            if entry["tuned"].startswith(skc.SEED_NOTE):  # untuned: exactly what --seed-only writes
                assert entry["config"] == skc.heuristic(*shape, doc["sms"])
            config, source = skc.lookup(mode, *shape, doc=doc)
            assert config == entry["config"] and source.endswith(f": {shape}")


@pytest.mark.parametrize("mode", ["atomic", "deterministic"])
@pytest.mark.parametrize("shape", [(7, 5000, 24), (1, 4096, 16), (1, 1, 1), (3, 17, 5), (20, 30000, 30),
                                   (5, 4096, 16), (300, 100000, 300), (1000, 64, 1000), (4096, 8192, 4096),
                                   (64, 32768, 64), (16, 14336, 128)])
def test_lookup_gives_a_valid_config(mode, shape):
    skc = configs()
    for sms in (132, 78, 8):
        config, source = skc.lookup(mode, *shape, sms=sms)
        assert_valid(config, shape, sms)
        assert source


def test_lookup_takes_the_exact_then_the_nearest_entry_then_the_heuristic():
    skc = configs()
    a = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 64, "SPLIT_K": 128, "num_warps": 8, "num_stages": 5}
    b = {**a, "SPLIT_K": 4, "num_warps": 4}
    doc = {"gpu": "h100", "entries": {"atomic": {"M16_K4096_N16": {"config": a},
                                                                    "M1_K4096_N16": {"config": b}}}}
    assert skc.lookup("atomic", 16, 4096, 16, doc=doc, gpu="h100")[0] == {**a, "SPLIT_K": 32}  # cut to fit K
    assert skc.lookup("atomic", 1, 4096, 16, doc=doc, gpu="h100")[0] == b
    near, source = skc.lookup("atomic", 9, 3000, 13, doc=doc, gpu="h100")  # bucket 16x4096x16, nearer M16
    assert near == {**a, "SPLIT_K": 16} and "nearest M16 K4096 N16" in source  # 47 K blocks: 16 splits
    assert skc.lookup("atomic", 2, 5000, 16, doc=doc, gpu="h100")[0] == b  # nearer M1
    assert skc.lookup("atomic", 16, 4096, 32, doc=doc, gpu="h100")[0] == skc.heuristic(16, 4096, 32)  # other bucket
    assert skc.lookup("deterministic", 16, 4096, 16, doc=doc, gpu="h100")[0] == skc.heuristic(16, 4096, 16)
    # A table tuned on another GPU is not used there; on CPU (gpu None) it is.
    other, source = skc.lookup("atomic", 1, 4096, 16, sms=108, doc=doc, gpu="a100")
    assert other == skc.heuristic(1, 4096, 16, 108) and source.startswith("heuristic")
    assert skc.lookup("atomic", 1, 4096, 16, doc=doc, gpu=None)[0] == b
    with pytest.raises(ValueError, match="mode"):
        skc.lookup("fast", 1, 4096, 16, doc=doc)


def test_heuristic_fills_the_sms_with_long_enough_k_slices():
    skc = configs()
    for shape in [*split_k_gemm.PRESETS["skinny"], (7, 5000, 24), (5, 1000, 7), (256, 65536, 256)]:
        c = skc.heuristic(*shape)
        assert_valid(c, shape)
        m, k, n = shape
        progs = skc.tiles(m, n, c) * c["SPLIT_K"]
        assert progs <= 2 * 132
        # Fewer than one wave only where K leaves too few blocks of 64 for more splits.
        assert progs > 132 or c["SPLIT_K"] == 128 or k < 64 * 2 * 2 * c["SPLIT_K"]


def test_bad_tables_are_refused_in_one_line(tmp_path):
    skc = configs()
    bad = [("not json", "not a readable JSON"),
           (json.dumps({"entries": {"fast": {}}}), "mode 'fast'"),
           (json.dumps({"entries": {"atomic": {"M1_K2": {"config": {}}}}}), "M<m>_K<k>_N<n>"),
           (json.dumps({"entries": {"atomic": {"M1_K2_N3": {"config": {"BLOCK_M": 16}}}}}), "lacks"),
           (json.dumps({"entries": {"atomic": {"M1_K2_N3": {"config": {**cfg(), "BLOCK_N": 24}}}}}),
            "power of two")]
    for text, match in bad:
        path = tmp_path / "t.json"
        path.write_text(text)
        with pytest.raises(ValueError, match=match):
            skc.read_table(path)


@pytest.mark.parametrize("name", ["triton", "triton_deterministic"])
@pytest.mark.parametrize("shape", [(1, 4096, 16), (7, 5000, 24)])
@pytest.mark.parametrize("bias", [False, True])
def test_backends_with_table_configs_vs_fp64(name, shape, bias, monkeypatch):
    # On CPU the backends take an explicit interpreter config; here they take
    # the table's, as on a GPU.
    from qgemm_bench.backends import triton_ops
    from qgemm_bench.backends.triton_kernels.split_k import MODE_NAMES

    monkeypatch.setattr(triton_ops, "on_cpu", lambda c, config: None)
    out, inputs, prepared = run_backend(split_k_gemm, name, case(split_k_gemm, shape, bias=bias))
    gemm = prepared.fn
    m, k, n = shape
    config, source = configs().lookup(MODE_NAMES[gemm.mode], m, k, n, gpu=None)
    assert gemm.config == config and gemm.source == source and source in gemm.note()
    # per-split planes where deterministic, or where the atomic entry runs the
    # deterministic winner's plane sum (REDUCE "kernel", e.g. 1x4096x16's)
    planes = config["SPLIT_K"] if name == "triton_deterministic" or config.get("REDUCE") == "kernel" else 1
    assert gemm.ws.numel() == planes * m * n and gemm.count.numel() == configs().tiles(m, n, config)
    check(out, reference64(inputs))
    check(gemm(), reference64(inputs))  # a second call starts from zero again


@interpreter
def test_opt_in_autotune_is_ignored_on_cpu():
    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels import split_k

    a, b = torch.randn(1, 4096).to(DT), torch.randn(4096, 16).to(DT)
    gemm = make_split_k(a, b, None, split_k.DETERMINISTIC, autotune=True, target=target_for(a))
    assert not gemm.autotune and gemm.config is not None
    assert rel_error(gemm(), a.double() @ b.double()) <= TOL[DT]


# ------------------------------------------------------------------ qgemm_bench.tuning.split_k (no GPU)


REPO = Path(__file__).resolve().parents[1]


def tune_script():
    from qgemm_bench.tuning import split_k

    return split_k


def test_tune_script_candidates_are_valid():
    from qgemm_bench.tuning import candidates as cands

    t = tune_script()
    for shape in [*split_k_gemm.PRESETS["skinny"], (7, 5000, 24)]:
        first = t.candidates(*shape, 132)
        assert first[0] == configs().heuristic(*shape, 132)
        assert len({json.dumps(c, sort_keys=True) for c in first}) == len(first) >= 6
        for c in first:
            assert_valid(c, shape)
            assert cands.split_k_smem(c) <= cands.SPLIT_SMEM_LIMIT and (c["num_warps"], c["num_stages"]) == (4, 3)
            for v in t.variants(c):
                assert_valid(v, shape)
                assert cands.split_k_smem(v) <= cands.SPLIT_SMEM_LIMIT and v != c


def test_tune_script_times_the_second_launch_reduction_for_deterministic_configs():
    t = tune_script()
    skc = configs()
    from qgemm_bench.tuning.candidates import split_k_cfg as cfg

    a, b, one = cfg(16, 16, 64, 32), cfg(64, 32, 128, 8), cfg(16, 32, 64, 1)
    got = t.second_launch([a, b, one], atomic_best=a)
    assert got == [{**a, "REDUCE": "kernel"}, {**b, "REDUCE": "kernel"}]  # no split: nothing to sum; no repeats
    for c in got:
        skc.check_config(c, "deterministic")  # a config the table and the kernel take
    assert t.second_launch([b]) == [{**b, "REDUCE": "kernel"}]


def test_tune_script_waits_for_its_compile_workers_to_start():
    # The first shape's clock starts once every worker of both pools has run
    # its warm-up (imported torch and triton) without an error.
    t = tune_script()
    assert not t.Compiler(0).started(5)  # no workers: nothing to wait for
    compiler = t.Compiler(4)  # 3 background workers, 1 urgent
    try:
        assert len(compiler.warm_ups) == 4
        assert compiler.started(120)
        assert all(f.done() and f.exception() is None for f in compiler.warm_ups)
        # and the first shape's clock once its compiles are done (stand-ins:
        # two workers' tasks of 0.2 and 3 s, so the 1.5 s wait ends between
        # them; the test module's _compile does not pickle)
        shape, configs_ = (16, 4096, 16), t.candidates(16, 4096, 16, 132)[:3]
        assert compiler.compiled(shape, 0, configs_, 5) == 0  # nothing submitted: nothing to wait for
        for c, sleep in zip(configs_[:2], (0.2, 3), strict=True):
            compiler.futures[t.compile_key(*shape, 0, c)] = compiler.pools[0].submit(exec, f"import time; "
                                                                                      f"time.sleep({sleep})")
        assert compiler.compiled(shape, 0, configs_, 0.1) == 0
        assert compiler.compiled(shape, 0, configs_, 1.5) == 1
        assert compiler.compiled(shape, 0, configs_, 30) == 2
    finally:
        compiler.close()
    assert t.Compiler(0).compiled((16, 4096, 16), 0, configs_, 5) == 0


def fake_tune(t, monkeypatch, script: dict, calls: list):
    """tuning.split_k.tune against a scripted GPU: script[(shape, pass, mode)] =
    (us, timed, candidates) or None (nothing accurate); pass n times config
    split 4 * 2**n (deterministic: planes summed by the second launch); each
    call records (shape, mode, pass, the earlier timings it was handed)."""
    from qgemm_bench.harness import environment
    from qgemm_bench.tuning.candidates import split_k_cfg

    class FakeTuner:
        def __init__(self, shape, *_):
            self.shape = shape

        def cublas(self):
            return 10.0

        def tune_mode(self, mode, compiler, until, deadline, atomic_best=None, timed=None, lead=None):
            n = sum(1 for c in calls if c[:2] == (self.shape, mode))
            calls.append((self.shape, mode, n, sorted(timed)))
            timed[f"pass {n}"] = None
            got = script[(self.shape, n, mode)]
            if got is None:
                return None
            us, count, cands = got
            c = split_k_cfg(16, 16, 64, 4 * 2**n)
            if mode == 1:
                c = {**c, "REDUCE": "kernel"}
            return {"config": c, "us": us, "err": 1e-3, "timed": count, "candidates": cands}

    monkeypatch.setattr(t, "ShapeTuner", FakeTuner)
    monkeypatch.setattr(t, "device_target", lambda dev: fake_target("h100"))
    monkeypatch.setattr(environment, "gpu_slug", lambda dev: "h100")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda dev=None: "fake H100")


def test_tune_script_tunes_partly_timed_shapes_again_keeping_the_faster_entry(tmp_path, monkeypatch):
    # P's first pass times only some candidates, Q's all of them. With time
    # left P gets a second pass, handed the first's timings (not timed
    # again); its entries change only where that pass timed >3% faster
    # (atomic 4.0 < 5.0; deterministic 7.0 > 6.0 keeps the first), and Q is
    # not tuned again. R: the deterministic winner (plane sum) is faster than
    # the atomic one in the same pass, so the atomic entry takes it, and again
    # in the second pass. S: nothing accurate in the deterministic mode: the
    # atomic entry does not take the deterministic entry from the table.
    import argparse

    t = tune_script()
    skc = configs()
    P, Q, R, S = Shape(16, 4096, 16), Shape(32, 8192, 32), Shape(64, 8192, 64), Shape(16, 8192, 16)
    script = {
        (P, 0, 0): (5.0, 3, 9), (P, 0, 1): (6.0, 3, 9), (P, 1, 0): (4.0, 9, 9), (P, 1, 1): (7.0, 9, 9),
        (Q, 0, 0): (3.0, 9, 9), (Q, 0, 1): (3.5, 9, 9),
        (R, 0, 0): (5.0, 3, 9), (R, 0, 1): (4.5, 3, 9), (R, 1, 0): (4.2, 9, 9), (R, 1, 1): (4.0, 9, 9),
        (S, 0, 0): (99.0, 9, 9), (S, 0, 1): None, (S, 1, 0): (99.0, 9, 9), (S, 1, 1): None}
    calls = []
    fake_tune(t, monkeypatch, script, calls)
    base = tmp_path / "base.json"
    doc = skc.read_table(a_store_file("split_k"))
    doc["entries"]["deterministic"][skc.key(*S)]["us"] = 1.0
    base.write_text(skc.dumps(doc))
    out = tmp_path / "t.json"
    args = argparse.Namespace(base=base, retune=True, keep_faster=False, limit_s=1e6, jobs=0, warmup_ms=1.0,
                              rep_ms=1.0, out=out)
    assert t.tune(args, [P, Q, R, S], dev=torch.device("cpu")) == 0
    firsts = [(P, 0), (P, 1), (Q, 0), (Q, 1), (R, 0), (R, 1), (S, 0), (S, 1)]
    assert calls[:8] == [(sh, m, 0, []) for sh, m in firsts]
    assert calls[8:] == [(sh, m, 1, ["pass 0"]) for sh, m in [(P, 0), (P, 1), (R, 0), (R, 1), (S, 0), (S, 1)]]
    got = json.loads(out.read_text())["entries"]

    def entry(mode, shape):
        e = got[mode][skc.key(*shape)]
        return e["us"], e["config"]["SPLIT_K"], e["config"].get("REDUCE")

    assert entry("atomic", P) == (4.0, 8, None)  # the second pass's
    assert entry("deterministic", P) == (6.0, 4, "kernel")  # the first pass's
    assert entry("atomic", Q) == (3.0, 4, None) and entry("deterministic", Q) == (3.5, 4, "kernel")
    assert entry("atomic", R) == entry("deterministic", R) == (4.0, 8, "kernel")
    assert entry("atomic", S) == (99.0, 4, None) and got["deterministic"][skc.key(*S)]["us"] == 1.0
    assert "deterministic winner" not in got["atomic"][skc.key(*S)]["tuned"]


def test_tune_script_keep_faster_keeps_the_tables_entries_and_says_so(tmp_path, monkeypatch):
    import argparse

    from qgemm_bench.harness import environment

    t = tune_script()
    skc = configs()
    P = Shape(16, 4096, 16)
    doc = skc.read_table(a_store_file("split_k"))
    old = {m: doc["entries"][m][skc.key(*P)] for m in skc.MODES}
    fast, slow = 0.9 * old["atomic"]["us"], 0.99 * old["deterministic"]["us"]  # slow: within the 3% margin
    calls = []
    command = "python3 -m qgemm_bench.tuning.split_k OUT --shapes 16x4096x16 --no-preset --retune --keep-faster"
    monkeypatch.setattr(sys, "orig_argv", command.split())
    monkeypatch.setattr(environment, "git_commit", lambda: "abc1234")
    fake_tune(t, monkeypatch, {(P, 0, 0): (fast, 9, 9), (P, 0, 1): (slow, 9, 9),
                               (P, 1, 0): (fast, 9, 9), (P, 1, 1): (slow, 9, 9)}, calls)
    out = tmp_path / "t.json"
    args = argparse.Namespace(base=a_store_file("split_k"), retune=True, keep_faster=True, limit_s=1e6, jobs=0,
                              warmup_ms=1.0, rep_ms=1.0, out=out)
    assert t.tune(args, [P], dev=torch.device("cpu")) == 0
    got = json.loads(out.read_text())
    assert got["entries"]["atomic"][skc.key(*P)]["us"] == fast
    assert got["entries"]["deterministic"][skc.key(*P)] == old["deterministic"]
    # The run recorded after the table's own provenance, as fields; the older prose gone.
    assert got["provenance"] == {**doc["provenance"], "passes": got["provenance"]["passes"]}
    (run,) = got["provenance"]["passes"]
    assert (run["pass"], run["keep_faster"], run["commit"]) == ("split_k", True, "abc1234")
    assert run["entries"] == {mode: [skc.key(*P)] for mode in skc.MODES} and run["command"] == command
    assert "source" not in got and "versions" not in got and got["format"] == skc.FORMAT
    # a second --keep-faster run over the first's table: one more record, not nested
    again = tmp_path / "again.json"
    assert t.tune(argparse.Namespace(**{**vars(args), "base": out, "out": again}), [P], dev=torch.device("cpu")) == 0
    assert json.loads(again.read_text())["provenance"]["passes"] == [run, {**run, "date": mock.ANY}]


@pytest.mark.parametrize("flag", ["--retune", "--keep-faster", "--seed-only"])
def test_tune_scripts_pf_pass_refuses_the_tunes_flags_in_one_line(tmp_path, flag):
    cmd = [sys.executable, "-m", "qgemm_bench.tuning.split_k", str(tmp_path / "t.json"), "--pf-pass", flag]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"error: --pf-pass times the table's entries against their twins: not with {flag}"], r.stderr
    assert not (tmp_path / "t.json").exists()


def test_tune_script_writes_the_seed_table(tmp_path):
    out = tmp_path / "seed.json"
    r = subprocess.run([sys.executable, "-m", "qgemm_bench.tuning.split_k", "--seed-only", str(out)],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 0, r.stderr
    skc = configs()
    doc = skc.read_table(out)
    prov = doc.pop("provenance")
    assert doc == json.loads(skc.dumps(skc.seed_table(split_k_gemm.PRESETS["skinny"])))
    # Its provenance: the store's fields, the command as run, nothing timed.
    assert set(PROVENANCE_KEYS) <= set(prov) and prov["pass"] == "seed" and prov["rounds"] == 0
    assert prov["command"].endswith(f"-m qgemm_bench.tuning.split_k --seed-only {out}") and prov["commit"]
    shape = split_k_gemm.PRESETS["skinny"][0]
    assert skc.lookup("atomic", *shape, doc=doc)[1] == f"heuristic seed: {shape}"
    checked_in = skc.read_table(a_store_file("split_k"))
    if all(e["tuned"].startswith(skc.SEED_NOTE) for es in checked_in["entries"].values() for e in es.values()):
        assert {k: v for k, v in checked_in.items() if k != "provenance"} == doc  # what the script regenerates
    bad = subprocess.run([sys.executable, "-m", "qgemm_bench.tuning.split_k", str(out), "--shapes", "3x4"],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "MxKxN" in bad.stderr


def test_triton_refuses_bad_inputs():
    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels.split_k import ATOMIC

    a = torch.randn(4, 64, device=DEV).to(DT)
    with pytest.raises(ValueError, match="do not match"):
        make_split_k(a, torch.randn(32, 8, device=DEV).to(DT), None, ATOMIC, cfg(), target=target_for(a))
    with pytest.raises(ValueError, match="bias"):
        make_split_k(a, torch.randn(64, 8, device=DEV).to(DT), torch.zeros(7, device=DEV, dtype=DT), ATOMIC, cfg(),
                     target=target_for(a))


# ------------------------------------------------------------------ our Helion kernel (interpreter configs)


def helion_config(bm=16, bn=32, bk=64, split=1, reduce="last") -> dict:
    return {"block_sizes": [bn, bm], "block_k": bk, "split_k": split, "num_warps": 4, "num_stages": 1,
            "reduce": reduce}


def helion_gemm(inputs, deterministic, config, monkeypatch):
    """kernels.split_k through helion_ops.SplitK with `config` (the interpreter's)."""
    from qgemm_bench.backends import helion_ops

    monkeypatch.setattr(helion_ops, "SPLIT_K_INTERPRETER_CONFIG", config)
    gemm = helion_ops.SplitK(inputs.a, inputs.b, inputs.bias, deterministic)
    return gemm, gemm.call(gemm.ready("split_k_gemm"))


@interpreter
@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("shape, config, bias", [
    ((16, 1024, 16), helion_config(bn=16, split=1), True),
    ((33, 1000, 50), helion_config(split=3), False),  # 16 K blocks: 3 splits of 6, 6, 4
    ((33, 1000, 50), helion_config(bm=32, bn=16, split=16), True),
    ((1, 1000, 16), helion_config(split=4), True),  # small M: 16-row tiles, masked rows
    ((5, 1000, 7), helion_config(bn=16, split=3), False),
    ((2, 300, 20), helion_config(bn=16, bk=32, split=8), True),  # 10 K blocks: 5 splits (not a multiple of 4)
    # The planes summed by a second launch (reduce_planes), in either mode:
    ((33, 1000, 50), helion_config(split=3, reduce="kernel"), True),
    ((5, 1000, 7), helion_config(bn=16, split=16, reduce="kernel"), False),
    ((16, 1024, 16), helion_config(bn=16, split=1, reduce="kernel"), True),  # one split: no second launch
    ((2, 300, 20), helion_config(bn=16, bk=32, split=8, reduce="kernel"), True),  # 5 splits launched, not 8
    # 65 K blocks in splits of 2: 33 planes, from SPREAD_PLANES summed as one tile
    ((3, 4100, 20), helion_config(bn=16, bk=64, split=40, reduce="kernel"), True),
])
def test_helion_kernel_vs_fp64(deterministic, shape, config, bias, monkeypatch):
    inputs = split_k_gemm.make_inputs(case(split_k_gemm, shape, bias=bias), seed())
    gemm, fn = helion_gemm(inputs, deterministic, config, monkeypatch)
    ref = reference64(inputs)
    first = fn().clone()
    check(first, ref)
    assert int(gemm.count.abs().sum()) == 0  # left zero for the next call
    if not deterministic and config["reduce"] == "last":
        assert float(gemm.ws.abs().sum()) == 0.0
    again = fn()
    check(again, ref)
    if deterministic:
        assert torch.equal(again, first)
    from qgemm_bench.backends.triton_kernels.split_k_parts import SPREAD_PLANES

    if config["split_k"] >= SPREAD_PLANES:  # the case meant for reduce_planes' tile of planes reaches it
        assert gemm.splits(gemm.ready("split_k_gemm").config) >= SPREAD_PLANES


@pytest.mark.parametrize("pdl", [1, 2, 3])
def test_helion_split_k_waits_before_it_reads(pdl):
    # The Triton code Helion emits for the split-K kernel (and its second
    # launch) with PDL: nothing is read before griddepcontrol.wait but the
    # prefetch of b (PDL 2, 3); the next kernel is let in before the wait
    # (1, 2) or after the K loop's last dot (3). On the GPU, timed in
    # results/h100/split_k_gemm; the interpreter has no griddepcontrol.
    from qgemm_bench.backends.helion_kernels import kernels

    m, k, n = 16, 1024, 32
    a, b = torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)
    ws = torch.zeros(4, m, n)
    cfg = {"block_sizes": [32, 16], "split_k": 4, "num_warps": 4, "num_stages": 3}
    code = kernels.split_k.bind((a, b, b[0], ws, torch.zeros(1, 2, dtype=torch.int32), False, True, 64, 0, pdl,
                                 True)).to_triton_code(cfg)
    body = code[code.index("def _helion_split_k"):code.index("def split_k(")]
    wait, launch = body.index("gdc_wait()"), body.index("gdc_launch_dependents()")
    assert body.count("gdc_wait()") == 1 and body.count("gdc_launch_dependents()") == 1
    assert wait < body.index("tl.load(")
    assert ("prefetch.global.L2" in body) == (pdl >= 2)
    if pdl >= 2:
        assert body.index("prefetch.global.L2") < wait
    assert (launch > body.rindex("tl.dot(")) if pdl == 3 else (launch < wait)
    planes = ws.view(4, -1)
    code = kernels.reduce_planes.bind((planes, b[0], torch.empty(m * n, dtype=torch.float16), False, 4, 64,
                                       1)).to_triton_code({"num_warps": 2, "num_stages": 1})
    body = code[code.index("def _helion_reduce_planes"):code.index("def reduce_planes(")]
    assert body.index("gdc_launch_dependents()") < body.index("gdc_wait()") < body.index("tl.load(")


@pytest.mark.parametrize("pdl", [0, 1, 2, 3])
def test_helion_split_k_candidates_time_the_table_config_at_its_own_pdl_and_at_3(monkeypatch, pdl):
    # The table's config runs in Helion at the Triton config's own PDL mode;
    # where that launches the next kernel early (1, 2), the tuner also times
    # it launching after the K loop (3: faster on the H100, slower on the H200).
    from qgemm_bench.backends import helion_dispatch
    from qgemm_bench.tuning import candidates

    table = {"block_sizes": [16, 16], "block_k": 128, "split_k": 16, "num_warps": 4, "num_stages": 3,
             "pdl": pdl, "reduce": "kernel"}
    monkeypatch.setattr(helion_dispatch, "split_k_default", lambda *a, **k: (dict(table), "test"))
    got = candidates.helion("split_k_gemm", 16, (16, 4096, 16), torch.device("cpu"))
    assert got[0] == table
    late = [i for i, c in enumerate(got) if c == {**table, "pdl": 3}]
    assert late == ([1] if pdl in (1, 2) else [0] if pdl == 3 else [])
    assert len(got) == len({str(c) for c in got}) > 2  # then the curated list, no repeats


@interpreter
def test_helion_runs_the_triton_table_config_where_no_helion_config_is_checked_in(monkeypatch):
    # On a GPU without a configs/<gpu>.json entry, tuning.ready falls back to
    # `default` (test_helion_configs tests that); here: the default is the
    # Triton table's config for the mode, translated, and it runs.
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels import kernels, tuning
    from qgemm_bench.backends.triton_dispatch import choose_split_k as choose_config
    from qgemm_bench.target import Target

    calls = []
    real = tuning.ready

    def spy(name, *args, **kwargs):
        calls.append((name, args[-1]))  # default: ready's last positional argument
        return real(name, *args, **kwargs)

    monkeypatch.setattr(tuning, "ready", spy)
    m, k, n = 7, 5000, 24
    inputs = split_k_gemm.make_inputs(case(split_k_gemm, (m, k, n), bias=True), seed())
    for deterministic in (False, True):
        c, source = choose_config(int(deterministic), m, k, n, Target.cpu())
        config, note = helion_ops.split_k_default(deterministic, m, k, n, Target.cpu())
        assert config == {"block_sizes": [c["BLOCK_N"], c["BLOCK_M"]], "block_k": c["BLOCK_K"],
                          "split_k": c["SPLIT_K"], "num_warps": c["num_warps"], "num_stages": c["num_stages"],
                          "pdl": c.get("PDL", 0), "reduce": c.get("REDUCE", "last")}
        assert note.startswith("Triton table config") and source in note
        gemm, fn = helion_gemm(inputs, deterministic, config, monkeypatch)  # the interpreter runs it
        assert calls[-1] == ("split_k_gemm_deterministic" if deterministic else "split_k_gemm", (config, note))
        splits = -(-k // kernels.split_chunk(k, c["BLOCK_K"], c["SPLIT_K"]))
        assert gemm.ws.shape == ((splits, 16, n) if deterministic else (16, n))  # small M: 16 rows
        check(fn(), reference64(inputs))


@interpreter
def test_helion_refuses_configs_of_the_earlier_kernel(monkeypatch):
    inputs = split_k_gemm.make_inputs(case(split_k_gemm, (16, 1024, 16)), seed())
    with pytest.raises(ValueError, match="earlier split-K kernel"):
        helion_gemm(inputs, False, {"block_sizes": [16, 32, 32], "split_k": 4, "num_warps": 4, "num_stages": 1},
                    monkeypatch)


@interpreter
def test_helion_deterministic_backend_is_registered():
    b = registry.get("split_k_gemm", "helion_deterministic")
    assert "fixed order" in b.summary and b.why_not is registry.get("split_k_gemm", "helion").why_not
    _, _, prepared = run_backend(split_k_gemm, "helion_deterministic", case(split_k_gemm, (5, 1000, 7)))
    assert prepared.compile_s is not None and prepared.compile_s >= 0 and "interpreter" in prepared.notes


@interpreter
def test_helion_refuses_bad_bias():
    c = case(split_k_gemm, (4, 64, 8), bias=True)
    inputs = split_k_gemm.Inputs(torch.randn(4, 64).to(DT), torch.randn(64, 8).to(DT), torch.zeros(7, dtype=DT))
    for name in ("helion", "helion_deterministic"):
        with pytest.raises(ValueError, match="bias"):
            registry.get("split_k_gemm", name).prepare(c, inputs)


# ------------------------------------------------------------------ tritonbench entry points


@interpreter
@pytest.mark.parametrize("entry", [tb.matmul_split_k_tritonbench, tb.triton_matmul_split_k_tritonbench])
@pytest.mark.parametrize("with_bias", [False, True])
def test_tritonbench_entry(entry, with_bias):
    a, b = torch.randn(16, 2048).to(DT), torch.randn(2048, 24).to(DT)
    bias = (16 * torch.randn(24)).to(DT) if with_bias else None
    out = entry(None, a, b, bias)()
    ref = a.double() @ b.double() + (bias.double() if with_bias else 0)
    assert rel_error(out, ref) <= TOL[DT]


def test_tritonbench_entry_refuses_bad_operands():
    with pytest.raises(ValueError, match="2-D"):
        tb.matmul_split_k_tritonbench(None, torch.randn(2, 3, 4).to(DT), torch.randn(4, 8).to(DT))


# ------------------------------------------------------------------ GPU


def check_gpu(name, shape, **settings):
    check_on_gpu(split_k_gemm, name, shape, **settings)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("shape", [(64, 32768, 64), (5, 4099, 7)])
@pytest.mark.parametrize("bias", [False, True])
def test_every_backend_bf16(name, shape, bias):
    check_gpu(name, shape, bias=bias)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("name", ["triton_deterministic", "helion_deterministic"])
def test_deterministic_is_bit_identical_on_gpu(name):
    c = case(split_k_gemm, (64, 32768, 64), torch.bfloat16, CUDA, bias=True)
    inputs = split_k_gemm.make_inputs(c, 1)
    fn = registry.get("split_k_gemm", name).prepare(c, inputs).fn
    first = fn()
    assert all(torch.equal(fn(), first) for _ in range(20))


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("config", [(32, 32, 128, 16), (16, 64, 128, 16), (64, 32, 64, 32)])
def test_atomic_finish_has_no_race(config):
    # These configs read incomplete sums in up to 20 of 20 runs when the last
    # program read the workspace with a plain (.cg) load.
    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels.split_k import ATOMIC

    a = torch.randn(256, 8192, device=CUDA, dtype=torch.bfloat16)
    b = torch.randn(8192, 256, device=CUDA, dtype=torch.bfloat16)
    bm, bn, bk, sk = config
    gemm = make_split_k(a, b, None, ATOMIC, {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sk,
                                           "num_warps": 4, "num_stages": 3}, target=target_for(a))
    ref = a.double() @ b.double()
    assert all(rel_error(gemm(), ref) <= 1e-2 for _ in range(20))


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("config", [(32, 32, 128, 16), (16, 64, 128, 16), (64, 32, 64, 32)])
def test_helion_finish_has_no_race(config, deterministic):
    # The Triton kernel's racy configs (test_atomic_finish_has_no_race), in
    # the Helion kernel: explicit configs, as tuning/helion.py gives them.
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels import tuning

    a = torch.randn(256, 8192, device=CUDA, dtype=torch.bfloat16)
    b = torch.randn(8192, 256, device=CUDA, dtype=torch.bfloat16)
    bm, bn, bk, sk = config
    gemm = helion_ops.SplitK(a, b, None, deterministic)
    with tuning.options(explicit={"block_sizes": [bn, bm], "block_k": bk, "split_k": sk, "num_warps": 4,
                                  "num_stages": 3}):
        r = gemm.ready("split_k_gemm")
    args = gemm.args(r.config)
    ref = a.double() @ b.double()
    assert all(rel_error(r.run(*args), ref) <= 1e-2 for _ in range(20))
    assert int(gemm.count.abs().sum()) == 0


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("mode", [0, 1])
def test_every_table_config_on_gpu(mode):
    # Every skinny preset shape with the table's config of this mode, in bf16 with bias.
    from qgemm_bench.backends.triton_dispatch import make_split_k

    for shape in split_k_gemm.PRESETS["skinny"]:
        inputs = split_k_gemm.make_inputs(case(split_k_gemm, shape, torch.bfloat16, CUDA, bias=True), 2)
        gemm = make_split_k(inputs.a, inputs.b, inputs.bias, mode, autotune=False, target=target_for(inputs.a))
        assert gemm.config is not None and not gemm.autotune
        ref = split_k_gemm.reference(inputs)
        for _ in range(2):
            assert rel_error(gemm(), ref) <= 1e-2, (shape, gemm.note())


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("deterministic", [False, True])
def test_helion_runs_every_table_config_on_gpu(deterministic):
    # The Helion kernel with the Triton table's configs (PDL, the second
    # launch), every skinny preset shape, bf16 with bias, twice (the
    # workspace and counters left ready for the next call).
    from qgemm_bench.backends import helion_ops

    for shape in split_k_gemm.PRESETS["skinny"]:
        inputs = split_k_gemm.make_inputs(case(split_k_gemm, shape, torch.bfloat16, CUDA, bias=True), 2)
        gemm = helion_ops.SplitK(inputs.a, inputs.b, inputs.bias, deterministic)
        r = gemm.ready("split_k_gemm")
        fn = gemm.call(r)
        ref = split_k_gemm.reference(inputs)
        first = fn().clone()
        assert rel_error(first, ref) <= 1e-2, (shape, r.notes)
        again = fn()
        assert rel_error(again, ref) <= 1e-2, (shape, r.notes)
        if deterministic:
            assert torch.equal(again, first), (shape, r.notes)


@pytest.mark.gpu
@needs_gpu
def test_tritonbench_entries_on_gpu():
    a = torch.randn(64, 32768, device=CUDA, dtype=torch.bfloat16)
    b = torch.randn(32768, 64, device=CUDA, dtype=torch.bfloat16)
    for entry in (tb.matmul_split_k_tritonbench, tb.triton_matmul_split_k_tritonbench):
        assert rel_error(entry(None, a, b, None)(), a.double() @ b.double()) <= 1e-2


@pytest.mark.parametrize("shape, exact", [((16, 8192, 16), True), ((256, 4096, 256), True), ((20, 9000, 24), False)])
def test_helion_takes_its_nearest_bucket_only_where_the_triton_table_lacks_the_shape(shape, exact, monkeypatch):
    """A Helion split-K entry of another bucket must not displace the Triton
    table's config of the shape's own (both modes; each store entry's Target)."""
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels import tuning
    from qgemm_bench.configs import store

    seen = []
    monkeypatch.setattr(tuning, "ready", lambda *args, **kwargs: seen.append(kwargs["nearest_ok"]))
    inputs = split_k_gemm.make_inputs(case(split_k_gemm, shape), seed())
    targets = list(store.entries().values())
    for target in targets:
        for deterministic in (False, True):
            helion_ops.SplitK(inputs.a, inputs.b, None, deterministic, target=target).ready("split_k_gemm")
    assert targets and seen == [not exact] * 2 * len(targets)


@interpreter
def test_the_helion_tuner_writes_the_deterministic_kernels_entry(tmp_path, monkeypatch):
    """--op split_k_gemm_deterministic: candidates start from the Triton
    table's deterministic config, the backend timed is
    helion_deterministic (checked against fp64 by measure), and the winner
    is saved under the kernel that backend reads."""
    from qgemm_bench.backends import helion_dispatch
    from qgemm_bench.configs.store import Store
    from qgemm_bench.target import Target
    from qgemm_bench.tuning import candidates
    from qgemm_bench.tuning import helion as tuner

    shape, cpu = (3, 512, 24), torch.device("cpu")
    modes, real = [], helion_dispatch.split_k_default
    monkeypatch.setattr(helion_dispatch, "split_k_default",
                        lambda det, *a, **k: (modes.append(det), real(det, *a, **k))[1])
    for op, det in (("split_k_gemm", False), ("split_k_gemm_deterministic", True)):
        assert candidates.helion(op, shape[0], shape, cpu)[0]["reduce"] == real(det, *shape, Target.cpu())[0][
            "reduce"] and modes[-1] is det
        assert tuner.kernel_name(op, shape[0], shape, cpu) == op
    backends, get = [], registry.get
    monkeypatch.setattr(registry, "get", lambda o, b: (backends.append((o, b)), get(o, b))[1])
    from qgemm_bench.harness import measure

    timed, real_measure = [], measure.measure
    monkeypatch.setattr(measure, "measure", lambda *a, **k: (timed.append(1), real_measure(*a, **k))[1])
    monkeypatch.setattr(tuner, "_MEASURED", set())  # a fresh process: its first timing is discarded
    cfgs = [helion_config(bn=16, split=s, reduce="kernel") for s in (2, 4)]
    r = tuner.tune("split_k_gemm_deterministic", shape, cpu, 0, 1.0, torch.float16, cfgs, "cpu")
    assert backends == [("split_k_gemm", "helion_deterministic")] and len(timed) == 3
    tuner.tune("split_k_gemm_deterministic", shape, cpu, 0, 1.0, torch.float16, cfgs, "cpu")
    assert len(timed) == 5  # once each from the process's second tune on
    assert r["op"] == "split_k_gemm_deterministic" and r["entry"]["config"] in cfgs
    store = Store(tmp_path)
    helion_dispatch.save(*r["save"], store)
    entries = store.read("cpu", "helion")["kernels"]
    assert list(entries) == ["split_k_gemm_deterministic"]
    assert entries["split_k_gemm_deterministic"]["M4_K512_N24"]["config"] == r["entry"]["config"]


def test_the_helion_tuners_discarded_first_timing_keeps_its_compile_time_and_verdict(monkeypatch):
    """The first config a process times on a device is timed twice, the
    second timing kept with the first's compile time (the compile happened
    there); a first call that is not ok is the verdict (no second call)."""
    from qgemm_bench.harness import measure
    from qgemm_bench.tuning import helion as tuner

    shape, cpu = (3, 512, 24), torch.device("cpu")
    cfgs = [helion_config(bn=16, split=s) for s in (2, 4)]
    for first_status, calls, taken in (("ok", 3, cfgs[0]), ("incorrect", 2, cfgs[1])):
        results = iter([{"status": first_status, "p50_us": 5.0, "compile_s": 7.0},
                        {"status": "ok", "p50_us": 1.0, "compile_s": 0.0},
                        {"status": "ok", "p50_us": 2.0, "compile_s": 0.5}])
        timed = []
        monkeypatch.setattr(measure, "measure", lambda *a, _t=timed, _r=results, **k: (_t.append(1), next(_r))[1])
        monkeypatch.setattr(tuner, "_MEASURED", set())
        r = tuner.tune("split_k_gemm", shape, cpu, 0, 1.0, torch.float16, cfgs, "cpu")
        assert len(timed) == calls and r["entry"]["config"] == taken
        if first_status == "ok":
            assert r["us"] == 1.0 and r["entry"]["compile_s"] == 7.0


def test_the_h100_helion_split_k_entries_keep_pdl_3_where_its_table_launches_early():
    """Helion's split-K fallback runs the Triton config's own PDL mode (the
    H200's measurements); the H100, where mode 3 was faster at every shape
    timed, keeps it through untimed entries: at each H100 table bucket of
    either mode whose config has PDL 1 or 2, the table's config at PDL 3."""
    from qgemm_bench.backends.config_buckets import parse
    from qgemm_bench.backends.helion_dispatch import split_k_default
    from qgemm_bench.backends.helion_kernels import configs as hconfigs
    from qgemm_bench.configs.store import DEFAULT

    h100 = DEFAULT.entries()["h100"]
    doc, table = DEFAULT.read("h100", "helion"), DEFAULT.read("h100", "split_k")["entries"]
    early = 0
    for mode, kernel in (("atomic", "split_k_gemm"), ("deterministic", "split_k_gemm_deterministic")):
        for key, e in table[mode].items():
            shape = parse(key)
            own, _ = split_k_default(mode == "deterministic", *shape, h100)
            assert own["pdl"] == e["config"].get("PDL", 0)  # the fallback: the table's own mode
            if own["pdl"] not in (1, 2):
                continue
            early += 1
            cfg, note = hconfigs.lookup(kernel, *shape, doc, "h100/helion.json", nearest_ok=False)
            assert cfg == {**own, "pdl": 3} and note.startswith("untimed"), (kernel, key)
    assert early == 36
