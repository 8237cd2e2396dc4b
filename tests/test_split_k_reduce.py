"""The Triton split-K GEMM's deterministic reductions (config key REDUCE:
"last", "kernel"; split_k_parts.py): each against fp64 on ragged shapes and
bit-identical over calls (each in its own fixed order), and the config
checks."""

import json

import pytest
import torch

from qgemm_bench.operators import split_k_gemm
from tests.support import a_store_file, case, check, seed, target_for, triton_config


def reference64(inputs):
    ref = inputs.a.double() @ inputs.b.double()
    return ref if inputs.bias is None else ref + inputs.bias.double()


VARIANTS = [{"REDUCE": "last"}, {"REDUCE": "kernel"}]


# Shapes that divide no block; splits 3, 7 (at 7x1000x33 its last split gets
# no K block) and 8. The larger shape (31 K blocks of 64: every split of 7 or
# 8 has blocks, the last one fewer) runs seconds a case in the interpreter:
# two cases of it.
@pytest.mark.parametrize("shape, bias, split", [
    ((7, 1000, 33), False, 3), ((7, 1000, 33), True, 3), ((7, 1000, 33), False, 7), ((7, 1000, 33), True, 7),
    ((7, 1000, 33), False, 8), ((7, 1000, 33), True, 8), ((33, 1984, 17), True, 7), ((33, 1984, 17), False, 8),
    # From SPREAD_PLANES splits the second launch sums a tile of planes by
    # tl.sum (33: 64 planes loaded, 31 of them masked; 35 K blocks of 64).
    ((5, 2200, 33), True, 33), ((9, 2100, 40), False, 32)])
def test_reduce_variants_vs_fp64_and_last(shape, bias, split):
    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels.split_k import DETERMINISTIC
    from qgemm_bench.backends.triton_kernels.split_k_parts import SPREAD_PLANES

    inputs = split_k_gemm.make_inputs(case(split_k_gemm, shape, bias=bias), seed())
    ref = reference64(inputs)
    base = triton_config(bn=32, bk=64, split=split)
    last = make_split_k(inputs.a, inputs.b, inputs.bias, DETERMINISTIC, base,
                        target=target_for(inputs.a))()  # no REDUCE: today's path
    check(last, ref)
    for extra in VARIANTS:
        gemm = make_split_k(inputs.a, inputs.b, inputs.bias, DETERMINISTIC, {**base, **extra},
                            target=target_for(inputs.a))
        gemm.ws.fill_(float("nan"))  # no variant needs its planes zeroed: every call writes each
        first = gemm().clone()
        check(first, ref)
        assert torch.equal(gemm(), first), extra  # deterministic
        assert int(gemm.count.abs().sum()) == 0
        if split < SPREAD_PLANES:
            assert torch.equal(first, last), extra  # split order from zero, then the bias: the same bits


def test_plane_launch_spreads_many_planes_over_threads():
    from qgemm_bench.backends.triton_kernels.split_k_parts import SPREAD_PLANES, plane_launch, reduce_block

    cases = ((16, 16, SPREAD_PLANES - 1), (256, 256, 8), (16, 16, SPREAD_PLANES), (32, 32, 128), (1, 128, 33),
             (256, 256, 128), (256, 256, 64))  # 256 elements a program at 128 planes: 128 values a thread before
    for m, n, split in cases:
        grid, meta = plane_launch(m, n, split, 132)
        assert meta["BLOCK"] <= reduce_block(m, n, 132)[0] and grid == (-(-m * n // meta["BLOCK"]),)
        assert meta["SPREAD"] == (split >= SPREAD_PLANES)
        assert meta["PLANES"] >= split and meta["PLANES"] & (meta["PLANES"] - 1) == 0
        if meta["SPREAD"]:  # every plane of the block at once, ~16 values a thread, 8 warps at most
            assert meta["PLANES"] * meta["BLOCK"] <= 16 * 32 * meta["num_warps"] and meta["num_warps"] <= 8
        else:
            assert meta["num_warps"] == reduce_block(m, n, 132)[1] and meta["BLOCK"] == reduce_block(m, n, 132)[0]


def test_a_workspace_past_int32_offsets_is_refused():
    from qgemm_bench.backends.triton_kernels.split_k_parts import check_workspace

    check_workspace(128, 4096, 4095)  # 2^31 - 2^19 elements: the kernels' offsets reach it
    with pytest.raises(ValueError, match="over the 2\\^31 the kernels' int32 offsets reach"):
        check_workspace(128, 4096, 4096)


def test_reduce_kernel_with_one_split_is_one_launch():
    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels.split_k import DETERMINISTIC

    inputs = split_k_gemm.make_inputs(case(split_k_gemm, (5, 300, 20), bias=True), seed())
    gemm = make_split_k(inputs.a, inputs.b, inputs.bias, DETERMINISTIC, triton_config(split=1, REDUCE="kernel"),
                        target=target_for(inputs.a))
    assert gemm.reduce is None  # split 1 stores the output itself
    check(gemm(), reference64(inputs))


# ------------------------------------------------------------------ configs (no kernel runs)


def test_configs_check_reduce():
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc

    c = triton_config(split=8)
    for mode in (None, "atomic", "deterministic"):
        skc.check_config({**c, "REDUCE": "last"}, mode)
    for mode in ("atomic", "deterministic"):  # an atomic entry may take the plane-sum kernel
        skc.check_config({**c, "REDUCE": "kernel"}, mode)
    bad = [({"REDUCE": "tree"}, "must be one of 'last', 'kernel'"),
           ({"REDUCE": "chunk"}, "must be one of"),  # measured and dropped
           ({"REDUCE": None}, "must be one of")]
    for extra, match in bad:
        with pytest.raises(ValueError, match=match):
            skc.check_config({**c, **extra}, "deterministic")


def test_an_atomic_entry_may_name_the_plane_sum_kernel(tmp_path):
    """The tuner gives an atomic entry the deterministic REDUCE "kernel" winner
    where it timed faster: tables take it in either mode, and an ATOMIC gemm
    with it runs the plane sum (right, and bit-stable as a bonus)."""
    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc
    from qgemm_bench.backends.triton_kernels.split_k import ATOMIC, DETERMINISTIC

    c = {**triton_config(split=8), "REDUCE": "kernel"}
    path = tmp_path / "t.json"
    for mode in ("atomic", "deterministic"):
        path.write_text(json.dumps({"entries": {mode: {"M1_K2_N3": {"config": c}}}}))
        skc.read_table(path)
    inputs = split_k_gemm.make_inputs(case(split_k_gemm, (4, 1000, 40), bias=True), seed())
    gemm = make_split_k(inputs.a, inputs.b, inputs.bias, ATOMIC, c, target=target_for(inputs.a))
    assert gemm.mode == DETERMINISTIC and gemm.reduce is not None and gemm.ws.numel() == 8 * 4 * 40
    first = gemm().clone()
    check(first, reference64(inputs))
    assert torch.equal(gemm(), first)


def test_describe_and_kernel_meta():
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc
    from qgemm_bench.backends.triton_kernels.split_k import kernel_meta

    c = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 64, "SPLIT_K": 64, "num_warps": 4, "num_stages": 3}
    assert skc.describe(c) == skc.describe({**c, "REDUCE": "last"}) == "16x16x64 split 64 w4 s3"
    assert skc.describe({**c, "REDUCE": "kernel"}) == "16x16x64 split 64 w4 s3 reduce kernel"
    assert skc.describe({**c, "TMA": True, "ACC_SCALE": True, "maxnreg": 128, "PDL": 2}) == \
        "16x16x64 split 64 w4 s3 tma acc r128 pdl2"
    assert skc.describe({**c, "TMA": True, "TMA_W": False}) == "16x16x64 split 64 w4 s3 tma-x"
    # The kernel's arguments: the default path passes REDUCE 0 (the kernel's
    # default), i.e. the same kernel as before REDUCE existed.
    assert kernel_meta(c) == kernel_meta({**c, "REDUCE": "last"}) == {**c, "REDUCE": 0}
    assert kernel_meta({**c, "REDUCE": "kernel"}) == {**c, "REDUCE": 1}


def test_checked_in_reductions_are_last_or_kernel_and_run_right():
    """The table's deterministic entries reduce in a fixed order ("last" or
    "kernel"; "kernel" where it timed faster, docs/split_k.md),
    its atomic ones by atomics or, where the deterministic "kernel"
    winner timed faster, by that very config; two of its "kernel" configs,
    run at a ragged shape in either mode, against fp64 and bit-stable."""
    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc
    from qgemm_bench.backends.triton_kernels.split_k import ATOMIC, DETERMINISTIC

    doc = skc.read_table(a_store_file("split_k"))
    for key, e in doc["entries"]["atomic"].items():
        if "REDUCE" in e["config"]:
            assert e["config"] == doc["entries"]["deterministic"][key]["config"]
            assert e["config"]["REDUCE"] == "kernel"
    det = [e["config"] for e in doc["entries"]["deterministic"].values()]
    assert {c.get("REDUCE", "last") for c in det} <= {"last", "kernel"}
    kernel = sorted((c for c in det if c.get("REDUCE") == "kernel"), key=lambda c: c["SPLIT_K"] * c["BLOCK_K"])
    inputs = split_k_gemm.make_inputs(case(split_k_gemm, (20, 3000, 40), bias=True), seed())
    for c, mode in ((kernel[0], DETERMINISTIC), (kernel[-1], DETERMINISTIC), (kernel[0], ATOMIC)):
        gemm = make_split_k(inputs.a, inputs.b, inputs.bias, mode, {**c, "num_stages": 1}, target=target_for(inputs.a))
        assert gemm.mode == DETERMINISTIC  # "kernel" is the plane sum in either mode
        first = gemm().clone()
        check(first, reference64(inputs))
        assert torch.equal(gemm(), first)


def test_reduce_block_spreads_the_output_over_the_sms():
    from qgemm_bench.backends.triton_kernels.split_k_parts import reduce_block

    for m, n in [(1, 16), (16, 16), (7, 33), (128, 128), (256, 256), (4096, 4096)]:
        block, warps = reduce_block(m, n, 132)
        assert 32 <= block <= 256 and block & (block - 1) == 0 and block // (32 * warps) in (1, 2)
        assert block == 32 or -(-m * n // block) >= 132
