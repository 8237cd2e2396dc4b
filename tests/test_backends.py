"""torch backends on CPU against the fp32 reference; the registry."""

import numpy as np
import pytest
import torch

from qgemm_bench import backends
from qgemm_bench.operators import formats, int4_gemm, nvfp4_gemm, split_k_gemm
from qgemm_bench.operators.common import Case, InputError, Shape, rel_error

CPU = torch.device("cpu")
OPS = {"int4_gemm": int4_gemm, "nvfp4_gemm": nvfp4_gemm, "split_k_gemm": split_k_gemm}


def run_backend(op, backend_name, shape, **settings):
    c = Case(op.NAME, Shape(*shape), torch.float16, CPU, {**op.DEFAULT_SETTINGS, **settings})
    backend = next(b for b in backends.for_op(op.NAME) if b.name == backend_name)
    assert backend.why_not(c) is None
    inputs = op.make_inputs(c, seed=np.random.randint(1 << 30))
    out = backend.prepare(c, inputs).fn()
    assert out.dtype == torch.float16 and out.shape == (shape[0], shape[2])
    return rel_error(out, op.reference(inputs)), op.tolerance(torch.float16)


@pytest.mark.parametrize("name", ["torch", "cublas"])
@pytest.mark.parametrize("shape", [(1, 128, 64), (17, 384, 96), (5, 256, 37)])
@pytest.mark.parametrize("group", [64, 128, "channel", None])
def test_int4_eager_backends(name, shape, group):
    err, tol = run_backend(int4_gemm, name, shape, group_size=group)
    assert err <= tol


@pytest.mark.parametrize("name", ["torch", "cublas"])
@pytest.mark.parametrize("shape", [(1, 64, 48), (17, 384, 96), (5, 256, 37)])
@pytest.mark.parametrize("unscaled", [False, True])
def test_nvfp4_eager_backends(name, shape, unscaled):
    err, tol = run_backend(nvfp4_gemm, name, shape, unscaled=unscaled)
    assert err <= tol


@pytest.mark.parametrize("shape", [(16, 1024, 16), (5, 1000, 7), (64, 2048, 33)])
@pytest.mark.parametrize("bias", [False, True])
def test_split_k_eager_backend(shape, bias):
    err, tol = run_backend(split_k_gemm, "torch", shape, bias=bias)
    assert err <= tol


@pytest.mark.parametrize("op,shape,settings", [
    (int4_gemm, (3, 256, 40), {"group_size": 128}),
    (nvfp4_gemm, (3, 160, 40), {}),
    (split_k_gemm, (5, 1000, 7), {"bias": True}),
])
def test_torch_compile_backends(op, shape, settings):
    err, tol = run_backend(op, "torch_compile", shape, **settings)
    assert err <= tol


def test_tolerance_catches_plausible_kernel_bugs():
    """The accuracy check must fail the bugs a kernel actually makes."""
    c = Case("int4_gemm", Shape(17, 384, 96), torch.float16, CPU, {"group_size": 128})
    inputs = int4_gemm.make_inputs(c, 0)
    ref, tol = int4_gemm.reference(inputs), int4_gemm.tolerance(torch.float16)
    x, w, s = inputs["x"], inputs["w"], inputs["scales"]
    q = formats.unpack_int4(w).half()
    swapped = torch.stack((q[1::2], q[0::2]), 1).reshape(q.shape)  # nibble order swapped
    last_k_tile_dropped = q.clone()
    last_k_tile_dropped[-16:] = 0
    wrong_group = q * s.half()[torch.arange(384) // 128 % 2]  # scale of the wrong group
    for bad in (swapped * s.half().repeat_interleave(128, 0), last_k_tile_dropped * s.half().repeat_interleave(128, 0),
                wrong_group):
        assert rel_error(x @ bad, ref) > tol
    y = x @ (q * s.half().repeat_interleave(128, 0))
    y[-1] = 0  # one row of M unwritten
    assert rel_error(y, ref) > tol


def test_tinygemm_says_why_not_on_cpu():
    c = Case("int4_gemm", Shape(1, 256, 64), torch.bfloat16, CPU, {"group_size": 128})
    tiny = next(b for b in backends.for_op("int4_gemm") if b.name == "tinygemm")
    assert tiny.why_not(c) == "needs a CUDA device"


def test_tinygemm_refuses_unsupported_settings_on_cuda_cases():
    tiny = next(b for b in backends.for_op("int4_gemm") if b.name == "tinygemm")
    cuda = torch.device("cuda", 0)  # why_not only reads the case, it never touches the device
    mk = lambda shape, dtype=torch.bfloat16, g=128: Case("int4_gemm", Shape(*shape), dtype, cuda, {"group_size": g})
    assert tiny.why_not(mk((1, 256, 64))) is None
    assert "bfloat16" in tiny.why_not(mk((1, 256, 64), torch.float16))
    assert "N % 8" in tiny.why_not(mk((1, 256, 37)))
    assert "group sizes" in tiny.why_not(mk((1, 512, 64), g=512))
    assert tiny.why_not(mk((1, 256, 64), g=None)) is None


def test_select_puts_baseline_first_and_refuses_unknown_names():
    names = [b.name for b in backends.select("int4_gemm", ["cublas", "torch"], "torch")]
    assert names == ["torch", "cublas"]
    assert [b.name for b in backends.select("int4_gemm", ["cublas"], "torch")] == ["torch", "cublas"]
    with pytest.raises(InputError, match="unknown backend 'cutlass'"):
        backends.select("int4_gemm", ["cutlass"], "torch")
    with pytest.raises(InputError, match="unknown backend 'nope'"):
        backends.select("int4_gemm", None, "nope")


def test_every_backend_is_listed_for_its_operator():
    for op in OPS:
        names = [b.name for b in backends.for_op(op)]
        assert names[0] == "torch" and len(set(names)) == len(names)
        assert all(b.op == op for b in backends.for_op(op))
