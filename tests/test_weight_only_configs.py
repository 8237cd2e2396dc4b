"""The Triton weight-only tables (the store's configs/<gpu>/weight_only.json):
lookup, the checked-in files' configs against fp64 math, and the Triton and
Helion backends running the configs of the store and Target they are given."""

import inspect
import json
import sys

import pytest
import torch

from qgemm_bench.backends.triton_dispatch import make_weight_only
from qgemm_bench.backends.triton_kernels import weight_only_configs as woc
from qgemm_bench.configs import store as config_store
from qgemm_bench.configs.store import PROVENANCE_KEYS
from qgemm_bench.operators import int4_gemm, nvfp4_gemm
from qgemm_bench.operators.formats import INT4, NVFP4
from qgemm_bench.target import Target
from tests.support import (
    DEV,
    DT,
    case,
    check,
    fake_target,
    fp64,
    interpreter,
    seed,
    table_store,
    target_for,
    triton_config,
)

A, B, C = triton_config(16, 32, 64, 2), triton_config(16, 64, 64, 4), triton_config(64, 32, 64, 1)
DOC = {"gpu": "h100", "kernels": {"int4_gemm": {"M1_K4096_N4096": {"config": A}, "M16_K8192_N8192": {"config": B}},
                                  "int4_gemm_fused": {"M256_K8192_N8192": {"config": C}}}}


def test_lookup_exact_bucket_nearest_and_other_gpu_or_format():
    assert woc.lookup(INT4, "split", 1, 4096, 4096, "h100", DOC) == (A, "")
    assert woc.lookup(INT4, "split", 12, 8192, 8192, "h100", DOC) == (B, "")  # M 12 is in bucket 16
    assert woc.lookup(INT4, "split", 1, 8192, 57344, "h100", DOC) == (
        A, "triton split config of nearest bucket M1_K4096_N4096")  # M counts most
    assert woc.lookup(INT4, "fused", 200, 4096, 4096, "h100", DOC) == (
        C, "triton fused config of nearest bucket M256_K8192_N8192")
    assert woc.lookup(NVFP4, "split", 1, 4096, 4096, "h100", DOC) is None
    assert woc.lookup(INT4, "split", 1, 4096, 4096, "a100", DOC) is None
    assert woc.lookup(INT4, "split", 1, 4096, 4096, None, DOC) is None  # CPU: no GPU's table


def test_a_tie_between_buckets_goes_to_the_smaller_m():
    """M = 4 is as far from M1 as from M16 (two powers of two each way): the
    M1 entry's config runs (the key string would pick M16, "M16_" < "M1_").
    M = 32 between M16 and M64 takes M16 either way; other ties fall to the
    key string."""
    from qgemm_bench.backends.config_buckets import nearest
    keys = ["M16_K8192_N8192", "M1_K8192_N8192", "M64_K8192_N8192"]
    assert nearest(keys, 4, 8192, 8192) == "M1_K8192_N8192"
    assert nearest(list(reversed(keys)), 4, 8192, 8192) == "M1_K8192_N8192"
    assert nearest(keys, 8, 8192, 8192) == "M16_K8192_N8192"
    assert nearest(keys, 32, 8192, 8192) == "M16_K8192_N8192"
    assert nearest(["M1_K4096_N8192", "M1_K16384_N8192"], 1, 8192, 8192) == "M1_K16384_N8192"


def test_lookup_takes_an_int4_group_s_own_config_in_the_bucket_the_shape_takes():
    # "groups" overrides the entry's config at that group size only; the
    # group-128 entries decide the bucket (the nearest one's override, or none).
    g32 = triton_config(128, 128, 128, 1)
    doc = {"gpu": "h100", "kernels": {"int4_gemm_fused": {
        "M256_K8192_N8192": {"config": C, "groups": {"32": {"config": g32}, "channel": {"config": A}}},
        "M1024_K8192_N8192": {"config": B}}}}
    assert woc.lookup(INT4, "fused", 200, 8192, 8192, "h100", doc, group="32") == (g32, "")
    assert woc.lookup(INT4, "fused", 256, 8192, 8192, "h100", doc, group="channel") == (A, "")
    assert woc.lookup(INT4, "fused", 256, 8192, 8192, "h100", doc, group="64") == (C, "")
    assert woc.lookup(INT4, "fused", 256, 8192, 8192, "h100", doc) == (C, "")
    assert woc.lookup(INT4, "fused", 1024, 8192, 8192, "h100", doc, group="32") == (B, "")
    assert woc.lookup(INT4, "fused", 256, 4096, 4096, "h100", doc, group="32") == (
        g32, "triton fused config of nearest bucket M256_K8192_N8192")
    assert [woc.group_key(g, 8192) for g in (32, 64, 128, 8192, None)] == ["32", "64", "128", "channel", "channel"]


def test_the_triton_backend_runs_its_group_s_config(tmp_path):
    # WeightOnlyGemm.tuned looks up its own group (per channel and unscaled:
    # "channel"); NVFP4 and the split path have none.
    g32, chan = triton_config(128, 128, 128, 1), triton_config(64, 64, 128, 2)
    gpu, store = table_store(tmp_path, "weight_only", {"kernels": {"int4_gemm_fused": {
        "M256_K512_N72": {"config": C, "groups": {"32": {"config": g32}, "channel": {"config": chan}}}},
        "nvfp4_gemm_fused": {"M256_K512_N72": {"config": C}}}})
    for group, want in ((32, g32), (64, C), (128, C), ("channel", chan), (None, chan)):
        inputs = int4_gemm.make_inputs(case(int4_gemm, (200, 512, 72), group_size=group), seed())
        gemm = make_weight_only(inputs.w, inputs.scales, None, INT4, {None: 2, "channel": 512}.get(group, group),
                                target=gpu, store=store)
        assert gemm.tuned(200, "fused") == (want, ""), group
    from qgemm_bench.backends.triton_ops import weight_args

    nv = nvfp4_gemm.make_inputs(case(nvfp4_gemm, (200, 512, 72)), seed())
    assert make_weight_only(*weight_args(nvfp4_gemm.NAME, nv), target=gpu, store=store).tuned(200, "fused") == (C, "")


def test_a_smaller_m_does_not_borrow_a_bucket_s_ws_tiles_it_fills_half_of(tmp_path):
    # M 5..16 take the M16 entry (M 3 and 4, in bucket 4, as far from M1: M1's, the
    # tie going to the smaller M): its 16-row WS tiles run from M = 8 (half their
    # rows or more), below that its config without them, said in the note.
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    plain = triton_config(16, 128, 128, 2)
    ws16 = {**plain, "WS": ws_tiles(16, 64, 128, 8, splits=2)}
    gpu, store = table_store(tmp_path, "weight_only", {"kernels": {"int4_gemm_fused": {
        "M1_K512_N72": {"config": plain}, "M16_K512_N72": {"config": ws16}}}})
    inputs = int4_gemm.make_inputs(case(int4_gemm, (16, 512, 72), group_size=128), seed())
    gemm = make_weight_only(inputs.w, inputs.scales, None, INT4, 128, target=gpu, store=store)
    for m in (8, 9, 12, 16):
        assert gemm.tuned(m, "fused")[0] == ws16, m
    for m in (3, 4):
        c, note = gemm.tuned(m, "fused")
        assert c == plain and "nearest bucket M1_K512_N72" in note and "WS" not in note, (m, note)
    for m in (5, 7):
        c, note = gemm.tuned(m, "fused")
        assert c == plain and f"the entry's 16-row WS tiles not at M = {m} (under half their rows)" in note, m


def test_a_smaller_m_takes_a_tma_entry_s_pointer_loads_under_half_its_bucket_s_m(tmp_path):
    # M 5..16 take the M16 entry: its TMA loads (timed at M = 16) run from M = 8, below that
    # its pointer-load config, said in the note; M = 1's own TMA entry runs at 1 to 4 (bucket 4
    # is as far from M1 as from M16: the tie goes to the smaller M).
    ptr = triton_config(16, 64, 128, 4)
    tma = {**ptr, "TMA": True}
    entry = {"config": tma, "pointer_config": ptr}
    gpu, store = table_store(tmp_path, "weight_only", {"kernels": {"int4_gemm_fused": {
        "M1_K512_N72": entry, "M16_K512_N72": entry}}})
    inputs = int4_gemm.make_inputs(case(int4_gemm, (16, 512, 72), group_size=128), seed())
    gemm = make_weight_only(inputs.w, inputs.scales, None, INT4, 128, target=gpu, store=store)
    for m in (1, 2, 3, 4, 8, 9, 16):
        assert gemm.tuned(m, "fused")[0] == tma, m
    for m in (5, 7):
        c, note = gemm.tuned(m, "fused")
        assert c == ptr and f"the entry's TMA loads not at M = {m} (under half its bucket's M)" in note, m
    # The entry's WS tiles stay (the WS rule decides them), a group's own TMA config gives way too,
    # and above SPLIT_PATH_MAX_M (buckets the table mode tunes from its pool) a smaller M keeps TMA.
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    ws = ws_tiles(16, 64, 128, 8, splits=2)
    wide = triton_config(128, 64, 128, 1)
    gpu, store = table_store(tmp_path / "more", "weight_only", {"kernels": {"int4_gemm_fused": {
        "M32_K512_N72": {"config": {**tma, "WS": ws}, "pointer_config": ptr,
                         "groups": {"64": {"config": tma}}},
        "M256_K512_N72": {"config": {**wide, "TMA": True}, "pointer_config": wide}}}})
    for group, want in ((128, {**ptr, "WS": ws}), (64, ptr)):
        gemm = make_weight_only(inputs.w, inputs.scales, None, INT4, group, target=gpu, store=store)
        c, note = gemm.tuned(12, "fused")
        assert c == want and "TMA loads not at M = 12" in note, group
        assert gemm.tuned(16, "fused")[0] == ({**tma, "WS": ws} if group == 128 else tma)
        assert gemm.tuned(100, "fused")[0] == {**wide, "TMA": True}  # bucket 256 > 64: not this rule


def test_faster_path_is_the_one_timed_faster_at_the_nearest_bucket_with_both_timings():
    fast, slow = {"config": A, "us": 28.7}, {"config": B, "us": 37.1}
    doc = {"gpu": "h100", "kernels": {"int4_gemm": {"M32_K8192_N8192": slow, "M64_K8192_N8192": fast,
                                                    "M16_K8192_N8192": {"config": B}},
                                      "int4_gemm_fused": {"M32_K8192_N8192": fast, "M64_K8192_N8192": slow,
                                                          "M16_K8192_N8192": fast}}}
    assert woc.faster_path(INT4, 20, 8192, 8192, "h100", doc) == "fused"  # M 20 is in bucket 32
    assert woc.faster_path(INT4, 64, 8192, 8192, "h100", doc) == "split"
    assert woc.faster_path(INT4, 16, 8192, 8192, "h100", doc) == "fused"  # its split entry has no timing: M32's
    assert woc.faster_path(INT4, 32, 8192, 4096, "h100", doc) == "fused"  # the nearest bucket's
    assert woc.faster_path(INT4, 50, 8192, 8192, "h100", doc) == "split"  # bucket 64
    split_only = {**doc, "kernels": {"int4_gemm": doc["kernels"]["int4_gemm"]}}
    assert woc.faster_path(INT4, 32, 8192, 8192, "h100", split_only) is None
    assert woc.faster_path(NVFP4, 32, 8192, 8192, "h100", doc) is None
    assert woc.faster_path(INT4, 32, 8192, 8192, "a100", doc) is None


@interpreter
def test_the_table_sends_a_small_m_to_the_fused_path_in_both_backends(tmp_path):
    """Where the table timed the fused kernel (split-K) faster at M <= 64, the
    Triton backend runs it with the table's config, right against fp64, and
    the Helion backend takes the same path; elsewhere the M bounds decide."""
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.triton_dispatch import path_for, weight_only_entry

    fused = triton_config(32, 32, 64, 3)
    split = {"config": triton_config(16, 32, 64, 2), "us": 9.0}
    gpu, store = table_store(tmp_path, "weight_only", {"kernels": {
        "int4_gemm": {"M1_K256_N40": {**split, "us": 5.0}, "M32_K256_N40": split, "M64_K256_N40": split},
        "int4_gemm_fused": {"M1_K256_N40": {"config": fused, "us": 6.0}, "M32_K256_N40": {"config": fused, "us": 8.0},
                            "M64_K256_N40": {"config": fused, "us": 10.0}}}})
    e = weight_only_entry(gpu, store)
    # Buckets without both timings (4, 16) take the nearest one's choice.
    assert [path_for(m, INT4, 256, 40, e.gpu, doc=e.table) for m in (1, 4, 16, 17, 32, 33, 65)] == \
        ["split", "split", "fused", "fused", "fused", "split", "fused"]
    assert path_for(32, NVFP4, 256, 40, e.gpu, doc=e.table) == "split"
    inputs = int4_gemm.make_inputs(case(int4_gemm, (27, 256, 40), group_size=64), seed())
    gemm = make_weight_only(inputs.w, inputs.scales, None, INT4, 64, target=gpu, store=store)
    assert gemm.path(27) == "fused" and gemm.tuned(27) == (fused, "")
    check(gemm(inputs.x), fp64(inputs.x, int4_gemm.dequantize(inputs)))
    assert gemm.fused()._workspace[27][0].numel() >= 27 * 40  # it split K: the workspace exists
    helion = helion_ops.WeightOnly("int4_gemm", inputs.w, inputs.scales, None, INT4, 64, gpu, store)
    assert [helion.path(m) for m in (1, 27, 64)] == ["split", "fused", "split"]


WS = '"WS": {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 128, "num_stages": 4}'
CFG = '"config": {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 64, "SPLIT_K": 2, "num_warps": 4, "num_stages": 3'


@pytest.mark.parametrize("text,match", [
    ("{", "not a readable JSON file"),
    ('{"gpu": "h100"}', "expected"),
    ('{"kernels": {}}', "expected"),  # no GPU named
    ('{"gpu": "h100", "kernels": {"int8_gemm": {}}}', "kernel 'int8_gemm' must be one of"),
    ('{"gpu": "h100", "kernels": {"int4_gemm": {"M1_K4096": {' + CFG + '}}}}}', "bad bucket"),
    ('{"gpu": "h100", "kernels": {"int4_gemm": {"M0_K64_N64": {' + CFG + '}}}}}', "all positive"),
    ('{"gpu": "h100", "kernels": {"int4_gemm": {"Q1_K64_N64": {' + CFG + '}}}}}', "bad bucket"),
    ('{"gpu": "h100", "kernels": {"int4_gemm": {"M1_K64_N64": {"config": {"BLOCK_M": 16}}}}}',
     "a config needs BLOCK_M, BLOCK_N"),
    ('{"gpu": "h100", "kernels": {"int4_gemm": {"M1_K64_N64": {' + CFG.replace('"BLOCK_N": 32', '"BLOCK_N": 16')
     + '}}}}}', "BLOCK_N=16 must be a power of two >= 32"),
    ('{"gpu": "h100", "kernels": {"int4_gemm": {"M1_K64_N64": {' + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 0')
     + '}}}}}', "SPLIT_K=0 must be a positive integer"),
    ('{"gpu": "h100", "kernels": {"int4_gemm": {"M1_K64_N64": {' + CFG.replace('"BLOCK_K": 64', '"BLOCK_K": 48')
     + '}}}}}', "BLOCK_K=48 must be a power of two"),
    ('{"gpu": "h100", "kernels": {"int4_gemm": {"M1_K64_N64": {' + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, "PDL": 4')
     + '}}}}}', "PDL=4 must be one of 0, 1, 2, 3"),
    ('{"gpu": "h100", "kernels": {"int4_gemm_fused": {"M1_K64_N64": {'
     + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, "TMA": 1') + '}}}}}', "TMA=1 must be true or false"),
    ('{"gpu": "h100", "kernels": {"nvfp4_gemm_fused": {"M1_K64_N64": {'
     + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, "TMA_W": "x"') + '}}}}}', "TMA_W='x' must be true or false"),
    ('{"gpu": "h100", "kernels": {"nvfp4_gemm": {"M1_K64_N64": {'
     + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, "TMA_W": false') + '}}}}}', "TMA_W is the fused kernel's only"),
    ('{"gpu": "h100", "kernels": {"int4_gemm": {"M1_K64_N64": {'
     + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, "TMA": true') + '}}}}}', "TMA is the fused kernel's only"),
    ('{"gpu": "h100", "kernels": {"int4_gemm_fused": {"M1_K64_N64": {'
     + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, "ACC_SCALE": "yes"') + '}}}}}', "ACC_SCALE='yes' must be true or"),
    ('{"gpu": "h100", "kernels": {"int4_gemm": {"M1_K64_N64": {'
     + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, "ACC_SCALE": true') + '}}}}}',
     "ACC_SCALE is the fused kernel's only"),
    ('{"gpu": "h100", "kernels": {"int4_gemm": {"M1_K64_N64": {'
     + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, "maxnreg": 300') + '}}}}}', "maxnreg=300 must be an integer"),
    ('{"gpu": "h100", "kernels": {"int4_gemm_fused": {"M1_K64_N64": {'
     + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, "PERSISTENT": 1') + '}}}}}',
     "M1_K64_N64: PERSISTENT: not a config key of these kernels"),
    ('{"gpu": "h100", "kernels": {"nvfp4_gemm": {"M1_K64_N64": {'
     + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, "FLATTEN": false') + '}}}}}',
     "M1_K64_N64: FLATTEN: not a config key of these kernels"),
    ('{"gpu": "h100", "kernels": {"int4_gemm_fused": {"M1_K64_N64": {' + CFG + '}, "pointer_config": {"BLOCK_M": 16}'
     + '}}}}', "pointer_config: a config needs"),
    ('{"gpu": "h100", "kernels": {"int4_gemm_fused": {"M1_K64_N64": {' + CFG + '}, "pointer_config": {'
     + CFG[CFG.index("{") + 1:].replace('"SPLIT_K": 2', '"SPLIT_K": 2, "TMA": true') + '}}}}}',
     "pointer_config must not take TMA loads"),
    ('{"gpu": "h100", "kernels": {"int4_gemm": {"M1_K64_N64": {'
     + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, ' + WS) + '}}}}}', "WS is the fused kernel's only"),
    ('{"gpu": "h100", "kernels": {"int4_gemm_fused": {"M1_K64_N64": {'
     + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, "WS": true') + '}}}}}', "WS=True must be the warp-specialized"),
    ('{"gpu": "h100", "kernels": {"int4_gemm_fused": {"M1_K64_N64": {'
     + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, "WS": {"BLOCK_M": 64}') + '}}}}}', "must be the warp-specialized"),
    ('{"gpu": "h100", "kernels": {"int4_gemm_fused": {"M1_K64_N64": {'
     + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, ' + WS.replace('"BLOCK_N": 64', '"BLOCK_N": 256')) + '}}}}}',
     "M1_K64_N64: WS .* takes BLOCK_N 64 or 128"),
    ('{"gpu": "h100", "kernels": {"int4_gemm_fused": {"M1_K64_N64": {' + CFG + '}, "pointer_config": {'
     + CFG[CFG.index("{") + 1:].replace('"SPLIT_K": 2', '"SPLIT_K": 2, ' + WS) + '}}}}}',
     "pointer_config must not take TMA loads"),
    ('{"gpu": "h100", "kernels": {"int4_gemm_fused": {"M1_K64_N64": {'
     + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, ' + WS) + '}, "ws_us": [1, -2]}}}}',
     "ws_us must be two positive numbers"),
    ('{"gpu": "h100", "kernels": {"nvfp4_gemm_fused": {"M1_K64_N64": {' + CFG + '}, "groups": {"32": {'
     + CFG + '}}}}}}}', "groups \\(int4_gemm_fused only\\)"),
    ('{"gpu": "h100", "kernels": {"int4_gemm_fused": {"M1_K64_N64": {' + CFG + '}, "groups": {"128": {'
     + CFG + '}}}}}}}', "maps 32, 64, channel to an entry"),
    ('{"gpu": "h100", "kernels": {"int4_gemm_fused": {"M1_K64_N64": {' + CFG + '}, "groups": {"32": {'
     '"config": {"BLOCK_M": 16}}}}}}}', "M1_K64_N64 groups 32: a config needs"),
])
def test_a_bad_table_file_is_refused_in_one_line(tmp_path, text, match):
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as e:
        woc.read_table(path)
    assert "\n" not in str(e.value)


def test_ws_tiles_count_the_format_s_scales_and_nvfp4_entries_take_them(tmp_path):
    # NVFP4's K block reads BLOCK_K // 16 scale rows per stage (int4's one);
    # both formats' fused entries take WS tiles and their timings.
    from qgemm_bench.backends.triton_kernels import ws_gemm
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    c = ws_tiles(256, 128, 64, 3)
    assert ws_gemm.shared_bytes(c, NVFP4) == ws_gemm.shared_bytes(c) + 3 * 2 * 128 * 3
    big = ws_tiles(128, 128, 128, 5)
    with pytest.raises(ValueError, match=f"shared memory \\({ws_gemm.shared_bytes(big, NVFP4)}\\)"):
        ws_gemm.check(big, NVFP4, fake_target().smem_per_block)  # the Target's shared memory bounds the tiles
    ws_gemm.check(big, NVFP4)  # a table's tiles, checked against no GPU
    entry = ('{"gpu": "h100", "kernels": {"nvfp4_gemm_fused": {"M1_K64_N64": {'
             + CFG.replace('"SPLIT_K": 2', '"SPLIT_K": 2, ' + WS) + '}, "ws_us": [2, 1]}}}}')
    (tmp_path / "t.json").write_text(entry)
    assert woc.read_table(tmp_path / "t.json")["kernels"]["nvfp4_gemm_fused"]["M1_K64_N64"]["ws_us"] == [2, 1]


def test_dumps_round_trips_one_entry_per_line():
    text = woc.dumps(DOC)
    assert json.loads(text) == DOC
    assert sum('"config"' in line for line in text.splitlines()) == 3


def checked_in() -> dict:
    from tests.support import store_files

    return {gpu: woc.read_table(f) for gpu, f in store_files("weight_only").items()}


def test_checked_in_tables_name_their_gpu_and_pass_the_checks():
    for gpu, doc in checked_in().items():
        assert doc["gpu"] == gpu and set(doc["kernels"]) == set(woc.KERNELS)


def distinct_configs(kernel: str) -> list[dict]:
    entries = [e for doc in checked_in().values() for e in doc["kernels"][kernel].values()]
    found = {json.dumps(c, sort_keys=True) for e in entries for c in (e["config"], e.get("pointer_config")) if c}
    # The interpreter has no inline PTX: there the kernels decode in Triton.
    return [{**json.loads(c), **({} if DEV.type == "cuda" else {"DECODE_ASM": False})} for c in sorted(found)]


# Launch and compile options the Triton interpreter ignores: warps, stages and
# the register cap (Triton's compile options), PDL (split_k_parts.pdl_launch
# gives PDL 0 off the GPU), and the warp-specialized tiles (WS: the Gluon
# kernel runs on CUDA x only, FusedGemm.runs_ws; off the GPU the rest of the
# config runs). Configs that differ only in these run the same interpreted
# computation (the h100 table's fused configs: 25 int4 and 24 NVFP4 to
# interpret instead of 44 each; 10.0 -> 6.7 s and 14.2 -> 9.0 s on this
# repository's 2-core CPU).
INTERPRETER_IGNORES = ("num_warps", "num_stages", "maxnreg", "PDL", "WS")


def interpreted(c: dict) -> str:
    """What the interpreter runs of config c (on a GPU: all of c, compiled)."""
    return json.dumps({k: v for k, v in c.items() if DEV.type == "cuda" or k not in INTERPRETER_IGNORES},
                      sort_keys=True)


# The fused kernel reads padded weights (only x is masked, by EVEN_K, which
# K = 384 covers both ways: 128 divides it, 256 does not), so one (K, N).
# Its M and N (33, 136) are off every tile as 65 and 200 were, with fewer
# tiles for its ~50 configs to run in the interpreter (65 x 640 x 200 took
# about 20 s a format on CI's CPU, 33 x 640 x 136 under half of that; K 384's 3
# blocks of 128 still split unevenly, in 40% fewer steps than 640's 5).
@pytest.mark.parametrize("fmt", ["int4", "nvfp4"])
@pytest.mark.parametrize("path,m,k,n", [("split", 7, 640, 200), ("split", 7, 512, 256), ("fused", 33, 384, 136)])
def test_every_checked_in_config_is_right(path, m, k, n, fmt):
    """Each distinct config of the checked-in tables, of either format, int4 at
    group 128 (the default), against fp64 math on the dequantized weights:
    M that no tile height divides (7; 33 on the fused path: three row tiles
    of 16 or two of 32, the last of one row, or part of one of 64 or more);
    N = 200 and 136 a ragged tile (the masked loads), N = 256 whole
    tiles and whole K blocks (the unmasked ones: EVEN_KN); K = 640, 512 and
    384 split unevenly (5, 4-8 or 3 blocks over 2-16 splits)."""
    if fmt == "int4":
        inputs = int4_gemm.make_inputs(case(int4_gemm, (m, k, n), group_size=128), seed())
        wargs, deq = (inputs.w, inputs.scales, None, INT4, 128), int4_gemm.dequantize(inputs)
    else:
        inputs = nvfp4_gemm.make_inputs(case(nvfp4_gemm, (m, k, n)), seed())
        wargs = (inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16)
        deq = nvfp4_gemm.dequantize(inputs)
    kernel = f"{fmt}_gemm" + ("_fused" if path == "fused" else "")
    configs = distinct_configs(kernel)
    assert configs, kernel
    ran = set()
    for c in configs:
        gemm = make_weight_only(*wargs, config=c, path=path, target=target_for(wargs[0]))
        if path == "fused":
            gemm.fused().config_for(m)  # every config passes the call's checks (wrong_on_sm90 reads num_warps)
        if interpreted(c) in ran:
            continue  # on CPU: the same interpreted computation as a config already run (INTERPRETER_IGNORES)
        ran.add(interpreted(c))
        check(gemm(inputs.x), fp64(inputs.x, deq))


@pytest.mark.parametrize("group", ["32", "64", "channel"])
def test_every_checked_in_group_config_is_right(group):
    """Each distinct config the checked-in tables keep for an int4 group size
    (an entry's "groups"), at that group against fp64 math, on the fused
    path's ragged shape (the WS tiles run on the GPU only: -m gpu)."""
    configs = {json.dumps(e["groups"][group]["config"], sort_keys=True)
               for doc in checked_in().values() for e in doc["kernels"]["int4_gemm_fused"].values()
               if group in e.get("groups", {})}
    assert configs, group
    inputs = int4_gemm.make_inputs(case(int4_gemm, (33, 384, 136), group_size=group if group == "channel"
                                        else int(group)), seed())
    wargs = (inputs.w, inputs.scales, None, INT4, 384 if group == "channel" else int(group))
    ran = set()
    for text in sorted(configs):
        c = {**json.loads(text), **({} if DEV.type == "cuda" else {"DECODE_ASM": False})}
        if interpreted(c) in ran:
            continue
        ran.add(interpreted(c))
        check(make_weight_only(*wargs, config=c, path="fused", target=target_for(wargs[0]))(inputs.x),
              fp64(inputs.x, int4_gemm.dequantize(inputs)))


@interpreter
def test_triton_backend_runs_the_table_config_and_names_its_bucket(tmp_path):
    """No explicit config: the store's entry for the Target it is given is
    what runs, and the row names the bucket it came from; another GPU of the
    same compute capability runs it too, and its row names the entry."""
    cfg = triton_config(16, 32, 64, 3)
    gpu, store = table_store(tmp_path, "weight_only", {"kernels": {"int4_gemm": {
        "M16_K8192_N8192": {"config": cfg}}}})
    inputs = int4_gemm.make_inputs(case(int4_gemm, (5, 256, 40), group_size=64), seed())
    gemm = make_weight_only(inputs.w, inputs.scales, None, INT4, 64, target=gpu, store=store)
    assert gemm.tuned(5) == (cfg, "triton split config of nearest bucket M16_K8192_N8192")
    assert gemm.note(5) == "triton split config of nearest bucket M16_K8192_N8192"
    other = make_weight_only(inputs.w, inputs.scales, None, INT4, 64, target=fake_target("gpu_b", sms=140),
                             store=store)
    assert other.tuned(5) == (cfg, "configs of gpu_a (same compute capability 9.0; no entry for gpu_b); "
                                   "triton split config of nearest bucket M16_K8192_N8192")
    check(gemm(inputs.x), fp64(inputs.x, int4_gemm.dequantize(inputs)))
    assert gemm._workspace[5][0].shape[0] >= 5  # the split path ran (its workspace exists)


@pytest.mark.parametrize("group", [128, 64, 32, "channel", None])
def test_a_tma_entry_runs_only_for_groups_tma_usable_takes_else_its_pointer_config(tmp_path, group):
    """TMA loads run with groups of whole K blocks (per channel and unscaled
    over whole K blocks among them) and, here in 64-row x tiles, groups two
    to a K block (fused_gemm.tma_usable); group 32 (four to a block) takes
    the entry's pointer-load config, tuned without TMA, and the same
    without a table (fused_gemm.POINTER_CONFIGS)."""
    from qgemm_bench.backends.triton_kernels import fused_gemm

    tma, ptr = {**triton_config(64, 64, 128, 1), "TMA": True}, triton_config(32, 64, 64, 2)
    inputs = int4_gemm.make_inputs(case(int4_gemm, (80, 512, 72), group_size=group), seed())
    g = {None: 2, "channel": 512}.get(group, group)
    for i, (doc, want) in enumerate((({"kernels": {"int4_gemm_fused": {"M128_K512_N72": {
            "config": tma, "pointer_config": ptr}}}}, ptr), ({"kernels": {}}, fused_gemm.POINTER_CONFIGS[INT4][128]))):
        gpu, store = table_store(tmp_path / str(i), "weight_only", doc)
        gemm = make_weight_only(inputs.w, inputs.scales, None, INT4, g, target=gpu, store=store)
        table_tma = fused_gemm.FUSED_CONFIGS[INT4][128]  # 128x64x128: group 64 two to a K block
        expected = (tma if doc["kernels"] else table_tma) if group != 32 else want
        assert gemm.path(80) == "fused" and gemm.tuned(80)[0] == expected
    check(gemm(inputs.x), fp64(inputs.x, int4_gemm.dequantize(inputs)))
    # Another bucket's entry: the fallback keeps the note naming it.
    gpu, store = table_store(tmp_path / "near", "weight_only", {"kernels": {"int4_gemm_fused": {
        "M256_K512_N72": {"config": tma, "pointer_config": ptr}}}})
    gemm = make_weight_only(inputs.w, inputs.scales, None, INT4, g, target=gpu, store=store)
    assert gemm.tuned(80) == (tma if group != 32 else ptr, "triton fused config of nearest bucket M256_K512_N72")


def test_tma_runs_with_the_groups_measured_on_hopper_only():
    from qgemm_bench.backends.triton_kernels import fused_gemm
    from qgemm_bench.target import Target

    for cap, want in ((9, True), (8, False)):
        cuda = fake_target(capability=(cap, 0))  # the Target decides, not the machine the test runs on
        assert fused_gemm.tma_usable(INT4, 128, 8192, 128, cuda) is want
        assert fused_gemm.tma_usable(INT4, 256, 8192, 64, cuda) is want  # a group of whole K blocks: BLOCK
        assert fused_gemm.tma_usable(INT4, 64, 8192, 128, cuda, 128) is want  # SUB, two groups a block
        assert fused_gemm.tma_usable(INT4, 32, 8192, 128, cuda, 256) is want  # four: in 256-row x tiles
        assert not fused_gemm.tma_usable(INT4, 32, 8192, 128, cuda, 128)  # only there
        assert fused_gemm.tma_usable(INT4, 32, 8192, 64, cuda, 128) is want
        assert not fused_gemm.tma_usable(INT4, None, 8192, 128, cuda)  # NONE (FusedGemm passes scales of one)
        assert fused_gemm.tma_usable(INT4, 8192, 8192, 128, cuda) is want  # per channel over whole K blocks: BLOCK
        assert fused_gemm.tma_usable(INT4, 8000, 8000, 128, cuda) is want  # K off the K block: BLOCK too
        assert not fused_gemm.tma_usable(INT4, 96, 8192, 128, cuda)  # GATHER
        assert fused_gemm.tma_usable(NVFP4, 16, 8192, 128, cuda) is want  # SUB scales: checked on the H100
    assert fused_gemm.tma_usable(INT4, 128, 8192, 128, Target.cpu())  # the interpreter


def test_without_a_table_entry_the_split_path_says_it_autotunes():
    inputs = int4_gemm.make_inputs(case(int4_gemm, (3, 256, 40), DT, torch.device("cpu")), 0)
    gemm = make_weight_only(inputs.w, inputs.scales, None, INT4, 128, target=target_for(inputs.w))
    assert gemm.tuned(3) == (None, "triton split config autotuned at run time (no checked-in config for this GPU)")
    assert gemm.note(100) == gemm.note(2000) == ""  # the fused path: FUSED_CONFIGS, nothing to say
    g96 = int4_gemm.make_inputs(case(int4_gemm, (3, 192, 40), DT, torch.device("cpu"), group_size=96), 0)
    gemm = make_weight_only(g96.w, g96.scales, None, INT4, 96,
                            target=target_for(g96.w))  # GATHER, no TMA: dequantize + cuBLAS above 1024
    assert gemm.note(2000) == "dequantize + cuBLAS path (a K x N scratch)"


@pytest.mark.parametrize("gpu", sorted(config_store.entries()))
def test_helion_takes_the_triton_table_config_of_the_shape(gpu):
    """Without a Helion entry of the shape's own bucket, the Helion weight-only
    kernels run the Triton table's config for the shape (configs.from_triton),
    for each store entry's Target."""
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels.configs import from_triton

    real = woc.read_table(config_store.DEFAULT.path(gpu, woc.FAMILY))["kernels"]
    cuda = config_store.entries()[gpu]  # the Target whose entry this is
    cfg, note = helion_ops.default_config(INT4, "split", 1, 4096, 6144, cuda)
    assert cfg == from_triton(real["int4_gemm"]["M1_K4096_N6144"]["config"], split=True)
    assert note == "the Triton table's split config, untimed in Helion"
    cfg, note = helion_ops.default_config(NVFP4, "fused", 256, 14336, 4096, cuda)
    entry = real["nvfp4_gemm_fused"]["M256_K14336_N4096"]
    fused = entry["pointer_config"] if entry["config"].get("TMA") else entry["config"]  # Helion has no TMA loads
    assert cfg == from_triton(fused, split=fused["SPLIT_K"] > 1)  # split_k only where it splits K
    cfg, note = helion_ops.default_config(INT4, "split", 1, 5000, 6144, cuda)
    assert cfg == from_triton(real["int4_gemm"]["M1_K4096_N6144"]["config"], split=True)
    assert "nearest bucket M1_K4096_N6144" in note
    # A TMA entry: Helion (no TMA loads) mirrors the entry's pointer-load config instead of its tiles.
    entry = real["int4_gemm_fused"]["M256_K8192_N57344"]
    assert entry["config"]["TMA"] and entry["pointer_config"] != {**entry["config"], "TMA": False}
    cfg, _ = helion_ops.default_config(INT4, "fused", 256, 8192, 57344, cuda)
    ptr = entry["pointer_config"]
    assert cfg == from_triton(ptr, split=ptr["SPLIT_K"] > 1)


@pytest.mark.parametrize("gpu", ["h200"])  # Helion tuned at M = 1 and 16 (the H100's: the test below)
@pytest.mark.parametrize("m, own", [(2, False), (5, False), (16, True)])
def test_helion_takes_its_nearest_bucket_where_the_triton_table_has_only_a_nearest_one(gpu, m, own, monkeypatch):
    """Between the tuned M (2..8 at a Llama layer), both the Triton table's
    config and Helion's own are another bucket's, as near: Helion's (timed
    in Helion) runs; at the table's own bucket (M = 16) the table's config runs."""
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels import tuning

    seen, signature = [], inspect.signature(tuning.ready)
    monkeypatch.setattr(tuning, "ready", lambda *args, **kwargs: seen.append(
        signature.bind(*args, **kwargs).arguments["nearest_ok"]))
    k = n = 8192
    gemm = helion_ops.WeightOnly("int4_gemm", torch.zeros(k // 2, n, dtype=torch.uint8),
                                 torch.ones(k // 128, n, dtype=DT), None, INT4, 128, target=config_store.entries()[gpu])
    assert gemm.path(m) != "dequant"
    gemm.bound(torch.zeros(m, k, dtype=DT))
    assert seen == [not own]


@pytest.mark.parametrize("helion_m, taken", [(1, True), (128, False)])
def test_helion_borrows_its_bucket_only_where_it_is_no_farther_than_the_tables(tmp_path, helion_m, taken,
                                                                              monkeypatch):
    """At M = 2 neither table has the shape's own bucket. Helion's own config
    of another bucket runs where that bucket is as near as the Triton table's
    (M = 1 against the table's M = 1), not where it is far (the H100's store:
    only M >= 128 fused entries, whose [64, 128] 8-warp tiles ran at M = 2
    with the table's split_k 8 where its M = 1 config is a bucket away)."""
    import shutil

    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels import tuning

    gpu = "h100"
    (tmp_path / gpu).mkdir()
    for family in ("target", "weight_only"):
        shutil.copy(config_store.DEFAULT.root / gpu / f"{family}.json", tmp_path / gpu)
    store = config_store.Store(tmp_path)
    target = store.entries()[gpu]
    k = n = 8192
    assert woc.lookup(INT4, "fused", 2, k, n, gpu, store.read(gpu, woc.FAMILY))[1].endswith("bucket M1_K8192_N8192")
    far = {"block_sizes": [64, helion_m], "block_k": 128, "decode_asm": True, "num_warps": 8, "num_stages": 3}
    (tmp_path / gpu / "helion.json").write_text(json.dumps({"gpu": gpu, "kernels": {"int4_gemm_fused": {
        f"M{helion_m}_K{k}_N{n}": {"config": far, "us": 50.0}}}}))
    seen, signature = [], inspect.signature(tuning.ready)
    monkeypatch.setattr(tuning, "ready", lambda *args, **kwargs: seen.append(
        signature.bind(*args, **kwargs).arguments["nearest_ok"]))
    gemm = helion_ops.WeightOnly("int4_gemm", torch.zeros(k // 2, n, dtype=torch.uint8),
                                 torch.ones(k // 128, n, dtype=DT), None, INT4, 128, target=target, store=store)
    assert gemm.path(2) == "fused"
    gemm.bound(torch.zeros(2, k, dtype=DT))
    assert seen == [taken]


def test_lookup_gives_kernels_without_tma_the_pointer_config():
    tma, ptr = {**C, "TMA": True}, triton_config(128, 64, 64, 2)
    doc = {"gpu": "h100", "kernels": {"int4_gemm_fused": {"M256_K8192_N8192": {"config": tma, "pointer_config": ptr},
                                                          "M1024_K8192_N8192": {"config": tma}}}}
    assert woc.lookup(INT4, "fused", 256, 8192, 8192, "h100", doc) == (tma, "")
    assert woc.lookup(INT4, "fused", 256, 8192, 8192, "h100", doc, tma=False) == (ptr, "")
    assert woc.lookup(INT4, "fused", 1024, 8192, 8192, "h100", doc, tma=False) == (C, "")  # no pointer_config: TMA off
    assert woc.lookup(INT4, "fused", 1024, 8192, 8192, "h100", doc)[0] is not tma  # a copy, not the table's dict
    ws = {**tma, "WS": {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 3}}  # its own TMA loads
    doc = {"gpu": "h100", "kernels": {"int4_gemm_fused": {"M1024_K8192_N8192": {"config": ws}}}}
    assert woc.lookup(INT4, "fused", 1024, 8192, 8192, "h100", doc, tma=False) == (C, "")
    # x-only TMA (NVFP4's) without a pointer_config: both TMA keys dropped.
    doc = {"gpu": "h100", "kernels": {"nvfp4_gemm_fused": {"M256_K8192_N8192": {"config": {**tma, "TMA_W": False}}}}}
    assert woc.lookup(NVFP4, "fused", 256, 8192, 8192, "h100", doc, tma=False) == (C, "")


@pytest.mark.parametrize("fmt,group,k,n,even", [
    (fmt, g, k, n, even) for fmt, g in ((INT4, 32), (INT4, 128), (NVFP4, 16))
    for k, n, even in ((512, 96, True), (512, 100, False), (480, 96, False)) if k % g == 0])
def test_whole_tiles_drop_the_k_and_n_masks_and_stay_right(fmt, group, k, n, even):
    """The split kernel without K / N masks (weight_only.even_kn: K a multiple
    of BLOCK_K, N of BLOCK_N) against fp64 math, beside a ragged K or N that
    keeps them; splits of unequal length (8 K blocks over 3, or 7.5)."""
    from qgemm_bench.backends.triton_kernels.weight_only import even_kn

    c = triton_config(16, 32, 64, 3)
    assert even_kn({"K": k, "N": n, **c}) == even
    op = int4_gemm if fmt == INT4 else nvfp4_gemm
    inputs = op.make_inputs(case(op, (5, k, n), **({"group_size": group} if fmt == INT4 else {})), seed())
    wargs = (inputs.w, inputs.scales, None, INT4, group) if fmt == INT4 else \
        (inputs.w, inputs.block_scales.view(torch.uint8), inputs.tensor_scale, NVFP4, 16)
    check(make_weight_only(*wargs, config=c, path="split",
                           target=target_for(wargs[0]))(inputs.x), fp64(inputs.x, op.dequantize(inputs)))


def test_a_fused_config_runs_the_split_kernel_without_its_fused_only_keys():
    # An explicit config with TMA and ACC_SCALE where the split kernel runs:
    # it takes neither (weight_only_configs.FUSED_ONLY), the tiles the same.
    inputs = int4_gemm.make_inputs(case(int4_gemm, (5, 512, 100), group_size=128), seed())
    c = {**triton_config(16, 32, 64, 3), "TMA": True, "ACC_SCALE": True}
    out = make_weight_only(inputs.w, inputs.scales, None, INT4, 128, config=c, path="split",
                           target=target_for(inputs.w))(inputs.x)
    check(out, fp64(inputs.x, int4_gemm.dequantize(inputs)))


def load_tune_script(name="tune_weight_only"):
    """A tuner of qgemm_bench.tuning (tune_weight_only: its weight_only
    module), or a study script of scripts/ loaded by path."""
    import importlib

    from tests.support import load_script

    if name == "tune_weight_only":
        return importlib.import_module("qgemm_bench.tuning.weight_only")
    return load_script(name)


def test_table_check_counts_wrong_calls_per_entry(monkeypatch, tmp_path, capsys):
    """tuning/weight_only.py check against a scripted kernel (no GPU):
    an entry wrong in one call of many (or NaN once) is counted, a
    pointer_config is checked too and one that fails to run counts, --ms
    filters, nothing to check is an error."""
    from qgemm_bench.harness import environment

    script = load_tune_script()
    monkeypatch.setattr(script, "results", [])  # the module's log of every tune run in this process
    out = tmp_path / "h100.json"
    good, racy, nan = triton_config(16, 64, 128, 8), triton_config(128, 64, 128, 2), triton_config(64, 64, 128, 2)
    out.write_text(woc.dumps({"gpu": "h100", "kernels": {"int4_gemm_fused": {
        "M16_K8192_N8192": {"config": {**good, "TMA": True}, "pointer_config": triton_config(32, 64, 64, 1)},
        "M128_K8192_N8192": {"config": racy}},
        "nvfp4_gemm_fused": {"M64_K8192_N8192": {"config": nan}}}}))
    calls, seen = {}, {}

    class Gemm:
        def __init__(self, *args, config, path, target=None):
            if config["BLOCK_M"] == 32:
                raise ValueError("refused")
            self.c = config

        def __call__(self, x):
            seen.setdefault(self.c["BLOCK_M"], set()).add(float(x.sum()))
            calls[self.c["BLOCK_M"]] = calls.get(self.c["BLOCK_M"], 0) + 1
            nan_at_5 = float("nan") if calls[64] == 5 else 1e-3
            return {16: 1e-3, 128: 0.1 if calls[128] == 7 else 1e-3, 64: nan_at_5}[self.c["BLOCK_M"]]

    monkeypatch.setattr(script, "TABLE_OUT", out)
    monkeypatch.setattr(script, "TARGET", Target.cpu())  # the fake kernels run nowhere
    monkeypatch.setattr(environment, "gpu_slug", lambda dev: "h100")
    monkeypatch.setattr(script, "operands",
                        lambda fmt, m, k, n, dequantized, group=128: (torch.ones(2, 4), (), torch.ones(4, 3)))
    monkeypatch.setattr(script, "make_weight_only", Gemm)
    monkeypatch.setattr(script, "rel_error", lambda err, ref: err)
    calls[64] = 0
    assert script.check(("fused",), None, 10) == 3
    text = capsys.readouterr().out
    assert "int4 fused M128_K8192_N8192 128x64x128 split 2 w4 s1: 1/10 wrong, max error 1.00e-01" in text
    assert "nvfp4 fused M64_K8192_N8192 64x64x128 split 2 w4 s1: 1/10 wrong, max error nan" in text
    assert "int4 fused M16_K8192_N8192 16x64x128 split 8 w4 s1 tma: 0/10 wrong" in text
    assert "int4 fused M16_K8192_N8192 32x64x64 split 1 w4 s1: FAILED ValueError: refused" in text  # pointer_config
    assert "3 of 4 configs with a wrong call" in text
    assert len(seen[16]) == 10  # new activations each call (a stale buffer would pass with the same x)
    assert {r["max_err"] for r in script.results if r["fmt"] == "nvfp4"} == {"nan"}
    assert script.check(("fused",), {128}, 3) == 0 and calls[128] == 13
    # --layers: only those layers' entries; a layer the table lacks (a swapped KxN, say) is refused in
    # every mode that takes it, before anything runs or is written
    for mode in (lambda: script.check(("fused",), {128}, 3, layers={(4096, 4096)}),
                 lambda: script.pdl_pass(("fused",), ms={128}, layers={(4096, 4096)}),
                 lambda: script.ws_pass(ms={128}, layers={(4096, 4096)})):
        with pytest.raises(script.InputError, match="--layers: 4096x4096 not in the table's layers \\(8192x8192\\)"):
            mode()
    assert script.check(("fused",), None, 2, layers={(8192, 8192)}) >= 0 and calls[128] == 15
    with pytest.raises(script.InputError, match="no table entries for --paths split"):
        script.check(("split",), None, 3)
    # A broken or absent table ends in one line in every mode that reads it.
    out.write_text("{not json")
    for mode in (lambda: script.check(("fused",), None, 3), lambda: script.pdl_pass(("fused",)),
                 lambda: script.table(("fused",), {128})):
        with pytest.raises(script.InputError, match=r"fix or delete it\)$"):
            mode()
    out.unlink()
    for mode, needed in ((lambda: script.check(("fused",), None, 3), "check"),
                         (lambda: script.pdl_pass(("fused",)), "add PDL to")):
        with pytest.raises(script.InputError, match=f"no table to {needed} "):
            mode()


def test_table_retune_of_some_m_keeps_the_rest_and_records_the_pointer_config(monkeypatch, tmp_path):
    """tuning/weight_only.py table --ms against scripted timings (no
    GPU): only the named M are replaced, a TMA winner gets the best
    pointer-load candidate as pointer_config, the provenance keeps its history
    (each pass a record of fields)."""
    from qgemm_bench.backends.triton_kernels import fused_gemm
    from qgemm_bench.backends.triton_kernels.split_k_configs import describe
    from qgemm_bench.harness import environment
    from qgemm_bench.operators import common

    script = load_tune_script()
    out = tmp_path / "h100.json"
    kept = {"config": triton_config(16, 64, 128, 8), "us": 17.0, "tuned": "earlier"}
    old = {"config": triton_config(128, 64, 128, 2), "us": 44.0, "tuned": "earlier"}
    first = {"commit": "0123456", "date": "2026-11-28T00:00:00+00:00", "command": "qgemm-bench tune", "rounds": 2,
             "versions": {}}
    out.write_text(woc.dumps({"gpu": "h100", "provenance": first, "kernels": {
        "int4_gemm_fused": {"M16_K8192_N8192": kept, "M128_K8192_N8192": old}}}))
    tma_best, ptr_best = fused_gemm.config(128, 64, 128, 1, 4, 5, tma=True), fused_gemm.config(128, 64, 128, 2, 4, 3)
    us = {describe(tma_best): 37.0, describe(ptr_best): 44.5}

    class Gemm:
        def __init__(self, *args, config=None, path, target=None):
            self.c = config if config is not None else {"path": path}

        def __call__(self, x):
            return self.c

    def name(c):
        return c["path"] if "path" in c else describe(c)

    monkeypatch.setattr(script, "TABLE_OUT", out)
    monkeypatch.setattr(script, "TARGET", Target.cpu())  # the fake kernels run nowhere
    monkeypatch.setattr(environment, "gpu_slug", lambda dev: "h100")
    monkeypatch.setattr(environment, "git_commit", lambda: "abc1234")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda dev=None: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(common, "LLAMA3_8B_KN", [(8192, 8192)])
    monkeypatch.setattr(common, "LLAMA3_70B_KN", [])
    monkeypatch.setattr(script, "operands", lambda fmt, m, k, n: (None, (), None))
    monkeypatch.setattr(script, "copies", lambda x, wargs: [(None, ())])
    monkeypatch.setattr(script, "make_weight_only", Gemm)
    monkeypatch.setattr(script, "rel_error", lambda c, ref: 0.0)
    monkeypatch.setattr(script, "time_fns", lambda fns: us.get(name(fns[0]()), 90.0))
    real_pool = fused_gemm.pool
    monkeypatch.setattr(fused_gemm, "pool", lambda m, fmt: [ptr_best, tma_best])
    argv = ["/usr/bin/python3", "-m", "qgemm_bench.tuning.weight_only", "OUT", "table", "--paths", "fused",
            "--ms", "128"]
    monkeypatch.setattr(sys, "orig_argv", argv)
    script.table(("fused",), {128})
    doc = woc.read_table(out)
    int4 = doc["kernels"]["int4_gemm_fused"]
    assert int4["M16_K8192_N8192"] == kept  # not re-tuned
    entry = int4["M128_K8192_N8192"]
    assert entry["config"] == tma_best and entry["us"] == 37.0
    assert entry["pointer_config"] == ptr_best and entry["pointer_us"] == 44.5
    assert set(doc["kernels"]["nvfp4_gemm_fused"]) == {"M128_K8192_N8192"}
    # The first tune's provenance stays; the pass follows it, as fields.
    assert {k: doc["provenance"][k] for k in first} == first
    (retune,) = doc["provenance"]["passes"]
    assert retune["pass"] == "table" and retune["commit"] == "abc1234" and retune["date"]
    assert retune["command"] == "python3 -m qgemm_bench.tuning.weight_only OUT table --paths fused --ms 128"
    assert retune["entries"] == {"int4_gemm_fused": ["M128_K8192_N8192"], "nvfp4_gemm_fused": ["M128_K8192_N8192"]}
    assert (retune["paths"], retune["formats"], retune["ms"]) == (["fused"], ["int4", "nvfp4"], [128])
    # --formats: one format re-tuned (every M of the path), the other's entries kept as they were.
    before = woc.read_table(out)["kernels"]
    script.table(("fused",), None, ("nvfp4",))
    doc = woc.read_table(out)
    assert doc["kernels"]["int4_gemm_fused"] == before["int4_gemm_fused"]
    assert set(doc["kernels"]["nvfp4_gemm_fused"]) == {f"M{m}_K8192_N8192" for m in script.cands.TABLE_M["fused"]}
    assert doc["provenance"]["passes"][0] == retune
    nvfp4 = doc["provenance"]["passes"][1]
    assert nvfp4["formats"] == ["nvfp4"] and "ms" not in nvfp4
    assert nvfp4["entries"] == {"nvfp4_gemm_fused": [f"M{m}_K8192_N8192" for m in script.cands.TABLE_M["fused"]]}
    out.write_text(woc.dumps({**doc, "kernels": {**doc["kernels"], "nvfp4_gemm_fused": before["nvfp4_gemm_fused"]},
                              "provenance": {**first, "passes": [retune]}}))
    # Above FUSED_MAX_M the real pool: the 256-row TMA configs only (both formats), each entry timed
    # against dequantize + cuBLAS.
    monkeypatch.setattr(fused_gemm, "pool", real_pool)
    two_ctas = fused_gemm.config(256, 64, 64, 1, 4, 3, tma=True)
    us[describe(two_ctas)], us["dequant"] = 70.0, 80.0  # the others 90; dequantize + cuBLAS timed beside
    script.table(("fused",), {4096})
    doc = woc.read_table(out)
    entry = doc["kernels"]["int4_gemm_fused"]["M4096_K8192_N8192"]
    assert entry["config"] == two_ctas and entry["us"] == 70.0 and entry["versus_dequant_us"] == [70.0, 80.0]
    assert "versus_dequant_us" not in doc["kernels"]["int4_gemm_fused"]["M128_K8192_N8192"]  # above 1024 only
    assert not woc.dequant_faster(INT4, 3000, 8192, 8192, "h100", doc)
    us["dequant"] = 60.0
    script.table(("fused",), {4096})
    assert woc.dequant_faster(INT4, 3000, 8192, 8192, "h100", woc.read_table(out))
    assert not woc.dequant_faster(INT4, 200, 8192, 8192, "h100", woc.read_table(out))  # M128's entry: none
    assert set(doc["kernels"]["nvfp4_gemm_fused"]) == {"M128_K8192_N8192", "M4096_K8192_N8192"}
    assert doc["kernels"]["nvfp4_gemm_fused"]["M4096_K8192_N8192"]["versus_dequant_us"] == [70.0, 80.0]
    assert real_pool(4096, INT4) and all(c.get("TMA") and c["BLOCK_M"] == 256 for c in real_pool(4096, INT4))
    assert real_pool(4096, NVFP4) == real_pool(4096, INT4) and two_ctas in real_pool(512, INT4)
    # Timed after every candidate compiled, a forward and a reverse round averaged
    # (TABLE_ROUNDS): a drift of +1 us per timing adds the same to each (one pass
    # in order would favour the first); a candidate whose timing fails is left out.
    bad = fused_gemm.config(128, 64, 128, 1, 4, 4, tma=True)
    calls = []

    def drifting(fns):
        calls.append(describe(fns[0]()))
        if calls[-1] == describe(bad):
            raise RuntimeError("launch failed")
        return {describe(ptr_best): 40.0, describe(tma_best): 40.2}[calls[-1]] + len(calls) - 1

    monkeypatch.setattr(fused_gemm, "pool", lambda m, fmt: [ptr_best, tma_best, bad])
    monkeypatch.setattr(script, "time_fns", drifting)
    script.results.clear()
    script.table(("fused",), {256})
    assert calls[:5] == [describe(c) for c in (ptr_best, tma_best, bad, tma_best, ptr_best)]
    entry = woc.read_table(out)["kernels"]["int4_gemm_fused"]["M256_K8192_N8192"]
    assert entry["config"] == ptr_best and entry["us"] == 42.0 and entry["runner_up"] == [42.2, describe(tma_best)]
    assert "FAILED timing RuntimeError: launch failed" in script.results[2]["label"]
    # A lost CUDA context stops the tune (every later timing would fail) rather than dropping candidates.
    def lost(fns):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(script, "time_fns", lost)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        script.table(("fused",), {256})
    # The pdl pass: each entry up to M = 64 with PDL 0 and 2, the same two rounds, the faster kept.
    monkeypatch.setattr(script, "time_fns", lambda fns: 17.0 if fns[0]().get("PDL") == 2 else 17.5)
    script.pdl_pass(("fused",))
    entry = woc.read_table(out)["kernels"]["int4_gemm_fused"]["M16_K8192_N8192"]
    assert entry["config"] == {**kept["config"], "PDL": 2} and entry["pdl_us"] == {"0": 17.5, "2": 17.0}
    # Up to M = 64 the table times every candidate with PDL 0 and 2 too.
    monkeypatch.setattr(fused_gemm, "pool", lambda m, fmt: [ptr_best, tma_best])
    monkeypatch.setattr(script, "time_fns", lambda fns: {describe(ptr_best): 20.0, describe(tma_best): 19.0,
                                                         describe({**ptr_best, "PDL": 2}): 18.0}.get(
        describe(fns[0]()), 25.0))
    script.results.clear()
    script.table(("fused",), {16})
    entry = woc.read_table(out)["kernels"]["int4_gemm_fused"]["M16_K8192_N8192"]
    assert entry["config"] == {**ptr_best, "PDL": 2} and entry["runner_up"] == [19.0, describe(tma_best)]
    assert len([r for r in script.results if r["fmt"] == "int4"]) == 4  # two candidates, with and without PDL
    script.table(("fused",), {128})
    assert not [r for r in script.results[8:] if "pdl" in r["label"]]  # above 64: as listed
    # The pdl pass at --ms above 64: PDL 0 and 1, the others left as they are.
    before = woc.read_table(out)["kernels"]["int4_gemm_fused"]
    monkeypatch.setattr(script, "time_fns", lambda fns: 30.0 if fns[0]().get("PDL") == 1 else 31.0)
    script.pdl_pass(("fused",), ms={128})
    after = woc.read_table(out)["kernels"]["int4_gemm_fused"]
    entry = after["M128_K8192_N8192"]
    assert entry["config"] == {**before["M128_K8192_N8192"]["config"], "PDL": 1}
    assert entry["pdl_us"] == {"0": 31.0, "1": 30.0} and entry["us"] == 30.0
    assert {k: v for k, v in after.items() if k != "M128_K8192_N8192"} == \
        {k: v for k, v in before.items() if k != "M128_K8192_N8192"}


def test_pdl_variants_toggle_the_kernel_that_runs():
    # Where the WS tiles run, their PDL 0, 1 and 2 (the rest as it is; stream-K's not 2); elsewhere
    # the config's own PDL: 0 and 2 up to M = 64, 0 and 1 above.
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    script = load_tune_script("tune_weight_only")
    c = {"BLOCK_M": 256, "BLOCK_N": 64, "BLOCK_K": 128, "PDL": 2, "WS": ws_tiles(256, 128, 64, 4, pdl=True)}
    assert script.pdl_variants(c, 512, True) == [("ws pdl 0", {**c, "WS": ws_tiles(256, 128, 64, 4)}),
                                                  ("ws pdl 1", {**c, "WS": ws_tiles(256, 128, 64, 4, pdl=True)}),
                                                  ("ws pdl 2", {**c, "WS": ws_tiles(256, 128, 64, 4, pdl=2)})]
    sk = {**c, "WS": ws_tiles(256, 128, 64, 4, stream_k=True)}
    assert [label for label, _ in script.pdl_variants(sk, 512, True)] == ["ws pdl 0", "ws pdl 1"]
    base = {k: v for k, v in c.items() if k != "PDL"}
    assert script.pdl_variants(c, 64, False) == [("pdl 0", base), ("pdl 2", {**base, "PDL": 2})]
    assert script.pdl_variants(c, 128, False) == [("pdl 0", base), ("pdl 1", {**base, "PDL": 1})]


@interpreter
def test_path_ab_times_each_path_and_the_dense_matmul_in_alternating_rounds(capsys):
    """scripts/path_ab.py on the CPU (interpreter, fp16, a CPU timer): every
    path checked against the reference, then timed round by round, in
    reverse order every other round; a path that cannot run says why."""
    from qgemm_bench.harness.timing import time_cpu

    script = load_tune_script("path_ab")
    args = script.parse_args(["--shape", "1025,256,72", "--paths", "fused,dequant,split", "--rounds", "2",
                              "--soak", "0", "--warmup", "0", "--rep", "1"])
    order = []

    def timer(fns, warmup_ms, rep_ms):
        order.append(fns[0])
        return time_cpu(fns[0], warmup_ms, rep_ms)

    script.compare(args, args.shapes[0], torch.device("cpu"), torch.float16, timer, state=lambda: "cpu")
    out = capsys.readouterr().out
    assert "int4_gemm 1025x256x72: 2 rounds" in out and "(cpu)" in out
    for label in ("fused {", "dequant", script.DENSE):
        assert label in out, out
    assert "  split: RuntimeError" in out  # no split config on the CPU, and the interpreter cannot autotune
    assert len(order) == 6 and order[3:] == order[:3][::-1]  # 3 candidates, the second round reversed


def test_above_fused_max_m_dequantize_runs_where_the_table_timed_it_faster(tmp_path):
    """weight_only_configs.dequant_faster: the nearest fused bucket with both
    timings decides; an explicit config, or a table without dequant_us, keeps
    the fused kernel (with TMA loads); bad dequant_us is refused."""
    tma = {**triton_config(256, 64, 64, 1), "TMA": True}
    inputs = int4_gemm.make_inputs(case(int4_gemm, (4, 256, 40), group_size=128), 0)
    other = {"config": tma, "us": 80.0, "versus_dequant_us": [80.0, 50.0]}  # dequant faster, another bucket
    for i, (versus, want) in enumerate((([70.0, 60.0], "dequant"), ([70.0, 80.0], "fused"), (None, "fused"))):
        entry = {"config": tma, "us": 70.0, **({"versus_dequant_us": versus} if versus else {})}
        gpu, store = table_store(tmp_path / str(i), "weight_only", {"kernels": {"int4_gemm_fused": {
            "M2048_K8192_N8192": entry, "M4096_K4096_N4096": other}}})
        run = {"target": gpu, "store": store}
        assert make_weight_only(inputs.w, inputs.scales, None, INT4, 128, **run).path(2000) == want  # M2048's decides
        assert make_weight_only(inputs.w, inputs.scales, None, INT4, 128, tma, **run).path(2000) == "fused"
    for kernel, key, bad in (("int4_gemm_fused", "M4096_K8192_N8192", [70.0]),
                             ("int4_gemm_fused", "M4096_K8192_N8192", [70.0, True]),
                             ("int4_gemm_fused", "M4096_K8192_N8192", "fast"),
                             ("int4_gemm_fused", "M1024_K8192_N8192", [70.0, 60.0]),
                             ("int4_gemm", "M4096_K8192_N8192", [70.0, 60.0])):
        with pytest.raises(ValueError, match="versus_dequant_us must be two positive numbers"):
            woc.check_table({"gpu": "h100", "kernels": {kernel: {key: {
                "config": triton_config(256, 64, 64, 1), "us": 70.0, "versus_dequant_us": bad}}}}, "t")


@pytest.mark.parametrize("first", ["first", None])
def test_ws_pass_at_a_group_writes_the_entry_s_config_for_that_group(monkeypatch, tmp_path, first):
    """tuning/weight_only.py ws --group against scripted timings (no
    GPU): the entry's config as it runs at the group (its pointer_config
    where its TMA loads do not: group 32 in 128-row x tiles) and each WS
    tile, the fastest written as the entry's "groups" config; the entry's
    own config stays. The pass's record follows the table's provenance, or
    is it where the table has none."""
    from qgemm_bench.backends.triton_kernels import fused_gemm
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles
    from qgemm_bench.harness import environment
    from qgemm_bench.target import Target

    script = load_tune_script()
    out = tmp_path / "h100.json"
    tma, ptr = {**triton_config(128, 64, 128, 1), "TMA": True}, triton_config(128, 128, 128, 1)
    earlier = {"commit": "0123456", "date": "2026-11-28T00:00:00+00:00", "command": "qgemm-bench tune",
               "rounds": 2, "versions": {}}
    out.write_text(woc.dumps({"gpu": "h100", **({"provenance": earlier} if first else {}), "kernels": {
        "int4_gemm_fused": {"M256_K8192_N8192": {"config": tma, "pointer_config": ptr, "us": 51.0}}}}))
    plain, split2 = ws_tiles(256, 128, 64, 3), ws_tiles(256, 128, 64, 4, splits=2, skew=4)
    us = {None: 61.3, "256x128x64 s3": 58.0, "256x128x64 s4 split 2 skew 4": 54.5}
    groups = []

    class Gemm:
        def __init__(self, *args, config, path, target=None):
            self.c = config

        def fused(self):
            return self

        def runs_ws(self, x, c):
            return True

    def timings(cands, stop=None):
        from qgemm_bench.backends.triton_kernels.split_k_configs import ws_label

        return [us[ws_label(c["WS"]) if "WS" in (c := calls[0]()) else None] for calls in cands]

    monkeypatch.setattr(script, "TABLE_OUT", out)
    monkeypatch.setattr(script, "TARGET", Target.cpu())  # the fake kernels run nowhere
    monkeypatch.setattr(environment, "gpu_slug", lambda dev: "h100")
    monkeypatch.setattr(environment, "git_commit", lambda: "abc1234")
    monkeypatch.setattr(script, "TARGET", Target("h100", "an sm_90 GPU", (9, 0), 132, 227 * 1024, 50 * 2**20))
    monkeypatch.setattr(fused_gemm, "ws_pool", lambda m: [plain, split2])
    monkeypatch.setattr(script, "operands", lambda fmt, m, k, n, group=128: groups.append(group) or (None, (), None))
    monkeypatch.setattr(script, "copies", lambda x, wargs: [(None, ())])
    monkeypatch.setattr(script, "make_weight_only", Gemm)
    monkeypatch.setattr(script, "checked_calls", lambda what, wargs, x, ref, reps, c, path: [lambda c=c: c])
    monkeypatch.setattr(script, "time_interleaved", timings)
    script.ws_pass(("int4",), {256}, 32)
    script.ws_pass(("int4",), {256}, "channel")
    doc = woc.read_table(out)
    entry = doc["kernels"]["int4_gemm_fused"]["M256_K8192_N8192"]
    assert groups == [32, "channel"]
    assert entry["config"] == tma and entry["us"] == 51.0 and "ws_us" not in entry
    assert entry["groups"]["32"] == {"config": {**ptr, "WS": split2}, "us": 54.5, "ws_us": [61.3, 54.5],
                                     "tuned": "ws --group 32: the entry's config and WS tiles, same rounds"}
    assert entry["groups"]["channel"]["config"] == {**tma, "WS": split2}  # per channel: its TMA loads run
    assert woc.lookup(INT4, "fused", 256, 8192, 8192, "h100", doc, group="32")[0] == {**ptr, "WS": split2}
    prov = doc["provenance"]
    # Each pass a record of fields after the tune's provenance, or the first one the file's provenance.
    passes = prov["passes"] if first else [prov] + prov["passes"]
    assert [(p["pass"], p["group"], p["commit"]) for p in passes] == [("ws", 32, "abc1234"),
                                                                      ("ws", "channel", "abc1234")]
    assert passes[-1]["entries"] == {"int4_gemm_fused": ["M256_K8192_N8192"]} and passes[-1]["formats"] == ["int4"]
    assert {k: prov[k] for k in earlier} == earlier if first else set(PROVENANCE_KEYS) <= set(prov)


def test_table_check_at_a_group_runs_what_runs_there(monkeypatch, tmp_path, capsys):
    """tuning/weight_only.py check --group: weights in that group size,
    and per entry the config WeightOnlyGemm picks there (its "groups"
    config, else its own), on new activations each call."""
    from qgemm_bench.harness import environment

    script = load_tune_script()
    out = tmp_path / "h100.json"
    own, g32 = triton_config(64, 64, 128, 4), triton_config(64, 128, 128, 2)
    doc = {"gpu": "h100", "kernels": {"int4_gemm_fused": {
        "M64_K8192_N8192": {"config": own, "groups": {"32": {"config": g32}}},
        "M128_K8192_N8192": {"config": own}}}}
    out.write_text(woc.dumps(doc))
    ran, groups = [], []

    class Gemm:
        def __init__(self, *args, config=None, path=None, target=None):
            self.c = config

        def tuned(self, m, path):
            return woc.lookup(INT4, path, m, 8192, 8192, "h100", doc, group="32")

        def __call__(self, x):
            ran.append(self.c["BLOCK_N"])
            return 0.1 if self.c == own and len(ran) == 2 else 1e-3

    monkeypatch.setattr(script, "TABLE_OUT", out)
    monkeypatch.setattr(script, "TARGET", Target.cpu())  # the fake kernels run nowhere
    monkeypatch.setattr(environment, "gpu_slug", lambda dev: "h100")
    monkeypatch.setattr(script, "operands", lambda fmt, m, k, n, dequantized, group=128: groups.append(group) or (
        torch.ones(2, 4), (), torch.ones(4, 3)))
    monkeypatch.setattr(script, "make_weight_only", Gemm)
    monkeypatch.setattr(script, "rel_error", lambda err, ref: err)
    assert script.check(("fused",), None, 3, ("int4",), 32) == 1
    text = capsys.readouterr().out
    assert groups == [32, 32] and ran == [64, 64, 64, 128, 128, 128]  # M128's own config, then M64's group one
    assert "int4 group 32 fused M128_K8192_N8192 64x64x128 split 4 w4 s1: 1/3 wrong" in text
    assert "int4 group 32 fused M64_K8192_N8192 64x128x128 split 2 w4 s1: 0/3 wrong" in text
    assert "1 of 2 configs with a wrong call" in text


def run_scripted_pass(monkeypatch, tmp_path, doc: dict, time_of, mode: str, *args):
    """The weight-only tuner's `mode` pass (its <mode>_pass(*args)) over
    table `doc` on scripted kernels (no GPU: the table file of GPU "h100",
    commit abc1234, gemms whose WS tiles run, every candidate right), each
    candidate timed time_of(its bucket key, its config): (the table the pass
    wrote, the (bucket key, config) pairs it timed, in order)."""
    from qgemm_bench.harness import environment

    class Gemm:
        def __init__(self, *args, config, path, target=None):
            pass

        def fused(self):
            return self

        def runs_ws(self, x, c):
            return True

    script = load_tune_script()
    out = tmp_path / "h100.json"
    out.write_text(woc.dumps(doc))
    shape, timed = [], []  # the bucket key of the entry being timed; what was timed
    monkeypatch.setattr(script, "TABLE_OUT", out)
    monkeypatch.setattr(script, "TARGET", Target.cpu())  # the fake kernels run nowhere
    monkeypatch.setattr(environment, "gpu_slug", lambda dev: "h100")
    monkeypatch.setattr(environment, "git_commit", lambda: "abc1234")
    monkeypatch.setattr(script, "operands",
                        lambda fmt, m, k, n, group=128: shape.append(f"M{m}_K{k}_N{n}") or (None, (), None))
    monkeypatch.setattr(script, "copies", lambda x, wargs: [(None, ())])
    monkeypatch.setattr(script, "make_weight_only", Gemm)
    monkeypatch.setattr(script, "checked_calls", lambda what, wargs, x, ref, reps, c, path: [lambda c=c: c])
    monkeypatch.setattr(script, "time_interleaved", lambda cands, stop=None: [
        timed.append((shape[-1], c := calls[0]())) or time_of(shape[-1], c) for calls in cands])
    monkeypatch.setattr(sys, "orig_argv", ["python3", "-m", "qgemm_bench.tuning.weight_only", "OUT", mode])
    getattr(script, f"{mode}_pass")(*args)
    return woc.read_table(out), timed


def by_flag(us: dict, flag: str):
    """run_scripted_pass's time_of from us[(bucket key, whether the config has flag)]."""
    return lambda key, c: us[(key, bool(c.get(flag)))]


def test_ws_pass_drops_the_pdl_timings_of_a_config_it_replaces(monkeypatch, tmp_path):
    """tuning/weight_only.py ws (no group) against scripted timings:
    where pool tiles win, they become the entry's config and its pdl_us
    (timed for the config before) goes; where the config stays, pdl_us
    stays; an entry's own WS tiles with PDL are timed beside the pool's
    (which have none) and stay where fastest; tiles within TIE_SHARE of
    the config leave it as it is."""
    from qgemm_bench.backends.triton_kernels import fused_gemm
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles
    from qgemm_bench.backends.triton_kernels.split_k_configs import ws_label

    base = {**triton_config(256, 64, 128, 1), "TMA": True, "PDL": 1}
    sk, sk_pdl = ws_tiles(256, 128, 64, 4, stream_k=True), ws_tiles(256, 128, 64, 4, stream_k=True, pdl=True)
    pdl_us = {"0": 52.0, "1": 51.0}
    doc = {"gpu": "h100", "kernels": {"int4_gemm_fused": {
        "M256_K8192_N8192": {"config": base, "us": 51.0, "pdl_us": pdl_us},
        "M256_K8192_N10240": {"config": base, "us": 84.0, "pdl_us": pdl_us, "ahead_us": {"0": 84.0}},
        "M256_K8192_N57344": {"config": {**base, "WS": sk_pdl}, "us": 340.0, "pdl_us": {"ws 0": 345.0}},
        "M256_K4096_N4096": {"config": base, "us": 18.0}}}}
    us = {("M256_K8192_N8192", None): 51.0, ("M256_K8192_N8192", ws_label(sk)): 66.0,
          ("M256_K8192_N10240", None): 84.0, ("M256_K8192_N10240", ws_label(sk)): 78.0,
          ("M256_K8192_N57344", None): 368.0, ("M256_K8192_N57344", ws_label(sk)): 345.0,
          ("M256_K8192_N57344", ws_label(sk_pdl)): 341.0,
          ("M256_K4096_N4096", None): 18.05, ("M256_K4096_N4096", ws_label(sk)): 18.0}  # a tie: the config stays

    monkeypatch.setattr(fused_gemm, "ws_pool", lambda m: [sk])
    time = lambda key, c: us[(key, ws_label(c["WS"]) if "WS" in c else None)]  # noqa: E731
    got, _ = run_scripted_pass(monkeypatch, tmp_path, doc, time, "ws", ("int4",), {256})
    entries = got["kernels"]["int4_gemm_fused"]
    kept, moved, own = entries["M256_K8192_N8192"], entries["M256_K8192_N10240"], entries["M256_K8192_N57344"]
    assert kept["config"] == base and kept["pdl_us"] == pdl_us and kept["ws_us"] == [51.0, 66.0]
    assert moved["config"] == {**base, "WS": sk} and not {"pdl_us", "ahead_us"} & set(moved) and moved["us"] == 78.0
    assert own["config"] == {**base, "WS": sk_pdl} and own["pdl_us"] == {"ws 0": 345.0} and own["us"] == 341.0
    tie = entries["M256_K4096_N4096"]
    assert tie["config"] == base and tie["us"] == 18.05 and tie["ws_us"] == [18.05, 18.0]


def test_ws_ab_tiles_name_every_config_of_the_ws_pool():
    # scripts/ws_ab.py --tiles: every WS config the ws pass times, written in
    # its syntax (ws_label's words, joined), reads back as that config.
    import re

    from qgemm_bench.backends.triton_kernels.fused_gemm import WS_POOL
    from qgemm_bench.backends.triton_kernels.split_k_configs import ws_label
    from qgemm_bench.operators.formats import INT4, NVFP4

    script = load_tune_script("ws_ab")
    words = {"split": "split", "skew": "skew", "k2": "k2", "stream-K": "sk", "pdl": "pdl"}
    pool = [c for cs in WS_POOL.values() for c in cs] + [{**WS_POOL[512][0], "PDL": 1}]
    for c in pool:
        tile, stages, *rest = ws_label(c).split(" ")
        opts = re.sub(r"group (\d+)", r"mg\1", re.sub(r"(split|skew) (\d+)", r"\1\2", " ".join(rest))).split()
        text = f"{tile}{stages}" + "".join(f"+{words.get(o, o)}" for o in opts)
        for fmt in (INT4, NVFP4) if not c.get("ACC") else (INT4,):  # ACC: int4's (ws_gemm.check)
            assert script.parse_tiles(text, fmt) == c, text


def test_ws_ab_refuses_tiles_an_older_build_lacks():
    # A --variant from before a WS key (M_GROUP) would run such tiles without it.
    import types

    from qgemm_bench.backends.triton_kernels import ws_gemm

    script = load_tune_script("ws_ab")
    old = types.SimpleNamespace(TILE_KEYS=ws_gemm.TILE_KEYS, OPTIONAL_KEYS=("K_SPLIT", "SPLITS", "SKEW", "PDL"))
    grouped = {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 4, "M_GROUP": 4}
    plain = {k: v for k, v in grouped.items() if k != "M_GROUP"}
    assert script.unknown_keys({"main": ws_gemm, "old": old}, [plain, grouped]) == \
        "--variant old: its ws_gemm has no M_GROUP (an older build): leave those tiles out"
    assert script.unknown_keys({"main": ws_gemm, "old": old}, [plain]) == ""


def test_ws_ab_checks_each_build_then_times_the_right_ones_in_alternating_rounds(monkeypatch, capsys):
    """scripts/ws_ab.py's compare on the CPU with stand-in builds of the
    kernel and a CPU timer: each checked over the rotating copies (each
    copy at least twice, its planes NaN before each call, its counters
    zero after all), only the right ones timed, in reverse order every
    other round, with cuBLAS. Stand-ins: right; 5% off; raising; NaN on
    its second call; leaving a counter at 1; reading a plane it never
    stored."""
    import contextlib
    import math
    import types

    from qgemm_bench.harness.timing import time_cpu
    from qgemm_bench.operators import int4_gemm as op
    from qgemm_bench.types import Shape

    script = load_tune_script("ws_ab")
    args = script.parse_args(["--shape", "16,256,136", "--tiles", "64x64x128s4", "--tiles",
                              "128x128x64s4+split2+skew4", "--rounds", "2", "--calls", "5", "--cublas"])
    refs, calls, real = {}, [], op.make_inputs

    def make_inputs(case, seed):  # each copy's reference, by its x
        i = real(case, seed)
        refs[i.x.data_ptr()] = op.reference(i)
        return i

    def build(name):
        def run(kmajor, fmt, group, ts, x, c, descs, cache):
            calls.append((name, x.data_ptr()))
            y = refs[x.data_ptr()].clone()
            if name == "bad":
                raise RuntimeError("launch failed")
            if name == "off":
                y *= 1.05
            seen = cache.setdefault("calls", [0])  # this config's calls on this copy
            seen[0] += 1
            if name == "nan" and seen[0] == 2:
                y[0, 0] = math.nan
            if name in ("stale", "early"):
                new = "w" not in cache
                planes, count = cache.setdefault("w", (torch.zeros(4), torch.zeros(2, dtype=torch.int32)))
                count[1] = name == "stale"
                if name == "early" and not new:  # adds a plane this call did not store
                    y += planes[0]
            return y

        return types.SimpleNamespace(reads=lambda kmajor, c: True, usable=lambda *a: True, run=run,
                                     weight_descriptors=lambda *a: None)

    labelled, order, checked = {}, [], []
    real_candidates = script.candidates

    def candidates(*a):
        fns, notes = real_candidates(*a)
        labelled.update({id(f): k for k, f in fns.items()})
        checked.extend(calls)
        return fns, notes

    def timer(fns, warmup_ms, rep_ms):
        order.append(labelled[id(fns)])
        return time_cpu(fns[0], 0, 1)

    monkeypatch.setattr(op, "make_inputs", make_inputs)
    monkeypatch.setattr(script, "candidates", candidates)
    builds = {n: build(n) for n in ("main", "off", "bad", "nan", "stale", "early")}
    steps = []  # what main()'s watchdog (--stall-timeout) would time: each check and each timing
    args.watch = types.SimpleNamespace(step=lambda label: steps.append(label) or contextlib.nullcontext())
    assert args.stall_timeout == script.STALL_S
    script.compare(args, Shape(16, 256, 136), torch.device("cpu"), builds, timer)
    out = capsys.readouterr().out
    labels = ["64x64x128 s4 @main", "128x128x64 s4 split 2 skew 4 @main", "cublas (bf16 weights)"]
    assert order == labels + labels[::-1]
    per_config = ["main"] * 5 + ["off"] * 5 + ["bad"] + ["nan"] * 5 + ["stale"] * 5 + ["early"] * 5
    assert [n for n, _ in checked] == per_config * 2
    ptrs = [p for _, p in checked[:5]]
    assert len(refs) == 2 and ptrs[0] == ptrs[2] == ptrs[4] != ptrs[1] == ptrs[3]  # the two copies in turn
    for tiles in ("64x64x128 s4", "128x128x64 s4 split 2 skew 4"):
        assert f"{tiles} @off: WRONG (error 5.00e-02 > 0.01 in 5 calls), not timed" in out
        assert f"{tiles} @bad: RuntimeError: launch failed" in out
        assert f"{tiles} @nan: WRONG (error nan > 0.01 in 5 calls), not timed" in out
        assert f"{tiles} @stale: WRONG (2 split counters not zeroed after 5 calls), not timed" in out
        assert f"{tiles} @early: WRONG (error nan > 0.01 in 5 calls), not timed" in out
    assert out.startswith("int4_gemm 16x256x136: 2 rounds") and all(f"  {k}  (" in out for k in labels)
    at = "at 16x256x136"
    assert steps == [f"{t} @{n}'s 5 checked calls {at}" for t in ("64x64x128 s4", "128x128x64 s4 split 2 skew 4")
                     for n in ("main", "off", "bad", "nan", "stale", "early")] + \
        [f"{k}'s timing {at}" for k in labels + labels[::-1]]


def test_ws_ab_stamp_lines_summarize_one_launch():
    # scripts/ws_ab.py --stamps: a SPLITS 2 launch's int64 stamps (ws_gemm.stamp_slots; %globaltimer counts
    # ns since the epoch, past float64's ns resolution) summarized per split, us from the first start, the
    # clock from %clock64 over %globaltimer, a stamp left unset (0) by some consumers said so.
    import types

    from qgemm_bench.backends.triton_kernels import ws_gemm
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    script = load_tune_script("ws_ab")
    c = ws_tiles(256, 128, 64, 4, splits=2, skew=2)
    kmajor = types.SimpleNamespace(wt=torch.empty(1, 256, dtype=torch.int8))  # padded K 512: 8 blocks, 3 + 5
    base = 1_800_000_000_000_000_000
    raw = torch.zeros(4, 2, ws_gemm.STAMP_SLOTS, dtype=torch.int64)
    for p in range(4):  # tile p // 2, split p % 2
        first = p % 2 == 0
        loop = 3000 if first else 5000
        for w in range(2):
            r = raw[p, w]
            r[0], r[1] = base + 100 * w, base + 100 * w + loop
            r[2], r[3] = base + 6000 + 100 * (p // 2), base + 7100
            if not first:
                r[4] = base + 8200
            r[5] = base + 9300
            r[6], r[7] = 5, 5 + 3 * loop // 2  # 1.5 GHz
    raw[3, 1, 4] = 0  # one consumer's y start unset
    lines = script.stamp_lines(raw, c, kmajor)
    assert lines[0] == ("  SM clock over the K loops 1.5 [1.5-1.5] GHz; 1024 clocks per K block for the wgmmas of "
                        "the program at 4096 FLOP a clock")
    # torch's median: the lower of the middle two
    assert lines[1] == ("  split 0 of 2 (3 K blocks): clocks per K block 1500.0 [1500.0-1500.0]; start 0.0 [0.0-0.1]; "
                        "loop end 3.0 [3.0-3.1]; stored / waited 6.0 [6.0-6.1]; counted / added 7.1 [7.1-7.1]; "
                        "end 9.3 [9.3-9.3]")
    assert lines[2] == ("  split 1 of 2 (5 K blocks): clocks per K block 1500.0 [1500.0-1500.0]; start 0.0 [0.0-0.1]; "
                        "loop end 5.0 [5.0-5.1]; stored / waited 6.0 [6.0-6.1]; counted / added 7.1 [7.1-7.1]; "
                        "y start 8.2 [8.2-8.2] (unset in 1 of 4); end 9.3 [9.3-9.3]")
    one = ws_tiles(64, 64, 128, 4)  # one consumer, two programs an SM: the second slots are not read
    lines = script.stamp_lines(raw, one, kmajor)
    assert len(lines) == 2 and "512 clocks per K block for the wgmmas of the two programs on an SM" in lines[0] and \
        lines[1].startswith("  split 0 of 1 (4 K blocks): clocks per K block 1125.0 [1125.0-1875.0]")
    k2 = ws_tiles(64, 64, 64, 6, 2)  # K_SPLIT 2: a line per part
    lines = script.stamp_lines(raw, k2, kmajor)
    assert [x[:26] for x in lines[1:]] == ["  split 0 of 1 part 0 (8 K", "  split 0 of 1 part 1 (8 K"]


def test_ws_ab_copies_sets_the_rotating_copies(monkeypatch):
    # scripts/ws_ab.py --copies 1: every checked call on the same operands (by default, on the CPU, two).
    import types

    from qgemm_bench.operators import int4_gemm as op
    from qgemm_bench.types import Shape

    script = load_tune_script("ws_ab")
    seen, refs, real = [], {}, op.make_inputs

    def make_inputs(case, seed):  # each copy's reference, by its x
        i = real(case, seed)
        refs[i.x.data_ptr()] = op.reference(i)
        return i

    def run(kmajor, fmt, group, ts, x, c, descs, cache):
        seen.append(x.data_ptr())
        return refs[x.data_ptr()].clone()

    monkeypatch.setattr(op, "make_inputs", make_inputs)

    build = types.SimpleNamespace(reads=lambda kmajor, c: True, usable=lambda *a: True, run=run,
                                  weight_descriptors=lambda *a: None)
    for copies, want in ((["--copies", "1"], 1), ([], 2)):
        seen.clear()
        args = script.parse_args(["--shape", "16,256,136", "--tiles", "64x64x128s4", "--calls", "4", *copies])
        fns, notes = script.candidates(args, Shape(16, 256, 136), torch.device("cpu"), {"main": build})
        assert not notes and len(fns["64x64x128 s4 @main"]) == want and len(set(seen)) == want and len(seen) == 4



@pytest.mark.parametrize("fmt", [INT4, NVFP4])
def test_every_ws_pool_tile_fits_the_h200_in_both_formats(fmt):
    # The ws pass times each bucket's tiles as they are: one that the
    # kernel refuses on the GPU (shared memory, keys) would only be noise;
    # ACC tiles are int4's (NVFP4's pass leaves them out: ws_gemm.usable).
    from qgemm_bench.backends.triton_kernels import ws_gemm
    from qgemm_bench.backends.triton_kernels.fused_gemm import WS_POOL, ws_pool
    from qgemm_bench.configs.store import DEFAULT

    smem = DEFAULT.entries()["h200"].smem_per_block
    for m, tiles in WS_POOL.items():
        assert ws_pool(m) == tiles and all(t["BLOCK_M"] <= max(m, 64) for t in tiles)
        for t in tiles:
            if t.get("ACC") and fmt == NVFP4:
                with pytest.raises(ValueError, match="ACC"):
                    ws_gemm.check(t, fmt, smem)
            else:
                ws_gemm.check(t, fmt, smem)
    assert ws_pool(1) == [] and [t["BLOCK_M"] for t in ws_pool(16)] == [16] * 6
    assert [t.get("ACC") for t in ws_pool(16)] == [None] * 3 + [1] * 3


def test_scale8_pass_keeps_the_faster_where_fused_kernel_loads_the_scales(monkeypatch, tmp_path):
    """tuning/weight_only.py scale8 against scripted timings: each NVFP4
    fused entry up to M = 64 without and with SCALE8 in the same rounds, the
    faster kept and both noted (scale8_us); not where its WS tiles run (they
    read the bf16 scales) nor with TMA loads; int4 and M > 64 untouched; the
    pass's record is the provenance of a table without one."""
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    plain, ws = triton_config(16, 128, 128, 8), ws_tiles(16, 64, 128, 8, splits=2)
    tma = {**triton_config(256, 64, 128, 1), "TMA": True}
    doc = {"gpu": "h100", "kernels": {"nvfp4_gemm_fused": {
        "M1_K8192_N8192": {"config": plain, "us": 18.0}, "M1_K8192_N57344": {"config": plain, "us": 106.0},
        "M16_K8192_N8192": {"config": {**plain, "WS": ws}, "us": 17.7},
        "M64_K8192_N8192": {"config": tma, "us": 24.0}, "M256_K8192_N8192": {"config": plain, "us": 50.0}},
        "int4_gemm_fused": {"M1_K8192_N8192": {"config": plain, "us": 15.7}}}}
    us = {("M1_K8192_N8192", False): 18.0, ("M1_K8192_N8192", True): 18.4,
          ("M1_K8192_N57344", False): 106.0, ("M1_K8192_N57344", True): 97.0}

    got, timed = run_scripted_pass(monkeypatch, tmp_path, doc, by_flag(us, "SCALE8"), "scale8")
    entries = got["kernels"]["nvfp4_gemm_fused"]
    assert sorted({key for key, _ in timed}) == ["M1_K8192_N57344", "M1_K8192_N8192"]  # not WS (M16), TMA (M64), M 256
    assert entries["M1_K8192_N8192"]["config"] == plain and entries["M1_K8192_N8192"]["us"] == 18.0
    assert entries["M1_K8192_N8192"]["scale8_us"] == {"0": 18.0, "1": 18.4}
    assert entries["M1_K8192_N57344"]["config"] == {**plain, "SCALE8": True}
    assert entries["M1_K8192_N57344"]["us"] == 97.0 and entries["M1_K8192_N57344"]["scale8_us"]["1"] == 97.0
    for key in ("M16_K8192_N8192", "M64_K8192_N8192", "M256_K8192_N8192"):
        assert entries[key] == doc["kernels"]["nvfp4_gemm_fused"][key]
    assert got["kernels"]["int4_gemm_fused"] == doc["kernels"]["int4_gemm_fused"]
    # The table had no provenance: the pass's record is it (the store's fields, then the pass's).
    prov = got["provenance"]
    assert set(PROVENANCE_KEYS) <= set(prov) and (prov["pass"], prov["commit"]) == ("scale8", "abc1234")
    assert prov["command"] == "python3 -m qgemm_bench.tuning.weight_only OUT scale8" and "entries" not in prov


def test_ahead_pass_keeps_the_faster_where_acc_scale_loads_its_rows(monkeypatch, tmp_path):
    """tuning/weight_only.py ahead against scripted timings: each int4 fused
    entry up to M = 64 with ACC_SCALE, without and with SCALE_AHEAD in the
    same rounds, the faster kept and both noted (ahead_us); not without
    ACC_SCALE, nor where its WS tiles run, nor M > 64; NVFP4 untouched."""
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    plain = triton_config(16, 128, 128, 8)
    acc, ws = {**plain, "ACC_SCALE": True}, ws_tiles(16, 64, 128, 8, splits=2, acc=True)
    doc = {"gpu": "h100", "kernels": {"int4_gemm_fused": {
        "M1_K8192_N8192": {"config": acc, "us": 15.7}, "M1_K4096_N4096": {"config": acc, "us": 6.5},
        "M1_K4096_N6144": {"config": plain, "us": 8.5}, "M16_K8192_N8192": {"config": {**acc, "WS": ws}, "us": 14.5},
        "M256_K8192_N8192": {"config": acc, "us": 50.0}},
        "nvfp4_gemm_fused": {"M1_K8192_N8192": {"config": acc, "us": 18.0}}}}
    us = {("M1_K8192_N8192", False): 15.7, ("M1_K8192_N8192", True): 15.2,
          ("M1_K4096_N4096", False): 6.5, ("M1_K4096_N4096", True): 6.7}

    got, timed = run_scripted_pass(monkeypatch, tmp_path, doc, by_flag(us, "SCALE_AHEAD"), "ahead")
    entries = got["kernels"]["int4_gemm_fused"]
    assert sorted({key for key, _ in timed}) == ["M1_K4096_N4096", "M1_K8192_N8192"]  # not without ACC_SCALE, WS, M 256
    assert entries["M1_K8192_N8192"]["config"] == {**acc, "SCALE_AHEAD": True}
    assert entries["M1_K8192_N8192"]["us"] == 15.2 and entries["M1_K8192_N8192"]["ahead_us"] == {"0": 15.7, "1": 15.2}
    assert entries["M1_K4096_N4096"]["config"] == acc and entries["M1_K4096_N4096"]["us"] == 6.5
    for key in ("M1_K4096_N6144", "M16_K8192_N8192", "M256_K8192_N8192"):
        assert entries[key] == doc["kernels"]["int4_gemm_fused"][key]
    assert got["kernels"]["nvfp4_gemm_fused"] == doc["kernels"]["nvfp4_gemm_fused"]
    assert got["provenance"]["pass"] == "ahead"


def test_regs_pass_keeps_the_fastest_register_cap(monkeypatch, tmp_path):
    """tuning/weight_only.py regs against scripted timings: each fused entry
    up to M = 64 whose WS tiles do not run, without a cap and at REG_CAPS
    for its warps (and its own cap) in the same rounds; the fastest kept,
    every timing noted (regs_us), the other passes' timings of a replaced
    config dropped, the entry's own config kept where it ties within
    TIE_SHARE; not where WS runs, nor M > 64; --formats int4 leaves NVFP4
    as it was."""
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    script = load_tune_script()
    plain = triton_config(16, 64, 128, 4)
    capped = {**triton_config(16, 128, 128, 8), "maxnreg": 128}
    ws = ws_tiles(16, 64, 128, 8, splits=2)
    doc = {"gpu": "h100", "kernels": {"int4_gemm_fused": {
        "M1_K4096_N28672": {"config": plain, "us": 26.0, "ahead_us": {"0": 26.0, "1": 26.4}},
        "M1_K4096_N4096": {"config": plain, "us": 6.54},
        "M1_K8192_N8192": {"config": capped, "us": 15.0},
        "M16_K8192_N8192": {"config": {**plain, "WS": ws}, "us": 14.5},
        "M256_K8192_N8192": {"config": plain, "us": 50.0}},
        "nvfp4_gemm_fused": {"M1_K8192_N8192": {"config": plain, "us": 18.0}}}}
    us = {("M1_K4096_N28672", None): 26.0, ("M1_K4096_N28672", 96): 26.1, ("M1_K4096_N28672", 80): 26.0,
          ("M1_K4096_N28672", 72): 24.9,
          ("M1_K4096_N4096", None): 6.54, ("M1_K4096_N4096", 96): 6.53, ("M1_K4096_N4096", 80): 6.6,
          ("M1_K4096_N4096", 72): 6.7,
          ("M1_K8192_N8192", None): 15.4, ("M1_K8192_N8192", 128): 15.0, ("M1_K8192_N8192", 96): 15.2,
          ("M1_K8192_N8192", 80): 15.3, ("M1_K8192_N8192", 72): 16.0}

    got, timed = run_scripted_pass(monkeypatch, tmp_path, doc, lambda key, c: us[(key, c.get("maxnreg"))], "regs",
                                   ("int4",))
    entries = got["kernels"]["int4_gemm_fused"]
    assert [(key, c.get("maxnreg")) for key, c in timed] == [
        ("M1_K4096_N28672", None), ("M1_K4096_N28672", 96), ("M1_K4096_N28672", 80), ("M1_K4096_N28672", 72),
        ("M1_K4096_N4096", None), ("M1_K4096_N4096", 96), ("M1_K4096_N4096", 80), ("M1_K4096_N4096", 72),
        ("M1_K8192_N8192", None), ("M1_K8192_N8192", 128), ("M1_K8192_N8192", 96), ("M1_K8192_N8192", 80),
        ("M1_K8192_N8192", 72)]  # sorted keys; not where WS runs, nor M 256, nor NVFP4
    assert entries["M1_K4096_N28672"]["config"] == {**plain, "maxnreg": 72}
    assert entries["M1_K4096_N28672"]["regs_us"] == {"0": 26.0, "96": 26.1, "80": 26.0, "72": 24.9}
    assert entries["M1_K4096_N28672"]["us"] == 24.9 and "ahead_us" not in entries["M1_K4096_N28672"]
    assert entries["M1_K8192_N8192"]["config"] == capped and entries["M1_K8192_N8192"]["us"] == 15.0
    # 96 registers timed 0.15% faster than none: a tie, the entry keeps its config (and its time)
    assert entries["M1_K4096_N4096"]["config"] == plain and entries["M1_K4096_N4096"]["us"] == 6.54
    assert entries["M1_K4096_N4096"]["regs_us"] == {"0": 6.54, "96": 6.53, "80": 6.6, "72": 6.7}
    for key in ("M16_K8192_N8192", "M256_K8192_N8192"):
        assert entries[key] == doc["kernels"]["int4_gemm_fused"][key]
    assert got["kernels"]["nvfp4_gemm_fused"] == doc["kernels"]["nvfp4_gemm_fused"]
    assert got["provenance"]["pass"] == "regs" and got["provenance"]["formats"] == ["int4"]
    assert script.regs_variants({**plain, "num_warps": 8}, 1, False)[1:] == [("regs 80", {**plain, "num_warps": 8,
                                                                                            "maxnreg": 80})]
    assert script.regs_variants(plain, 1, True) == []


def test_tma_pass_keeps_the_faster_loads_and_a_pointer_config(monkeypatch, tmp_path):
    """tuning/weight_only.py tma against scripted timings: each fused entry
    up to M = 64 whose WS tiles do not run, on pointer and on TMA loads in
    the same rounds; TMA kept where faster, with the pointer-load config as
    its pointer_config and without SCALE8 (NVFP4 scales after the decode
    there), the other passes' timings dropped; not where WS runs, nor
    M > 64, nor the split path."""
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    plain, ws = {**triton_config(16, 128, 128, 8), "PDL": 2}, ws_tiles(16, 64, 128, 8, splits=2)
    s8 = {**plain, "SCALE8": True}
    doc = {"gpu": "h100", "kernels": {
        "nvfp4_gemm_fused": {"M1_K8192_N8192": {"config": s8, "us": 18.0, "scale8_us": {"0": 18.5, "1": 18.0}},
                             "M1_K4096_N4096": {"config": plain, "us": 8.5, "pdl_us": {"0": 9.0, "2": 8.5}},
                             "M16_K8192_N8192": {"config": {**plain, "WS": ws}, "us": 17.7},
                             "M256_K8192_N8192": {"config": plain, "us": 50.0}},
        "int4_gemm_fused": {"M1_K8192_N8192": {"config": plain, "us": 15.7}},
        "int4_gemm": {"M1_K8192_N8192": {"config": plain, "us": 16.0}}}}
    us = {("M1_K8192_N8192", False): 18.0, ("M1_K8192_N8192", True): 17.4,
          ("M1_K4096_N4096", False): 8.5, ("M1_K4096_N4096", True): 8.9}

    got, timed = run_scripted_pass(monkeypatch, tmp_path, doc, by_flag(us, "TMA"), "tma")
    nv, i4 = got["kernels"]["nvfp4_gemm_fused"], got["kernels"]["int4_gemm_fused"]
    assert sorted({key for key, _ in timed}) == ["M1_K4096_N4096", "M1_K8192_N8192"]  # not WS, M 256, split
    won = nv["M1_K8192_N8192"]
    assert won["config"] == {**plain, "TMA": True} and won["us"] == 17.4 and won["tma_us"] == {"0": 18.0, "1": 17.4}
    assert won["pointer_config"] == s8 and won["pointer_us"] == 18.0 and "scale8_us" not in won
    kept = nv["M1_K4096_N4096"]
    assert kept["config"] == plain and kept["pdl_us"] == {"0": 9.0, "2": 8.5} and "pointer_config" not in kept
    assert i4["M1_K8192_N8192"]["config"]["TMA"] and i4["M1_K8192_N8192"]["pointer_config"] == plain
    for key in ("M16_K8192_N8192", "M256_K8192_N8192"):
        assert nv[key] == doc["kernels"]["nvfp4_gemm_fused"][key]
    assert got["kernels"]["int4_gemm"] == doc["kernels"]["int4_gemm"]


def test_rot_pass_keeps_the_faster_decode_on_pointer_loads(monkeypatch, tmp_path):
    """tuning/weight_only.py rot against scripted timings: each NVFP4 fused
    entry up to M = 64, as it is and with ROT_DECODE in the same rounds; the
    twin of a TMA config is on pointer loads (and a winner there loses the
    TMA entry's pointer_config), of a SHORT_DECODE config without it, of a
    config whose WS tiles run the fused kernel alone (its ws_us dropped
    where that wins); each twin also at the other SPLIT_K of 2, 4, 8, 16;
    the fastest kept, every timing noted (rot_us), other passes' timings
    dropped where the config changed; a ROT winner keeps the config it
    replaced (rot_of), which a later pass starts from again (and drops
    where it wins); not int4, M > 64; M > 64 refused in one line."""
    from qgemm_bench.backends.triton_kernels.fused_gemm import ws_tiles

    plain, ws = {**triton_config(16, 128, 128, 8), "PDL": 2}, ws_tiles(16, 64, 128, 8, splits=2)
    short = {**plain, "ACC_SCALE": True, "SHORT_DECODE": True}
    tma = {**plain, "TMA": True}
    doc = {"gpu": "h100", "kernels": {
        "nvfp4_gemm_fused": {"M1_K8192_N8192": {"config": plain, "us": 18.0, "pdl_us": {"0": 19.0, "2": 18.0}},
                             "M1_K4096_N4096": {"config": short, "us": 8.5},
                             "M1_K14336_N4096": {"config": tma, "us": 15.1, "pointer_config": plain,
                                                 "pointer_us": 15.3, "tma_us": {"0": 15.3, "1": 15.1}},
                             "M1_K4096_N28672": {"config": plain, "us": 30.9},
                             "M1_K8192_N57344": {"config": plain, "us": 100.1},
                             "M32_K8192_N8192": {"config": {**plain, "SPLIT_K": 2, "ROT_DECODE": True},
                                                 "rot_of": plain, "us": 20.0, "rot_us": {"0": 20.1, "1": 20.0}},
                             "M16_K8192_N8192": {"config": {**plain, "WS": ws}, "us": 17.7, "ws_us": [19.3, 17.7]},
                             "M16_K28672_N8192": {"config": {**short, "WS": ws}, "us": 54.7, "ws_us": [56.3, 54.7]},
                             "M256_K8192_N8192": {"config": plain, "us": 50.0}},
        "int4_gemm_fused": {"M1_K8192_N8192": {"config": plain, "us": 15.7}}}}
    us = {("M1_K8192_N8192", False): 18.1, ("M1_K8192_N8192", True): 17.2,
          ("M16_K8192_N8192", False): 17.7, ("M16_K8192_N8192", True): 18.0,
          ("M16_K28672_N8192", False): 54.7, ("M16_K28672_N8192", True): 51.0,
          ("M1_K4096_N4096", False): 8.6, ("M1_K4096_N4096", True): 8.2,
          ("M1_K14336_N4096", False): 15.1, ("M1_K14336_N4096", True): 14.0,
          ("M1_K4096_N28672", False): 30.9, ("M1_K4096_N28672", True): 31.6,
          ("M1_K8192_N57344", False): 100.1, ("M1_K8192_N57344", True): 100.0,
          ("M32_K8192_N8192", False): 19.0, ("M32_K8192_N8192", True): 20.5}

    def time(key, c):  # the other splits slower by 1-1.16 us, but split 2 at 1x8192x57344
        t = us[(key, bool(c.get("ROT_DECODE")))]
        if c.get("ROT_DECODE") and c["SPLIT_K"] != 8:
            t = 94.2 if (key, c["SPLIT_K"]) == ("M1_K8192_N57344", 2) else t + 1 + c["SPLIT_K"] / 100
        return t

    got, timed = run_scripted_pass(monkeypatch, tmp_path, doc, time, "rot")
    nv = got["kernels"]["nvfp4_gemm_fused"]
    assert sorted({s for s, _ in timed}) == ["M16_K28672_N8192", "M16_K8192_N8192", "M1_K14336_N4096",
                                             "M1_K4096_N28672", "M1_K4096_N4096", "M1_K8192_N57344",
                                             "M1_K8192_N8192", "M32_K8192_N8192"]  # not M 256, int4
    for key in {s for s, _ in timed}:  # the config, its twin at split 8, then at 2, 4 and 16
        assert [c.get("ROT_DECODE", False) for s, c in timed if s == key] == [False] + [True] * 4
        assert [c["SPLIT_K"] for s, c in timed if s == key] == [8, 8, 2, 4, 16]
    twins = {s: c for s, c in timed if c.get("ROT_DECODE") and c["SPLIT_K"] == 8}
    splits = lambda t: {f"1 split {k}": round(t + 1 + k / 100, 2) for k in (2, 4, 16)}  # noqa: E731 (as stored)
    assert twins["M16_K8192_N8192"] == {**plain, "ROT_DECODE": True}  # the fused kernel alone
    assert nv["M16_K8192_N8192"] == {**doc["kernels"]["nvfp4_gemm_fused"]["M16_K8192_N8192"],
                                     "rot_us": {"0": 17.7, "1": 18.0, **splits(18.0)}}
    assert nv["M16_K28672_N8192"] == {"config": {**plain, "ACC_SCALE": True, "ROT_DECODE": True}, "us": 51.0,
                                      "rot_us": {"0": 54.7, "1": 51.0, **splits(51.0)},
                                      "rot_of": {**short, "WS": ws}}
    again = nv["M32_K8192_N8192"]  # from its rot_of: the config without ROT won this time
    assert again == {"config": plain, "us": 19.0, "rot_us": {"0": 19.0, "1": 20.5, **splits(20.5)}}
    assert twins["M1_K14336_N4096"] == {**plain, "ROT_DECODE": True}  # pointer loads
    assert twins["M1_K4096_N4096"] == {**plain, "ACC_SCALE": True, "ROT_DECODE": True}  # not SHORT_DECODE
    won = nv["M1_K8192_N8192"]
    assert won["config"] == {**plain, "ROT_DECODE": True} and won["us"] == 17.2
    assert won["rot_us"] == {"0": 18.1, "1": 17.2, **splits(17.2)} and "pdl_us" not in won
    assert won["rot_of"] == plain and nv["M1_K4096_N4096"]["rot_of"] == short
    moved = nv["M1_K14336_N4096"]
    assert moved["config"] == {**plain, "ROT_DECODE": True} and moved["us"] == 14.0
    assert not {"pointer_config", "pointer_us", "tma_us"} & set(moved) and moved["rot_of"] == tma, moved
    kept = nv["M1_K4096_N28672"]
    assert kept == {"config": plain, "us": 30.9, "rot_us": {"0": 30.9, "1": 31.6, **splits(31.6)}}
    fewer = nv["M1_K8192_N57344"]
    assert fewer["config"] == {**plain, "SPLIT_K": 2, "ROT_DECODE": True} and fewer["us"] == 94.2
    assert fewer["rot_of"] == plain
    assert nv["M256_K8192_N8192"] == doc["kernels"]["nvfp4_gemm_fused"]["M256_K8192_N8192"]
    assert got["kernels"]["int4_gemm_fused"] == doc["kernels"]["int4_gemm_fused"]
    script = load_tune_script()
    with pytest.raises(script.InputError, match="rot --ms 1,128: M up to 64 only"):
        script.rot_pass(ms={1, 128})


def test_scale8_pass_drops_the_pdl_timings_of_a_config_it_replaces(monkeypatch, tmp_path):
    """tuning/weight_only.py scale8 against scripted timings: where SCALE8
    wins, the entry's pdl_us and ahead_us (timed for the config without
    it) go, as the ws pass drops them; where the config stays, they stay."""

    plain = {**triton_config(16, 128, 128, 8), "PDL": 2}
    pdl_us = {"0": 19.0, "2": 18.0}
    doc = {"gpu": "h100", "kernels": {"nvfp4_gemm_fused": {
        "M1_K8192_N8192": {"config": plain, "us": 18.0, "pdl_us": pdl_us, "ahead_us": {"0": 18.0}},
        "M1_K8192_N57344": {"config": plain, "us": 106.0, "pdl_us": pdl_us, "ahead_us": {"0": 106.0}}}}}
    us = {("M1_K8192_N8192", False): 18.0, ("M1_K8192_N8192", True): 18.4,
          ("M1_K8192_N57344", False): 106.0, ("M1_K8192_N57344", True): 97.0}

    got, _ = run_scripted_pass(monkeypatch, tmp_path, doc, by_flag(us, "SCALE8"), "scale8")
    entries = got["kernels"]["nvfp4_gemm_fused"]
    kept, moved = entries["M1_K8192_N8192"], entries["M1_K8192_N57344"]
    assert kept["config"] == plain and kept["pdl_us"] == pdl_us and kept["ahead_us"] == {"0": 18.0}
    assert moved["config"] == {**plain, "SCALE8": True} and not {"pdl_us", "ahead_us"} & set(moved), moved
