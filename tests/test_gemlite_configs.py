"""gemlite's shipped configs on a GPU it ships none for: the nearest GPU of
the same compute capability, and every shape given one config so gemlite's
autotuner never times (no GPU or gemlite needed: the cache is plain data)."""

from qgemm_bench.backends import gemlite

TAGS = ["4090", "5090", "6000_ada", "a100", "a40", "a6000", "h100", "l4", "l40", "l40s", "mi300x"]


def test_a_gpu_without_a_file_takes_the_nearest_of_its_capability():
    assert gemlite.nearest_shipped(TAGS, (9, 0), 132) == "h100"  # H200: 132 SMs, sm_90
    assert gemlite.nearest_shipped(TAGS, (8, 9), 60) == "l4"
    assert gemlite.nearest_shipped(TAGS, (8, 9), 140) == "6000_ada"  # 142 SMs, three tags tie: the first name
    assert gemlite.nearest_shipped(TAGS, (7, 5), 40) is None
    assert gemlite.nearest_shipped(["a100"], (9, 0), 132) is None


def cache():
    return {"GEMM": {"(96, 4096, 4096, 128, 8, 104)": {"BLOCK_SIZE_M": 64, "num_warps": 4},
                     "(1024, 4096, 4096, 128, 8, 104)": {"BLOCK_SIZE_M": 128, "num_warps": 8},
                     "(1024, 28672, 4096, 128, 8, 104)": {"BLOCK_SIZE_M": 128, "num_warps": 4},
                     "(1024, 8192, 8192, 64, 8, 104)": {"BLOCK_SIZE_M": 16, "num_warps": 2}},
            "GEMV_REVSPLITK": {}}


def test_a_cached_shape_keeps_its_own_config():
    c = cache()
    assert gemlite.fill_nearest(c, "GEMM", (1024, 28672, 4096, 128, 8, 104)) == ""
    assert len(c["GEMM"]) == 4


def test_a_missing_shape_copies_the_nearest_of_its_group_m_first():
    c = cache()
    # 1024 x K=8192 x N=8192, group 128: the group-64 entry at its exact N, K is not a candidate;
    # of the group-128 ones, the same M bucket (two powers of two off in K, N) beats M 96.
    assert gemlite.fill_nearest(c, "GEMM", (1024, 8192, 8192, 128, 8, 104)) == "1024x4096x4096"
    assert c["GEMM"]["(1024, 8192, 8192, 128, 8, 104)"] == {"BLOCK_SIZE_M": 128, "num_warps": 8}
    c["GEMM"]["(1024, 8192, 8192, 128, 8, 104)"]["num_warps"] = 2  # a copy, not the shared dict
    assert c["GEMM"]["(1024, 4096, 4096, 128, 8, 104)"]["num_warps"] == 8
    assert gemlite.fill_nearest(c, "GEMM", (64, 4096, 4096, 128, 8, 104)) == "96x4096x4096"


def test_no_entry_of_the_group_or_kernel_leaves_gemlite_to_autotune():
    c = cache()
    assert gemlite.fill_nearest(c, "GEMM", (1024, 4096, 4096, 32, 8, 104)) is None
    assert gemlite.fill_nearest(c, "GEMV_REVSPLITK", (1, 4096, 4096, 128, 8, 104)) is None
    assert gemlite.fill_nearest(c, "GEMM_SPLITK", (16, 4096, 4096, 128, 8, 104)) is None
    assert "(1024, 4096, 4096, 32, 8, 104)" not in c["GEMM"] and "GEMM_SPLITK" not in c
