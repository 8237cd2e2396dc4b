"""split_k_gemm: the operator against fp64 math, every backend against the
reference, our Triton (atomic and deterministic) and Helion split-K kernels
on ragged shapes with and without bias, and the tritonbench entry points.
GPU variants are marked `gpu`."""

import numpy as np
import pytest
import torch

from qgemm_bench.backends import registry
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
    case,
    check,
    check_on_gpu,
    fp64,
    interpreter,
    needs_gpu,
    run_backend,
    seed,
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


# ------------------------------------------------------------------ every backend


BACKENDS = [b.name for b in registry.for_op("split_k_gemm")]


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("shape", [(16, 1024, 16), (5, 1000, 7), (64, 2048, 33)])
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


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("shape", [(16, 1024, 16), (5, 1000, 7), (33, 2048, 40)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("split", [1, 3, 8])
def test_triton_kernel_vs_fp64(deterministic, shape, bias, split):
    from qgemm_bench.backends.triton_kernels.split_k import ATOMIC, DETERMINISTIC, SplitKGemm

    inputs = split_k_gemm.make_inputs(case(split_k_gemm, shape, bias=bias), seed())
    gemm = SplitKGemm(inputs.a, inputs.b, inputs.bias, DETERMINISTIC if deterministic else ATOMIC,
                      cfg(bn=32, bk=64, split=split))
    ref = reference64(inputs)
    check(gemm(), ref)
    check(gemm(), ref)  # the workspace and counters were left ready for the next call
    assert int(gemm.count.abs().sum()) == 0
    if not deterministic:
        assert float(gemm.ws.abs().sum()) == 0.0


def test_triton_deterministic_is_bit_identical_over_runs():
    from qgemm_bench.backends.triton_kernels.split_k import DETERMINISTIC, SplitKGemm

    inputs = split_k_gemm.make_inputs(case(split_k_gemm, (17, 4096, 40), bias=True), 3)
    gemm = SplitKGemm(inputs.a, inputs.b, inputs.bias, DETERMINISTIC, cfg(bn=32, bk=64, split=16))
    first = gemm()
    for _ in range(4):
        assert torch.equal(gemm(), first)


def test_triton_refuses_bad_inputs():
    from qgemm_bench.backends.triton_kernels.split_k import ATOMIC, SplitKGemm

    a = torch.randn(4, 64, device=DEV).to(DT)
    with pytest.raises(ValueError, match="do not match"):
        SplitKGemm(a, torch.randn(32, 8, device=DEV).to(DT), None, ATOMIC, cfg())
    with pytest.raises(ValueError, match="bias"):
        SplitKGemm(a, torch.randn(64, 8, device=DEV).to(DT), torch.zeros(7, device=DEV, dtype=DT), ATOMIC, cfg())


# ------------------------------------------------------------------ our Helion kernel (interpreter configs)


@interpreter
@pytest.mark.parametrize("shape", [(16, 1024, 16), (5, 1000, 7), (33, 2048, 40)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("split", [1, 4, 16])
def test_helion_kernel_vs_fp64(shape, bias, split, monkeypatch):
    from qgemm_bench.backends import helion_ops

    monkeypatch.setattr(helion_ops, "SPLIT_K_INTERPRETER_CONFIG",
                        {"block_sizes": [16, 32, 32], "split_k": split, "num_warps": 4, "num_stages": 1})
    out, inputs, prepared = run_backend(split_k_gemm, "helion", case(split_k_gemm, shape, bias=bias))
    check(out, reference64(inputs))
    check(prepared.fn(), reference64(inputs))  # a second call starts from zero again
    assert prepared.compile_s is not None and prepared.compile_s >= 0


@interpreter
def test_helion_refuses_bad_bias():
    c = case(split_k_gemm, (4, 64, 8), bias=True)
    inputs = split_k_gemm.Inputs(torch.randn(4, 64).to(DT), torch.randn(64, 8).to(DT), torch.zeros(7, dtype=DT))
    with pytest.raises(ValueError, match="bias"):
        registry.get("split_k_gemm", "helion").prepare(c, inputs)


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
def test_deterministic_is_bit_identical_on_gpu():
    c = case(split_k_gemm, (64, 32768, 64), torch.bfloat16, CUDA, bias=True)
    inputs = split_k_gemm.make_inputs(c, 1)
    fn = registry.get("split_k_gemm", "triton_deterministic").prepare(c, inputs).fn
    first = fn()
    assert all(torch.equal(fn(), first) for _ in range(20))


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("config", [(32, 32, 128, 16), (16, 64, 128, 16), (64, 32, 64, 32)])
def test_atomic_finish_has_no_race(config):
    # These configs read incomplete sums in up to 20 of 20 runs when the last
    # program read the workspace with a plain (.cg) load.
    from qgemm_bench.backends.triton_kernels.split_k import ATOMIC, SplitKGemm

    a = torch.randn(256, 8192, device=CUDA, dtype=torch.bfloat16)
    b = torch.randn(8192, 256, device=CUDA, dtype=torch.bfloat16)
    bm, bn, bk, sk = config
    gemm = SplitKGemm(a, b, None, ATOMIC, {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sk,
                                           "num_warps": 4, "num_stages": 3})
    ref = a.double() @ b.double()
    assert all(rel_error(gemm(), ref) <= 1e-2 for _ in range(20))


@pytest.mark.gpu
@needs_gpu
def test_tritonbench_entries_on_gpu():
    a = torch.randn(64, 32768, device=CUDA, dtype=torch.bfloat16)
    b = torch.randn(32768, 64, device=CUDA, dtype=torch.bfloat16)
    for entry in (tb.matmul_split_k_tritonbench, tb.triton_matmul_split_k_tritonbench):
        assert rel_error(entry(None, a, b, None)(), a.double() @ b.double()) <= 1e-2
