"""The Triton split-K GEMM's deterministic reductions (config key REDUCE:
"last", "kernel", "tree"; split_k_parts.py): each against fp64 on ragged
shapes, bit-identical over calls ("last" and "kernel" to each other too),
the tree's groups and counters, Helion's stand-in for it, and the config
checks."""

import json

import pytest
import torch

from qgemm_bench.operators import split_k_gemm
from qgemm_bench.operators.common import rel_error
from tests.support import a_store_file, case, check, fake_target, seed, table_store, target_for, triton_config


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
    ((7, 1000, 33), False, 8), ((7, 1000, 33), True, 8), ((33, 1984, 17), True, 7), ((33, 1984, 17), False, 8)])
def test_reduce_variants_vs_fp64_and_last(shape, bias, split):
    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels.split_k import DETERMINISTIC

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
        assert torch.equal(first, last), extra  # split order from zero, then the bias: the same bits


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
    for mode in ("atomic", "deterministic"):  # an atomic entry may take the plane sums
        skc.check_config({**c, "REDUCE": "kernel"}, mode)
        for split in (1, 2, 7, 8, 128):  # a short last group (7: 4 + 3) too
            skc.check_config({**c, "SPLIT_K": split, "REDUCE": "tree"}, mode)
    bad = [({"REDUCE": "trees"}, "must be one of 'last', 'kernel', 'tree'"),
           ({"REDUCE": "Tree"}, "must be one of"),
           ({"REDUCE": 2}, "must be one of"),  # the kernel's code, not the table's name
           ({"REDUCE": "chunk"}, "must be one of"),  # measured and dropped
           ({"REDUCE": None}, "must be one of")]
    for extra, match in bad:
        with pytest.raises(ValueError, match=match):
            skc.check_config({**c, **extra}, "deterministic")


@pytest.mark.parametrize("reduce", ["kernel", "tree"])
def test_an_atomic_entry_may_name_the_plane_sum_kernel(tmp_path, reduce):
    """The tuner gives an atomic entry the deterministic REDUCE "kernel" (or
    "tree") winner where it timed faster: tables take it in either mode, and
    an ATOMIC gemm with it runs the plane sum (right, and bit-stable as a bonus)."""
    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc
    from qgemm_bench.backends.triton_kernels.split_k import ATOMIC, DETERMINISTIC

    c = {**triton_config(split=8), "REDUCE": reduce}
    path = tmp_path / "t.json"
    for mode in ("atomic", "deterministic"):
        path.write_text(json.dumps({"entries": {mode: {"M1_K2_N3": {"config": c}}}}))
        skc.read_table(path)
    inputs = split_k_gemm.make_inputs(case(split_k_gemm, (4, 1000, 40), bias=True), seed())
    gemm = make_split_k(inputs.a, inputs.b, inputs.bias, ATOMIC, c, target=target_for(inputs.a))
    assert gemm.mode == DETERMINISTIC and (gemm.reduce is not None) == (reduce == "kernel")
    assert gemm.ws.numel() == 8 * 4 * 40
    first = gemm().clone()
    check(first, reference64(inputs))
    assert torch.equal(gemm(), first)


def test_describe_and_kernel_meta():
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc
    from qgemm_bench.backends.triton_kernels.split_k import kernel_meta

    c = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 64, "SPLIT_K": 64, "num_warps": 4, "num_stages": 3}
    assert skc.describe(c) == skc.describe({**c, "REDUCE": "last"}) == "16x16x64 split 64 w4 s3"
    assert skc.describe({**c, "REDUCE": "kernel"}) == "16x16x64 split 64 w4 s3 reduce kernel"
    assert skc.describe({**c, "REDUCE": "tree", "PDL": 3}) == "16x16x64 split 64 w4 s3 reduce tree pdl3"
    assert skc.describe({**c, "TMA": True, "ACC_SCALE": True, "maxnreg": 128, "PDL": 2}) == \
        "16x16x64 split 64 w4 s3 tma acc r128 pdl2"
    assert skc.describe({**c, "TMA": True, "TMA_W": False}) == "16x16x64 split 64 w4 s3 tma-x"
    # The kernel's arguments: the default path passes REDUCE 0 (the kernel's
    # default), i.e. the same kernel as before REDUCE existed.
    assert kernel_meta(c) == kernel_meta({**c, "REDUCE": "last"}) == {**c, "REDUCE": 0}
    assert kernel_meta({**c, "REDUCE": "kernel"}) == {**c, "REDUCE": 1}
    assert kernel_meta({**c, "REDUCE": "tree"}) == {**c, "REDUCE": 2, "GROUP": 8}  # 8 groups of 8


def test_checked_in_reductions_are_the_split_order_ones_and_run_right():
    """The table's deterministic entries reduce in split order ("last" or
    "kernel": the same bits; "kernel" where it timed faster, docs/split_k.md),
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


# ------------------------------------------------------------------ REDUCE "tree"


def test_tree_group_rule_and_counters():
    """tree_group: the smallest power of two >= sqrt(split), halved until
    there are >= 2 groups; the counters a tree config needs: a tile's, then
    one per (tile, group)."""
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc

    want = {1: 1, 2: 1, 3: 2, 4: 2, 5: 4, 7: 4, 8: 4, 9: 4, 16: 4, 17: 8, 32: 8, 64: 8, 65: 16, 128: 16}
    assert {s: skc.tree_group(s) for s in want} == want
    for s in range(2, 129):
        g = skc.tree_group(s)
        assert g & (g - 1) == 0 and -(-s // g) >= 2 and (g * g >= s or g == 1), s
    c = triton_config(bm=16, bn=32, split=64)  # 40x80: 3 x 3 tiles
    assert skc.counters(40, 80, c) == skc.counters(40, 80, {**c, "REDUCE": "kernel"}) == 9
    assert skc.counters(40, 80, {**c, "REDUCE": "tree"}) == 9 * (1 + 8)
    assert skc.counters(40, 80, {**c, "SPLIT_K": 7, "REDUCE": "tree"}) == 9 * (1 + 2)  # groups of 4 and 3


def group_partials(inputs, c):
    """fp64 a @ b over each tree group's K range (split_k_parts.tile_and_range's
    split ranges, tree_group's groups): what the group's first plane holds
    after a call."""
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc

    k = inputs.a.shape[1]
    per_split = -(-skc.k_blocks(k, c) // c["SPLIT_K"]) * c["BLOCK_K"]
    g = skc.tree_group(c["SPLIT_K"])
    out = []
    for lead in range(0, c["SPLIT_K"], g):
        lo, hi = min(k, lead * per_split), min(k, (lead + g) * per_split)
        out.append((lead, inputs.a[:, lo:hi].double() @ inputs.b[lo:hi].double()))
    return out


# Ragged shapes (M, N past the tiles; K not a multiple of BLOCK_K x SPLIT_K),
# several tiles (their counters apart), splits 4 (2 groups of 2) and 8 (2 of
# 4), and short last groups: 3 (2 + 1) and 7 (4 + 3, its last split without
# a K block at 7x1000x33).
@pytest.mark.parametrize("shape, bias, split", [
    ((7, 1000, 33), False, 4), ((7, 1000, 33), True, 4), ((7, 1000, 33), False, 8), ((7, 1000, 33), True, 8),
    ((7, 1000, 33), True, 3), ((7, 1000, 33), False, 7), ((33, 1984, 17), True, 7)])
def test_tree_vs_fp64_stable_over_calls(shape, bias, split):
    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc
    from qgemm_bench.backends.triton_kernels.split_k import DETERMINISTIC

    inputs = split_k_gemm.make_inputs(case(split_k_gemm, shape, bias=bias), seed())
    ref = reference64(inputs)
    c = triton_config(bn=32, bk=64, split=split, REDUCE="tree")
    gemm = make_split_k(inputs.a, inputs.b, inputs.bias, DETERMINISTIC, c, target=target_for(inputs.a))
    m, n = shape[0], shape[2]
    assert gemm.meta["GROUP"] == skc.tree_group(split) and gemm.reduce is None  # one launch
    assert gemm.count.numel() == skc.tiles(m, n, c) * (1 + -(-split // skc.tree_group(split)))
    gemm.ws.fill_(float("nan"))  # every call writes each plane before it is read
    first = gemm().clone()
    check(first, ref)
    # The two levels ran: each group's first plane holds its group's sum (a
    # sum of all planes by one program would leave it the split's own partial).
    planes = gemm.ws.view(split, m, n).double()
    for lead, part in group_partials(inputs, c):
        assert rel_error(planes[lead], part) <= 1e-5, lead
    for _ in range(2):  # the counters left zero: the next calls finish too, with the same bits
        assert int(gemm.count.abs().sum()) == 0
        assert torch.equal(gemm(), first)
    assert int(gemm.count.abs().sum()) == 0


def test_tree_with_one_split_stores_the_output_itself():
    from qgemm_bench.backends.triton_dispatch import make_split_k
    from qgemm_bench.backends.triton_kernels.split_k import DETERMINISTIC

    inputs = split_k_gemm.make_inputs(case(split_k_gemm, (5, 300, 20), bias=True), seed())
    gemm = make_split_k(inputs.a, inputs.b, inputs.bias, DETERMINISTIC, triton_config(split=1, REDUCE="tree"),
                        target=target_for(inputs.a))
    check(gemm(), reference64(inputs))


@pytest.mark.parametrize("deterministic", [False, True])
def test_helion_runs_a_tree_config_as_last(tmp_path, monkeypatch, deterministic):
    """Helion's split-K kernel has no two-level sum: a Triton table's "tree"
    config reaches it as "last" (the note says so), and runs right (and,
    deterministic, bit-stable)."""
    from qgemm_bench.backends import helion_dispatch, helion_ops
    from qgemm_bench.backends.triton_kernels import split_k_configs as skc

    m, k, n = 7, 5000, 24
    c = {**triton_config(bm=16, bn=32, bk=64, split=16), "REDUCE": "tree", "PDL": 2}
    doc = {"format": skc.FORMAT, "entries": {mode: {skc.key(m, k, n): {"config": c}} for mode in skc.MODES}}
    target, store = table_store(tmp_path, "split_k", doc, fake_target())
    config, note = helion_dispatch.split_k_default(deterministic, m, k, n, target, store)
    assert config["reduce"] == "last" and config["split_k"] == 16 and config["pdl"] == 3
    assert "reduce tree" in note and "run with PDL 3 and reduce last" in note
    kernel = {**c, "REDUCE": "kernel"}  # the other plane sum passes through as it is
    doc = {"format": skc.FORMAT, "entries": {mode: {skc.key(m, k, n): {"config": kernel}} for mode in skc.MODES}}
    target, store = table_store(tmp_path / "kernel", "split_k", doc, fake_target())
    assert helion_dispatch.split_k_default(deterministic, m, k, n, target, store)[0]["reduce"] == "kernel"

    inputs = split_k_gemm.make_inputs(case(split_k_gemm, (m, k, n), bias=True), seed())
    monkeypatch.setattr(helion_ops, "SPLIT_K_INTERPRETER_CONFIG", {**config, "num_stages": 1})
    gemm = helion_ops.SplitK(inputs.a, inputs.b, inputs.bias, deterministic)
    fn = gemm.call(gemm.ready("split_k_gemm"))
    first = fn().clone()
    check(first, reference64(inputs))
    assert int(gemm.count.abs().sum()) == 0
    again = fn()
    check(again, reference64(inputs))
    if deterministic:
        assert torch.equal(again, first)
