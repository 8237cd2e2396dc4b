"""GPU suite: `pytest -m gpu` on a CUDA machine (bf16, larger and ragged shapes)."""

import json

import numpy as np
import pytest
import torch

from qgemm_bench import backends
import runner
from qgemm_bench.harness import timing
from qgemm_bench.harness.measure import copies_needed
from qgemm_bench.operators import formats, int4_gemm, nvfp4_gemm, split_k_gemm
from qgemm_bench.operators.common import Case, Shape, rel_error

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
CUDA = torch.device("cuda", 0)


def test_formats_are_identical_on_cpu_and_cuda():
    w = torch.randn(4096, 264) * torch.rand(1, 264) * 100
    for fn in (lambda t: formats.quantize_int4(t, 128), formats.quantize_nvfp4):
        for a, b in zip(fn(w), fn(w.to(CUDA)), strict=True):
            assert torch.equal(a.cpu().view(torch.uint8) if a.dtype == torch.float8_e4m3fn else a.cpu(),
                               b.cpu().view(torch.uint8) if b.dtype == torch.float8_e4m3fn else b.cpu())
    p, s = formats.quantize_int4(w, 64)
    assert torch.equal(formats.dequantize_int4(p, s, 64), formats.dequantize_int4(p.cuda(), s.cuda(), 64).cpu())


def check(op, backend_name, shape, **settings):
    c = Case(op.NAME, Shape(*shape), torch.bfloat16, CUDA, {**op.DEFAULT_SETTINGS, **settings})
    backend = next(b for b in backends.for_op(op.NAME) if b.name == backend_name)
    if reason := backend.why_not(c):
        pytest.skip(reason)
    inputs = op.make_inputs(c, seed=np.random.randint(1 << 30))
    out = backend.prepare(c, inputs).fn()
    torch.cuda.synchronize()
    assert out.dtype == torch.bfloat16 and out.shape == (shape[0], shape[2])
    err = rel_error(out, op.reference(inputs))
    assert err <= op.tolerance(torch.bfloat16), err


@pytest.mark.parametrize("name", ["torch", "cublas", "torch_compile", "tinygemm"])
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (17, 2048, 1000), (256, 1024, 3072)])
@pytest.mark.parametrize("group", [32, 128, 256, None])
def test_int4_backends_bf16(name, shape, group):
    check(int4_gemm, name, shape, group_size=group)


def test_tinygemm_per_channel_when_k_is_a_supported_group():
    check(int4_gemm, "tinygemm", (5, 256, 512), group_size="channel")


@pytest.mark.parametrize("name", ["torch", "cublas", "torch_compile"])
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (17, 2048, 1000), (256, 1024, 3072)])
@pytest.mark.parametrize("unscaled", [False, True])
def test_nvfp4_backends_bf16(name, shape, unscaled):
    check(nvfp4_gemm, name, shape, unscaled=unscaled)


@pytest.mark.parametrize("name", ["torch", "torch_compile"])
@pytest.mark.parametrize("shape", [(64, 32768, 64), (5, 4099, 7)])
@pytest.mark.parametrize("bias", [False, True])
def test_split_k_backends_bf16(name, shape, bias):
    check(split_k_gemm, name, shape, bias=bias)


def test_graph_timing_rotates_past_l2():
    c = Case("int4_gemm", Shape(1, 4096, 4096), torch.bfloat16, CUDA, {"group_size": 128})
    backend = backends.for_op("int4_gemm")[1]  # cublas: an 32 MiB bf16 weight
    inputs = int4_gemm.make_inputs(c, 0)
    p = backend.prepare(c, inputs)
    out = p.fn()
    l2 = torch.cuda.get_device_properties(CUDA).L2_cache_size
    n = copies_needed(c, inputs, p, out, l2)
    assert n * 32 * 2**20 >= 2 * l2 and n >= 2
    fns = [p.fn] + [backend.prepare(c, {k: v.clone() if torch.is_tensor(v) else v for k, v in inputs.items()}).fn
                    for _ in range(n - 1)]
    t = timing.time_graph(fns, warmup_ms=5, rep_ms=20)
    assert t.mode == "graph" and len(t.samples_us) >= 10 and t.calls_per_sample % n == 0
    assert all(s > 0 for s in t.samples_us)


@pytest.mark.parametrize("mode", ["graph", "events"])
def test_runner_on_cuda(tmp_path, mode):
    out = tmp_path / "run"
    code = runner.main(["--op", "int4_gemm", "--shape", "16,4096,4096", "--shape", "3,1024,1004",
                        "--timing", mode, "--rep", "20", "--output-dir", str(out)])
    assert code == 0
    doc = json.loads((out / "results.json").read_text())
    meta, rows = doc["metadata"], doc["rows"]
    assert meta["gpu"] and meta["ceilings"]["copy_GBps"] > 100 and meta["settings"]["timing"] == mode
    assert {r["backend"] for r in rows} == {"torch", "cublas", "torch_compile", "tinygemm", "triton", "helion"}
    for r in rows:
        if r["backend"] == "tinygemm" and r["N"] == 1004:
            assert r["status"] == "unavailable" and "N % 8" in r["reason"]
            continue
        assert r["status"] == "ok", r
        assert r["timing"] == mode and r["peak_extra_mib"] is not None and r["sol_pct"] > 0
    assert (out / "roofline.png").exists()


# ---------------------------------------- Triton backends through the autotuner (bf16)
# Each new shape autotunes (~9 s on the H100), so a few representative cases;
# tests/test_triton.py covers the kernels broadly with explicit configs.


@pytest.mark.parametrize("shape,group", [((1, 4096, 4096), 128), ((17, 2048, 1000), None), ((256, 1024, 3072), 64)])
def test_int4_triton_bf16(shape, group):
    check(int4_gemm, "triton", shape, group_size=group)


@pytest.mark.parametrize("shape,unscaled", [((1, 4096, 4096), False), ((256, 1024, 3072), True)])
def test_nvfp4_triton_bf16(shape, unscaled):
    check(nvfp4_gemm, "triton", shape, unscaled=unscaled)


@pytest.mark.parametrize("name", ["triton", "triton_deterministic"])
def test_split_k_triton_bf16(name):
    check(split_k_gemm, name, (5, 4099, 7), bias=True)


def test_split_k_deterministic_is_bit_identical_on_gpu():
    c = Case("split_k_gemm", Shape(64, 32768, 64), torch.bfloat16, CUDA, {"bias": True})
    inputs = split_k_gemm.make_inputs(c, 1)
    fn = next(b for b in backends.for_op("split_k_gemm") if b.name == "triton_deterministic").prepare(c, inputs).fn
    first = fn()
    assert all(torch.equal(fn(), first) for _ in range(20))


@pytest.mark.parametrize("cfg", [(32, 32, 128, 16), (16, 64, 128, 16), (64, 32, 64, 32)])
def test_split_k_atomic_finish_has_no_race(cfg):
    # These configs read incomplete sums in up to 20 of 20 runs when the last
    # program read the workspace with a plain (.cg) load.
    from qgemm_bench.backends.triton_kernels.split_k import ATOMIC, SplitKGemm

    a = torch.randn(256, 8192, device=CUDA, dtype=torch.bfloat16)
    b = torch.randn(8192, 256, device=CUDA, dtype=torch.bfloat16)
    bm, bn, bk, sk = cfg
    gemm = SplitKGemm(a, b, None, ATOMIC, {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sk,
                                           "num_warps": 4, "num_stages": 3})
    ref = a.double() @ b.double()
    assert all(rel_error(gemm(), ref) <= 1e-2 for _ in range(20))


@pytest.mark.parametrize("k,n,group", [(4096, 1000, 128), (1024, 264, 32), (256, 72, 256)])
def test_int4_quantize_kernel_bf16_bit_identical(k, n, group):
    from qgemm_bench.operators.int4_quantize_kernel import quantize_int4

    w = (torch.randn(k, n, device=CUDA) * torch.rand(1, n, device=CUDA) * 10).to(torch.bfloat16)
    w[:group, 0] = 0
    for a, b in zip(quantize_int4(w, group, torch.bfloat16), formats.quantize_int4(w, group, torch.bfloat16),
                    strict=True):
        assert torch.equal(a, b)


# ---------------------------------------- Helion backends with the checked-in configs (bf16)


@pytest.mark.parametrize("shape,group", [((1, 4096, 4096), 128), ((17, 2048, 1000), None), ((256, 1024, 3072), 64),
                                         ((100, 960, 520), 96)])
def test_int4_helion_bf16(shape, group):
    check(int4_gemm, "helion", shape, group_size=group)


@pytest.mark.parametrize("shape,unscaled", [((1, 4096, 4096), False), ((256, 1024, 3072), True),
                                            ((17, 2048, 1000), False)])
def test_nvfp4_helion_bf16(shape, unscaled):
    check(nvfp4_gemm, "helion", shape, unscaled=unscaled)


@pytest.mark.parametrize("shape", [(5, 4099, 7), (64, 32768, 64)])
def test_split_k_helion_bf16(shape):
    check(split_k_gemm, "helion", shape, bias=True)


def test_tritonbench_entries_on_gpu():
    from qgemm_bench.backends import tritonbench as tb

    x = torch.randn(16, 4096, device=CUDA, dtype=torch.bfloat16)
    w = torch.randint(-8, 8, (4096, 4096), device=CUDA, dtype=torch.int32)
    for entry in (tb.int4_gemm_tritonbench, tb.triton_int4_gemm_tritonbench):
        assert rel_error(entry(None, x, w)(), x.double() @ w.double()) <= 1e-2
    a, b = torch.randn(64, 32768, device=CUDA, dtype=torch.bfloat16), torch.randn(32768, 64, device=CUDA,
                                                                                 dtype=torch.bfloat16)
    for entry in (tb.matmul_split_k_tritonbench, tb.triton_matmul_split_k_tritonbench):
        assert rel_error(entry(None, a, b, None)(), a.double() @ b.double()) <= 1e-2
